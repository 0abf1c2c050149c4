// The daemon killed at a step of a publish (fault injection, see fs/README.md)
// leaves, after a remount, the old state or the complete new one: a load is
// a hit or a miss, never a corrupt load, and a miss is repaired by a save.
#include <gtest/gtest.h>

#include "tests/integration/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr int kFaultExit = 75;  // the daemon's exit status at an injected fault

class DaemonCrash : public ::testing::TestWithParam<const char*> {};

TEST_P(DaemonCrash, RemountShowsOldOrCompleteNewState) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-crash");
  make_dirs(dir / "B");
  {
    Mount mount(MountConfig::with({"profile=tilelang"})
                    .backed_by(dir / "B")
                    .with_env(std::string("SEALFS_FAULT_STEP=") + GetParam()));
    ASSERT_TRUE(mount.ok()) << mount.error();
    mount.expect_exit_status(kFaultExit);
    ProcessResult saved = tilelang("save", mount.mountpoint(), "k");
    EXPECT_NE(saved.status, 0) << "the publish should have been cut short: " << saved.out;
    EXPECT_EQ(mount.wait_for_exit(std::chrono::seconds(20)), kFaultExit) << mount.log();
  }
  Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ProcessResult loaded = tilelang("load", mount.mountpoint(), "k");
  EXPECT_TRUE(loaded.status == kHit || loaded.status == kMiss) << loaded.status << " " << loaded.out;
  if (loaded.status == kMiss) {
    ProcessResult saved = tilelang("save", mount.mountpoint(), "k");
    EXPECT_EQ(saved.status, 0) << saved.out << saved.err;
  }
  ProcessResult again = tilelang("load", mount.mountpoint(), "k");
  EXPECT_EQ(again.status, kHit) << again.out << again.err;
}

INSTANTIATE_TEST_SUITE_P(Steps, DaemonCrash,
                         ::testing::Values("files_synced", "validated", "manifest_written", "renamed",
                                           "dir_synced"),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace sealfs::test
