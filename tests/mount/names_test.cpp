// R5 (hidden things never block), R7 (reserved names) and R10 (links,
// FIFOs, devices, ownership) through a real mount.
#include <gtest/gtest.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <thread>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

class Names : public MountTest {
 protected:
  MountConfig config() const override { return MountConfig::with({"profile=tilelang"}); }
};

TEST_F(Names, R5CreateMkdirAndRenameOntoHiddenNamesSucceed) {
  write_file(b("foreign-file"), "planted");
  write_file(b("foreign-dir-name"), "planted");
  write_file(b("foreign-target"), "planted");
  ASSERT_EQ(lstat_errno(m("foreign-file")), ENOENT);
  {
    UniqueFd fd(::open(m("foreign-file").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    EXPECT_TRUE(fd.valid()) << std::strerror(errno);
  }
  EXPECT_EQ(err_of(::mkdir(m("foreign-dir-name").c_str(), 0755)), 0);
  ASSERT_EQ(::mkdir(m("tmp").c_str(), 0755), 0);
  write_file(m("tmp/new"), "published");
  EXPECT_EQ(err_of(::rename(m("tmp/new").c_str(), m("foreign-target").c_str())), 0);
  EXPECT_EQ(read_file(m("foreign-target")), "published");
  // The planted objects were moved aside, not lost.
  EXPECT_GE(quarantined_files(*mount_).size(), 2u);
}

TEST_F(Names, R5RmRfOfADirectoryWithHiddenLeftoversSucceeds) {
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  write_file(b("d/foreign"), "planted");
  make_dirs(b("d/sub"));
  write_file(b("d/sub/foreign"), "planted");
  write_file(b("d/.sealfs-manifest.ghost"), "{}");
  ProcessResult r = run_process({"rm", "-rf", m("d")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lstat_errno(m("d")), ENOENT);
  EXPECT_EQ(lstat_errno(b("d")), ENOENT);
}

TEST_F(Names, R7ReservedNamesAreNeverShownAndCannotBeCreated) {
  ASSERT_EQ(tilelang("save", mount_->mountpoint(), "k").status, 0);
  write_file(m("plain"), "x");
  ASSERT_TRUE(eventually([&] { return lstat_errno(b(".sealfs-manifest.plain")) == 0; }));
  for (const std::string& dir : {std::string(""), std::string("ns/kernels/k")}) {
    for (const auto& name : list_dir(m(dir)))
      EXPECT_NE(name.rfind(".sealfs", 0), 0u) << "listed: " << dir << "/" << name;
  }
  for (const auto& tool : std::vector<std::vector<std::string>>{{"find", mount_->mountpoint()},
                                                                {"ls", "-aR", mount_->mountpoint()}}) {
    ProcessResult r = run_process(tool);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find(".sealfs"), std::string::npos) << tool[0] << ": " << r.out;
  }
  EXPECT_EQ(lstat_errno(m(".sealfs")), ENOENT);
  EXPECT_EQ(lstat_errno(m(".sealfs-manifest.plain")), ENOENT);
  EXPECT_EQ(err_of(::open(m(".sealfs-x").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644) >= 0 ? 0 : -1),
            EPERM);
  EXPECT_EQ(err_of(::mkdir(m(".sealfs-dir").c_str(), 0755)), EPERM);
  EXPECT_EQ(err_of(::symlink("plain", m(".sealfs-link").c_str())), EPERM);
  EXPECT_EQ(err_of(::mkfifo(m(".sealfs-fifo").c_str(), 0644)), EPERM);
  EXPECT_EQ(err_of(::rename(m("plain").c_str(), m(".sealfs-manifest.other").c_str())), EPERM);
  EXPECT_EQ(err_of(::link(m("plain").c_str(), m(".sealfs-hardlink").c_str())), EPERM);
  EXPECT_EQ(read_file(m("plain")), "x");
}

TEST_F(Names, R10LinkThenUnlinkPublishesAFileEntry) {
  ASSERT_EQ(::mkdir(m("tmp").c_str(), 0755), 0);
  write_file(m("tmp/obj.o"), "object code");
  ASSERT_EQ(err_of(::link(m("tmp/obj.o").c_str(), m("obj.o").c_str())), 0);
  ASSERT_EQ(err_of(::unlink(m("tmp/obj.o").c_str())), 0);
  EXPECT_EQ(read_file(m("obj.o")), "object code");
  EXPECT_EQ(lstat_errno(b(".sealfs-manifest.obj.o")), 0);
  EXPECT_TRUE(list_dir(mount_->mountpoint()).count("obj.o"));
}

TEST_F(Names, R10FifosWorkAndDevicesAreShownNeverSealed) {
  ASSERT_EQ(err_of(::mkfifo(m("pipe").c_str(), 0644)), 0);
  struct stat st {};
  ASSERT_EQ(::lstat(m("pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  UniqueFd fd(::open(m("pipe").c_str(), O_RDWR | O_CLOEXEC));  // O_RDWR: no wait for a peer
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  ASSERT_EQ(::write(fd.get(), "ping", 4), 4);
  char buf[8] = {};
  ASSERT_EQ(::read(fd.get(), buf, sizeof buf), 4);
  EXPECT_EQ(std::string(buf, 4), "ping");
  // R10 (amended): device nodes like FIFOs; the mount is nodev, so they
  // never act as devices through it (bug C: they were refused with EPERM).
  ASSERT_EQ(err_of(::mknod(m("null").c_str(), S_IFCHR | 0666, makedev(1, 3))), 0);
  ASSERT_EQ(err_of(::mknod(m("disk").c_str(), S_IFBLK | 0666, makedev(7, 0))), 0);
  ASSERT_EQ(::lstat(m("null").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  ASSERT_EQ(::lstat(m("disk").c_str(), &st), 0);
  EXPECT_TRUE(S_ISBLK(st.st_mode));
  EXPECT_EQ(lstat_errno(b(".sealfs-manifest.null")), ENOENT);
  UniqueFd dev(::open(m("null").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(dev.valid()) << "a device node opened through a nodev mount";
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(err_of(::unlink(m("null").c_str())), 0);
}

TEST_F(Names, SymlinksAreShownAsTheyAre) {
  ASSERT_EQ(err_of(::symlink("../../etc/passwd", m("ln").c_str())), 0);
  char buf[256] = {};
  ASSERT_EQ(::readlink(m("ln").c_str(), buf, sizeof buf), 16);
  EXPECT_EQ(std::string(buf), "../../etc/passwd");
}

TEST(NamesAllowOther, FilesCreatedByAnotherUserBelongToThatUser) {
  SEALFS_REQUIRE_FUSE();
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount with allow_other and switch users";
  Mount mount(MountConfig::with({"allow_other,profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ASSERT_EQ(::mkdir(mount.m("pub").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(mount.m("pub").c_str(), 0777), 0);
  // TempDir's parent is private to root; let nobody reach the mount.
  ::chmod(mount.mountpoint().c_str(), 0755);
  const std::string parent = mount.mountpoint().substr(0, mount.mountpoint().rfind('/'));
  ::chmod(parent.c_str(), 0755);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
    const int fd = ::open(mount.m("pub/mine").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(91);
    if (::write(fd, "n", 1) != 1) ::_exit(92);
    ::close(fd);
    if (::mkdir(mount.m("pub/mydir").c_str(), 0755) != 0) ::_exit(93);
    // default_permissions: nobody may not write into root's 0755 directory.
    if (::mkdir(mount.m("denied").c_str(), 0755) == 0 || errno != EACCES) ::_exit(94);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_EQ(decode_wait_status(wstatus), 0);
  for (const char* rel : {"pub/mine", "pub/mydir"}) {
    struct stat st {};
    ASSERT_EQ(::lstat(mount.m(rel).c_str(), &st), 0) << rel;
    EXPECT_EQ(st.st_uid, 65534u) << rel;
    EXPECT_EQ(st.st_gid, 65534u) << rel;
    ASSERT_EQ(::lstat(mount.b(rel).c_str(), &st), 0) << rel;
    EXPECT_EQ(st.st_uid, 65534u) << rel << " in B";
  }
}

}  // namespace
}  // namespace sealfs::test
