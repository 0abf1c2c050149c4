// fsck and adopt (offline.hpp) tell an OfflineProgress their plan (a
// stat-only walk) and each item done with the bytes hashed so far.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/store/offline.hpp"
#include "core/store/progress.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

struct Recorder : OfflineProgress {
  std::vector<Work> plans;
  std::vector<Work> steps;
  void planned(const Work& total) override { plans.push_back(total); }
  void advanced(const Work& done) override { steps.push_back(done); }
};

// Items count up by one; bytes never go back.
void expect_monotonic(const std::vector<Work>& steps) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].items, i + 1);
    if (i > 0) {
      EXPECT_GE(steps[i].bytes, steps[i - 1].bytes);
    }
  }
}

TEST_F(StoreTest, FsckPlansByStatThenReportsEachEntry) {
  publish_entry("k1", {{"lib.so", std::string(1000, 'a')}, {"kernel.src", std::string(300, 's')}});
  publish_entry("k2", {{"lib.so", std::string(2000, 'b')}});
  write_file(B("c/loose"), "foreign, no item");
  open_store();  // the hashes of the publishes are not counted
  const auto hashed_before = store().metrics().bytes_hashed.load();
  Recorder r;
  auto report = sealfs::fsck(store(), false, &r);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].items, 2u);
  EXPECT_EQ(r.plans[0].bytes, 3000u);  // the size-only source is not hashed
  ASSERT_EQ(r.steps.size(), 2u);
  expect_monotonic(r.steps);
  EXPECT_EQ(r.steps.back().bytes, store().metrics().bytes_hashed.load() - hashed_before);
  EXPECT_EQ(r.steps.back().bytes, 3000u);
  EXPECT_EQ(report->entries, 2u);
}

TEST_F(StoreTest, FsckWithoutProgressWalksNothingMore) {
  publish_entry("k", {{"lib.so", "x"}});
  auto report = sealfs::fsck(store(), false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->entries, 1u);
}

TEST_F(StoreTest, AdoptPlansEveryFileAndReportsEach) {
  make_dirs(B("c/d"));
  write_file(B("c/a.so"), std::string(100, 'a'));
  write_file(B("c/d/b.so"), std::string(50, 'b'));
  write_file(B("c/d/c.src"), std::string(10, 'c'));
  write_file(B("tmp/scratch"), "volatile: never an item");
  Recorder r;
  auto adopted = sealfs::adopt(store(), {}, &r);
  ASSERT_TRUE(adopted.ok()) << adopted.error().message;
  EXPECT_EQ(adopted->size(), 3u);
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].items, 3u);
  EXPECT_EQ(r.plans[0].bytes, 150u);
  ASSERT_EQ(r.steps.size(), 3u);
  expect_monotonic(r.steps);
  EXPECT_EQ(r.steps.back().bytes, 150u);
}

TEST_F(StoreTest, AdoptOfADirectoryIsOneItem) {
  make_dirs(B("c/entry/sub"));
  write_file(B("c/entry/x.so"), std::string(70, 'x'));
  write_file(B("c/entry/sub/y.so"), std::string(30, 'y'));
  write_file(B("c/single.so"), std::string(5, 's'));
  Recorder r;
  auto adopted = sealfs::adopt(store(), {"c/entry", "c/single.so"}, &r);
  ASSERT_TRUE(adopted.ok()) << adopted.error().message;
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].items, 2u);
  EXPECT_EQ(r.plans[0].bytes, 105u);
  ASSERT_EQ(r.steps.size(), 2u);
  expect_monotonic(r.steps);
  EXPECT_EQ(r.steps.back().bytes, 105u);
}

}  // namespace
}  // namespace sealfs::test
