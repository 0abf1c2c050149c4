// DESIGN.md's five seed scenarios, on a tilelang mount, driven by the
// TileLang stand-in (tests/scenarios/tilelang_protocol.py). Damage is done
// in B behind the mount's back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/base/digest.hpp"
#include "core/base/unique_fd.hpp"
#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr const char* kEntry = "ns/kernels/k";

class SeedScenario : public MountTest {
 protected:
  MountConfig config() const override { return MountConfig::with({"profile=tilelang"}); }

  void save_and_hit() {
    ProcessResult saved = tilelang("save", m(), "k");
    ASSERT_EQ(saved.status, 0) << saved.out << saved.err;
    ProcessResult loaded = tilelang("load", m(), "k");
    ASSERT_EQ(loaded.status, kHit) << loaded.out << loaded.err;
  }

  // After damage in B, once the cache timeout has passed (R9: until then the
  // kernel may serve the bytes it holds, which are the verified ones): a miss
  // through M (never a corrupt load), the entry is neither listed nor looked
  // up, it sits in quarantine, and the next save through M repairs it.
  void expect_miss_quarantine_and_repair() {
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past cache_timeout=1
    ProcessResult loaded = tilelang("load", m(), "k");
    EXPECT_EQ(loaded.status, kMiss) << loaded.out << loaded.err;
    EXPECT_FALSE(list_dir(m("ns/kernels")).count("k"));
    EXPECT_EQ(lstat_errno(m(kEntry)), ENOENT);
    const auto quarantined = quarantined_files(*mount_);
    EXPECT_TRUE(std::any_of(quarantined.begin(), quarantined.end(), [](const std::string& p) {
      return p.find("kernel_lib.so") != std::string::npos;
    })) << "quarantine holds no kernel_lib.so";
    ProcessResult saved = tilelang("save", m(), "k");
    EXPECT_EQ(saved.status, 0) << saved.out << saved.err;
    ProcessResult again = tilelang("load", m(), "k");
    EXPECT_EQ(again.status, kHit) << again.out << again.err;
  }
};

TEST_F(SeedScenario, S1SaveLeavesAManifestCoveringTheFourFiles) {
  save_and_hit();
  auto text = read_file(b(std::string(kEntry) + "/.sealfs-manifest"));
  ASSERT_TRUE(text.has_value()) << "no manifest in B";
  auto manifest = parse_manifest(*text);
  ASSERT_TRUE(manifest) << manifest.error().message;
  for (const char* name : {"device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl"}) {
    ASSERT_TRUE(manifest->files.count(name)) << name;
    struct stat st {};
    ASSERT_EQ(::stat(b(std::string(kEntry) + "/" + name).c_str(), &st), 0);
    EXPECT_EQ(manifest->files.at(name).size, static_cast<std::uint64_t>(st.st_size)) << name;
  }
  EXPECT_EQ(manifest->files.size(), 4u);
  auto lib = read_file(b(std::string(kEntry) + "/kernel_lib.so"));
  ASSERT_TRUE(lib.has_value());
  ASSERT_TRUE(manifest->files.at("kernel_lib.so").sha256.has_value());
  EXPECT_EQ(*manifest->files.at("kernel_lib.so").sha256, sha256_of(*lib));
  // Sources are size-only in the tilelang profile.
  EXPECT_FALSE(manifest->files.at("device_kernel.cu").sha256.has_value());
  EXPECT_FALSE(manifest->files.at("host_kernel.cu").sha256.has_value());
  // The manifest itself is never visible through M.
  EXPECT_EQ(lstat_errno(m(std::string(kEntry) + "/.sealfs-manifest")), ENOENT);
  EXPECT_FALSE(list_dir(m(kEntry)).count(".sealfs-manifest"));
}

TEST_F(SeedScenario, S2TruncatedLibraryIsAMissAndQuarantined) {
  save_and_hit();
  ASSERT_EQ(::truncate(b(std::string(kEntry) + "/kernel_lib.so").c_str(), 100), 0);
  // Without sealfs the program would load the damage.
  EXPECT_EQ(tilelang("load", mount_->backing(), "k").status, kCorrupt);
  expect_miss_quarantine_and_repair();
}

TEST_F(SeedScenario, S3ZeroedLibraryOfTheSameSizeIsAMissAndQuarantined) {
  save_and_hit();
  const std::string lib = b(std::string(kEntry) + "/kernel_lib.so");
  ASSERT_TRUE(zero_in_place(lib));
  EXPECT_EQ(tilelang("load", mount_->backing(), "k").status, kCorrupt);
  expect_miss_quarantine_and_repair();
}

TEST_F(SeedScenario, S4SourceRewrittenWithTheSameSizeIsStillAHit) {
  save_and_hit();
  const std::string src = b(std::string(kEntry) + "/device_kernel.cu");
  auto old = read_file(src);
  ASSERT_TRUE(old.has_value());
  write_file(src, std::string(old->size(), 'x'));
  ProcessResult loaded = tilelang("load", m(), "k");
  EXPECT_EQ(loaded.status, kHit) << loaded.out << loaded.err;
  EXPECT_EQ(read_file(m(std::string(kEntry) + "/device_kernel.cu")), std::string(old->size(), 'x'));
  EXPECT_TRUE(quarantined_files(*mount_).empty());
}

