#include "fs/fuse/writer_tracking.hpp"

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

constexpr HandleEnd kWrote{true, false};
constexpr HandleEnd kWroteAbandoned{true, true};
constexpr HandleEnd kOpenedOnly{false, false};
constexpr HandleEnd kOpenedOnlyAbandoned{false, true};
constexpr HandleEnd kMadeOnlyAbandoned{false, true, true, true};  // its creator closed it normally
constexpr HandleEnd kMadeByAKilledWriter{false, true, true, false};

TEST(WriterTrackingTest, InProgressUntilTheSealAfterTheLastRelease) {
  WriterTracking w;
  EXPECT_FALSE(w.in_progress(1, 2));
  w.opened(1, 2);
  w.opened(1, 2);
  EXPECT_TRUE(w.in_progress(1, 2));
  EXPECT_FALSE(w.released(1, 2, kWrote).has_value());  // not the last
  auto last = w.released(1, 2, kWrote);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::seal);
  EXPECT_TRUE(w.in_progress(1, 2));  // still, while sealing
  w.finished(1, 2);
  EXPECT_FALSE(w.in_progress(1, 2));
}

// R4's seal journal records a FLUSH only when it is the file's last close
// that will lead to a seal: one write handle left, something to seal, nothing
// abandoned.
TEST(WriterTrackingTest, TheLastWritersFlushSealsOnlyAsTheSoleWriterOfAChangedFile) {
  WriterTracking w;
  EXPECT_FALSE(w.last_writer_seals(1, 2, true)) << "not open";
  w.opened(1, 2);
  EXPECT_TRUE(w.last_writer_seals(1, 2, true));
  EXPECT_FALSE(w.last_writer_seals(1, 2, false)) << "nothing to seal";
  w.opened(1, 2);
  EXPECT_FALSE(w.last_writer_seals(1, 2, true)) << "another write handle is open";
  EXPECT_FALSE(w.released(1, 2, kWrote).has_value());
  EXPECT_TRUE(w.last_writer_seals(1, 2, false)) << "changed by the handle released before";
  w.opened(3, 4);
  w.opened(3, 4);
  EXPECT_FALSE(w.released(3, 4, kWroteAbandoned).has_value());
  EXPECT_FALSE(w.last_writer_seals(3, 4, true)) << "a changing handle was abandoned";
}

TEST(WriterTrackingTest, OneAbandonedHandleThatChangedTheFileAbandonsIt) {
  WriterTracking w;
  w.opened(1, 2);
  w.opened(1, 2);
  EXPECT_FALSE(w.released(1, 2, kWroteAbandoned).has_value());
  auto last = w.released(1, 2, kOpenedOnly);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::abandon);
  w.finished(1, 2);
  // The verdict does not stick to the next round of writers.
  w.opened(1, 2);
  auto next = w.released(1, 2, kWrote);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, LastClose::seal);
}

// R10: `sh -c 'exec 3>>f; exit 1'` must leave f as it was.
TEST(WriterTrackingTest, AnAbandonedHandleThatChangedNothingLeavesTheFileAlone) {
  WriterTracking w;
  w.opened(1, 2);
  auto last = w.released(1, 2, kOpenedOnlyAbandoned);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::untouched);
  w.finished(1, 2);
  // Another handle's change is sealed, not abandoned, by an idle abandoned one.
  w.opened(1, 2);
  w.opened(1, 2);
  EXPECT_FALSE(w.released(1, 2, kWrote).has_value());
  auto mixed = w.released(1, 2, kOpenedOnlyAbandoned);
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(*mixed, LastClose::seal);
}

// stress-ng's flock stressor: a lock file created, never written, whose last
// holder is SIGKILLed. Creating is no change to abandon: it is sealed empty.
TEST(WriterTrackingTest, AFileOnlyCreatedByAnAbandonedHandleIsSealed) {
  WriterTracking w;
  w.opened(1, 2);
  auto last = w.released(1, 2, kMadeOnlyAbandoned);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, LastClose::seal);
  w.finished(1, 2);
  // R4: a writer killed after its create and before its first write (no
  // normal close at all) leaves nothing visible.
  w.opened(1, 2);
  auto killed = w.released(1, 2, kMadeByAKilledWriter);
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(*killed, LastClose::abandon);
}

TEST(WriterTrackingTest, UnknownReleaseAndCancelDoNothing) {
  WriterTracking w;
  EXPECT_FALSE(w.released(5, 6, kWrote).has_value());
  w.opened(5, 6);
  w.cancelled(5, 6);
  EXPECT_FALSE(w.in_progress(5, 6));
  EXPECT_FALSE(w.released(5, 6, kWrote).has_value());
}

TEST(WriterTrackingTest, AHoldWaitsForTheHoldOnTheSameFileOnly) {
  WriterTracking w;
  std::atomic<int> step{0};
  auto seal = std::make_unique<WriterTracking::Hold>(w.hold(1, 2));
  {
    auto other = w.hold(1, 3);  // another file: no wait
  }
  std::thread setattr([&] {
    auto gate = w.hold({{1, 3}, {1, 2}});
    step = 2;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(step.load(), 0) << "a hold on a file being sealed went through";
  step = 1;
  seal.reset();
  setattr.join();
  EXPECT_EQ(step.load(), 2);
  auto again = w.hold({{0, 0}, {1, 2}, {1, 2}});  // absent and repeated keys are fine
}

TEST(WriterTrackingTest, FilesAreKeptApart) {
  WriterTracking w;
  w.opened(1, 2);
  EXPECT_TRUE(w.in_progress(1, 2));
  EXPECT_FALSE(w.in_progress(1, 3));
  EXPECT_FALSE(w.in_progress(2, 2));
}

}  // namespace
}  // namespace sealfs::fuse
