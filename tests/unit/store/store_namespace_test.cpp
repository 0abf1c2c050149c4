// Store: escapes (planted symlinks, fds outside the root), removal, open-time
// verification (R8), listing, truncate, fsck/adopt and the directory-context
// cache.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/offline.hpp"
#include "core/store/store.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

TEST_F(StoreTest, PlantedSymlinksNeverLeadOutside) {
  TempDir outside("sealfs-outside");
  write_file(outside / "secret", "secret");
  ASSERT_EQ(::symlink((outside / "secret").c_str(), B("evil").c_str()), 0);
  ASSERT_EQ(::symlink(outside.path().c_str(), B("evildir").c_str()), 0);
  UniqueFd root = dir("");
  EXPECT_EQ(lookup_errno("evil"), ENOENT);
  EXPECT_EQ(lookup_errno("evildir"), ENOENT);
  EXPECT_EQ(store().unlink(root.get(), "evil").code(), ENOENT);
  EXPECT_EQ(store().rmdir(root.get(), "evildir").code(), ENOENT);
  EXPECT_EQ(store().rename(root.get(), "evil", root.get(), "x", 0).code(), ENOENT);
  EXPECT_EQ(store().rename(root.get(), "evildir", root.get(), "y", 0).code(), ENOENT);
  // Creating over the planted link replaces the link, never writes through it.
  auto c = store().create(root.get(), "evil", 0644, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(::write(c->open_fd.get(), "mine", 4), 4);
  EXPECT_EQ(slurp(outside / "secret"), "secret");
  EXPECT_EQ(store().mkdir(root.get(), "evildir", 0755).ok(), true);
  EXPECT_TRUE(exists_nofollow(outside / "secret"));
  // A manifest listing a path through a symlinked directory never verifies,
  // even when the file outside has the recorded size and digest.
  make_dirs(B("e"));
  ASSERT_EQ(::symlink(outside.path().c_str(), B("e/sub").c_str()), 0);
  Manifest m;
  m.files["sub/secret"] = FileRecord{6, sha256_of("secret"), std::nullopt};
  UniqueFd e = dir("e");
  ASSERT_TRUE(write_manifest_atomic(e.get(), ".sealfs-manifest", m, false).ok());
  EXPECT_EQ(lookup_errno("e"), ENOENT);
  EXPECT_EQ(slurp(outside / "secret"), "secret");
}

TEST_F(StoreTest, SymlinkedIntermediateDirectoryIsNotWalked) {
  TempDir outside("sealfs-outside");
  make_dirs(outside / "d");
  ASSERT_EQ(::symlink(outside.path().c_str(), B("c").c_str()), 0);
  // The daemon only ever holds fds it got from lookups; a symlink is not a
  // directory to it, so nothing below it can be reached or created.
  EXPECT_EQ(lookup_errno("c"), ENOENT);
  auto fd = open_beneath(dir("").get(), "c/d", O_PATH | O_DIRECTORY);
  EXPECT_FALSE(fd.ok());
  EXPECT_TRUE(fd.code() == ELOOP || fd.code() == ENOENT || fd.code() == EXDEV) << fd.code();
}

TEST_F(StoreTest, DirectoryFdOutsideTheRootIsRefused) {
  TempDir outside("sealfs-outside");
  int raw = ::open(outside.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  UniqueFd out(raw);
  write_file(outside / "x", "x");
  EXPECT_EQ(store().lookup(out.get(), "x").code(), ENOENT);
  EXPECT_FALSE(store().create(out.get(), "y", 0644, O_WRONLY).ok());
  EXPECT_FALSE(exists_nofollow(outside / "y"));
  // Nor anything inside B/.sealfs (the quarantine).
  UniqueFd q = dir(".sealfs/quarantine");
  EXPECT_FALSE(store().mkdir(q.get(), "z", 0755).ok());
}

TEST_F(StoreTest, RmdirRemovesHiddenLeftoversOnly) {
  make_dirs(B("c/k"));
  write_file(B("c/k/foreign"), "x");
  write_file(B("c/k/.sealfs-manifest.gone"), "{}");
  UniqueFd c = dir("c");
  EXPECT_TRUE(store().rmdir(c.get(), "k").ok());
  EXPECT_FALSE(exists_nofollow(B("c/k")));
  publish_entry("e", {{"a", "a"}});
  EXPECT_EQ(store().rmdir(c.get(), "e").code(), ENOTEMPTY);
  UniqueFd e = dir("c/e");
  ASSERT_TRUE(store().unlink(e.get(), "a").ok());
  EXPECT_TRUE(store().rmdir(c.get(), "e").ok());  // only the manifest was left
  EXPECT_EQ(store().rmdir(c.get(), "nothing").code(), ENOENT);
}

TEST_F(StoreTest, UnlinkInsideEntryShrinksTheManifest) {
  publish_entry("k", {{"a", "a"}, {"b", "b"}});
  UniqueFd k = dir("c/k");
  ASSERT_TRUE(store().unlink(k.get(), "a").ok());
  EXPECT_FALSE(exists_nofollow(B("c/k/a")));
  auto m = read_manifest_at(k.get(), ".sealfs-manifest");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->manifest.files.count("a"), 0u);
  EXPECT_TRUE(visible("c/k"));
  EXPECT_TRUE(visible("c/k/b"));
  EXPECT_EQ(store().unlink(k.get(), "a").code(), ENOENT);
  write_file(B("c/k/hidden"), "h");
  EXPECT_EQ(store().unlink(k.get(), "hidden").code(), ENOENT);
  EXPECT_TRUE(exists_nofollow(B("c/k/hidden")));
}

TEST_F(StoreTest, UnlinkOfFileEntryRemovesSidecar) {
  UniqueFd root = dir("");
  ASSERT_TRUE(store().symlink(root.get(), "l.src", "t").ok());
  ASSERT_TRUE(exists_nofollow(B(".sealfs-manifest.l.src")));
  ASSERT_TRUE(store().unlink(root.get(), "l.src").ok());
  EXPECT_FALSE(exists_nofollow(B("l.src")));
  EXPECT_FALSE(exists_nofollow(B(".sealfs-manifest.l.src")));
}

TEST_F(StoreTest, OpenRechecksChangedFilesAndRefusesCreateFlags) {
  publish_entry("k", {{"lib.so", "0123456789"}});
  auto f = lookup("c/k/lib.so");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(store().open_file(f->fd.get(), O_RDONLY | O_CREAT).code(), EINVAL);
  EXPECT_TRUE(store().open_file(f->fd.get(), O_RDONLY).ok());
  write_file(B("c/k/lib.so"), "9876543210");  // same size, new bytes, behind the mount
  EXPECT_EQ(store().open_file(f->fd.get(), O_RDONLY).code(), ENOENT);
  EXPECT_FALSE(exists_nofollow(B("c/k")));
}

// A file being written (in progress) that another process unlinks or
// renames over after a reader looked it up still opens, as on a native
// filesystem: its seal decides its content, not a manifest (R4), and it got
// ESTALE (fsmix multi-process runs, now and then).
TEST_F(StoreTest, AFileInProgressOpensAfterItsNameIsGone) {
  UniqueFd root = dir("");
  auto c = store().create(root.get(), "w", 0644, O_WRONLY | O_EXCL);
  ASSERT_TRUE(c.ok()) << c.error().message;
  add_writer(c->found.st);
  ASSERT_EQ(::write(c->open_fd.get(), "being written", 13), 13);
  auto looked_up = lookup("w");
  ASSERT_TRUE(looked_up.ok());
  ASSERT_EQ(::unlink(B("w").c_str()), 0);  // as a rename over it by another writer would
  auto opened = store().open_file(looked_up->fd.get(), O_RDONLY);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  char buf[32] = {};
  EXPECT_EQ(::pread(opened->get(), buf, sizeof buf, 0), 13);
  EXPECT_EQ(std::string(buf), "being written");
  clear_writers();
}

// A name the caller looked up, then replaced (R6): the old file still opens
// while it is exactly what was verified. Otherwise the error says which case
// it is, because a READ answers them differently (fs/fuse/file_handles.cpp):
// unlinked, ESTALE (look again); still in B elsewhere, here in quarantine
// after a change behind the mount, ENOENT (not what was verified).
TEST_F(StoreTest, AReplacedFileOpensAsVerifiedOrSaysWhetherItIsGone) {
  UniqueFd root = dir("");
  ASSERT_TRUE(store().mkdir(root.get(), "c", 0755).ok());
  auto publish = [&](const std::string& bytes) {
    write_file(B("tmp/f"), bytes);
    Status s = rename("tmp/f", "c/f");
    ASSERT_TRUE(s.ok()) << s.error().message;
  };
  publish("version-0");
  auto v0 = lookup("c/f");
  ASSERT_TRUE(v0.ok());
  publish("version-1");
  EXPECT_TRUE(store().open_file(v0->fd.get(), O_RDONLY).ok());  // unchanged, unlinked: served

  auto v1 = lookup("c/f");
  ASSERT_TRUE(v1.ok());
  write_file(B("c/f"), "version-X");  // changed behind the store, then removed there
  ASSERT_EQ(::unlink(B("c/f").c_str()), 0);
  publish("version-2");
  EXPECT_EQ(store().open_file(v1->fd.get(), O_RDONLY).code(), ESTALE);

  auto v2 = lookup("c/f");
  ASSERT_TRUE(v2.ok());
  write_file(B("c/f"), "version-Y");  // changed behind the store: quarantined at the open
  EXPECT_EQ(store().open_file(v2->fd.get(), O_RDONLY).code(), ENOENT);
  ASSERT_EQ(quarantine_slots(), 1u);
  EXPECT_EQ(store().open_file(v2->fd.get(), O_RDONLY).code(), ENOENT);  // in quarantine now
  EXPECT_EQ(store().metrics().quarantined.load(), 1u);
}

TEST_F(StoreTest, VerifyAlwaysRehashesAtEveryOpen) {
  options().verify = VerifyMode::always;
  open_store();
  publish_entry("k", {{"lib.so", "0123456789"}});
  auto f = lookup("c/k/lib.so");
  ASSERT_TRUE(f.ok());
  const auto hashed = store().metrics().files_hashed.load();
  ASSERT_TRUE(store().open_file(f->fd.get(), O_RDONLY).ok());
  ASSERT_TRUE(store().open_file(f->fd.get(), O_RDONLY).ok());
  EXPECT_GE(store().metrics().files_hashed.load(), hashed + 2);
}

TEST_F(StoreTest, ListNeverHashes) {
  publish_entry("k", {{"a.so", std::string(4096, 'a')}});
  open_store();  // fresh caches
  const auto hashed = store().metrics().files_hashed.load();
  EXPECT_EQ(listed("c"), (std::set<std::string>{"k"}));
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"a.so"}));
  EXPECT_EQ(store().metrics().files_hashed.load(), hashed);
  // A size mismatch is seen at stat level.
  ASSERT_EQ(::truncate(B("c/k/a.so").c_str(), 1), 0);
  EXPECT_TRUE(listed("c").empty());
}

