// EntryVerifier: R2 checks of one entry against its manifest (types, sizes
// before digests, symlink targets, accept records, hostile manifests) and the
// verdict cache of R8.
#include "core/verify/entry.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "core/base/digest.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/store.hpp"
#include "tests/support/entry_location.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class EntryTest : public EntryDirTest {
 protected:
  EntryTest() : EntryDirTest("sealfs-entry") {}
  void seal(const Manifest& m) {
    ASSERT_TRUE(write_manifest_atomic(dir_.get(), kDirManifest, m, false).ok());
  }
  static FileRecord hashed(const std::string& content) {
    return FileRecord{content.size(), sha256_of(content), std::nullopt};
  }
  // "a" recorded with its digest, "b" by size only (never hashed).
  void seal_hashed_and_size_only() {
    put("a", "aaa");
    put("b", "bb");
    Manifest m;
    m.files["a"] = hashed("aaa");
    m.files["b"] = FileRecord{2, std::nullopt, std::nullopt};
    seal(m);
  }

  EntryVerifier entries_{verifier_, std::chrono::hours(1)};
};

TEST_F(EntryTest, ValidEntryVerifiesAndIsCached) {
  seal_hashed_and_size_only();
  auto v = entries_.check(where(), VerifyDepth::cached);
  EXPECT_TRUE(v->valid) << v->reason;
  EXPECT_EQ(v->file_stamps.size(), 2u);
  EXPECT_EQ(metrics_.files_hashed.load(), 1u);  // size-only "b" is never hashed
  auto again = entries_.check(where(), VerifyDepth::cached);
  EXPECT_EQ(again.get(), v.get());  // within the TTL: the same verdict
  EXPECT_EQ(entries_.cached(where()).get(), v.get());
}

// fsck's depth: verified now with every hashed file hashed again, past the
// verdict within its TTL and the digests the stamps would vouch for.
TEST_F(EntryTest, AuditHashesEveryFileWhatTheCachesHold) {
  seal_hashed_and_size_only();
  auto first = entries_.check(where(), VerifyDepth::cached);
  ASSERT_TRUE(first->valid) << first->reason;
  const auto hashed_before = metrics_.files_hashed.load();
  auto audited = entries_.check(where(), VerifyDepth::audit);
  EXPECT_TRUE(audited->valid) << audited->reason;
  EXPECT_NE(audited.get(), first.get());
  EXPECT_EQ(metrics_.files_hashed.load(), hashed_before + 1);  // "a"; size-only "b" is never hashed
}

TEST_F(EntryTest, ManifestChangeInvalidatesTheCachedVerdict) {
  put("a", "aaa");
  Manifest m;
  m.files["a"] = hashed("aaa");
  seal(m);
  ASSERT_TRUE(entries_.check(where(), VerifyDepth::cached)->valid);
  m.files["a"] = hashed("zzz");
  seal(m);
  auto v = entries_.check(where(), VerifyDepth::cached);
  EXPECT_FALSE(v->valid);
  EXPECT_NE(v->reason.find("sha256"), std::string::npos) << v->reason;
}

