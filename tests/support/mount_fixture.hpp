// A real sealfs mount for a test: temporary B and M, the built sealfs binary
// running in the foreground as a child process, and on destruction an
// unmount, a reap and a check that the daemon exited 0 (even when the test
// failed half-way).
//
// The binary is $SEALFS_BINARY. Tests that need FUSE start with
// SEALFS_REQUIRE_FUSE(): it skips with a one-line reason where FUSE is
// unusable, except under CI=true, where that is a failure.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

// Empty when FUSE mounts can be made here, else why not.
std::string fuse_unusable_reason();
bool running_under_ci();

#define SEALFS_REQUIRE_FUSE()                                                                      \
  do {                                                                                             \
    const std::string sealfs_why_ = ::sealfs::test::fuse_unusable_reason();                        \
    if (!sealfs_why_.empty()) {                                                                    \
      if (::sealfs::test::running_under_ci()) FAIL() << "FUSE unusable under CI: " << sealfs_why_; \
      GTEST_SKIP() << "FUSE unusable: " << sealfs_why_;                                            \
    }                                                                                              \
  } while (0)

// $SEALFS_BINARY, the sealfs executable under test.
std::string sealfs_binary();

// True when path is currently a FUSE mount point (per /proc/self/mountinfo).
bool is_fuse_mount(const std::string& path);

struct MountConfig {
  std::vector<std::string> options;    // each one "-o" list, e.g. "profile=tilelang"
  std::optional<std::string> backing;  // an existing B instead of a fresh temp dir
  bool over_backing = false;           // mount on B itself (`sealfs B B`)
  std::vector<std::string> env;        // extra "NAME=value" for the daemon
  std::vector<std::string> launcher;   // argv before the daemon's own (e.g. "unshare", "-p", "-f")

  // Builders, so tests name only what they change.
  static MountConfig with(std::vector<std::string> opts) {
    MountConfig c;
    c.options = std::move(opts);
    return c;
  }
  MountConfig& backed_by(std::string path) {
    backing = std::move(path);
    return *this;
  }
  MountConfig& mounted_over_backing() {
    over_backing = true;
    return *this;
  }
  MountConfig& with_env(std::string entry) {
    env.push_back(std::move(entry));
    return *this;
  }
  MountConfig& launched_by(std::vector<std::string> prefix) {
    launcher = std::move(prefix);
    return *this;
  }
};

class Mount {
 public:
  explicit Mount(MountConfig config = {});
  ~Mount();
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;

  // Whether the mount came up; error() says why not (with the daemon's log).
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  const std::string& backing() const { return backing_; }
  const std::string& mountpoint() const { return mountpoint_; }
  std::string b(std::string_view rel) const { return backing_ + "/" + std::string(rel); }
  std::string m(std::string_view rel) const { return mountpoint_ + "/" + std::string(rel); }
  pid_t daemon_pid() const { return pid_; }

  // Unmount and reap now; returns the daemon's exit status (see ProcessResult).
  // Idempotent; the destructor does it when a test did not.
  int unmount();
  // For tests that make the daemon end by itself: wait up to limit for it to
  // exit and reap it; its exit status, or -1 if it is still running.
  // unmount() then only cleans the (dead) mount up.
  int wait_for_exit(std::chrono::milliseconds limit);
  // The daemon's stdout+stderr so far.
  std::string log() const;
  // The destructor checks this exit status (default 0); for tests that kill
  // the daemon on purpose.
  void expect_exit_status(int status) { expected_status_ = status; }

 private:
  std::unique_ptr<TempDir> dirs_;
  std::string backing_;
  std::string mountpoint_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::string error_;
  bool unmounted_ = false;
  bool reaped_ = false;
  int exit_status_ = -1;
  int expected_status_ = 0;
};

// The fixture most mount tests share: SetUp skips (or fails, under CI)
// where FUSE is unusable, then mounts with config(), and m()/b() name paths
// in M and B. A fixture overrides config() to name its options; one with
// steps of its own overrides SetUp, calls MountTest::SetUp() first and goes
// on only while mounted().
class MountTest : public ::testing::Test {
 protected:
  virtual MountConfig config() const { return {}; }
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    mount_ = std::make_unique<Mount>(config());
    ASSERT_TRUE(mount_->ok()) << mount_->error();
  }
  bool mounted() const { return mount_ && mount_->ok() && !IsSkipped() && !HasFatalFailure(); }
  // M itself for "", else rel under it.
  std::string m(std::string_view rel = "") const {
    return rel.empty() ? mount_->mountpoint() : mount_->m(rel);
  }
  std::string b(std::string_view rel) const { return mount_->b(rel); }

  std::unique_ptr<Mount> mount_;
};

}  // namespace sealfs::test
