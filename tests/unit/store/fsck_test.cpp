// fsck (core/store/fsck.cpp): a walk that asks the judge of every name, at
// audit depth, what a lookup would show, and counts the answers; with
// repair, what is invalid goes to quarantine.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "core/store/judge.hpp"
#include "core/store/offline.hpp"
#include "core/store/quarantine_report.hpp"
#include "core/store/store.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

bool reported(const FsckReport& r, const std::string& problem) {
  return std::find(r.problems.begin(), r.problems.end(), problem) != r.problems.end();
}

TEST_F(StoreTest, FsckReportsAndRepairs) {
  publish_entry("good", {{"a", "a"}});
  publish_entry("bad", {{"a", "abc"}});
  write_file(B("c/bad/a"), "xyz");  // same size, other bytes
  write_file(B("c/foreign"), "f");
  write_file(B("c/good/unlisted"), "u");  // hidden by a lookup as unlisted, and so counted
  auto r = sealfs::fsck(store(), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->entries, 2u);
  EXPECT_EQ(r->valid, 1u);
  EXPECT_EQ(r->invalid, 1u);
  EXPECT_EQ(r->foreign, 1u);
  EXPECT_EQ(r->unlisted, 1u);
  EXPECT_EQ(lookup_errno("c/good/unlisted"), ENOENT);
  EXPECT_TRUE(reported(*r, "c/good/unlisted: " + std::string(kUnlistedReason)));
  EXPECT_TRUE(reported(*r, "c/foreign: " + std::string(kForeignReason)));
  EXPECT_EQ(r->quarantined, 0u);
  EXPECT_TRUE(exists_nofollow(B("c/bad")));
  auto fixed = sealfs::fsck(store(), true);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->quarantined, 1u);
  EXPECT_FALSE(exists_nofollow(B("c/bad")));
  auto again = sealfs::fsck(store(), false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->invalid, 0u);
}

// fsck keeps no rules of its own: whatever it reports a lookup hides, what
// it counts valid a lookup shows, and what a lookup shows without a record
// of its own (a special file, a volatile area) it does not report.
TEST_F(StoreTest, FsckSaysOfEachNameWhatALookupShows) {
  publish_entry("good", {{"a", "a"}});
  publish_entry("bad", {{"a", "abc"}});
  write_file(B("c/bad/a"), "xyz");
  write_file(B("tmp/f.part"), "file");
  ASSERT_TRUE(rename("tmp/f.part", "c/f.bin").ok());  // a file entry, with its sidecar
  write_file(B("tmp/g.part"), "gggg");
  ASSERT_TRUE(rename("tmp/g.part", "c/g.bin").ok());
  write_file(B("c/g.bin"), "GGGG");
  write_file(B("c/foreign"), "f");
  write_file(B("c/good/unlisted"), "u");
  ASSERT_EQ(::mkfifo(B("c/pipe").c_str(), 0644), 0);
  write_file(B("tmp/scratch"), "s");
  open_store();  // fresh caches: the verdicts are fsck's own
  const auto judged = store().status().judgements;
  auto r = sealfs::fsck(store(), false);
  ASSERT_TRUE(r.ok());
  // Judged once each, never again: c, tmp; c's six names (not the sidecars);
  // the good entry's two; nothing below the bad entry, nothing in tmp (volatile).
  EXPECT_EQ(store().status().judgements - judged, 10u);
  EXPECT_EQ(r->entries, 4u);
  EXPECT_EQ(r->valid, 2u);
  EXPECT_EQ(r->invalid, 2u);
  EXPECT_EQ(r->foreign, 1u);
  EXPECT_EQ(r->unlisted, 1u);
  EXPECT_EQ(r->unchecked, 0u);
  ASSERT_EQ(r->problems.size(), 4u);
  EXPECT_EQ(quarantine_slots(), 0u);  // nothing written without repair; the lookups below quarantine
  for (const std::string& problem : r->problems) {
    const std::string rel = problem.substr(0, problem.find(':'));
    EXPECT_EQ(lookup_errno(rel), ENOENT) << problem;
  }
  for (const char* rel : {"c/good", "c/good/a", "c/f.bin", "c/pipe", "tmp/scratch"})
    EXPECT_TRUE(visible(rel)) << rel;
}

