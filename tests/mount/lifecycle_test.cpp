// The daemon's life cycle: mount, mount over B, unmount with exit 0, the
// start-up errors, `sealfs status`, reserved xattrs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/xattr.h>

#include <algorithm>
#include <chrono>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

TEST(MountLifecycle, MountsServesAndExitsZeroAfterUnmount) {
  SEALFS_REQUIRE_FUSE();
  Mount mount;
  ASSERT_TRUE(mount.ok()) << mount.error();
  EXPECT_TRUE(is_fuse_mount(mount.mountpoint()));
  ASSERT_EQ(::mkdir(mount.m("kernels").c_str(), 0755), 0) << std::strerror(errno);
  EXPECT_EQ(lstat_errno(mount.b("kernels")), 0);
  EXPECT_EQ(mount.unmount(), 0) << mount.log();
  EXPECT_FALSE(is_fuse_mount(mount.mountpoint()));
}

TEST(MountLifecycle, MountsOverItsOwnBacking) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-over");
  make_dirs(dir / "B/kernels");
  {
    Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B").mounted_over_backing());
    ASSERT_TRUE(mount.ok()) << mount.error();
    EXPECT_EQ(mount.mountpoint(), mount.backing());
    EXPECT_TRUE(is_fuse_mount(dir / "B"));
    EXPECT_TRUE(list_dir(dir / "B").count("kernels"));
    EXPECT_FALSE(list_dir(dir / "B").count(".sealfs"));  // B's own state is hidden even at the top
    EXPECT_EQ(tilelang("save", dir / "B", "k").status, 0);
    EXPECT_EQ(tilelang("load", dir / "B", "k").status, kHit);
    EXPECT_EQ(mount.unmount(), 0) << mount.log();
  }
  EXPECT_FALSE(is_fuse_mount(dir / "B"));
  // After unmount the real directory shows, with the entry and its manifest.
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/k/.sealfs-manifest"), 0);
  EXPECT_EQ(lstat_errno(dir / "B/.sealfs/quarantine"), 0);
}

TEST(MountLifecycle, SigtermUnmountsAndExitsZero) {
  SEALFS_REQUIRE_FUSE();
  Mount mount;
  ASSERT_TRUE(mount.ok()) << mount.error();
  ASSERT_EQ(::kill(mount.daemon_pid(), SIGTERM), 0);
  EXPECT_TRUE(eventually([&] { return !is_fuse_mount(mount.mountpoint()); }))
      << "still mounted after SIGTERM";
  EXPECT_EQ(mount.unmount(), 0) << mount.log();
}

// The signal comes the moment the mount shows, while libfuse (as root) still
// waits for its `/bin/mount -f` (the mtab update): an EINTR there made it undo
// the mount, and the daemon exited 1 ("cannot mount"). Now the signal is held
// until the mount is complete, and the daemon unmounts and exits 0.
TEST(MountLifecycle, AStopSignalTheMomentTheMountShowsUnmountsAndExitsZero) {
  SEALFS_REQUIRE_FUSE();
  constexpr int kTries = 25;
  for (int i = 0; i < kTries; ++i) {
    Mount mount;
    ASSERT_TRUE(mount.ok()) << mount.error();
    ASSERT_EQ(::kill(mount.daemon_pid(), i % 2 == 0 ? SIGTERM : SIGINT), 0);
    ASSERT_EQ(mount.wait_for_exit(std::chrono::seconds(10)), 0) << "try " << i << ": " << mount.log();
    EXPECT_FALSE(is_fuse_mount(mount.mountpoint())) << "try " << i;
  }
}

