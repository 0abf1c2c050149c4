// Listings on a mount whose kernel keeps them (issue 14). With OPENDIR
// (-o keep_opendir) and a long cache timeout the kernel serves an unchanged
// directory's listing from its own copy, and the daemon drops that copy at
// the next opendir once the listing changed, however it changed: a damaged
// entry (its stamps moved), names added or removed in B behind the mount, a
// quarantine. Without OPENDIR (the default) the kernel keeps a listing until
// the directory changes: through the mount at once, in B once the kernel
// revalidates the directory after cache_timeout (R9), and a damaged entry
// leaves once a lookup notices it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/base/digest.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

// Listed twice a second apart: the listing is settled and the kernel keeps it.
std::set<std::string> list_settled(const std::string& dir) {
  list_dir(dir);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  list_dir(dir);
  return list_dir(dir);
}

const std::set<std::string> kDots = {".", ".."};

std::set<std::string> with_dots(std::set<std::string> names) {
  names.insert(kDots.begin(), kDots.end());
  return names;
}

TEST(Listing, ADamagedEntryLeavesTheListingOnceNoticed) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=600,keep_opendir"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  for (const char* key : {"k1", "k2", "k3"}) {
    ASSERT_EQ(tilelang("save", mount.mountpoint(), key).status, 0);
    ASSERT_EQ(tilelang("load", mount.mountpoint(), key).status, kHit);  // in the kernel's caches
  }
  const std::string kernels = mount.m("ns/kernels");
  ASSERT_EQ(list_settled(kernels), with_dots({"k1", "k2", "k3"}));
  ASSERT_EQ(list_settled(mount.m("ns/kernels/k1")),
            with_dots({"device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl"}));
  // A size change is seen by the listing itself (a stat per listed file),
  // before any lookup or load: the entry and its directory's listing go.
  ASSERT_EQ(::truncate(mount.b("ns/kernels/k1/kernel_lib.so").c_str(), 100), 0);
  EXPECT_EQ(list_dir(kernels), with_dots({"k2", "k3"}));
  EXPECT_EQ(list_dir(mount.m("ns/kernels/k1")), kDots);
  // Same size, other bytes: only a hash tells, which a listing never does
  // (R8). The next open notices (its stamp check finds the file changed and
  // the full open re-judges it: a miss, ENOENT; without OPEN the first READ
  // that reaches the daemon would, with EIO: SeedScenarioLongCache),
  // quarantines, and the listing follows.
  ASSERT_TRUE(zero_in_place(mount.b("ns/kernels/k2/kernel_lib.so")));
  EXPECT_EQ(list_dir(kernels), with_dots({"k2", "k3"}));
  EXPECT_EQ(read_errno_past_page_cache(mount.m("ns/kernels/k2/kernel_lib.so")), ENOENT);
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "k2").status, kMiss);
  EXPECT_EQ(list_dir(kernels), with_dots({"k3"}));
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "k3").status, kHit);
  EXPECT_EQ(list_settled(kernels), with_dots({"k3"}));
}

// A directory entry "kernels/<key>" with one file, written into B behind
// the mount.
void plant_entry(const Mount& mount, const std::string& key) {
  make_dirs(mount.b("kernels/" + key));
  write_file(mount.b("kernels/" + key + "/a"), "alpha");
  write_file(
      mount.b("kernels/" + key + "/.sealfs-manifest"),
      "{\"files\":{\"a\":{\"sha256\":\"" + to_hex(sha256_of("alpha")) + "\",\"size\":5}},\"sealfs\":1}");
}

