// Proof with two daemons over one backing store (two hosts sharing an NFS
// cache), on real mounts: publishes and damage are seen by both, racing
// publishes leave one entry. The TileLang protocol is
// tests/scenarios/tilelang_protocol.py (see proof_util.hpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>

#include "tests/mount/mount_test_util.hpp"
#include "tests/mount/proof_util.hpp"

namespace sealfs::test {
namespace {

using namespace proof;  // the protocol driver shared by the proof tests

class TwoDaemons : public ::testing::Test {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    make_dirs(dir_ / "B");
    a_ = std::make_unique<Mount>(
        MountConfig::with({"profile=tilelang,cache_timeout=0"}).backed_by(dir_ / "B"));
    ASSERT_TRUE(a_->ok()) << a_->error();
    b_ = std::make_unique<Mount>(
        MountConfig::with({"profile=tilelang,cache_timeout=0"}).backed_by(dir_ / "B"));
    ASSERT_TRUE(b_->ok()) << b_->error();
  }
  std::size_t quarantined_libs() const {
    const auto files = quarantined_files(*a_);
    return static_cast<std::size_t>(std::count_if(files.begin(), files.end(), [](const std::string& p) {
      return p.find("kernel_lib.so") != std::string::npos;
    }));
  }

  TempDir dir_{"sealfs-proof-two"};
  std::unique_ptr<Mount> a_;
  std::unique_ptr<Mount> b_;
};

TEST_F(TwoDaemons, PublishThroughOneIsValidThroughTheOther) {
  ProcessResult saved = tilelang("save", a_->mountpoint(), "k");
  ASSERT_EQ(saved.status, 0) << saved.out << saved.err;
  ProcessResult loaded = tilelang("load", b_->mountpoint(), "k");
  EXPECT_EQ(loaded.status, kHit) << loaded.out << loaded.err;
  EXPECT_TRUE(list_dir(b_->m("ns/kernels")).count("k"));

  ProcessResult other = tilelang("save", b_->mountpoint(), "k2", {"--variant", "v2"});
  ASSERT_EQ(other.status, 0) << other.out << other.err;
  EXPECT_EQ(tilelang("load", a_->mountpoint(), "k2").status, kHit);
}

TEST_F(TwoDaemons, DamageNoticedByOneIsAMissOnBothAndQuarantinedOnce) {
  ASSERT_EQ(tilelang("save", a_->mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", b_->mountpoint(), "k").status, kHit);
  ASSERT_EQ(::truncate(a_->b("ns/kernels/k/kernel_lib.so").c_str(), 100), 0);

  ProcessResult through_a = tilelang("load", a_->mountpoint(), "k");
  EXPECT_EQ(through_a.status, kMiss) << through_a.out;
  ProcessResult through_b = tilelang("load", b_->mountpoint(), "k");
  EXPECT_EQ(through_b.status, kMiss) << through_b.out;
  EXPECT_EQ(lstat_errno(b_->m("ns/kernels/k")), ENOENT);
  EXPECT_EQ(lstat_errno(a_->m("ns/kernels/k")), ENOENT);
  EXPECT_EQ(quarantined_libs(), 1u);

  // Both notice at once: still one quarantined copy more, and a miss on both.
  ASSERT_EQ(tilelang("save", b_->mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", a_->mountpoint(), "k").status, kHit);
  write_file(a_->b("ns/kernels/k/kernel_lib.so"), std::string(4096, '\0'));
  TempDir logs("sealfs-proof-two-logs");
  const pid_t pa = spawn_process(
      {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"), "load", a_->mountpoint(), "k"},
      logs / "a.log", kPythonEnv);
  const pid_t pb = spawn_process(
      {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"), "load", b_->mountpoint(), "k"},
      logs / "b.log", kPythonEnv);
  EXPECT_EQ(wait_process(pa, std::chrono::seconds(30)), kMiss) << file_text(logs / "a.log");
  EXPECT_EQ(wait_process(pb, std::chrono::seconds(30)), kMiss) << file_text(logs / "b.log");
  EXPECT_EQ(quarantined_libs(), 2u);

  ProcessResult repaired = tilelang("save", a_->mountpoint(), "k");
  EXPECT_EQ(repaired.status, 0) << repaired.out << repaired.err;
  EXPECT_EQ(tilelang("load", b_->mountpoint(), "k").status, kHit);
}

TEST_F(TwoDaemons, RacingPublishesThroughBothLeaveOneValidEntry) {
  constexpr int kRounds = 5;
  constexpr int kPerSide = 3;
  TempDir logs("sealfs-proof-race");
  const pid_t reader =
      spawn_process(driver_argv({"reader", b_->mountpoint(), "8"}), logs / "reader.log", kPythonEnv);
  ASSERT_GT(reader, 0);
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = "race" + std::to_string(round);
    std::vector<pid_t> savers;
    for (int i = 0; i < 2 * kPerSide; ++i) {
      const Mount& side = i % 2 == 0 ? *a_ : *b_;
      savers.push_back(
          spawn_process(save_argv(side.mountpoint(), key, {"--variant", "v" + std::to_string(i)}),
                        logs / (key + "_" + std::to_string(i) + ".log"), kPythonEnv));
      ASSERT_GT(savers.back(), 0);
    }
    int won = 0;
    for (std::size_t i = 0; i < savers.size(); ++i) {
      const int status = wait_process(savers[i], std::chrono::seconds(60));
      EXPECT_TRUE(status == 0 || status == kLost)
          << key << " saver " << i << ": " << status << " "
          << file_text(logs / (key + "_" + std::to_string(i) + ".log"));
      if (status == 0) ++won;
    }
    EXPECT_EQ(won, 1) << key;
    EXPECT_EQ(tilelang("load", a_->mountpoint(), key).status, kHit) << key;
    EXPECT_EQ(tilelang("load", b_->mountpoint(), key).status, kHit) << key;
    const auto in_b = list_dir(a_->b("ns/kernels/" + key));
    EXPECT_EQ(in_b, (std::set<std::string>{".", "..", ".sealfs-manifest", "device_kernel.cu",
                                           "host_kernel.cu", "kernel_lib.so", "params.pkl"}))
        << key;
  }
  EXPECT_EQ(wait_process(reader, std::chrono::seconds(60)), 0) << file_text(logs / "reader.log");
  std::printf("[ proof ] two daemons race: %d rounds x %d savers; %s", kRounds, 2 * kPerSide,
              file_text(logs / "reader.log").c_str());
}

}  // namespace
}  // namespace sealfs::test
