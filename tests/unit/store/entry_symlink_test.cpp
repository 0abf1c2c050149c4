// Symlinks inside a directory entry (namespace.cpp's symlink, records.cpp's
// symlink_record, the entry verifier's rules): one whose target stays inside
// the entry, out of its volatile areas and not under a name a validator
// guards, amends the manifest and is shown; unlink and rename edit the
// manifest again; one that leaves the entry is EPERM and leaves nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>
#include <string>

#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/offline.hpp"
#include "core/store/store.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

class EntrySymlinkTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    profile().validators.clear();  // no name guarded: the generic profile's case
    open_store();
    make_dirs(B("tmp/k/sub"));
    write_file(B("tmp/k/a"), "a");
    write_file(B("tmp/k/sub/b"), "b");
    UniqueFd root = dir("");
    ASSERT_TRUE(store().mkdir(root.get(), "c", 0755).ok());
    ASSERT_TRUE(rename("tmp/k", "c/k").ok());
  }
  // The symlink target recorded under key in c/k's manifest, if any.
  std::optional<std::string> recorded(const std::string& key) {
    UniqueFd k = dir("c/k");
    auto m = read_manifest_at(k.get(), ".sealfs-manifest");
    if (!m) return std::nullopt;
    auto it = m->manifest.files.find(key);
    if (it == m->manifest.files.end() || !it->second.symlink) return std::nullopt;
    return *it->second.symlink;
  }
};