TEST(MountLifecycle, DaemonizesWithoutForegroundFlag) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-bg");
  make_dirs(dir / "B");
  make_dirs(dir / "M");
  ProcessResult r =
      run_process({sealfs_binary(), dir / "B", dir / "M", "-o", "rw,nosuid,nodev,profile=tilelang"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(eventually([&] { return is_fuse_mount(dir / "M"); }));
  EXPECT_EQ(::mkdir((dir / "M/x").c_str(), 0755), 0);
  EXPECT_EQ(run_process({"fusermount3", "-u", dir / "M"}).status, 0);
  EXPECT_FALSE(is_fuse_mount(dir / "M"));
}

// An fstab line "B M fuse.sealfs profile=tilelang 0 0" makes mount(8) run
// mount.fuse3, which runs `sealfs B M -o <opts>` with options of its own.
TEST(MountLifecycle, MountFuse3InvocationWorks) {
  SEALFS_REQUIRE_FUSE();
  if (::access("/sbin/mount.fuse3", X_OK) != 0 && ::access("/usr/sbin/mount.fuse3", X_OK) != 0)
    GTEST_SKIP() << "mount.fuse3 is not installed";
  TempDir dir("sealfs-fstab");
  make_dirs(dir / "B");
  make_dirs(dir / "M");
  const std::string bin = sealfs_binary();
  const std::string path = "PATH=" + bin.substr(0, bin.rfind('/')) + ":" + std::getenv("PATH");
  ProcessResult r =
      run_process({::access("/sbin/mount.fuse3", X_OK) == 0 ? "/sbin/mount.fuse3" : "/usr/sbin/mount.fuse3",
                   dir / "B", dir / "M", "-t", "sealfs", "-o", "rw,nosuid,nodev,noatime,profile=tilelang"},
                  {path});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(eventually([&] { return is_fuse_mount(dir / "M"); }));
  EXPECT_EQ(tilelang("save", dir / "M", "k").status, 0);
  EXPECT_EQ(run_process({"fusermount3", "-u", dir / "M"}).status, 0);
  EXPECT_FALSE(is_fuse_mount(dir / "M"));
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/k/.sealfs-manifest"), 0);
}

struct StartupCase {
  friend void PrintTo(const StartupCase& c, std::ostream* os) { *os << c.name; }
  const char* name;
  std::vector<std::string> args;  // after the binary; "@B"/"@M"/"@F" are replaced
  const char* expected;           // in the one stderr line
};

class MountStartupError : public ::testing::TestWithParam<StartupCase> {};

TEST_P(MountStartupError, OneLineNonZeroNothingMounted) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-start");
  make_dirs(dir / "B");
  make_dirs(dir / "M");
  write_file(dir / "F", "not a directory");
  std::vector<std::string> argv = {sealfs_binary(), "-f"};
  for (const auto& a : GetParam().args) {
    if (a == "@B")
      argv.push_back(dir / "B");
    else if (a == "@M")
      argv.push_back(dir / "M");
    else if (a == "@F")
      argv.push_back(dir / "F");
    else if (a == "@missing")
      argv.push_back(dir / "missing");
    else
      argv.push_back(a);
  }
  ProcessResult r = run_process(argv, {}, std::chrono::seconds(20));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, -1) << "did not exit";
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("sealfs: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(GetParam().expected), std::string::npos) << r.err;
  EXPECT_FALSE(is_fuse_mount(dir / "M"));
  EXPECT_FALSE(is_fuse_mount(dir / "B"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MountStartupError,
    ::testing::Values(StartupCase{"MissingBacking", {"@missing", "@M"}, "backing directory"},
                      StartupCase{"BackingIsAFile", {"@F", "@M"}, "Not a directory"},
                      StartupCase{"MountpointIsAFile", {"@B", "@F"}, "mountpoint"},
                      StartupCase{"MissingMountpoint", {"@B", "@missing"}, "No such file or directory"},
                      StartupCase{"UnknownOption", {"-o", "frobnicate", "@B", "@M"}, "frobnicate"},
                      StartupCase{"BadOptionValue", {"-o", "verify=sometimes", "@B", "@M"}, "verify"},
                      StartupCase{"UnknownProfile", {"-o", "profile=no-such-profile", "@B", "@M"}, "profile"},
                      StartupCase{
                          "MissingProfileFile", {"-o", "profile=/nonexistent/p.json", "@B", "@M"}, "profile"},
                      StartupCase{"NoMountpoint", {"@B"}, "usage"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(MountStatus, PrintsCountersThatChange) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ProcessResult before = run_process({sealfs_binary(), "status", mount.mountpoint()});
  ASSERT_EQ(before.status, 0) << before.err;
  EXPECT_EQ(before.out.front(), '{');
  const long publishes_before = counter(before.out, "publishes");
  const long lookups_before = counter(before.out, "lookups");
  ASSERT_GE(publishes_before, 0) << before.out;
  ASSERT_GE(lookups_before, 0) << before.out;
  ASSERT_EQ(tilelang("save", mount.mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", mount.mountpoint(), "k").status, kHit);
  ProcessResult after = run_process({sealfs_binary(), "status", mount.mountpoint()});
  ASSERT_EQ(after.status, 0) << after.err;
  EXPECT_GT(counter(after.out, "publishes"), publishes_before) << after.out;
  EXPECT_GT(counter(after.out, "lookups"), lookups_before) << after.out;
}

// R8: listing never hashes, also when the kernel asks with READDIRPLUS (as it
// does for the first readdir of a directory): a fresh daemon lists published
// entries without hashing a byte, and the first load hashes.
TEST(MountStatus, ListingDoesNotHash) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-listing");
  make_dirs(dir / "B");
  {
    Mount writer(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
    ASSERT_TRUE(writer.ok()) << writer.error();
    for (const char* key : {"k1", "k2", "k3"})
      ASSERT_EQ(tilelang("save", writer.mountpoint(), key).status, 0);
  }
  Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string kernels = mount.m("ns/kernels");
  EXPECT_EQ(list_dir(kernels), (std::set<std::string>{".", "..", "k1", "k2", "k3"}));
  ProcessResult listed = run_process({sealfs_binary(), "status", mount.mountpoint()});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(counter(listed.out, "bytes_hashed"), 0) << listed.out;
  ASSERT_EQ(tilelang("load", mount.mountpoint(), "k1").status, kHit);
  ProcessResult loaded = run_process({sealfs_binary(), "status", mount.mountpoint()});
  ASSERT_EQ(loaded.status, 0) << loaded.err;
  EXPECT_GT(counter(loaded.out, "bytes_hashed"), 0) << loaded.out;
}

TEST(MountStatus, RefusesWhatIsNotASealfsMount) {
  TempDir dir("sealfs-status");
  ProcessResult r = run_process({sealfs_binary(), "status", dir.path()});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("sealfs: "), std::string::npos) << r.err;
}

TEST(MountXattrs, ReservedNamesAreRefusedAndUnlisted) {
  SEALFS_REQUIRE_FUSE();
  Mount mount;
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string dir = mount.m("d");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  EXPECT_EQ(err_of(::setxattr(dir.c_str(), "user.sealfs.x", "1", 1, 0)), EPERM);
  EXPECT_EQ(err_of(::removexattr(dir.c_str(), "user.sealfs.status")), EPERM);
  EXPECT_EQ(err_of(::setxattr(mount.mountpoint().c_str(), "user.sealfs.status", "1", 1, 0)), EPERM);
  char buf[4096];
  EXPECT_LT(::getxattr(dir.c_str(), "user.sealfs.status", buf, sizeof buf), 0);  // only the root answers
  // Ordinary xattrs pass through to B.
  ASSERT_EQ(::setxattr(dir.c_str(), "user.note", "hi", 2, 0), 0) << std::strerror(errno);
  ASSERT_EQ(::getxattr(dir.c_str(), "user.note", buf, sizeof buf), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");
  ASSERT_EQ(::setxattr(mount.b("d").c_str(), "user.sealfs.planted", "x", 1, 0), 0);
  const ssize_t n = ::listxattr(dir.c_str(), buf, sizeof buf);
  ASSERT_GE(n, 0);
  const std::string names(buf, static_cast<size_t>(n));
  EXPECT_NE(names.find("user.note"), std::string::npos);
  EXPECT_EQ(names.find("user.sealfs"), std::string::npos);
  ASSERT_EQ(::removexattr(dir.c_str(), "user.note"), 0);
  EXPECT_LT(::getxattr(mount.b("d").c_str(), "user.note", buf, sizeof buf), 0);
}

}  // namespace
}  // namespace sealfs::test
