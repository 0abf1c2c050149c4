#include "fs/fuse/writer_tasks.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace sealfs::fuse {
namespace {

// A /proc/<tid>/stat line with the given flags (field 9) and exit code (field 52).
std::string stat_line(const std::string& comm, unsigned long flags, int exit_code) {
  std::string s = "1234 (" + comm + ") R 1 1234 1234 0 -1 " + std::to_string(flags);
  for (int field = 10; field < 52; ++field) s += " 0";
  s += " " + std::to_string(exit_code) + "\n";
  return s;
}

TEST(CloserStateTest, DyingOfASignalIsAbandoned) {
  EXPECT_EQ(closer_state_from_stat(stat_line("python3", 0x4, SIGKILL)), CloserState::abandoned);
  EXPECT_EQ(closer_state_from_stat(stat_line("python3", 0x404044, SIGTERM)), CloserState::abandoned);
  EXPECT_EQ(closer_state_from_stat(stat_line("cc1", 0x204, 0x80 | SIGSEGV)),
            CloserState::abandoned);  // core dumped
  EXPECT_EQ(closer_state_from_stat(stat_line("cc1", 0x204, 0x80 | SIGABRT)), CloserState::abandoned);
}

// R4: an exit status is the program's business; `cmd > f; exit 1` keeps f.
TEST(CloserStateTest, AliveOrExitingWithAnyStatusIsNormal) {
  EXPECT_EQ(closer_state_from_stat(stat_line("cc", 0x400000, 0)), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat(stat_line("cc", 0x4, 0)), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat(stat_line("cc", 0x0, 9)), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat(stat_line("make", 0x404044, 3 << 8)), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat(stat_line("sh", 0x4, 1 << 8)), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat(stat_line("sh", 0x4, 255 << 8)), CloserState::normal);
}

TEST(CloserStateTest, CommWithSpacesAndParenthesesIsSkipped) {
  EXPECT_EQ(closer_state_from_stat(stat_line("a) R 1 (b c", 0x4, 9)), CloserState::abandoned);
}

TEST(CloserStateTest, GarbageCountsAsNormal) {
  EXPECT_EQ(closer_state_from_stat(""), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat("1 (x) R 1 2 3"), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat("no parenthesis at all"), CloserState::normal);
  EXPECT_EQ(closer_state_from_stat("1 (x) R 1 1 1 0 -1 notanumber"), CloserState::normal);
}

TEST(CloserStateTest, ThisLiveProcessIsNormalAndMissingTaskIsNormal) {
  EXPECT_EQ(closer_state_of(::getpid()), CloserState::normal);
  EXPECT_EQ(closer_state_of(0), CloserState::normal);
  EXPECT_EQ(closer_state_of(-1), CloserState::normal);
}

TEST(CloserStateTest, OnlyATaskWithoutItsMemoryIsAskedForItsExitState) {
  // What /proc/<tid>/status shows of a live task (or one in exec) and of one
  // in do_exit after exit_mm, where its FLUSHes come from.
  EXPECT_TRUE(status_shows_memory("Name:\tpython3\nState:\tS (sleeping)\nVmPeak:\t4 kB\nVmSize:\t4 kB\n"));
  EXPECT_FALSE(status_shows_memory("Name:\tsh\nState:\tR (running)\nTgid:\t77\nThreads:\t1\n"));
  EXPECT_FALSE(status_shows_memory(""));
  std::string own(8192, '\0');
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  own.resize(static_cast<std::size_t>(std::max<ssize_t>(0, ::read(fd, own.data(), own.size()))));
  ::close(fd);
  EXPECT_TRUE(status_shows_memory(own)) << own;
}

// R4's unseen-writer policy: pid 0 (another pid namespace) is never seen,
// this process is, and so is a child whose /proc we may read.
TEST(WriterVisibleTest, PidZeroIsUnseenAndOurOwnProcessIsSeen) {
  EXPECT_FALSE(writer_visible(0));
  EXPECT_FALSE(writer_visible(-1));
  EXPECT_TRUE(writer_visible(::getpid()));
  EXPECT_TRUE(proc_is_own_namespace());
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  EXPECT_TRUE(writer_visible(child));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(writer_visible(child)) << "a reaped process is no writer";
}

// A daemon out of descriptors still sees a writer it can see: the check takes
// no descriptor (an open that failed with EMFILE turned every in-place write
// into an EPERM refusal under stress-ng's dentry burst).
TEST(WriterVisibleTest, OutOfDescriptorsAWriterIsStillSeen) {
  const pid_t child = ::fork();
  if (child == 0) {
    struct rlimit lim {
      64, 64
    };
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(3);
    while (::open("/dev/null", O_RDONLY) >= 0) {
    }
    if (errno != EMFILE) ::_exit(4);
    ::_exit(writer_visible(::getppid()) ? 0 : 5);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: setrlimit, 4: no EMFILE, 5: not seen";
}

TEST(ProcessGoneTest, AZombieIsGoneAndALiveProcessIsNot) {
  EXPECT_FALSE(process_gone(::getpid()));
  EXPECT_FALSE(process_gone(0));  // another pid namespace: never called gone
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie, whose descriptors are all closed.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = process_gone(child);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(gone);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(process_gone(child));  // reaped: gone from /proc
}

}  // namespace
}  // namespace sealfs::fuse