TEST_F(SeedScenario, S5EntryWithoutManifestIsAMissUntilSavedThroughTheMount) {
  // Written into B behind the mount's back: same protocol, no manifest.
  ASSERT_EQ(tilelang("save", mount_->backing(), "k").status, 0);
  ASSERT_EQ(lstat_errno(b(std::string(kEntry) + "/.sealfs-manifest")), ENOENT);
  ProcessResult loaded = tilelang("load", m(), "k");
  EXPECT_EQ(loaded.status, kMiss) << loaded.out << loaded.err;
  ProcessResult saved = tilelang("save", m(), "k");
  ASSERT_EQ(saved.status, 0) << saved.out << saved.err;
  ProcessResult again = tilelang("load", m(), "k");
  EXPECT_EQ(again.status, kHit) << again.out << again.err;
  EXPECT_EQ(lstat_errno(b(std::string(kEntry) + "/.sealfs-manifest")), 0);
}

// Many processes publishing the same key at once: one wins, the others see
// EEXIST/ENOTEMPTY (exit 2), and a reader meanwhile never loads a partial entry.
TEST_F(SeedScenario, ConcurrentSavesOneWinsAndReadersNeverSeeAPartialEntry) {
  constexpr int kSavers = 6;
  TempDir logs("sealfs-savers");
  std::vector<pid_t> savers;
  for (int i = 0; i < kSavers; ++i) {
    savers.push_back(spawn_process({std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"),
                                    "save", m(), "k", "--variant", "v" + std::to_string(i)},
                                   logs / ("saver" + std::to_string(i)), {"PYTHONDONTWRITEBYTECODE=1"}));
    ASSERT_GT(savers.back(), 0);
  }
  std::vector<int> loads;
  std::vector<int> statuses(kSavers, -1);
  int running = kSavers;
  while (running > 0) {
    loads.push_back(tilelang("load", m(), "k").status);
    running = 0;
    for (int i = 0; i < kSavers; ++i) {
      if (statuses[i] == -1) statuses[i] = wait_process(savers[i], std::chrono::milliseconds(0));
      if (statuses[i] == -1) ++running;
    }
  }
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 0), 1);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 2), kSavers - 1);
  for (int status : loads) EXPECT_TRUE(status == kHit || status == kMiss) << status;
  EXPECT_EQ(tilelang("load", m(), "k").status, kHit);
}

// A mount with a long cache timeout that saved "k" and loaded it (now in the
// kernel's caches).
void save_and_load_into_kernel_caches(const Mount& mount) {
  ASSERT_TRUE(mount.ok()) << mount.error();
  ASSERT_EQ(tilelang("save", mount.mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", mount.mountpoint(), "k").status, kHit);
}

// Once damage is found: the kernel was told (the entry is gone from lookups
// at once), a load misses, and a save through the mount repairs the entry.
void expect_gone_at_once_and_repaired(const Mount& mount) {
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount.m(kEntry)) == ENOENT; }, std::chrono::seconds(3)));
  ProcessResult loaded = tilelang("load", mount.mountpoint(), "k");
  EXPECT_EQ(loaded.status, kMiss) << loaded.out << loaded.err;
  EXPECT_EQ(tilelang("save", mount.mountpoint(), "k").status, 0);
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "k").status, kHit);
}

// With a long cache timeout the kernel keeps sealed entries and their
// attributes; damage found behind its back must still never be served. With
// OPEN (the default, -o keep_open) the next open checks the stamp: a miss at once.
TEST(SeedScenarioLongCache, DamageIsNotServedFromKernelCaches) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=600,keep_open"}));
  save_and_load_into_kernel_caches(mount);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(zero_in_place(mount.b(std::string(kEntry) + "/kernel_lib.so")));
  ProcessResult loaded = tilelang("load", mount.mountpoint(), "k");
  EXPECT_EQ(loaded.status, kMiss) << loaded.out << loaded.err;
  expect_gone_at_once_and_repaired(mount);
}

// The same without OPEN (-o no_open): the kernel keeps the entry, its
// attributes and its pages, and no open reaches the daemon, so damage behind
// its back is not noticed before the timeout (R9), but it is never served
// (R2). A load in between gets the verified bytes the kernel holds; a READ
// that reaches the daemon (the pages were dropped) is refused with EIO, the
// damage found then hides the entry at once, and a save repairs it.
TEST(SeedScenarioLongCache, WithoutOpenDamageIsNeverServed) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=600,no_open"}));
  save_and_load_into_kernel_caches(mount);
  ASSERT_FALSE(HasFatalFailure());
  const std::string lib_m = mount.m(std::string(kEntry) + "/kernel_lib.so");
  const auto verified = read_file(lib_m);
  ASSERT_TRUE(verified.has_value());
  ASSERT_TRUE(zero_in_place(mount.b(std::string(kEntry) + "/kernel_lib.so")));
  // Served from the kernel's pages: the bytes that were verified, not zeros.
  EXPECT_EQ(read_file(lib_m), verified);
  // Drop the pages: the next read reaches the daemon, which refuses it.
  EXPECT_EQ(read_errno_past_page_cache(lib_m), EIO);
  expect_gone_at_once_and_repaired(mount);
}

}  // namespace
}  // namespace sealfs::test