// With OPENDIR, names added and removed in B behind the mount show at the
// next listing, not after the cache timeout (600 s here).
TEST(Listing, WithOpendirNamesChangedInBShowAtTheNextListing) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=600,keep_opendir"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ASSERT_EQ(::mkdir(mount.m("kernels").c_str(), 0755), 0);
  auto plant = [&](const std::string& key) { plant_entry(mount, key); };
  plant("k1");
  const std::string kernels = mount.m("kernels");
  ASSERT_EQ(list_settled(kernels), with_dots({"k1"}));
  plant("k2");
  EXPECT_EQ(list_dir(kernels), with_dots({"k1", "k2"}));
  std::filesystem::remove_all(mount.b("kernels/k1"));
  EXPECT_EQ(list_dir(kernels), with_dots({"k2"}));
  EXPECT_EQ(list_settled(kernels), with_dots({"k2"}));
  write_file(mount.b("kernels/foreign"), "no manifest covers it");  // R3: hidden
  EXPECT_EQ(list_dir(kernels), with_dots({"k2"}));
  EXPECT_EQ(list_dir(mount.m("kernels/k2")), with_dots({"a"}));
  write_file(mount.b("kernels/k2/unlisted"), "x");  // R2: hidden one by one
  EXPECT_EQ(list_settled(mount.m("kernels/k2")), with_dots({"a"}));
}

// Without OPENDIR (the default) a name added or removed in B shows once the
// kernel revalidates the directory, after cache_timeout (R9), and never
// later; hidden names stay hidden.
TEST(Listing, NamesChangedInBShowAfterTheCacheTimeout) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=1"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ASSERT_EQ(::mkdir(mount.m("kernels").c_str(), 0755), 0);
  plant_entry(mount, "k1");
  const std::string kernels = mount.m("kernels");
  ASSERT_EQ(list_settled(kernels), with_dots({"k1"}));
  plant_entry(mount, "k2");
  EXPECT_TRUE(eventually(
      [&] {
        return list_dir(kernels) == with_dots({"k1", "k2"});
      },
      std::chrono::seconds(3)))
      << "a name added in B was not listed within the cache timeout";
  std::filesystem::remove_all(mount.b("kernels/k1"));
  EXPECT_TRUE(eventually([&] { return list_dir(kernels) == with_dots({"k2"}); }, std::chrono::seconds(3)))
      << "a name removed in B was still listed after the cache timeout";
  write_file(mount.b("kernels/foreign"), "no manifest covers it");  // R3: hidden
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(list_dir(kernels), with_dots({"k2"}));
  write_file(mount.b("kernels/k2/unlisted"), "x");  // R2: hidden one by one
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(list_dir(mount.m("kernels/k2")), with_dots({"a"}));
}

// Without OPENDIR a damaged entry leaves its directory's listing as soon as
// a lookup notices the damage, whatever the cache timeout.
TEST(Listing, WithoutOpendirADamagedEntryLeavesOnceLookedUp) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=1"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  for (const char* key : {"k1", "k2"}) ASSERT_EQ(tilelang("save", mount.mountpoint(), key).status, 0);
  const std::string kernels = mount.m("ns/kernels");
  ASSERT_EQ(list_settled(kernels), with_dots({"k1", "k2"}));
  ASSERT_EQ(::truncate(mount.b("ns/kernels/k1/kernel_lib.so").c_str(), 100), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past the cache timeout
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "k1").status, kMiss);
  EXPECT_EQ(list_dir(kernels), with_dots({"k2"}));
  EXPECT_EQ(tilelang("save", mount.mountpoint(), "k1").status, 0);
  EXPECT_EQ(list_dir(kernels), with_dots({"k1", "k2"}));
}

// Changes through the mount are listed at once, settled or not.
TEST(Listing, ChangesThroughTheMountAreListedAtOnce) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=600"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ASSERT_EQ(tilelang("save", mount.mountpoint(), "k1").status, 0);
  const std::string kernels = mount.m("ns/kernels");
  ASSERT_EQ(list_settled(kernels), with_dots({"k1"}));
  for (const char* key : {"k2", "k3"}) {
    ASSERT_EQ(tilelang("save", mount.mountpoint(), key).status, 0);
    EXPECT_TRUE(list_dir(kernels).count(key)) << key;
  }
  std::filesystem::remove_all(mount.m("ns/kernels/k2"));
  EXPECT_EQ(list_dir(kernels), with_dots({"k1", "k3"}));
  EXPECT_EQ(list_settled(kernels), with_dots({"k1", "k3"}));
}

}  // namespace
}  // namespace sealfs::test
