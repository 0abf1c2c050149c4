// RemovalsInFlight (core/store/removals.hpp): which entries a removal through
// M is taking apart, by whom, and for how long that holds.
#include "core/store/removals.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace sealfs::test {
namespace {

struct stat root(ino_t ino) {
  struct stat st {};
  st.st_dev = 7;
  st.st_ino = ino;
  return st;
}

TEST(RemovalsInFlight, AStepHoldsItsEntryForTheWindowOnly) {
  RemovalsInFlight r;
  const auto t0 = RemovalsInFlight::Clock::now();
  EXPECT_FALSE(r.recent(root(1), t0));
  r.note(root(1), 100, t0);
  EXPECT_TRUE(r.recent(root(1), t0 + RemovalsInFlight::kWindow));
  EXPECT_FALSE(r.recent(root(1), t0 + RemovalsInFlight::kWindow + std::chrono::milliseconds(1)));
  EXPECT_FALSE(r.recent(root(2), t0));
  // Each step starts the window again.
  r.note(root(1), 100, t0 + RemovalsInFlight::kWindow);
  EXPECT_TRUE(r.recent(root(1), t0 + RemovalsInFlight::kWindow * 2));
}

TEST(RemovalsInFlight, OnlyTheRemoverIsShownItsEntry) {
  RemovalsInFlight r;
  const auto t0 = RemovalsInFlight::Clock::now();
  r.note(root(1), 100, t0);
  r.note(root(1), 0, t0);  // a step whose caller is unknown holds the entry for no one
  EXPECT_TRUE(r.recent_by(root(1), 100, t0));
  EXPECT_FALSE(r.recent_by(root(1), 101, t0));
  EXPECT_FALSE(r.recent_by(root(1), 0, t0));
  EXPECT_FALSE(r.recent_by(root(2), 100, t0));
}

TEST(RemovalsInFlight, AGoneRootIsForgottenAndOldNotesArePruned) {
  RemovalsInFlight r;
  const auto t0 = RemovalsInFlight::Clock::now();
  r.note(root(1), 100, t0);
  r.note(root(1), 101, t0);
  r.forget(root(1));
  EXPECT_FALSE(r.recent(root(1), t0));
  for (ino_t i = 10; i < 200; ++i) r.note(root(i), 100, t0);
  const auto later = t0 + RemovalsInFlight::kWindow * 2;
  r.note(root(500), 100, later);  // drops the expired ones
  EXPECT_TRUE(r.recent(root(500), later));
  EXPECT_FALSE(r.recent(root(10), later));
}

}  // namespace
}  // namespace sealfs::test
