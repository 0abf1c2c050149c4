// The quarantine read back for fsck (core/store/quarantine_report.cpp):
// slots newest first with their reasons and bytes, the marker that divides
// what the last fsck saw from what is new, and everything in the quarantine
// that is no readable slot listed as such, never skipped.
#include "core/store/quarantine_report.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/metrics.hpp"
#include "core/layout/paths.hpp"
#include "core/store/quarantine.hpp"
#include "tests/support/quarantine_root.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class QuarantineReportTest : public QuarantineRootTest {
 protected:
  QuarantineReportTest() : QuarantineRootTest("sealfs-quarantine-report") {}
  void SetUp() override {
    QuarantineRootTest::SetUp();
    q_.emplace(root_.get(), 100, 1ull << 30, metrics_);
  }

  // name, written with content, moved to quarantine with a reason that names it.
  void quarantine(const std::string& name, const std::string& content = "data") {
    write_file(tmp_ / name, content);
    struct stat st {};
    ASSERT_EQ(::lstat((tmp_ / name).c_str(), &st), 0);
    Quarantine::Request r;
    r.parent_fd = root_.get();
    r.name = name;
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.rel = "c/" + name;
    r.reason = "reason of " + name;
    auto moved = q_->move(r);
    ASSERT_TRUE(moved.ok() && *moved) << name;
  }

  QuarantineSummary summary(std::size_t newest_max = kNewestReasons) {
    auto s = summarize_quarantine(root_.get(), newest_max);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return s.ok() ? *s : QuarantineSummary{};
  }

  std::vector<std::string> slot_names() {
    auto s = q_->slots();
    return s ? *s : std::vector<std::string>{};
  }

  // A directory named as the quarantine names its slots, later than any it made.
  std::string fake_slot(const std::string& tail) {
    const std::string name = "29991231T235959.000000000Z-1-" + tail;
    make_dirs(tmp_ / (".sealfs/quarantine/" + name));
    return name;
  }

  std::optional<Quarantine> q_;  // over root_, once SetUp opened it
};

TEST_F(QuarantineReportTest, SlotNamesAreRecognised) {
  EXPECT_TRUE(is_slot_name("20261207T101501.123456789Z-4242-000001"));
  EXPECT_FALSE(is_slot_name("20261207T101501.123456789Z-4242-"));
  EXPECT_FALSE(is_slot_name("20261207T101501.12345678Z-4242-000001"));
  EXPECT_FALSE(is_slot_name("20261207X101501.123456789Z-4242-000001"));
  EXPECT_FALSE(is_slot_name("junk"));
  EXPECT_FALSE(is_slot_name(""));
}

TEST_F(QuarantineReportTest, NewestFirstWithReasonsAndBytes) {
  for (const char* name : {"a", "b", "c"}) quarantine(name, std::string(5000, name[0]));
  QuarantineSummary s = summary();
  EXPECT_EQ(s.held, 3u);
  EXPECT_EQ(s.fresh, 3u);  // no earlier fsck: all of it is new
  EXPECT_TRUE(s.marker.empty());
  EXPECT_TRUE(s.marker_problem.empty());
  EXPECT_TRUE(s.unreadable.empty());
  EXPECT_TRUE(s.measured);
  ASSERT_EQ(s.newest.size(), 3u);
  EXPECT_EQ(s.newest[0].path, "c/c");
  EXPECT_EQ(s.newest[1].path, "c/b");
  EXPECT_EQ(s.newest[2].path, "c/a");
  EXPECT_EQ(s.newest[0].reason, "reason of c");
  EXPECT_EQ(s.newest[0].time.size(), std::string("2026-12-07T10:15:01Z").size()) << s.newest[0].time;
  EXPECT_EQ(s.newest[0].slot, slot_names().back());
  std::uint64_t sum = 0;
  for (const auto& n : s.newest) {
    EXPECT_GE(n.bytes, 5000u) << n.path;  // the object's blocks, with its reason.json's and the slot's
    sum += n.bytes;
  }
  EXPECT_EQ(s.held_bytes, sum);
  EXPECT_EQ(s.fresh_bytes, sum);
  // Only a few reasons are kept; the count still says how many are new.
  QuarantineSummary two = summary(2);
  EXPECT_EQ(two.fresh, 3u);
  ASSERT_EQ(two.newest.size(), 2u);
  EXPECT_EQ(two.newest[1].path, "c/b");
}

TEST_F(QuarantineReportTest, TheMarkerDividesWhatTheLastFsckSawFromWhatIsNew) {
  quarantine("a");
  quarantine("b");
  const std::uint64_t old_bytes = summary().held_bytes;
  ASSERT_TRUE(mark_quarantine_seen(root_.get(), slot_names().back()).ok());
  EXPECT_EQ(read_file(tmp_ / ".sealfs/fsck-seen").value_or("<unreadable>"), slot_names().back() + "\n");
  QuarantineSummary seen = summary();
  EXPECT_EQ(seen.marker, slot_names().back());
  EXPECT_EQ(seen.fresh, 0u);
  EXPECT_EQ(seen.fresh_bytes, 0u);
  EXPECT_TRUE(seen.newest.empty());
  EXPECT_EQ(seen.held, 2u);  // still held, still counted
  EXPECT_EQ(seen.held_bytes, old_bytes);
  quarantine("c");
  QuarantineSummary later = summary();
  EXPECT_EQ(later.fresh, 1u);
  EXPECT_EQ(later.held, 3u);
  ASSERT_EQ(later.newest.size(), 1u);
  EXPECT_EQ(later.newest[0].path, "c/c");
  EXPECT_EQ(later.held_bytes, old_bytes + later.fresh_bytes);
  // Written through a temporary name, renamed: nothing else is left in B/.sealfs.
  auto state = read_dir(UniqueFd(::open((tmp_ / ".sealfs").c_str(), O_RDONLY | O_DIRECTORY)).get());
  ASSERT_TRUE(state.ok());
  std::vector<std::string> names;
  for (const auto& c : *state) names.push_back(c.name);
  std::ranges::sort(names);
  EXPECT_EQ(names, (std::vector<std::string>{"fsck-seen", "quarantine", "spare"}));
  auto newest = newest_quarantine_slot(root_.get());
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(*newest, slot_names().back());
}

