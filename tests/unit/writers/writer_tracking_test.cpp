#include "core/writers/writer_tracking.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

namespace sealfs {
namespace {

constexpr HandleEnd kWrote{true, false};
constexpr HandleEnd kWroteAbandoned{true, true};
constexpr HandleEnd kOpenedOnly{false, false};
constexpr HandleEnd kOpenedOnlyAbandoned{false, true};
constexpr HandleEnd kMadeOnlyAbandoned{false, true, true, true};  // its creator closed it normally
constexpr HandleEnd kMadeByAKilledWriter{false, true, true, false};

TEST(WriterTrackingTest, InProgressUntilTheSealAfterTheLastRelease) {
  WriterTracking w;
  EXPECT_FALSE(w.in_progress(1, 2));
  w.opened(1, 2);
  w.opened(1, 2);
  EXPECT_TRUE(w.in_progress(1, 2));
  EXPECT_FALSE(w.released(1, 2, kWrote).has_value());  // not the last
  auto last = w.released(1, 2, kWrote);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::seal);
  EXPECT_TRUE(w.in_progress(1, 2));  // still, while sealing
  w.finished(1, 2);
  EXPECT_FALSE(w.in_progress(1, 2));
}

// A truncate by path has no handle: the file is in progress for as long as
// the change (its truncate and seal) lasts, and no longer; a writer's state
// is not touched by it.
TEST(WriterTrackingTest, AChangeWithoutAHandleIsInProgressForItsLife) {
  WriterTracking w;
  {
    auto change = w.changing(1, 2);
    EXPECT_TRUE(w.in_progress(1, 2));
    EXPECT_FALSE(w.in_progress(1, 3));
    EXPECT_EQ(w.in_progress_count(), 1u);
    auto moved = std::move(change);
    EXPECT_TRUE(w.in_progress(1, 2));
  }
  EXPECT_FALSE(w.in_progress(1, 2));
  EXPECT_EQ(w.in_progress_count(), 0u);

  w.opened(1, 2);
  {
    auto change = w.changing(1, 2);
    EXPECT_TRUE(w.last_writer_seals(1, 2, true)) << "the change is not a writer";
    auto last = w.released(1, 2, kWrote);
    ASSERT_TRUE(last.has_value());
    w.finished(1, 2);
    EXPECT_TRUE(w.in_progress(1, 2)) << "sealed, but the change is still under way";
  }
  EXPECT_FALSE(w.in_progress(1, 2));
}

// R4's seal journal records a FLUSH only when it is the file's last close
// that will lead to a seal: one write handle left, something to seal, nothing
// abandoned.
TEST(WriterTrackingTest, TheLastWritersFlushSealsOnlyAsTheSoleWriterOfAChangedFile) {
  WriterTracking w;
  EXPECT_FALSE(w.last_writer_seals(1, 2, true)) << "not open";
  w.opened(1, 2);
  EXPECT_TRUE(w.last_writer_seals(1, 2, true));
  EXPECT_FALSE(w.last_writer_seals(1, 2, false)) << "nothing to seal";
  w.opened(1, 2);
  EXPECT_FALSE(w.last_writer_seals(1, 2, true)) << "another write handle is open";
  EXPECT_FALSE(w.released(1, 2, kWrote).has_value());
  EXPECT_TRUE(w.last_writer_seals(1, 2, false)) << "changed by the handle released before";
  w.opened(3, 4);
  w.opened(3, 4);
  EXPECT_FALSE(w.released(3, 4, kWroteAbandoned).has_value());
  EXPECT_FALSE(w.last_writer_seals(3, 4, true)) << "a changing handle was abandoned";
}

TEST(WriterTrackingTest, OneAbandonedHandleThatChangedTheFileAbandonsIt) {
  WriterTracking w;
  w.opened(1, 2);
  w.opened(1, 2);
  EXPECT_FALSE(w.released(1, 2, kWroteAbandoned).has_value());
  auto last = w.released(1, 2, kOpenedOnly);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::abandon);
  w.finished(1, 2);
  // The verdict does not stick to the next round of writers.
  w.opened(1, 2);
  auto next = w.released(1, 2, kWrote);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, LastClose::seal);
}

// R10: `sh -c 'exec 3>>f; exit 1'` must leave f as it was.
TEST(WriterTrackingTest, AnAbandonedHandleThatChangedNothingLeavesTheFileAlone) {
  WriterTracking w;
  w.opened(1, 2);
  auto last = w.released(1, 2, kOpenedOnlyAbandoned);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::untouched);
  w.finished(1, 2);
  // Another handle's change is sealed, not abandoned, by an idle abandoned one.
  w.opened(1, 2);
  w.opened(1, 2);
  EXPECT_FALSE(w.released(1, 2, kWrote).has_value());
  auto mixed = w.released(1, 2, kOpenedOnlyAbandoned);
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(*mixed, LastClose::seal);
}

// stress-ng's flock stressor: a lock file created, never written, whose last
// holder is SIGKILLed. Creating is no change to abandon: it is sealed empty.
TEST(WriterTrackingTest, AFileOnlyCreatedByAnAbandonedHandleIsSealed) {
  WriterTracking w;
  w.opened(1, 2);
  auto last = w.released(1, 2, kMadeOnlyAbandoned);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::seal);
  w.finished(1, 2);
  // R4: a writer killed after its create and before its first write (no
  // normal close at all) leaves nothing visible.
  w.opened(1, 2);
  auto killed = w.released(1, 2, kMadeByAKilledWriter);
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(*killed, LastClose::abandon);
}

TEST(WriterTrackingTest, UnknownReleaseAndCancelDoNothing) {
  WriterTracking w;
  EXPECT_FALSE(w.released(5, 6, kWrote).has_value());
  w.opened(5, 6);
  w.cancelled(5, 6);
  EXPECT_FALSE(w.in_progress(5, 6));
  EXPECT_FALSE(w.released(5, 6, kWrote).has_value());
}

TEST(WriterTrackingTest, AHoldWaitsForTheHoldOnTheSameFileOnly) {
  WriterTracking w;
  std::atomic<int> step{0};
  auto seal = std::make_unique<WriterTracking::Hold>(w.hold(1, 2));
  {
    auto other = w.hold(1, 3);  // another file: no wait
  }
  std::thread setattr([&] {
    auto gate = w.hold({{1, 3}, {1, 2}});
    step = 2;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(step.load(), 0) << "a hold on a file being sealed went through";
  step = 1;
  seal.reset();
  setattr.join();
  EXPECT_EQ(step.load(), 2);
  auto again = w.hold({{0, 0}, {1, 2}, {1, 2}});  // absent and repeated keys are fine
}

TEST(WriterTrackingTest, FilesAreKeptApart) {
  WriterTracking w;
  w.opened(1, 2);
  EXPECT_TRUE(w.in_progress(1, 2));
  EXPECT_FALSE(w.in_progress(1, 3));
  EXPECT_FALSE(w.in_progress(2, 2));
}

}  // namespace
}  // namespace sealfs
