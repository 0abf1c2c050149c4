// Issue 23 point 7: what a writer's close costs the daemon must not depend
// on how many descriptors the writing process holds (a framework holds
// thousands). Counted, not timed: the daemon's read calls (syscr in
// /proc/<daemon>/io) while this process, holding 4,000 descriptors or none,
// creates, writes and closes files. Without OPEN (-o no_open) each such
// close reads the writer's /proc/<pid>/fdinfo, one read per descriptor; by
// default RELEASE says which close was the last, and the count is the same
// whatever the writer holds. tests/bench/close_bench.sh times the same.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr int kFiles = 20;
constexpr int kHeld = 4000;

// The daemon's read system calls so far (0 when unreadable: the caller's
// expectations then fail).
std::uint64_t daemon_reads(const Mount& mount) {
  const auto io = read_file("/proc/" + std::to_string(mount.daemon_pid()) + "/io");
  if (!io) return 0;
  std::istringstream lines(*io);
  std::string key;
  std::uint64_t value = 0;
  while (lines >> key >> value)
    if (key == "syscr:") return value;
  return 0;
}

// The daemon's reads for kFiles creates+writes+closes in a new directory,
// counted once every file is sealed (the seal may follow close: RELEASE).
std::uint64_t reads_for_closes(const Mount& mount, const std::string& dir) {
  EXPECT_EQ(::mkdir(mount.m(dir).c_str(), 0755), 0) << std::strerror(errno);
  const std::uint64_t before = daemon_reads(mount);
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = dir + "/f" + std::to_string(i);
    UniqueFd fd(::open(mount.m(name).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    EXPECT_TRUE(fd.valid()) << name << ": " << std::strerror(errno);
    EXPECT_EQ(::write(fd.get(), "0123456789abcdef", 16), 16);
  }
  for (int i = 0; i < kFiles; ++i) {
    const std::string sidecar = mount.b(dir + "/.sealfs-manifest.f" + std::to_string(i));
    EXPECT_TRUE(eventually([&] { return lstat_errno(sidecar) == 0; })) << sidecar << " never sealed";
  }
  return daemon_reads(mount) - before;
}

// Holds kHeld descriptors on /dev/null for its lifetime (the soft limit
// raised as far as the hard one allows).
class HeldDescriptors {
 public:
  HeldDescriptors() {
    struct rlimit lim {};
    if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < kHeld + 256 && lim.rlim_max >= kHeld + 256) {
      lim.rlim_cur = kHeld + 256;
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    for (int i = 0; i < kHeld; ++i) {
      UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!fd) break;
      fds_.push_back(std::move(fd));
    }
  }
  std::size_t size() const { return fds_.size(); }

 private:
  std::vector<UniqueFd> fds_;
};

struct CloseReads {
  std::uint64_t idle = 0;  // holding no other descriptors
  std::uint64_t busy = 0;  // holding kHeld
};

CloseReads measure(const std::string& options) {
  Mount mount(MountConfig::with({options}));
  EXPECT_TRUE(mount.ok()) << mount.error();
  CloseReads r;
  if (!mount.ok()) return r;
  EXPECT_GT(daemon_reads(mount), 0u) << "/proc/<daemon>/io unreadable";
  r.idle = reads_for_closes(mount, "idle");
  HeldDescriptors held;
  EXPECT_EQ(held.size(), static_cast<std::size_t>(kHeld)) << "could not hold the descriptors";
  r.busy = reads_for_closes(mount, "busy");
  std::printf("[ close cost ] %s: daemon reads for %d closes: %llu holding none, %llu holding %d\n",
              options.c_str(), kFiles, static_cast<unsigned long long>(r.idle),
              static_cast<unsigned long long>(r.busy), kHeld);
  return r;
}

TEST(CloseCost, ByDefaultAWritersCloseCostsTheSameWhateverItHolds) {
  SEALFS_REQUIRE_FUSE();
  const CloseReads r = measure("cache_timeout=1");
  // The same requests either way; a little slack for the daemon's own
  // background reads (metrics, mountinfo) in between.
  EXPECT_LT(r.busy, r.idle + static_cast<std::uint64_t>(kFiles) * 20)
      << "a close read something per descriptor the writer holds";
}

// The probe can fail: without OPEN the same run reads each descriptor.
TEST(CloseCost, WithoutOpenAWritersCloseReadsEachOfItsDescriptors) {
  SEALFS_REQUIRE_FUSE();
  const CloseReads r = measure("cache_timeout=1,no_open");
  EXPECT_GT(r.busy, r.idle + static_cast<std::uint64_t>(kFiles) * kHeld / 2);
}

}  // namespace
}  // namespace sealfs::test
