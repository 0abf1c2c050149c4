// EntryVerifier's verdicts kept by stamps (issue 14): a verdict records the
// stamps of the manifest and of every listed file it saw, and answers again
// only while B still holds them all (a listing at any time, a lookup after
// the TTL). A changed stamp means a new check; a valid verdict is reused only
// once its stamps are settled (R8's one second); and no cached verdict makes
// an entry visible that checking it now would hide.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/base/digest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "tests/support/entry_location.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

// Past R8's one second: stamps taken before this are settled.
void let_stamps_settle() { std::this_thread::sleep_for(std::chrono::milliseconds(1100)); }

class VerdictCacheTest : public EntryDirTest {
 protected:
  VerdictCacheTest() : EntryDirTest("sealfs-verdicts") {}
  // "lib" hashed (recorded with lib_digest_of's digest), "src" size-only.
  void seal_entry(const std::string& lib, const std::string& lib_digest_of) {
    put("lib", lib);
    make_dirs(path("sub"));
    put("sub/src", "source");
    Manifest m;
    m.files["lib"] = FileRecord{lib.size(), sha256_of(lib_digest_of), std::nullopt};
    m.files["sub/src"] = FileRecord{6, std::nullopt, std::nullopt};
    ASSERT_TRUE(write_manifest_atomic(dir_.get(), kDirManifest, m, false).ok());
  }

  // TTL 0: a lookup never trusts a verdict by its age, only by its stamps.
  EntryVerifier entries_{verifier_, std::chrono::nanoseconds(0)};
};

TEST_F(VerdictCacheTest, SettledStampsAnswerListingsAndLookupsWithoutAnotherCheck) {
  seal_entry("library", "library");
  auto v = entries_.check(where(), VerifyDepth::cached);
  ASSERT_TRUE(v->valid) << v->reason;
  EXPECT_EQ(v->file_stamps.size(), 2u);
  let_stamps_settle();
  EXPECT_EQ(entries_.check(where(), VerifyDepth::stat_only).get(), v.get());
  EXPECT_EQ(entries_.check(where(), VerifyDepth::cached_only).get(), v.get());  // readdirplus: attributes
  EXPECT_EQ(entries_.check(where(), VerifyDepth::cached).get(), v.get());       // past the TTL: stamps hold
  EXPECT_EQ(metrics_.files_hashed.load(), 1u);
}

TEST_F(VerdictCacheTest, RecentStampsDoNotVouchForAValidVerdict) {
  seal_entry("library", "library");
  auto v = entries_.check(where(), VerifyDepth::cached);
  ASSERT_TRUE(v->valid) << v->reason;
  // Written under a second ago: a same-size rewrite could hide behind the
  // stamps, so the files are looked at again (sizes for a listing).
  auto listed = entries_.check(where(), VerifyDepth::stat_only);
  EXPECT_NE(listed.get(), v.get());
  EXPECT_TRUE(listed->valid);
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::cached_only)->unknown);
}

TEST_F(VerdictCacheTest, AStatChangeOfAListedFileDropsTheVerdict) {
  seal_entry("library", "library");
  auto v = entries_.check(where(), VerifyDepth::cached);
  ASSERT_TRUE(v->valid) << v->reason;
  let_stamps_settle();
  ASSERT_EQ(::truncate(path("lib").c_str(), 3), 0);
  auto listed = entries_.check(where(), VerifyDepth::stat_only);
  EXPECT_NE(listed.get(), v.get());
  EXPECT_FALSE(listed->valid);  // noticed by the listing itself, no lookup needed
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::cached_only)->unknown);
}

TEST_F(VerdictCacheTest, AStatChangeBelowASubdirectoryDropsTheVerdict) {
  seal_entry("library", "library");
  auto v = entries_.check(where(), VerifyDepth::cached);
  ASSERT_TRUE(v->valid) << v->reason;
  let_stamps_settle();
  put("sub/src", "SOURCE");  // same size: still valid, but checked again
  auto listed = entries_.check(where(), VerifyDepth::stat_only);
  EXPECT_NE(listed.get(), v.get());
  EXPECT_TRUE(listed->valid);
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::cached_only)->unknown);
}

TEST_F(VerdictCacheTest, AStatChangeOfTheManifestDropsTheVerdict) {
  seal_entry("library", "library");
  auto v = entries_.check(where(), VerifyDepth::cached);
  ASSERT_TRUE(v->valid) << v->reason;
  let_stamps_settle();
  // The same bytes written in place: only the stamp changes.
  auto text = read_file(path(std::string(kDirManifest)));
  ASSERT_TRUE(text);
  put(std::string(kDirManifest), *text);
  auto listed = entries_.check(where(), VerifyDepth::stat_only);
  EXPECT_NE(listed.get(), v.get());
  EXPECT_TRUE(listed->valid);
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::cached_only)->unknown);
}

// What hashing found keeps the entry out of listings while the stamps it saw
// stand, however recent they are, and a stat-level verdict cached earlier
// never overrules it.
TEST_F(VerdictCacheTest, NoCachedVerdictMakesAHiddenEntryVisible) {
  seal_entry("library", "LIBRARY");  // right size, wrong digest
  auto shallow = entries_.check(where(), VerifyDepth::stat_only);
  EXPECT_TRUE(shallow->valid);  // types and sizes only
  auto hashed = entries_.check(where(), VerifyDepth::cached);
  ASSERT_FALSE(hashed->valid);
  EXPECT_EQ(entries_.check(where(), VerifyDepth::stat_only).get(), hashed.get());
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::cached_only)->valid);
  let_stamps_settle();
  EXPECT_EQ(entries_.check(where(), VerifyDepth::stat_only).get(), hashed.get());
  EXPECT_EQ(entries_.check(where(), VerifyDepth::cached).get(), hashed.get());
}

// A lookup after the TTL does not take an invalid verdict on recent stamps:
// the entry may have been repaired within the same timestamp tick.
TEST_F(VerdictCacheTest, ALookupChecksAnInvalidVerdictAgainWhileItsStampsAreRecent) {
  seal_entry("library", "LIBRARY");
  auto hashed = entries_.check(where(), VerifyDepth::cached);
  ASSERT_FALSE(hashed->valid);
  auto again = entries_.check(where(), VerifyDepth::cached);
  EXPECT_NE(again.get(), hashed.get());
  EXPECT_FALSE(again->valid);
}

TEST_F(VerdictCacheTest, AVerdictThatStoppedEarlyIsCheckedAgain) {
  seal_entry("library", "library");
  ASSERT_EQ(::unlink(path("sub/src").c_str()), 0);
  auto v = entries_.check(where(), VerifyDepth::stat_only);
  ASSERT_FALSE(v->valid);
  let_stamps_settle();
  put("sub/src", "source");  // back: nothing recorded about it may keep the entry hidden
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::stat_only)->valid);
}

}  // namespace
}  // namespace sealfs::test
