// R10, POSIX where visible: what a conformance suite run outside the project
// (pjdfstest) found different from ext4 on a generic mount. One test per
// finding, each on a real mount as root with allow_other (as the suite ran).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

class Posix : public MountTest {
 protected:
  MountConfig config() const override { return MountConfig::with({"cache_timeout=1", "allow_other"}); }

  mode_t mode_of(const std::string& path) const {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 07777777;
  }

  // Run fn in a child with umask `mask`; its exit status (0 = fn returned true).
  static int in_child_with_umask(mode_t mask, const std::function<bool()>& fn) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::umask(mask);
      ::_exit(fn() ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return decode_wait_status(status);
  }
};

// A: open(O_RDONLY|O_CREAT) makes a file that is sealed empty at its close;
// it used to stay unsealed and vanish (55 of the suite's files).
TEST_F(Posix, ReadOnlyCreateMakesAVisibleEmptyFile) {
  for (int flags : {O_RDONLY | O_CREAT, O_RDONLY | O_CREAT | O_EXCL}) {
    const std::string name = "f" + std::to_string(flags);
    UniqueFd fd(::open(m(name).c_str(), flags | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    fd.reset();
    ASSERT_TRUE(eventually([&] { return lstat_errno(b(".sealfs-manifest." + name)) == 0; }))
        << name << " not sealed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past cache_timeout
    struct stat st {};
    ASSERT_EQ(::stat(m(name).c_str(), &st), 0) << name << ": " << std::strerror(errno);
    EXPECT_EQ(st.st_size, 0);
    EXPECT_EQ(read_file(m(name)), "");
  }
}

// B: the caller's umask alone decides the mode; the daemon's (022) used to
// be applied on top of it.
TEST_F(Posix, OnlyTheCallersUmaskApplies) {
  ASSERT_EQ(in_child_with_umask(0,
                                [&] {
                                  if (::mkdir(m("d").c_str(), 0777) != 0) return false;
                                  UniqueFd fd(::open(m("g").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666));
                                  return fd.valid() && ::mkfifo(m("p").c_str(), 0666) == 0;
                                }),
            0);
  EXPECT_EQ(mode_of(m("d")), 0777u);
  EXPECT_EQ(mode_of(m("g")), 0666u);
  EXPECT_EQ(mode_of(m("p")), 0666u);
  ASSERT_EQ(in_child_with_umask(027,
                                [&] {
                                  UniqueFd fd(::open(m("h").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666));
                                  return fd.valid() && ::mkdir(m("e").c_str(), 0777) == 0;
                                }),
            0);
  EXPECT_EQ(mode_of(m("h")), 0640u);
  EXPECT_EQ(mode_of(m("e")), 0750u);
}

// B2: setuid and setgid survive the chown that hands a new object to its
// caller (chown clears them).
TEST_F(Posix, SetuidAndSetgidBitsSurviveCreate) {
  ASSERT_EQ(in_child_with_umask(0,
                                [&] {
                                  UniqueFd a(::open(m("s").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 04755));
                                  UniqueFd c(::open(m("g").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 02755));
                                  return a.valid() && c.valid();
                                }),
            0);
  EXPECT_EQ(mode_of(m("s")), 04755u);
  EXPECT_EQ(mode_of(m("g")), 02755u);
}

// E: a writer that dies abandons only a file its handle changed.
// `exec 3>>f; kill -9 $$` used to quarantine f; an exit, with any status,
// is a normal close (R4).
TEST_F(Posix, AWriterThatDiesAbandonsOnlyWhatItsHandleChanged) {
  write_file(m("f"), "data\n");
  ASSERT_TRUE(eventually([&] { return lstat_errno(b(".sealfs-manifest.f")) == 0; }));
  auto sh = run_process({"sh", "-c", "exec 3>>\"$0\"; kill -9 $$", m("f")});
  EXPECT_EQ(sh.status, 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // any abandon would have run
  EXPECT_EQ(read_file(m("f")), "data\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
  // A write, then a non-zero exit: kept.
  auto failed = run_process({"sh", "-c", "exec 3>>\"$0\"; echo more >&3; exit 1", m("f")});
  EXPECT_EQ(failed.status, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(read_file(m("f")), "data\nmore\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
  // A write, then a death: abandoned (R4).
  auto wrote = run_process({"sh", "-c", "exec 3>>\"$0\"; echo again >&3; kill -9 $$", m("f")});
  EXPECT_EQ(wrote.status, 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return lstat_errno(m("f")) == ENOENT; }))
      << "an abandoned write stayed visible";
  EXPECT_FALSE(quarantined_files(*mount_).empty());
}

// stress-ng's flock stressor: a lock file created O_CREAT|O_RDWR, never
// written, shared with a child that is SIGKILLed holding the last descriptor.
// Creating is no change to abandon: the file stays, sealed empty.
TEST_F(Posix, ALockFileWhoseLastHolderIsKilledIsKept) {
  const int fd = ::open(m("lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();  // holds the inherited descriptor until killed
    ::_exit(0);
  }
  ::close(fd);  // the child's copy is now the last
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(lstat_errno(m("lock")), 0) << "a lock file nobody wrote was abandoned";
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

// A FIFO renamed over a sealed symlink takes the name without leaving the
// symlink's sidecar behind (it used to be quarantined later).
TEST_F(Posix, RenamingASpecialFileOverASealedOneDropsItsSidecar) {
  ASSERT_EQ(err_of(::symlink("test", m("s").c_str())), 0);
  ASSERT_EQ(lstat_errno(b(".sealfs-manifest.s")), 0);
  ASSERT_EQ(err_of(::mkfifo(m("p").c_str(), 0644)), 0);
  ASSERT_EQ(err_of(::rename(m("p").c_str(), m("s").c_str())), 0);
  struct stat st {};
  ASSERT_EQ(::lstat(m("s").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(lstat_errno(b(".sealfs-manifest.s")), ENOENT);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_EQ(::lstat(m("s").c_str(), &st), 0);
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

}  // namespace
}  // namespace sealfs::test
