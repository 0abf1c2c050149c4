// Mount options on real mounts.
//  - R10: the mount is always nodev,nosuid, also when it is asked for dev,suid
//    as mount.fuse3 asks for every root mount (it appends "dev,suid" unless
//    the fstab line says nodev/nosuid), and says nothing of it on standard
//    error (xfstests compares every mount's output).
//  - B's access times: the daemon's own reads (the digest at a seal, at a
//    publish, at a lookup's verification) leave them as they were (xfstests
//    generic/258), and -o noatime is honoured for reads through M (generic/003).
//  - Every atime rule mount(8) and libfuse know is accepted (generic/003's
//    cycle mounts).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

// The per-mount options (mountinfo's 6th field) of the mount at path, or "".
std::string mount_options(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::string found;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point, options;
    fields >> id >> parent >> devno >> root >> point >> options;
    if (point == path) found = options;  // the last one: the topmost mount
  }
  return found;
}

bool has_option(const std::string& options, const std::string& opt) {
  return ("," + options + ",").find("," + opt + ",") != std::string::npos;
}

TEST(MountFlags, DevAndSuidAskedForAreOverriddenNodevNosuid) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"dev,suid"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string options = mount_options(mount.mountpoint());
  EXPECT_TRUE(has_option(options, "nodev")) << options;
  EXPECT_TRUE(has_option(options, "nosuid")) << options;
  EXPECT_EQ(mount.log(), "") << "the override is no error: nothing on standard error";
}

// -d's output (and syslog) say what was overridden.
TEST(MountFlags, TheOverrideIsSaidUnderDebug) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"dev,suid,debug"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  EXPECT_TRUE(has_option(mount_options(mount.mountpoint()), "nodev"));
  EXPECT_NE(mount.log().find("sealfs: option dev ignored: the mount is always nodev,nosuid"),
            std::string::npos)
      << mount.log().substr(0, 2000);
  EXPECT_NE(mount.log().find("sealfs: option suid ignored"), std::string::npos)
      << mount.log().substr(0, 2000);
}

// As `mount -t fuse.sealfs B M` runs it: mount(8) execs mount.fuse3, which
// appends dev,suid and runs `sealfs` from PATH (mount(8) itself resets PATH,
// so the helper is run directly here, with the built binary first on PATH).
TEST(MountFlags, MountFuse3AsMount8RunsItGivesNodevNosuid) {
  SEALFS_REQUIRE_FUSE();
  const char* helper = "/sbin/mount.fuse3";
  if (::geteuid() != 0 || ::access(helper, X_OK) != 0) {
    if (running_under_ci()) FAIL() << "under CI: root and " << helper << " are needed";
    GTEST_SKIP() << "needs root and " << helper;
  }
  TempDir dir("sealfs-mountfuse3");
  ::mkdir((dir / "bin").c_str(), 0755);
  ::mkdir((dir / "b").c_str(), 0755);
  ::mkdir((dir / "m").c_str(), 0755);
  ASSERT_EQ(::symlink(sealfs_binary().c_str(), (dir / "bin/sealfs").c_str()), 0);
  const char* path = std::getenv("PATH");
  auto mounted = run_process({helper, dir / "b", dir / "m", "-o", "rw", "-t", "fuse.sealfs"},
                             {"PATH=" + (dir / "bin") + ":" + (path ? path : "/usr/bin:/bin")});
  ASSERT_EQ(mounted.status, 0) << mounted.out << mounted.err;
  const std::string options = mount_options(dir / "m");
  (void)run_process({"fusermount3", "-u", dir / "m"});
  EXPECT_TRUE(has_option(options, "nodev")) << options;
  EXPECT_TRUE(has_option(options, "nosuid")) << options;
  EXPECT_EQ(mounted.err, "") << "mount(8)'s dev,suid must leave standard error quiet";
  EXPECT_EQ(mounted.out, "");
}

// A known access time, long ago (older than mtime, so relatime would move it).
constexpr time_t kOld = 1000000000;  // 2001-09-09