TEST_F(QuarantineReportTest, WhatIsNoReadableSlotIsListedAsUnreadable) {
  quarantine("a");
  write_file(tmp_ / ".sealfs/quarantine/junk", "someone's file");
  make_dirs(tmp_ / ".sealfs/quarantine/not-a-slot");
  const std::string garbled = fake_slot("1");
  write_file(tmp_ / (".sealfs/quarantine/" + garbled + "/reason.json"), "{\"path\": ");
  const std::string empty = fake_slot("2");
  const std::string linked = fake_slot("3");
  ASSERT_EQ(::symlink("/etc/passwd", (tmp_ / (".sealfs/quarantine/" + linked + "/reason.json")).c_str()), 0);
  const std::string fifo = fake_slot("4");  // must not block the reader
  ASSERT_EQ(::mkfifo((tmp_ / (".sealfs/quarantine/" + fifo + "/reason.json")).c_str(), 0600), 0);
  const std::string partial = fake_slot("5");
  write_file(tmp_ / (".sealfs/quarantine/" + partial + "/reason.json"), "{\"path\":\"x\",\"reason\":7}");
  const std::string huge = fake_slot("6");
  write_file(tmp_ / (".sealfs/quarantine/" + huge + "/reason.json"),
             "{\"path\":\"x\",\"reason\":\"" + std::string(300 * 1024, 'r') + "\",\"time\":\"t\"}");
  const std::string array = fake_slot("7");
  write_file(tmp_ / (".sealfs/quarantine/" + array + "/reason.json"), "[1,2]");

  QuarantineSummary s = summary();
  EXPECT_EQ(s.held, 10u);
  EXPECT_EQ(s.fresh, 8u);  // the slots, readable or not; junk and not-a-slot cannot be dated
  ASSERT_EQ(s.newest.size(), 1u);
  EXPECT_EQ(s.newest[0].path, "c/a");
  const std::vector<std::string> expected = {
      garbled + ": reason.json is not a JSON object",
      empty + ": no reason.json",
      linked + ": reason.json unreadable: ",  // ELOOP's words follow
      fifo + ": reason.json unreadable: reason.json is not a regular file",
      partial + ": reason.json lacks its path, reason or time",
      huge + ": reason.json unreadable: reason.json is ",
      array + ": reason.json is not a JSON object",
      "junk: not a quarantine slot",
      "not-a-slot: not a quarantine slot",
  };
  ASSERT_EQ(s.unreadable.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(s.unreadable[i].rfind(expected[i], 0), 0u) << s.unreadable[i] << " / " << expected[i];
}

TEST_F(QuarantineReportTest, AnUnreadableMarkerCountsEverySlotAsNew) {
  quarantine("a");
  quarantine("b");
  write_file(tmp_ / ".sealfs/fsck-seen", "not a slot name\n");
  QuarantineSummary s = summary();
  EXPECT_TRUE(s.marker.empty());
  EXPECT_NE(s.marker_problem.find("does not name a quarantine slot"), std::string::npos) << s.marker_problem;
  EXPECT_EQ(s.fresh, 2u);
  ASSERT_EQ(::unlink((tmp_ / ".sealfs/fsck-seen").c_str()), 0);
  ASSERT_EQ(::mkdir((tmp_ / ".sealfs/fsck-seen").c_str(), 0700), 0);  // not even a file
  s = summary();
  EXPECT_FALSE(s.marker_problem.empty());
  EXPECT_EQ(s.fresh, 2u);
}

TEST_F(QuarantineReportTest, ADroppedObjectSaysOnlyItsRecordIsKept) {
  Quarantine small(root_.get(), 100, 64 * 1024, metrics_);
  write_file(tmp_ / "big", std::string(256 * 1024, 'x'));
  struct stat st {};
  ASSERT_EQ(::lstat((tmp_ / "big").c_str(), &st), 0);
  Quarantine::Request r{root_.get(), "big", st.st_dev, st.st_ino, "c/big", "too big", HideReason::size, {}};
  ASSERT_TRUE(small.move(r).ok());
  QuarantineSummary s = summary();
  ASSERT_EQ(s.newest.size(), 1u);
  EXPECT_NE(s.newest[0].dropped.find("byte cap"), std::string::npos) << s.newest[0].dropped;
  EXPECT_LT(s.newest[0].bytes, 64u * 1024);
}

TEST_F(QuarantineReportTest, NoQuarantineDirectoryHoldsNothing) {
  ASSERT_EQ(::rmdir((tmp_ / ".sealfs/quarantine").c_str()), 0);
  QuarantineSummary s = summary();
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.fresh, 0u);
}

}  // namespace
}  // namespace sealfs::test
