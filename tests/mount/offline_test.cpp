// `sealfs fsck` and `sealfs adopt` on B, and what a mount then shows.
#include <gtest/gtest.h>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

TEST(OfflineTools, AdoptSealsForeignContentSoTheMountShowsIt) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-adopt");
  make_dirs(dir / "B");
  ASSERT_EQ(tilelang("save", dir / "B", "old").status, 0);  // made before sealfs was used
  {
    Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
    ASSERT_TRUE(mount.ok()) << mount.error();
    EXPECT_EQ(tilelang("load", mount.mountpoint(), "old").status, kMiss);
  }
  ProcessResult adopted =
      run_process({sealfs_binary(), "adopt", "-o", "profile=tilelang", dir / "B", "ns/kernels/old"});
  ASSERT_EQ(adopted.status, 0) << adopted.err;
  EXPECT_NE(adopted.out.find("old"), std::string::npos) << adopted.out;
  Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "old").status, kHit);
}

TEST(OfflineTools, FsckReportsDamageAndRepairQuarantinesIt) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-fsck");
  make_dirs(dir / "B");
  {
    Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
    ASSERT_TRUE(mount.ok()) << mount.error();
    ASSERT_EQ(tilelang("save", mount.mountpoint(), "good").status, 0);
    ASSERT_EQ(tilelang("save", mount.mountpoint(), "bad").status, 0);
  }
  ProcessResult clean = run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(clean.status, 0) << clean.out << clean.err;
  ASSERT_EQ(::truncate((dir / "B/ns/kernels/bad/kernel_lib.so").c_str(), 10), 0);
  ProcessResult found = run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(found.status, 4) << found.out << found.err;
  EXPECT_NE(found.out.find("bad"), std::string::npos) << found.out;
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/bad"), 0);  // without --repair nothing moves
  ProcessResult repaired =
      run_process({sealfs_binary(), "fsck", "--repair", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(repaired.status, 1) << repaired.out << repaired.err;
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/bad"), ENOENT);
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/good"), 0);
  ProcessResult after = run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(after.status, 0) << after.out << after.err;
}

TEST(OfflineTools, FsckOfAMissingDirectoryFailsWithOneLine) {
  TempDir dir("sealfs-fsck-missing");
  ProcessResult r = run_process({sealfs_binary(), "fsck", dir / "missing"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sealfs: backing directory", 0), 0u) << r.err;
}

}  // namespace
}  // namespace sealfs::test
