// R4's unseen-writer policy (issue 23, point 3). A daemon in a pid namespace
// that its writers are not part of (a sidecar container without a shared
// pid namespace) is sent pid 0 for them and cannot tell a writer's death
// from its close. It never guesses: in-place writes outside volatile areas
// are refused with EPERM, rename-publish out of a volatile area still works,
// and the refusals are counted in status. Here the daemon runs under
// `unshare -p -f` (a new pid namespace, the host's /proc) and the test
// process is the unseen writer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/base/unique_fd.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

MountConfig in_own_pid_namespace(std::vector<std::string> options) {
  return MountConfig::with(std::move(options)).launched_by({"unshare", "--pid", "--fork"});
}

int open_errno(const std::string& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC, 0644));
  return fd.valid() ? 0 : errno;
}

int append_errno(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (!fd.valid()) return errno;
  if (::write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) return errno;
  return 0;
}

class UnseenWriter : public ::testing::TestWithParam<const char*> {};

TEST_P(UnseenWriter, InPlaceWritesAreRefusedAndRenamePublishWorks) {
  SEALFS_REQUIRE_FUSE();
  const std::string options = std::string("profile=tilelang,cache_timeout=1") + GetParam();
  TempDir dirs("sealfs-unseen");
  const std::string backing = dirs / "B";
  make_dirs(backing);
  {
    Mount mount(in_own_pid_namespace({options}).backed_by(backing));
    ASSERT_TRUE(mount.ok()) << mount.error();
    make_dirs(mount.m("tmp"));
    make_dirs(mount.m("ns/kernels"));
    // A normally closed file is never lost, and a killed writer's partial
    // file never served: outside volatile areas the write is refused.
    EXPECT_EQ(open_errno(mount.m("whole"), O_WRONLY | O_CREAT | O_TRUNC), EPERM);
    EXPECT_EQ(lstat_errno(mount.m("whole")), ENOENT);
    EXPECT_EQ(lstat_errno(mount.b("whole")), ENOENT) << "refused before anything was made";
    // The save path that needs no judgement of the writer: write in tmp/,
    // rename into place (R1).
    write_file(mount.m("tmp/k.so"), "kernel bytes");
    ASSERT_EQ(::rename(mount.m("tmp/k.so").c_str(), mount.m("ns/kernels/k.so").c_str()), 0)
        << std::strerror(errno);
    EXPECT_EQ(read_file(mount.m("ns/kernels/k.so")), "kernel bytes");
    // Rewriting the published file in place is refused too, and leaves it whole.
    EXPECT_EQ(append_errno(mount.m("ns/kernels/k.so"), "more"), EPERM);
    EXPECT_EQ(open_errno(mount.m("ns/kernels/k.so"), O_WRONLY | O_TRUNC), EPERM);
    EXPECT_EQ(::truncate(mount.m("ns/kernels/k.so").c_str(), 1), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(read_file(mount.m("ns/kernels/k.so")), "kernel bytes");
    // Reading, listing and making directories are not writes.
    EXPECT_EQ(open_errno(mount.m("ns/kernels/k.so"), O_RDONLY), 0);
    EXPECT_EQ(::mkdir(mount.m("ns/other").c_str(), 0755), 0) << std::strerror(errno);
    EXPECT_GE(daemon_counter(mount, "unseen_writes_refused"), 4);
    EXPECT_EQ(quarantined_files(mount), std::vector<std::string>{});
  }
  // After a restart, in the writer's own namespace this time, the published
  // file is still there and an in-place write is taken and sealed.
  Mount again(MountConfig::with({options}).backed_by(backing));
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(read_file(again.m("ns/kernels/k.so")), "kernel bytes");
  write_file(again.m("whole"), "seen writer");
  EXPECT_TRUE(eventually([&] { return lstat_errno(again.b(".sealfs-manifest.whole")) == 0; }));
  EXPECT_EQ(daemon_counter(again, "unseen_writes_refused"), 0);
}

INSTANTIATE_TEST_SUITE_P(NoOpenAndOpen, UnseenWriter, ::testing::Values(",no_open", ""),
                         [](const auto& param) { return param.index == 0 ? "NoOpen" : "Open"; });

}  // namespace
}  // namespace sealfs::test
