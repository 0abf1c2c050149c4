// Verified bytes pushed into the kernel's page cache (fs/fuse/page_push.hpp)
// on -o ro mounts: after the first lookup of a sealed file, and at the first
// READ that reaches the daemon. Loads then read without READs (or with one),
// and a change behind the mount still never serves other bytes (R2). A
// read-write mount never pushes (a push racing a write can send old bytes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/base/unique_fd.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/mount/passthrough_util.hpp"

namespace sealfs::test {
namespace {

constexpr const char* kLib = "ns/kernels/k/kernel_lib.so";

// A store with one TileLang entry "k", saved through a mount that is gone.
void save_entry_in(const std::string& backing) {
  Mount writer(MountConfig::with({"profile=tilelang"}).backed_by(backing));
  ASSERT_TRUE(writer.ok()) << writer.error();
  ASSERT_EQ(tilelang("save", writer.mountpoint(), "k").status, 0);
}

TEST(PagePush, ALookedUpSealedFileIsReadWithoutReads) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-push");
  make_dirs(dir / "B");
  save_entry_in(dir / "B");
  ASSERT_FALSE(HasFatalFailure());
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=600,ro"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  struct stat st {};
  ASSERT_EQ(::stat(mount.m(kLib).c_str(), &st), 0) << std::strerror(errno);
  ASSERT_GT(st.st_size, 0);
  // The push runs after the lookup's answer: wait for it.
  EXPECT_TRUE(eventually([&] { return daemon_counter(mount, "bytes_pushed") >= st.st_size; }))
      << daemon_counter(mount, "bytes_pushed") << " of " << st.st_size << " bytes pushed";
  const long reads_before = daemon_counter(mount, "reads");
  EXPECT_EQ(read_file(mount.m(kLib)), read_file(mount.b(kLib))) << "the pushed bytes are the file's";
  EXPECT_EQ(daemon_counter(mount, "reads"), reads_before) << "a pushed file was read through the daemon";
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "k").status, kHit);
}

// A read-write mount never pushes: a file sealed through it, its pages
// dropped, is read back through READs, and no byte was pushed.
TEST(PagePush, AReadWriteMountNeverPushes) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=600"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  std::string data(3 * 1024 * 1024 + 1234, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  write_file(mount.m("big"), data);
  ASSERT_TRUE(eventually([&] { return lstat_errno(mount.b(".sealfs-manifest.big")) == 0; }));
  {
    UniqueFd fd(::open(mount.m("big").c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    ASSERT_EQ(::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED), 0);
  }
  const long reads_before = daemon_counter(mount, "reads");
  EXPECT_EQ(read_file(mount.m("big")), data);
  if (passthrough_expected())  // the kernel reads B's file itself (passthrough_test.cpp)
    EXPECT_EQ(daemon_counter(mount, "reads"), reads_before)
        << "a passthrough open's READs reached the daemon";
  else
    EXPECT_GT(daemon_counter(mount, "reads"), reads_before) << "the dropped pages came back without READs";
  EXPECT_EQ(daemon_counter(mount, "bytes_pushed"), 0) << "a read-write mount pushed pages";
}

// A pushed file damaged behind the mount: once the daemon notices (the next
// lookup after cache_timeout) the entry is gone, so no open finds the pushed
// pages again; a descriptor opened before reads the verified bytes or EIO,
// never the damage (R2). A save by a read-write host repairs the entry.
TEST(PagePush, DamageBehindTheMountIsNeverServed) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-push");
  make_dirs(dir / "B");
  save_entry_in(dir / "B");
  ASSERT_FALSE(HasFatalFailure());
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=1,ro"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const auto verified = read_file(mount.b(kLib));
  ASSERT_TRUE(verified.has_value());
  struct stat st {};
  ASSERT_EQ(::stat(mount.m(kLib).c_str(), &st), 0) << std::strerror(errno);
  ASSERT_TRUE(eventually([&] { return daemon_counter(mount, "bytes_pushed") >= st.st_size; }));
  UniqueFd held(::open(mount.m(kLib).c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid()) << std::strerror(errno);
  ASSERT_TRUE(zero_in_place(mount.b(kLib)));
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount.m(kLib)) == ENOENT; }, std::chrono::seconds(5)))
      << "the damage was not noticed after cache_timeout";
  std::string got(verified->size(), '\0');
  const ssize_t n = ::pread(held.get(), got.data(), got.size(), 0);
  if (n < 0)
    EXPECT_EQ(errno, EIO);
  else
    EXPECT_EQ(got.substr(0, static_cast<std::size_t>(n)), verified->substr(0, static_cast<std::size_t>(n)))
        << "bytes other than the verified ones were served";
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "k").status, kMiss);
  // The read-only host cannot repair; a save through a read-write mount of
  // the same store does, and the read-only host loads it.
  held.reset();
  save_entry_in(dir / "B");
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_TRUE(eventually([&] { return tilelang("load", mount.mountpoint(), "k").status == kHit; },
                         std::chrono::seconds(5)));
}

}  // namespace
}  // namespace sealfs::test
