// The CUDA validator through a real mount (tilelang profile): a staging
// directory holding a truncated kernel_lib.so is refused with EBADMSG and
// nothing becomes visible; the sound one publishes and its manifest records
// the architectures found.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/support/fixtures.hpp"

namespace sealfs::test {
namespace {

std::string cuda_fixture(const std::string& name) { return (fixtures_dir() / "cuda" / name).string(); }

// Stages kernel_lib.so (and params.pkl) under ns/.staging/<name> through the mount.
std::string stage(const Mount& mount, const std::string& name, const std::string& lib) {
  const std::string dir = mount.m("ns/.staging/" + name);
  make_dirs(dir);
  write_file(dir + "/kernel_lib.so", lib);
  write_file(dir + "/params.pkl", "params");
  return dir;
}

TEST(MountCuda, TruncatedKernelLibIsRefusedAndTheSoundOnePublishes) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const auto lib = read_file(cuda_fixture("kernel_lib.so"));
  ASSERT_TRUE(lib.has_value());
  make_dirs(mount.m("ns/kernels"));

  const std::string broken = stage(mount, "k_1_a", lib->substr(0, lib->size() / 2));
  EXPECT_EQ(::rename(broken.c_str(), mount.m("ns/kernels/k").c_str()), -1);
  EXPECT_EQ(errno, EBADMSG) << std::strerror(errno);
  EXPECT_FALSE(exists_nofollow(mount.m("ns/kernels/k")));
  EXPECT_FALSE(exists_nofollow(mount.b("ns/kernels/k")));

  const std::string sound = stage(mount, "k_1_b", *lib);
  ASSERT_EQ(::rename(sound.c_str(), mount.m("ns/kernels/k").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(read_file(mount.m("ns/kernels/k/kernel_lib.so")), lib);
  const auto text = read_file(mount.b("ns/kernels/k/.sealfs-manifest"));
  ASSERT_TRUE(text.has_value());
  auto manifest = parse_manifest(*text);
  ASSERT_TRUE(manifest.ok()) << manifest.error().message;
  ASSERT_EQ(manifest->extra.count("cuda"), 1u) << *text;
  EXPECT_NE(manifest->extra.at("cuda").find("sm_"), std::string::npos) << *text;
}

}  // namespace
}  // namespace sealfs::test