// What a lookup quarantined (as a mount does) is in fsck's report, counted
// apart from what fsck quarantined itself, and new only until the next fsck.
TEST_F(StoreTest, FsckReportsWhatTheQuarantineTookSinceTheLastFsck) {
  publish_entry("good", {{"a", "a"}});
  publish_entry("bad", {{"a", "abc"}});
  publish_entry("worse", {{"b", "bbbb"}});
  write_file(B("c/bad/a"), "xy");  // a size the manifest does not say
  EXPECT_EQ(lookup_errno("c/bad/a"), ENOENT);
  ASSERT_EQ(quarantine_slots(), 1u);
  auto first = sealfs::fsck(store(), false);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->invalid, 0u);
  EXPECT_EQ(first->quarantined, 0u);  // fsck itself moved nothing
  const QuarantineSummary& q = first->quarantine;
  EXPECT_EQ(q.fresh, 1u);
  EXPECT_EQ(q.held, 1u);
  EXPECT_GT(q.fresh_bytes, 0u);
  EXPECT_EQ(q.fresh_bytes, q.held_bytes);
  ASSERT_EQ(q.newest.size(), 1u);
  EXPECT_EQ(q.newest[0].path, "c/bad");
  EXPECT_EQ(q.newest[0].reason, "a: is 2 bytes, manifest says 3 bytes");
  EXPECT_EQ(q.newest[0].bytes, q.fresh_bytes);
  EXPECT_TRUE(first->marker_error.empty()) << first->marker_error;
  // Seen once, no longer new; still held.
  auto second = sealfs::fsck(store(), false);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->quarantine.fresh, 0u);
  EXPECT_EQ(second->quarantine.held, 1u);
  EXPECT_EQ(second->quarantine.held_bytes, q.held_bytes);
  EXPECT_TRUE(second->quarantine.newest.empty());
  EXPECT_FALSE(second->quarantine.marker.empty());
  // Then --repair quarantines an entry itself: counted as its own, and not
  // new to the next fsck either.
  write_file(B("c/worse/b"), "BBBB");
  auto repaired = sealfs::fsck(store(), true);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired->quarantined, 1u);
  EXPECT_EQ(repaired->quarantine.fresh, 0u);  // the quarantine as this run found it
  ASSERT_EQ(quarantine_slots(), 2u);
  auto third = sealfs::fsck(store(), false);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->quarantine.fresh, 0u);
  EXPECT_EQ(third->quarantine.held, 2u);
}

// A quarantine holding something that is no readable slot does not stop fsck.
TEST_F(StoreTest, FsckListsWhatItCannotReadInTheQuarantine) {
  write_file(B(".sealfs/quarantine/junk"), "x");
  make_dirs(B(".sealfs/quarantine/20261207T101501.000000000Z-1-000001"));
  write_file(B(".sealfs/quarantine/20261207T101501.000000000Z-1-000001/reason.json"), "\xff{");
  auto r = sealfs::fsck(store(), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->quarantine.held, 2u);
  EXPECT_EQ(r->quarantine.fresh, 1u);
  ASSERT_EQ(r->quarantine.unreadable.size(), 2u);
  EXPECT_EQ(r->quarantine.unreadable[0],
            "20261207T101501.000000000Z-1-000001: reason.json is not a JSON object");
  EXPECT_EQ(r->quarantine.unreadable[1], "junk: not a quarantine slot");
  auto again = sealfs::fsck(store(), false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->quarantine.fresh, 0u);
  EXPECT_EQ(again->quarantine.unreadable.size(), 2u);  // still there, still said
}

}  // namespace
}  // namespace sealfs::test
