// R2 for the bytes a READ serves, not only for the stamp it checked: a file
// rewritten in place behind the mount between the daemon's stamp check and
// its read of the data must never reach the reader. The test builds'
// SEALFS_FAULT_DELAY=read_checked:MS holds each READ of a sealed file right
// after its first check, and the file changes in B meanwhile. (Found as a
// corrupt load in the shared-store scenario: host 0 served the bytes that
// host 1 had just zeroed.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

TEST(ReadWindow, BytesChangedAfterTheStampCheckAreNeverServed) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=1"}).with_env("SEALFS_FAULT_DELAY=read_checked:400"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string good(256 * 1024, 'a');
  {
    UniqueFd fd(::open(mount.m("lib.so").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    ASSERT_EQ(::write(fd.get(), good.data(), good.size()), static_cast<ssize_t>(good.size()));
  }
  ASSERT_TRUE(eventually([&] { return lstat_errno(mount.b(".sealfs-manifest.lib.so")) == 0; }));
  // Past R8's second: the stamp alone vouches for the file from here on.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));

  UniqueFd reader(::open(mount.m("lib.so").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(reader.valid()) << std::strerror(errno);
  ASSERT_EQ(::posix_fadvise(reader.get(), 0, 0, POSIX_FADV_DONTNEED), 0);  // the READ reaches the daemon
  // While the READ waits after its check: the same size, other bytes, in B.
  std::thread damage([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    UniqueFd fd(::open(mount.b("lib.so").c_str(), O_WRONLY | O_CLOEXEC));
    const std::string bad(good.size(), 'z');
    EXPECT_EQ(::pwrite(fd.get(), bad.data(), bad.size(), 0), static_cast<ssize_t>(bad.size()));
  });
  std::string got(4096, '\0');
  const ssize_t n = ::pread(reader.get(), got.data(), got.size(), 0);
  const int err = n < 0 ? errno : 0;
  damage.join();
  if (n < 0) {
    EXPECT_EQ(err, EIO) << "a read of damaged bytes fails with EIO (R2)";
  } else {
    got.resize(static_cast<size_t>(n));
    const auto unverified = std::count_if(got.begin(), got.end(), [](char c) { return c != 'a'; });
    EXPECT_EQ(unverified, 0) << "served " << unverified << " of " << n << " bytes that were never verified";
  }
  // And the damage is found: the next open is a miss.
  EXPECT_TRUE(eventually([&] { return ::access(mount.m("lib.so").c_str(), F_OK) != 0; }));
}

// A change of metadata only, through the mount (an unlink of the name, a
// link, a rename, a chmod, an xattr), moves the file's ctime but not its
// bytes: a reader that opened it before reads on, as on a native filesystem.
// Its READs used to fail with ESTALE once the name was unlinked (the stamp
// check saw the new ctime and looked the file up by a name that was gone;
// fsmix multi-entry seed 7: a copy_file_range from a file another process
// replaced).
TEST(ReadWindow, AnOpenFileReadsOnAfterAMetadataChangeThroughTheMount) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=1"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string good(256 * 1024, 'a');
  const std::vector<std::pair<std::string, std::function<int(const std::string&)>>> changes = {
      {"unlink", [](const std::string& p) { return ::unlink(p.c_str()); }},
      {"link", [](const std::string& p) { return ::link(p.c_str(), (p + ".2").c_str()); }},
      {"rename", [](const std::string& p) { return ::rename(p.c_str(), (p + ".moved").c_str()); }},
      {"chmod", [](const std::string& p) { return ::chmod(p.c_str(), 0600); }},
      {"setxattr", [](const std::string& p) { return ::setxattr(p.c_str(), "user.x", "1", 1, 0); }},
  };
  for (const auto& item : changes) {
    const std::string& what = item.first;  // named, not bound: lambdas capture it (clang 14)
    const auto& change = item.second;
    const std::string path = mount.m(what);
    {
      UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      ASSERT_EQ(::write(fd.get(), good.data(), good.size()), static_cast<ssize_t>(good.size()));
    }
    ASSERT_TRUE(eventually([&] { return lstat_errno(mount.b(".sealfs-manifest." + what)) == 0; })) << what;
    UniqueFd reader(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(reader.valid()) << what << ": " << std::strerror(errno);
    std::string got(4096, '\0');
    ASSERT_EQ(::pread(reader.get(), got.data(), got.size(), 0), static_cast<ssize_t>(got.size())) << what;
    ASSERT_EQ(change(path), 0) << what << ": " << std::strerror(errno);
    ASSERT_EQ(::posix_fadvise(reader.get(), 0, 0, POSIX_FADV_DONTNEED), 0);  // the READ reaches the daemon
    got.assign(good.size(), '\0');
    const ssize_t n = ::pread(reader.get(), got.data(), got.size(), 0);
    EXPECT_EQ(n, static_cast<ssize_t>(good.size()))
        << "after " << what << ": " << (n < 0 ? std::strerror(errno) : "");
    EXPECT_EQ(got, good) << "after " << what;
  }
}

}  // namespace
}  // namespace sealfs::test
