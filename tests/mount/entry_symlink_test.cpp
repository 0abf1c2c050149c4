// A symlink inside a directory entry whose target stays inside the entry is
// recorded in the entry's manifest (the entry stays valid, the link is shown,
// also by a fresh mount); one that leaves the entry is refused with EPERM.
// Unlink and rename of such a symlink edit the manifest. Made by coreutils'
// ln, mv, rm and cp -a, and by GNU tar.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

std::optional<std::string> link_of(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

// The entry's manifest as B holds it.
std::string manifest_of(const Mount& mount, const std::string& entry) {
  return read_file(mount.b(entry + "/.sealfs-manifest")).value_or("<no manifest>");
}

bool records(const std::string& manifest, const std::string& key, const std::string& target) {
  return manifest.find("\"" + key + "\":{\"size\":" + std::to_string(target.size()) + ",\"symlink\":\"" +
                       target + "\"}") != std::string::npos;
}

class EntrySymlink : public MountTest {
 protected:
  // B outlives each mount: the test mounts it again.
  MountConfig config() const override { return MountConfig{}.backed_by(dir_ / "B"); }
  void SetUp() override {
    make_dirs(dir_ / "B");
    MountTest::SetUp();
    if (!mounted()) return;
    // The steps: an empty directory renamed is published as an
    // entry; then files and a directory made inside it amend its manifest.
    ASSERT_EQ(::mkdir(m("e0").c_str(), 0755), 0);
    ASSERT_EQ(::rename(m("e0").c_str(), m("e").c_str()), 0);
    ASSERT_TRUE(exists_nofollow(b("e/.sealfs-manifest")));
    write_file(m("e/other"), "other\n");
    ASSERT_EQ(::mkdir(m("e/sub").c_str(), 0755), 0);
    write_file(m("e/sub/inner"), "inner\n");
    ASSERT_TRUE(
        eventually([&] { return manifest_of(*mount_, "e").find("\"sub/inner\":") != std::string::npos; }));
  }
  ProcessResult run(std::vector<std::string> argv) { return run_process(argv); }
  void remount() {
    ASSERT_EQ(mount_->unmount(), 0);
    mount_ = std::make_unique<Mount>(config());
    ASSERT_TRUE(mount_->ok()) << mount_->error();
  }
  void expect_fsck_clean() {
    ASSERT_EQ(mount_->unmount(), 0);
    ProcessResult f = run_process({sealfs_binary(), "fsck", dir_ / "B"});
    EXPECT_EQ(f.status, 0) << f.out << f.err;
    EXPECT_NE(f.out.find(", invalid 0, foreign 0, unlisted 0,"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("quarantine: 0 new"), std::string::npos) << f.out;
  }
  TempDir dir_{"sealfs-entry-symlink"};
};

TEST_F(EntrySymlink, LnInsideTheEntryIsRecordedAndShown) {
  ProcessResult ln = run({"ln", "-s", "other", m("e/l")});
  ASSERT_EQ(ln.status, 0) << ln.err;
  EXPECT_EQ(link_of(m("e/l")), "other");
  EXPECT_EQ(read_file(m("e/l")), "other\n");  // followed through M, to a verified file
  EXPECT_TRUE(records(manifest_of(*mount_, "e"), "l", "other")) << manifest_of(*mount_, "e");
  EXPECT_EQ(read_file(m("e/other")), "other\n");  // the entry is still valid
  // From a subdirectory, ".." back up to the entry's root is inside too.
  ln = run({"ln", "-s", "../other", m("e/sub/up")});
  ASSERT_EQ(ln.status, 0) << ln.err;
  EXPECT_EQ(read_file(m("e/sub/up")), "other\n");
  EXPECT_TRUE(records(manifest_of(*mount_, "e"), "sub/up", "../other")) << manifest_of(*mount_, "e");
  // A fresh mount shows them: the entry verifies with its symlinks.
  remount();
  EXPECT_EQ(link_of(m("e/l")), "other");
  EXPECT_EQ(read_file(m("e/sub/up")), "other\n");
  EXPECT_EQ(read_file(m("e/sub/inner")), "inner\n");
  EXPECT_EQ(list_dir(b(".sealfs/quarantine")).size(), 2u) << "something was quarantined";  // "." and ".."
  expect_fsck_clean();
}

TEST_F(EntrySymlink, ASymlinkLeavingTheEntryIsRefused) {
  for (const auto& [target, at] : std::vector<std::pair<std::string, std::string>>{
           {"/etc/passwd", "e/abs"}, {"../x", "e/up"}, {"..", "e/parent"}, {"../../x", "e/sub/up2"}}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(err_of(::symlink(target.c_str(), m(at).c_str())), EPERM);
    ProcessResult ln = run({"ln", "-s", target, m(at)});
    EXPECT_NE(ln.status, 0);
    EXPECT_NE(ln.err.find("Operation not permitted"), std::string::npos) << ln.err;
    EXPECT_EQ(lstat_errno(m(at)), ENOENT);
    EXPECT_EQ(lstat_errno(b(at)), ENOENT);  // nothing left behind in B
  }
  EXPECT_EQ(read_file(m("e/other")), "other\n");
  expect_fsck_clean();
}

TEST_F(EntrySymlink, RenameAndUnlinkEditTheManifest) {
  ASSERT_EQ(::symlink("other", m("e/l").c_str()), 0);
  ASSERT_EQ(::symlink("../other", m("e/sub/up").c_str()), 0);
  ProcessResult mv = run({"mv", m("e/l"), m("e/l2")});
  ASSERT_EQ(mv.status, 0) << mv.err;
  EXPECT_EQ(lstat_errno(m("e/l")), ENOENT);
  EXPECT_EQ(read_file(m("e/l2")), "other\n");
  std::string manifest = manifest_of(*mount_, "e");
  EXPECT_TRUE(records(manifest, "l2", "other")) << manifest;
  EXPECT_EQ(manifest.find("\"l\":"), std::string::npos) << manifest;
  // Down into sub/ the same text still stays inside (it names sub/other).
  mv = run({"mv", m("e/l2"), m("e/sub/l3")});
  ASSERT_EQ(mv.status, 0) << mv.err;
  EXPECT_EQ(link_of(m("e/sub/l3")), "other");
  EXPECT_TRUE(records(manifest_of(*mount_, "e"), "sub/l3", "other")) << manifest_of(*mount_, "e");
  // sub/up ("../other") one level up would leave the entry: refused as any
  // publish the rules refuse (EBADMSG), and left where it was.
  EXPECT_EQ(err_of(::rename(m("e/sub/up").c_str(), m("e/up").c_str())), EBADMSG);
  EXPECT_EQ(read_file(m("e/sub/up")), "other\n");
  EXPECT_TRUE(records(manifest_of(*mount_, "e"), "sub/up", "../other")) << manifest_of(*mount_, "e");
  ProcessResult rm = run({"rm", m("e/sub/l3"), m("e/sub/up")});
  ASSERT_EQ(rm.status, 0) << rm.err;
  manifest = manifest_of(*mount_, "e");
  EXPECT_EQ(manifest.find("symlink"), std::string::npos) << manifest;
  EXPECT_EQ(lstat_errno(b("e/sub/up")), ENOENT);
  EXPECT_EQ(read_file(m("e/sub/inner")), "inner\n");
  expect_fsck_clean();
}

// A tree with an internal symlink, copied or extracted into the entry by
// programs nobody here wrote, and published whole as an entry of its own.
TEST_F(EntrySymlink, CpAndTarBringATreeWithAnInternalSymlink) {
  TempDir src("sealfs-symlink-tree");
  make_dirs(src / "d/sub");
  write_file(src / "d/file", "file\n");
  ASSERT_EQ(::symlink("file", (src / "d/link").c_str()), 0);
  ASSERT_EQ(::symlink("../file", (src / "d/sub/up").c_str()), 0);
  ProcessResult cp = run({"cp", "-a", src / "d", m("e/d")});
  ASSERT_EQ(cp.status, 0) << cp.err;
  EXPECT_EQ(link_of(m("e/d/link")), "file");
  EXPECT_EQ(read_file(m("e/d/sub/up")), "file\n");
  EXPECT_TRUE(records(manifest_of(*mount_, "e"), "d/sub/up", "../file")) << manifest_of(*mount_, "e");
  ProcessResult tar = run({"tar", "-C", src.path(), "-cf", src / "t.tar", "d"});
  ASSERT_EQ(tar.status, 0) << tar.err;
  ASSERT_EQ(::mkdir(m("e/x").c_str(), 0755), 0);
  tar = run({"tar", "-C", m("e/x"), "-xf", src / "t.tar"});
  ASSERT_EQ(tar.status, 0) << tar.err;
  EXPECT_EQ(read_file(m("e/x/d/link")), "file\n");
  EXPECT_EQ(link_of(m("e/x/d/sub/up")), "../file");
  ProcessResult diff = run({"diff", "-r", "--no-dereference", src / "d", m("e/x/d")});
  EXPECT_EQ(diff.status, 0) << diff.out << diff.err;
  expect_fsck_clean();
}

// Under tilelang a tree copied into the volatile tmp/ and renamed out of it
// is published whole as an entry, its internal symlinks recorded; a symlink
// under an artefact's name (*.so, which the cuda validator guards) is not.
TEST(EntrySymlinkTree, PublishedWholeFromAVolatileArea) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  TempDir src("sealfs-symlink-tree");
  make_dirs(src / "d/sub");
  write_file(src / "d/file", "file\n");
  ASSERT_EQ(::symlink("file", (src / "d/link").c_str()), 0);
  ASSERT_EQ(::symlink("../file", (src / "d/sub/up").c_str()), 0);
  ASSERT_EQ(::mkdir(mount.m("tmp").c_str(), 0755), 0);
  ProcessResult cp = run_process({"cp", "-a", src / "d", mount.m("tmp/d")});
  ASSERT_EQ(cp.status, 0) << cp.err;
  ProcessResult mv = run_process({"mv", mount.m("tmp/d"), mount.m("p")});
  ASSERT_EQ(mv.status, 0) << mv.err;
  EXPECT_EQ(read_file(mount.m("p/link")), "file\n");
  EXPECT_EQ(read_file(mount.m("p/sub/up")), "file\n");
  EXPECT_TRUE(records(manifest_of(mount, "p"), "sub/up", "../file")) << manifest_of(mount, "p");
  EXPECT_EQ(err_of(::symlink("file", mount.m("p/lib.so").c_str())), EPERM);
  EXPECT_EQ(lstat_errno(mount.b("p/lib.so")), ENOENT);
}

}  // namespace
}  // namespace sealfs::test