void set_old_atime(const std::string& path) {
  const struct timespec times[2] = {{kOld, 0}, {0, UTIME_OMIT}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

time_t atime_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return -1;
  return st.st_atim.tv_sec;
}

std::uint64_t bytes_hashed(const Mount& mount) {
  char buf[8192];
  const ssize_t n = ::getxattr(mount.mountpoint().c_str(), "user.sealfs.status", buf, sizeof buf);
  if (n <= 0) return 0;
  const std::string json(buf, static_cast<std::size_t>(n));
  const auto at = json.find("\"bytes_hashed\":");
  return at == std::string::npos ? 0 : std::stoull(json.substr(at + 15));
}

std::string read_all(const std::string& path) { return read_file(path).value_or("<unreadable>"); }

TEST(MountFlags, TheDaemonsOwnReadsLeaveBackingAccessTimes) {
  SEALFS_REQUIRE_FUSE();
  struct statvfs fs {};
  TempDir b("sealfs-atime");
  ASSERT_EQ(::statvfs(b.path().c_str(), &fs), 0);
  const std::string data(std::size_t{256} << 10, 'a');
  {
    Mount m(MountConfig::with({"cache_timeout=0"}).backed_by(b.path()));
    ASSERT_TRUE(m.ok()) << m.error();
    // The seal at the last close hashes the file.
    const int fd = ::open(m.m("f").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    set_old_atime(b / "f");
    ::close(fd);
    ASSERT_TRUE(eventually([&] { return exists_nofollow(b / ".sealfs-manifest.f"); }));
    EXPECT_EQ(atime_of(b / "f"), kOld) << "the seal's digest moved B's atime";

    // A publish (rename of a directory) hashes what it publishes.
    ASSERT_EQ(::mkdir(m.m("stage").c_str(), 0755), 0);
    write_file(m.m("stage/g"), data);
    ASSERT_TRUE(eventually([&] { return exists_nofollow(b / "stage/.sealfs-manifest.g"); }));
    set_old_atime(b / "stage/g");
    ASSERT_EQ(::rename(m.m("stage").c_str(), m.m("entry").c_str()), 0);
    EXPECT_EQ(atime_of(b / "entry/g"), kOld) << "the publish's digest moved B's atime";
    EXPECT_EQ(m.unmount(), 0);
  }
  // A fresh daemon verifies at lookup: it hashes both again.
  set_old_atime(b / "f");
  set_old_atime(b / "entry/g");
  {
    Mount m(MountConfig::with({"cache_timeout=0"}).backed_by(b.path()));
    ASSERT_TRUE(m.ok()) << m.error();
    const std::uint64_t before = bytes_hashed(m);
    EXPECT_EQ(lstat_errno(m.m("f")), 0);
    EXPECT_EQ(lstat_errno(m.m("entry/g")), 0);
    EXPECT_GE(bytes_hashed(m) - before, 2 * data.size()) << "the lookups did not verify";
    EXPECT_EQ(atime_of(b / "f"), kOld) << "a lookup's verification moved B's atime";
    EXPECT_EQ(atime_of(b / "entry/g"), kOld) << "a lookup's verification moved B's atime";
    // A read through M is a read of B: B's own rule moves its atime.
    EXPECT_EQ(read_all(m.m("f")), data);
    if ((fs.f_flag & ST_NOATIME) == 0) {
      EXPECT_GT(atime_of(b / "f"), kOld) << "B's rule (relatime) applies";
    }
    EXPECT_EQ(m.unmount(), 0);
  }
  // -o noatime: reads through M leave it too.
  set_old_atime(b / "f");
  {
    Mount m(MountConfig::with({"noatime"}).backed_by(b.path()));
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_TRUE(has_option(mount_options(m.mountpoint()), "noatime")) << mount_options(m.mountpoint());
    EXPECT_EQ(read_all(m.m("f")), data);
    EXPECT_EQ(atime_of(b / "f"), kOld) << "-o noatime: a read through M moved B's atime";
    EXPECT_EQ(m.unmount(), 0);
  }
}

// xfstests generic/003 cycles its mount with each rule: mount, write,
// unmount, mount again with the rule, read.
TEST(MountFlags, NodiratimeMountsAndCycles) {
  SEALFS_REQUIRE_FUSE();
  TempDir b("sealfs-nodiratime");
  {
    Mount m(MountConfig::with({"nodiratime"}).backed_by(b.path()));
    ASSERT_TRUE(m.ok()) << m.error();
    ASSERT_EQ(::mkdir(m.m("dir1").c_str(), 0755), 0) << std::strerror(errno);
    write_file(m.m("dir1/file1"), "aaa\n");
    EXPECT_EQ(m.unmount(), 0) << m.log();
    EXPECT_EQ(m.log(), "");
  }
  Mount m(MountConfig::with({"nodiratime"}).backed_by(b.path()));
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(read_all(m.m("dir1/file1")), "aaa\n");
  EXPECT_EQ(list_dir(m.m("dir1")), (std::set<std::string>{".", "..", "file1"}));
  EXPECT_EQ(m.log(), "");
}

// The other rules, all at once: accepted, nothing said, and the mount works.
TEST(MountFlags, EveryAtimeRuleIsAccepted) {
  SEALFS_REQUIRE_FUSE();
  Mount m(MountConfig::with(
      {"atime,relatime,norelatime,strictatime,nostrictatime,diratime,nodiratime,lazytime,nolazytime"}));
  ASSERT_TRUE(m.ok()) << m.error();
  write_file(m.m("f"), "written");
  EXPECT_EQ(read_all(m.m("f")), "written");
  EXPECT_EQ(m.log(), "");
}

}  // namespace
}  // namespace sealfs::test
