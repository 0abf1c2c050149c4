// Issue 23, point 8: sealing a file closed many times does not hash it whole
// at every close. A large file's seal waits a moment after its last close
// (fs/fuse/deferred_seals.hpp) and a writer that opens it again takes the
// seal over; the file stays visible in between, a rename right after the
// close carries the seal with it, and the unmount seals what still waits.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/base/digest.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr std::size_t kChunk = 1 << 20;
constexpr int kChunks = 16;  // 16 MiB: large enough to be sealed late

std::string chunk_of(int i, int round) {
  return std::string(kChunk, static_cast<char>('a' + (i + round) % 26));
}

// Writes the whole file, then rewrites each chunk with an open and a close
// around it: kChunks + 1 closes. Returns the final content.
std::string write_then_rewrite(const std::string& path) {
  std::string content;
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    EXPECT_TRUE(fd.valid()) << std::strerror(errno);
    for (int i = 0; i < kChunks; ++i)
      EXPECT_EQ(::write(fd.get(), chunk_of(i, 0).data(), kChunk), ssize_t(kChunk));
  }
  for (int i = 0; i < kChunks; ++i) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    EXPECT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(::pwrite(fd.get(), chunk_of(i, 1).data(), kChunk, off_t(i) * off_t(kChunk)), ssize_t(kChunk));
    content += chunk_of(i, 1);
  }
  return content;
}

class Reclose : public ::testing::TestWithParam<const char*> {};

TEST_P(Reclose, AFileClosedManyTimesIsHashedOnce) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({GetParam()}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const long hashed_before = daemon_counter(mount, "bytes_hashed");
  const std::string content = write_then_rewrite(mount.m("big"));
  EXPECT_EQ(read_file(mount.m("big")), content) << "visible, as written, while its seal waits";
  ASSERT_TRUE(eventually([&] {
    return read_file(mount.b(".sealfs-manifest.big")).value_or("").find(to_hex(sha256_of(content))) !=
           std::string::npos;
  })) << "not sealed with its final content";
  const long hashed = daemon_counter(mount, "bytes_hashed") - hashed_before;
  std::printf("%d closes of a %d MiB file: %.1f MiB hashed\n", kChunks + 1, kChunks, double(hashed) / kChunk);
  EXPECT_LE(hashed, 2 * long(kChunks * kChunk)) << "hashed at every close";
  EXPECT_EQ(read_file(mount.m("big")), content);
  EXPECT_TRUE(quarantined_files(mount).empty());
}

TEST_P(Reclose, ARenameRightAfterTheCloseCarriesTheSeal) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({GetParam()}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string content = write_then_rewrite(mount.m("big"));
  ASSERT_EQ(::rename(mount.m("big").c_str(), mount.m("moved").c_str()), 0) << std::strerror(errno);
  EXPECT_NE(read_file(mount.b(".sealfs-manifest.moved")).value_or("").find(to_hex(sha256_of(content))),
            std::string::npos)
      << "the rename did not wait for the seal";
  EXPECT_EQ(read_file(mount.m("moved")), content);
  EXPECT_EQ(lstat_errno(mount.m("big")), ENOENT);
}

TEST_P(Reclose, TheUnmountSealsWhatWaits) {
  SEALFS_REQUIRE_FUSE();
  TempDir dirs("sealfs-reclose");
  const std::string backing = dirs / "B";
  make_dirs(backing);
  std::string content;
  {
    Mount mount(MountConfig::with({GetParam()}).backed_by(backing));
    ASSERT_TRUE(mount.ok()) << mount.error();
    content = write_then_rewrite(mount.m("big"));
  }  // unmounted at once, while the seal waits
  EXPECT_NE(read_file(backing + "/.sealfs-manifest.big").value_or("").find(to_hex(sha256_of(content))),
            std::string::npos)
      << "not sealed before the daemon exited";
  Mount again(MountConfig::with({GetParam()}).backed_by(backing));
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(read_file(again.m("big")), content);
}

INSTANTIATE_TEST_SUITE_P(NoOpenAndOpen, Reclose,
                         ::testing::Values("cache_timeout=1,no_open", "cache_timeout=1"),
                         [](const auto& param) { return param.index == 0 ? "NoOpen" : "Open"; });

}  // namespace
}  // namespace sealfs::test