TEST_F(StoreTest, TruncateByPathReseals) {
  publish_entry("k", {{"a", "abcdef"}});
  auto f = lookup("c/k/a");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(store().truncate(f->fd.get(), 2).ok());
  EXPECT_EQ(read_visible("c/k/a"), "ab");
  EXPECT_TRUE(visible("c/k"));
}

TEST_F(StoreTest, AdoptSealsForeignFilesAndGivenDirectories) {
  write_file(B("loose"), "l");
  make_dirs(B("c/k/sub"));
  write_file(B("c/k/sub/x"), "x");
  write_file(B("tmp/scratch"), "s");
  auto all = sealfs::adopt(store(), {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(read_visible("loose"), "l");
  EXPECT_TRUE(visible("c/k/sub/x"));  // as a file entry in its container
  EXPECT_FALSE(exists_nofollow(B("tmp/.sealfs-manifest.scratch")));
  make_dirs(B("d"));
  write_file(B("d/y"), "y");
  auto given = sealfs::adopt(store(), {"d"});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(*given, std::vector<std::string>{"d"});
  EXPECT_EQ(lookup("d")->kind, ObjectKind::entry_root);
  EXPECT_EQ(sealfs::adopt(store(), {".sealfs/quarantine"}).code(), EPERM);
  EXPECT_EQ(sealfs::adopt(store(), {"../etc"}).code(), EINVAL);
}

// With a long TTL the store keeps the contexts of the directories it walked
// (DirContextCache). Changes through the store show at once all the same.
TEST_F(StoreTest, CachedDirectoryContextsFollowChangesThroughTheStore) {
  options().verdict_ttl = std::chrono::hours(1);
  open_store();
  publish_entry("k", {{"sub/p.pkl", "p"}, {"kernel_lib.so", "lib"}});
  ASSERT_EQ(lookup("c/k/sub/p.pkl")->kind, ObjectKind::file_in_entry);  // context of c/k/sub stored
  // Moved into a volatile area: plain files there, not entry files.
  ASSERT_TRUE(rename("c/k", "tmp/k").ok());
  EXPECT_EQ(lookup("tmp/k/sub/p.pkl")->kind, ObjectKind::volatile_obj);
  // And published again: an entry once more.
  ASSERT_TRUE(rename("tmp/k", "c/k").ok());
  EXPECT_EQ(lookup("c/k/sub/p.pkl")->kind, ObjectKind::file_in_entry);
  // A container whose context is stored becomes an entry by adopt.
  make_dirs(B("c/d/sub"));
  write_file(B("c/d/sub/x"), "x");
  UniqueFd root = dir("");
  ASSERT_EQ(lookup("c/d/sub")->kind, ObjectKind::container);
  EXPECT_EQ(lookup_errno("c/d/sub/x"), ENOENT);  // foreign
  ASSERT_TRUE(sealfs::adopt(store(), {"c/d"}).ok());
  EXPECT_EQ(lookup("c/d/sub/x")->kind, ObjectKind::file_in_entry);
  // An entry whose manifest is removed behind the store is no entry, at once.
  ASSERT_EQ(::unlink(B("c/d/.sealfs-manifest").c_str()), 0);
  EXPECT_EQ(lookup_errno("c/d/sub/x"), ENOENT);
  // rmdir, then a new directory of the same name: a container again.
  ASSERT_EQ(::unlink(B("c/d/sub/x").c_str()), 0);
  UniqueFd d = dir("c/d");
  ASSERT_TRUE(store().rmdir(d.get(), "sub").ok());
  UniqueFd c = dir("c");
  ASSERT_TRUE(store().rmdir(c.get(), "d").ok());
  make_dirs(B("c/d/sub"));
  write_file(B("c/d/sub/x"), "x");
  EXPECT_EQ(lookup("c/d/sub")->kind, ObjectKind::container);
  EXPECT_EQ(lookup_errno("c/d/sub/x"), ENOENT);
}

// Store::open_file finds the file's directory through the cache; the file is
// still checked against its entry's manifest at every open.
TEST_F(StoreTest, OpenThroughCachedContextStillChecksTheFile) {
  options().verdict_ttl = std::chrono::hours(1);
  open_store();
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}, {"params.pkl", "p"}});
  EXPECT_EQ(read_visible("c/k/kernel_lib.so"), "0123456789abcdef");
  auto f = lookup("c/k/kernel_lib.so");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(store().open_file(f->fd.get(), O_RDONLY).ok());  // through the stored context of c/k
  // The entry moved behind the store: found where it is now.
  ASSERT_EQ(::rename(B("c/k").c_str(), B("c/k2").c_str()), 0);
  EXPECT_TRUE(store().open_file(f->fd.get(), O_RDONLY).ok());
  // Damaged: hidden and quarantined at once, stored context or not.
  ASSERT_EQ(::truncate(B("c/k2/kernel_lib.so").c_str(), 3), 0);
  EXPECT_EQ(store().open_file(f->fd.get(), O_RDONLY).code(), ENOENT);
  EXPECT_FALSE(exists_nofollow(B("c/k2")));
  EXPECT_EQ(quarantine_slots(), 1u);
}

TEST_F(StoreTest, SymlinkLoopsAndControlCharactersAreHandled) {
  ASSERT_EQ(::symlink("loop", B("loop").c_str()), 0);
  EXPECT_EQ(lookup_errno("loop"), ENOENT);
  make_dirs(B("e"));
  Manifest m;
  m.files["loop/x"] = FileRecord{1, std::nullopt, std::nullopt};
  UniqueFd e = dir("e");
  ASSERT_EQ(::symlink("loop", B("e/loop").c_str()), 0);
  ASSERT_TRUE(write_manifest_atomic(e.get(), ".sealfs-manifest", m, false).ok());
  EXPECT_EQ(lookup_errno("e"), ENOENT);
  const std::string odd =
      "bell\x07"
      "esc\x1b"
      "[0m nl\n";
  UniqueFd root = dir("");
  auto c = store().create(root.get(), odd, 0644, O_WRONLY);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(store().seal(c->found.fd.get()).ok());
  EXPECT_TRUE(visible(odd));
  EXPECT_EQ(listed("").count(odd), 1u);
}

}  // namespace
}  // namespace sealfs::test