// An entry inside the entry is its own unit: what the outer manifest says of
// files below it (a manifest written before that rule) is not the outer
// entry's to judge, while a change elsewhere still is.
TEST_F(EntryTest, WhatLiesInAnEntryInsideTheEntryIsNotJudgedByTheOuterOne) {
  make_dirs(path("c/n"));
  put("c/n/f", "hello");
  put("top", "top");
  Manifest outer;
  outer.files["c/n/f"] = hashed("hello");
  outer.files["top"] = hashed("top");
  seal(outer);
  put("c/n/f", "hello, more");  // amended into n's manifest only
  Manifest inner;
  inner.files["f"] = hashed("hello, more");
  UniqueFd n(::open(path("c/n").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(n);
  // Without n's manifest, c/n is part of e, and e fails.
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
  ASSERT_TRUE(write_manifest_atomic(n.get(), kDirManifest, inner, false).ok());
  auto v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_TRUE(v->valid) << v->reason;
  put("top", "TOP");
  v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(v->valid);
  EXPECT_NE(v->reason.find("top"), std::string::npos) << v->reason;
}

TEST_F(EntryTest, SizesAreComparedBeforeAnyHashing) {
  put("big", std::string(1 << 20, 'b'));
  put("small", "s");
  Manifest m;
  m.files["big"] = hashed(std::string(1 << 20, 'b'));
  m.files["small"] = hashed("longer than it is");
  seal(m);
  auto v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(v->valid);
  EXPECT_NE(v->reason.find("small"), std::string::npos) << v->reason;
  EXPECT_EQ(metrics_.files_hashed.load(), 0u);
}

TEST_F(EntryTest, MissingFileDirectoryAndSymlinkMismatches) {
  Manifest m;
  m.files["gone"] = hashed("x");
  seal(m);
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
  make_dirs(tmp_ / "e/gone");
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
  Manifest l;
  l.files["l"] = FileRecord{6, std::nullopt, std::string("target")};
  seal(l);
  ASSERT_EQ(::symlink("target", (tmp_ / "e/l").c_str()), 0);
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::fresh)->valid);
  ASSERT_EQ(::unlink((tmp_ / "e/l").c_str()), 0);
  ASSERT_EQ(::symlink("TARGET", (tmp_ / "e/l").c_str()), 0);
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
  // A regular file where a symlink is recorded.
  ASSERT_EQ(::unlink((tmp_ / "e/l").c_str()), 0);
  put("l", "target");
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
}

TEST_F(EntryTest, AcceptRecordAllowsEitherVersion) {
  put("f", "new");
  Manifest m;
  m.files["f"] = hashed("new");
  m.accept["f"] = hashed("older");
  seal(m);
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::fresh)->valid);
  put("f", "older");
  EXPECT_TRUE(entries_.check(where(), VerifyDepth::fresh)->valid);
  put("f", "neither");
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
}

// A damaged file that a publish replaces while it is hashed: what the hash
// saw is gone, so it is no evidence against the entry. The verdict is
// transient (asked again, never cached) and the valid verdict the cache held
// for the entry stays.
TEST_F(EntryTest, AFileReplacedWhileHashedIsNoEvidence) {
  put("a", "aaa");
  Manifest m;
  m.files["a"] = hashed("aaa");
  seal(m);
  auto valid = entries_.check(where(), VerifyDepth::fresh);
  ASSERT_TRUE(valid->valid) << valid->reason;
  put("a.new", "zzz");
  ASSERT_EQ(::rename(path("a.new").c_str(), path("a").c_str()), 0);  // damage: another file, same size
  put("a.new", "aaa");
  verifier_.set_mid_hash_hook([this] { ::rename(path("a.new").c_str(), path("a").c_str()); });
  auto v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(v->valid);
  EXPECT_TRUE(v->transient) << v->reason;
  EXPECT_EQ(entries_.cached(where()).get(), valid.get());

  // Damage that stays where the hash found it is evidence.
  verifier_.set_mid_hash_hook(nullptr);
  put("a", "zzz");
  auto damaged = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(damaged->valid);
  EXPECT_FALSE(damaged->transient) << damaged->reason;
}

// A listed file that changes as it is hashed gives no verdict (EAGAIN: no
// evidence, and an entry without a verdict shows none of its names) unless
// it is written through M right now (R4): then its seal decides and the
// entry stays valid meanwhile (amending), as for a size that differs (fsmix
// entry seeds 1, 3 and 11 under ASan: a directory of the entry listed empty).
TEST_F(EntryTest, AFileInProgressChangingWhileHashedLeavesTheEntryValid) {
  put("a", "aaa");
  put("b", "bbb");
  Manifest m;
  m.files["a"] = hashed("aaa");
  m.files["b"] = hashed("bbb");
  seal(m);
  struct stat a_st {};
  ASSERT_EQ(::stat(path("a").c_str(), &a_st), 0);
  // The same bytes written again: a new mtime, so every hash of "a" sees it change.
  verifier_.set_mid_hash_hook([this] {
    const int fd = ::open(path("a").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "aaa", 3, 0), 3);
    struct timespec later[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    ::futimens(fd, later);
    ::close(fd);
  });
  auto none = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(none->valid);
  EXPECT_EQ(none->error, EAGAIN) << none->reason;

  entries_.set_in_progress([&](const struct stat& st) { return st.st_ino == a_st.st_ino; });
  auto v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_TRUE(v->valid) << v->reason;
  EXPECT_TRUE(v->amending);
  verifier_.set_mid_hash_hook(nullptr);
}