TEST_F(EntrySymlinkTest, ATargetInsideTheEntryIsRecordedAndShown) {
  UniqueFd k = dir("c/k");
  auto made = store().symlink(k.get(), "l", "a");
  ASSERT_TRUE(made.ok()) << made.error().message;
  EXPECT_EQ(recorded("l"), "a");
  UniqueFd sub = dir("c/k/sub");
  ASSERT_TRUE(store().symlink(sub.get(), "up", "../a").ok());
  ASSERT_TRUE(store().symlink(sub.get(), "root", "..").ok());  // the entry's own root
  ASSERT_TRUE(store().symlink(k.get(), "dangling", "sub/none").ok());
  EXPECT_EQ(recorded("sub/up"), "../a");
  EXPECT_EQ(recorded("sub/root"), "..");
  open_store();  // fresh caches: the entry verifies with its symlinks
  for (const char* rel : {"c/k", "c/k/a", "c/k/l", "c/k/sub/up", "c/k/sub/root", "c/k/dangling"})
    EXPECT_TRUE(visible(rel)) << rel;
  auto r = sealfs::fsck(store(), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->invalid, 0u);
  EXPECT_EQ(r->unlisted, 0u);
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(EntrySymlinkTest, ATargetLeavingTheEntryIsRefusedAndLeavesNothing) {
  UniqueFd k = dir("c/k");
  UniqueFd sub = dir("c/k/sub");
  const auto before = read_file(B("c/k/.sealfs-manifest"));
  struct Case {
    int dir_fd;
    const char* name;
    const char* target;
  };
  for (const Case& c : {Case{k.get(), "abs", "/etc/passwd"}, Case{k.get(), "up", "../x"},
                        Case{k.get(), "parent", ".."}, Case{sub.get(), "up2", "../../x"},
                        // ".." after a name: where "sub" leads is not the text's to say
                        Case{k.get(), "round", "sub/../a"},
                        // into the volatile **/.staging/**: nothing there is verified
                        Case{k.get(), "vol", ".staging/f"}, Case{sub.get(), "vol2", "../.staging"}}) {
    SCOPED_TRACE(c.target);
    EXPECT_EQ(store().symlink(c.dir_fd, c.name, c.target).code(), EPERM);
  }
  for (const char* rel :
       {"c/k/abs", "c/k/up", "c/k/parent", "c/k/sub/up2", "c/k/round", "c/k/vol", "c/k/sub/vol2"})
    EXPECT_FALSE(exists_nofollow(B(rel))) << rel;
  EXPECT_EQ(read_file(B("c/k/.sealfs-manifest")), before);
  EXPECT_TRUE(visible("c/k/a"));
}

// The verifier holds a manifest to the same rules: a record leading into a
// volatile area, planted behind the store, makes the entry invalid.
TEST_F(EntrySymlinkTest, APlantedRecordIntoAVolatileAreaMakesTheEntryInvalid) {
  make_dirs(B("c/k/.staging"));
  write_file(B("c/k/.staging/f"), "unverified");
  ASSERT_EQ(::symlink(".staging/f", B("c/k/v").c_str()), 0);
  UniqueFd k = dir("c/k");
  auto m = read_manifest_at(k.get(), ".sealfs-manifest");
  ASSERT_TRUE(m.ok());
  m->manifest.files["v"] = FileRecord{10, std::nullopt, std::string(".staging/f")};
  ASSERT_TRUE(write_manifest_atomic(k.get(), ".sealfs-manifest", m->manifest, false).ok());
  auto r = sealfs::fsck(store(), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->invalid, 1u);
  ASSERT_EQ(r->problems.size(), 1u);
  EXPECT_EQ(r->problems[0], "c/k: v: symlink target lies in a volatile area");
}

// Under a name a validator guards the symlink is refused whatever its target.
TEST_F(EntrySymlinkTest, ANameAValidatorGuardsMustBeARegularFile) {
  profile().validators = {{"**/*.so", "test-reject"}};
  open_store();
  UniqueFd k = dir("c/k");
  EXPECT_EQ(store().symlink(k.get(), "lib.so", "a").code(), EPERM);
  EXPECT_FALSE(exists_nofollow(B("c/k/lib.so")));
  EXPECT_TRUE(store().symlink(k.get(), "lib.txt", "a").ok());
}

TEST_F(EntrySymlinkTest, UnlinkAndRenameEditTheManifest) {
  UniqueFd k = dir("c/k");
  UniqueFd sub = dir("c/k/sub");
  ASSERT_TRUE(store().symlink(k.get(), "l", "a").ok());
  ASSERT_TRUE(store().symlink(sub.get(), "up", "../a").ok());
  ASSERT_TRUE(rename("c/k/l", "c/k/l2").ok());
  EXPECT_EQ(recorded("l"), std::nullopt);
  EXPECT_EQ(recorded("l2"), "a");
  ASSERT_TRUE(rename("c/k/l2", "c/k/sub/l3").ok());  // "a" from sub/ names sub/a: still inside
  EXPECT_EQ(recorded("l2"), std::nullopt);
  EXPECT_EQ(recorded("sub/l3"), "a");
  // One level up, "../a" would leave the entry: refused like any publish
  // the rules refuse, and nothing moves.
  EXPECT_EQ(rename("c/k/sub/up", "c/k/up").code(), EBADMSG);
  EXPECT_EQ(recorded("sub/up"), "../a");
  EXPECT_TRUE(visible("c/k/sub/up"));
  EXPECT_FALSE(exists_nofollow(B("c/k/up")));
  ASSERT_TRUE(store().unlink(sub.get(), "up").ok());
  EXPECT_EQ(recorded("sub/up"), std::nullopt);
  EXPECT_FALSE(exists_nofollow(B("c/k/sub/up")));
  open_store();
  EXPECT_TRUE(visible("c/k/sub/l3"));
  EXPECT_TRUE(visible("c/k/a"));
  auto r = sealfs::fsck(store(), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->invalid, 0u);
  EXPECT_EQ(r->unlisted, 0u);
}

TEST(SymlinkDestination, ReadsTheTargetAgainstTheLinksOwnDirectory) {
  EXPECT_EQ(symlink_destination("c/e/l", "other"), "c/e/other");
  EXPECT_EQ(symlink_destination("c/e/sub/l", "../x"), "c/e/x");
  EXPECT_EQ(symlink_destination("c/e/sub/l", "./y/./z"), "c/e/sub/y/z");
  EXPECT_EQ(symlink_destination("c/e/sub/l", ".."), "c/e");
  EXPECT_EQ(symlink_destination("l", "a//b/"), "a/b");
  EXPECT_EQ(symlink_destination("l", "../../x"), "x");  // never above the root: no entry lies there
}

}  // namespace
}  // namespace sealfs::test
