// fsck (core/store/fsck.cpp): a walk that asks the judge of every name, at
// audit depth, what a lookup would show, and counts the answers; with
// repair, what is invalid goes to quarantine.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "core/store/judge.hpp"
#include "core/store/offline.hpp"
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

}  // namespace
}  // namespace sealfs::test
