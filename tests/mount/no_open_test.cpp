// Mounts without OPEN (fs/README.md "Without OPEN"): -o no_open keeps R4 and
// R2 with the requests that are left (WRITE, FLUSH, READ), and -o ro serves
// a cache built elsewhere read-only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/base/unique_fd.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

// The manifest text of a standalone sealed file (its sidecar in B).
std::string sidecar_of(const Mount& mount, const std::string& name) {
  return read_file(mount.b(".sealfs-manifest." + name)).value_or("");
}

TEST(NoOpen, AnExistingFileRewrittenInPlaceIsSealedAtItsClose) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=1,no_open"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  write_file(mount.m("f"), "first version\n");
  ASSERT_TRUE(eventually([&] { return sidecar_of(mount, "f").find("\"size\":14") != std::string::npos; }));
  // open(O_WRONLY|O_TRUNC) of an existing file sends no OPEN: the truncate
  // and the write make it in progress, and its close seals it.
  {
    UniqueFd fd(::open(mount.m("f").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    ASSERT_EQ(::write(fd.get(), "second, longer version\n", 23), 23);
    EXPECT_EQ(lstat_errno(mount.m("f")), 0) << "a file being written is visible (R4)";
  }
  EXPECT_NE(sidecar_of(mount, "f").find("\"size\":23"), std::string::npos) << "sealed before close returned";
  EXPECT_EQ(read_file(mount.m("f")), "second, longer version\n");
  EXPECT_TRUE(quarantined_files(mount).empty());
}

TEST(NoOpen, AWriterThatDiesAbandonsOnlyWhatItChanged) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"cache_timeout=1,no_open"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  write_file(mount.m("f"), "data\n");
  ASSERT_TRUE(eventually([&] { return lstat_errno(mount.b(".sealfs-manifest.f")) == 0; }));
  EXPECT_EQ(run_process({"sh", "-c", "exec 3>>\"$0\"; kill -9 $$", mount.m("f")}).status, 128 + SIGKILL);
  EXPECT_EQ(read_file(mount.m("f")), "data\n");
  EXPECT_TRUE(quarantined_files(mount).empty());
  // The shell's echo closes a copy of descriptor 3 first: that is not the
  // process's last close of the file, so the death still abandons.
  EXPECT_EQ(run_process({"sh", "-c", "exec 3>>\"$0\"; echo more >&3; kill -9 $$", mount.m("f")}).status,
            128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount.m("f")) == ENOENT; }))
      << "an abandoned write stayed visible";
  EXPECT_FALSE(quarantined_files(mount).empty());
}

// An exec closes the O_CLOEXEC descriptors while it holds the kernel's exec
// lock, which a read of the task's /proc/<tid>/stat waits for: a FLUSH
// handler that read stat first never answered, and the exec never ended
// (fs/fuse/writer_tasks.hpp closer_state_of). Both ways an exec meets a
// write descriptor: the writer execs itself (its own close is the seal), and
// a child it posix_spawns (vfork) closes its copy.
class ExecWithAWriteDescriptor : public ::testing::TestWithParam<const char*> {};

TEST_P(ExecWithAWriteDescriptor, IsNotHeldUpAndTheFileIsSealed) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({GetParam()}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const char* python = std::getenv("SEALFS_PYTHON");
  ASSERT_NE(python, nullptr);
  // A Python writer of file under M; -1 when it has not ended within 20 s.
  const auto writer = [&](const std::string& file, const std::string& script) {
    return run_process({python, "-c", "import os, sys\nf = open(sys.argv[1], 'w')\n" + script, mount.m(file)},
                       {}, std::chrono::seconds(20));
  };
  const ProcessResult self = writer("execs",
                                    "f.write('written before the exec\\n'); f.flush()\n"
                                    "os.execv('/bin/sh', ['sh', '-c', 'exit 0'])\n");
  EXPECT_EQ(self.status, 0) << "-1: still in its exec after 20 s; " << self.err;
  const ProcessResult spawn = writer("spawns",
                                     "f.write('written around a spawn\\n'); f.flush()\n"
                                     "pid = os.posix_spawnp('true', ['true'], os.environ)\n"
                                     "assert os.waitpid(pid, 0)[1] == 0\n"
                                     "f.write('and after it\\n'); f.close()\n");
  EXPECT_EQ(spawn.status, 0) << "-1: the spawn did not end within 20 s; " << spawn.err;
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount.b(".sealfs-manifest.execs")) == 0; }));
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount.b(".sealfs-manifest.spawns")) == 0; }));
  EXPECT_EQ(read_file(mount.m("execs")), "written before the exec\n");
  EXPECT_EQ(read_file(mount.m("spawns")), "written around a spawn\nand after it\n");
  EXPECT_TRUE(quarantined_files(mount).empty());
}

INSTANTIATE_TEST_SUITE_P(NoOpenAndOpen, ExecWithAWriteDescriptor,
                         ::testing::Values("cache_timeout=1,no_open", "cache_timeout=1"),
                         [](const auto& param) { return param.index == 0 ? "NoOpen" : "Open"; });

TEST(ReadOnlyMount, ServesASavedStoreAndRefusesWrites) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-ro");
  const std::string backing = dir / "B";
  make_dirs(backing);
  {
    Mount saving(MountConfig::with({"profile=tilelang"}).backed_by(backing));
    ASSERT_TRUE(saving.ok()) << saving.error();
    ASSERT_EQ(tilelang("save", saving.mountpoint(), "k").status, 0);
  }
  Mount mount(MountConfig::with({"profile=tilelang,ro,cache_timeout=600"}).backed_by(backing));
  ASSERT_TRUE(mount.ok()) << mount.error();
  for (int load = 0; load < 3; ++load) EXPECT_EQ(tilelang("load", mount.mountpoint(), "k").status, kHit);
  EXPECT_EQ(::open(mount.m("new").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::open(mount.m("ns/kernels/k/params.pkl").c_str(), O_WRONLY | O_CLOEXEC), -1);
  EXPECT_EQ(errno, EROFS);
  // A damaged entry in B is still a miss once the kernel asks again.
  ASSERT_EQ(::truncate(mount.b("ns/kernels/k/kernel_lib.so").c_str(), 100), 0);
  Mount fresh(MountConfig::with({"profile=tilelang,ro"}).backed_by(backing));
  ASSERT_TRUE(fresh.ok()) << fresh.error();
  EXPECT_EQ(tilelang("load", fresh.mountpoint(), "k").status, kMiss);
}

}  // namespace
}  // namespace sealfs::test