TEST_F(EntryTest, HostileManifestsAreInvalidNotFatal) {
  put("a", "a");
  for (std::string_view text :
       {"", "null", "{\"sealfs\":1}", "{\"sealfs\":1,\"files\":{\"a\":{\"size\":-1}}}",
        "{\"sealfs\":1,\"files\":{\"/abs\":{\"size\":1}}}"}) {
    write_file(tmp_ / "e/.sealfs-manifest", text);
    EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid) << text;
  }
  ASSERT_EQ(::unlink((tmp_ / "e/.sealfs-manifest").c_str()), 0);
  ASSERT_EQ(::mkfifo((tmp_ / "e/.sealfs-manifest").c_str(), 0644), 0);  // must not block
  auto v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(v->valid);
  EXPECT_FALSE(v->manifest);
}

TEST_F(EntryTest, StatOnlyNeverHashes) {
  put("a", "aaa");
  Manifest m;
  m.files["a"] = hashed("bbb");  // right size, wrong digest
  seal(m);
  auto shallow = entries_.check(where(), VerifyDepth::stat_only);
  EXPECT_TRUE(shallow->valid);
  EXPECT_FALSE(shallow->hashed);
  EXPECT_EQ(metrics_.files_hashed.load(), 0u);
  EXPECT_FALSE(entries_.cached(where()));  // stat-level verdicts are not cached
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::cached)->valid);
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::stat_only)->valid);  // now the cached verdict answers
}

TEST_F(EntryTest, FileEntryMustListExactlyItsOwnName) {
  put("f", "f");
  struct stat st {};
  ASSERT_EQ(::fstatat(dir_.get(), "f", &st, AT_SYMLINK_NOFOLLOW), 0);
  EntryLocation w;
  w.base_fd = dir_.get();
  w.manifest_name = sidecar_name("f");
  w.dev = st.st_dev;
  w.ino = st.st_ino;
  w.file_name = "f";
  w.file_entry = true;
  Manifest m;
  m.files["f"] = hashed("f");
  ASSERT_TRUE(write_manifest_atomic(dir_.get(), w.manifest_name, m, false).ok());
  EXPECT_TRUE(entries_.check(w, VerifyDepth::fresh)->valid);
  m.files["g"] = hashed("f");
  ASSERT_TRUE(write_manifest_atomic(dir_.get(), w.manifest_name, m, false).ok());
  EXPECT_FALSE(entries_.check(w, VerifyDepth::fresh)->valid);
  Manifest other;
  other.files["f"] = hashed("f");
  other.name = "someone-else";
  ASSERT_TRUE(write_manifest_atomic(dir_.get(), w.manifest_name, other, false).ok());
  EXPECT_FALSE(entries_.check(w, VerifyDepth::fresh)->valid);
}

TEST(SidecarNameTest, ShortAndHashedForms) {
  EXPECT_EQ(sidecar_name("k.so"), ".sealfs-manifest.k.so");
  EXPECT_FALSE(sidecar_is_hashed("k.so"));
  const std::string longest_plain(255 - kSidecarPrefix.size(), 'x');
  EXPECT_EQ(sidecar_name(longest_plain), std::string(kSidecarPrefix) + longest_plain);
  const std::string too_long = longest_plain + "y";
  EXPECT_TRUE(sidecar_is_hashed(too_long));
  EXPECT_EQ(sidecar_name(too_long), std::string(kSidecarPrefix) + "#" + to_hex(sha256_of(too_long)));
  EXPECT_LE(sidecar_name(std::string(255, 'z')).size(), 255u);
}

}  // namespace
}  // namespace sealfs::test
