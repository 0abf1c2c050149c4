// Issue 23, point 9: nothing on the FLUSH/RELEASE path waits for another
// process. A writer's close must return, and its file be sealed, whatever
// the other processes around it are doing: a child that holds the
// descriptor and is stopped (SIGSTOP), a writer that is ptraced, a vfork'ed
// child that closes its copy and exits, a thread of the writer in D state
// (waiting on a FUSE daemon that is stopped), a writer that exits while its
// child holds the descriptor. The exec cases are ExecWithAWriteDescriptor
// (no_open_test.cpp). Each runs with and without OPEN.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "fs/fuse/writer_tasks.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr auto kLimit = std::chrono::seconds(20);

class FlushWaits : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    mount_ = std::make_unique<Mount>(MountConfig::with({GetParam()}));
    ASSERT_TRUE(mount_->ok()) << mount_->error();
  }

  // A Python writer given the file's path; -1 when it has not ended within kLimit.
  ProcessResult python(const std::string& script, const std::vector<std::string>& args) const {
    const char* py = std::getenv("SEALFS_PYTHON");
    std::vector<std::string> argv = {py ? py : "python3", "-c",
                                     "import os, signal, sys, threading, time\n" + script};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {}, kLimit);
  }

  void expect_sealed(const std::string& name, const std::string& content) const {
    EXPECT_TRUE(eventually([&] { return lstat_errno(mount_->b(".sealfs-manifest." + name)) == 0; }))
        << name << " not sealed";
    EXPECT_EQ(read_file(mount_->m(name)), content);
    EXPECT_TRUE(quarantined_files(*mount_).empty());
  }

  std::unique_ptr<Mount> mount_;
};

// The writer's child holds the descriptor and is stopped; the writer's close
// returns at once. The child then goes on and exits normally. (Were it
// killed, the shared handle's last close would be a death: with OPEN the
// file would be abandoned, without OPEN sealed; fs/README.md "Without OPEN".)
TEST_P(FlushWaits, AStoppedChildHoldingTheDescriptor) {
  const auto r = python(
      "f = open(sys.argv[1], 'w'); f.write('by the parent\\n'); f.flush()\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    os.kill(os.getpid(), signal.SIGSTOP); os._exit(0)\n"
      "os.waitpid(pid, os.WUNTRACED)\n"
      "t = time.monotonic(); f.close(); took = time.monotonic() - t\n"
      "os.kill(pid, signal.SIGCONT); os.waitpid(pid, 0)\n"
      "sys.exit(0 if took < 5 else 1)\n",
      {mount_->m("stopped_child")});
  EXPECT_EQ(r.status, 0) << "1: the close took 5 s or more; -1: held up; " << r.err;
  expect_sealed("stopped_child", "by the parent\n");
}

// Parent and child both write; the child stops itself before its close.
// The parent's close returns at once; the file is sealed after the child's.
TEST_P(FlushWaits, AStoppedChildThatWroteDoesNotHoldUpTheParentsClose) {
  const auto r = python(
      "f = open(sys.argv[1], 'w'); f.write('parent\\n'); f.flush()\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    f.write('child\\n'); f.flush(); os.kill(os.getpid(), signal.SIGSTOP); f.close(); os._exit(0)\n"
      "os.waitpid(pid, os.WUNTRACED)\n"
      "t = time.monotonic(); f.close(); took = time.monotonic() - t\n"
      "os.kill(pid, signal.SIGCONT); _, st = os.waitpid(pid, 0)\n"
      "sys.exit(0 if took < 5 and st == 0 else 1)\n",
      {mount_->m("both")});
  EXPECT_EQ(r.status, 0) << "1: the parent's close took 5 s or more; -1: held up; " << r.err;
  expect_sealed("both", "parent\nchild\n");
}

// A thread of the writer waits in D state on another FUSE mount whose
// daemon is stopped; the writer's close on this mount returns meanwhile.
TEST_P(FlushWaits, AThreadOfTheWriterInDState) {
  Mount other(MountConfig::with({GetParam()}));
  ASSERT_TRUE(other.ok()) << other.error();
  write_file(other.m("elsewhere"), "x");
  ASSERT_EQ(::kill(other.daemon_pid(), SIGSTOP), 0);
  const auto r = python(
      "f = open(sys.argv[1], 'w'); f.write('while a thread waits\\n'); f.flush()\n"
      "threading.Thread(target=lambda: os.stat(sys.argv[2] + '/never-looked-up'), daemon=True).start()\n"
      "time.sleep(0.3)\n"
      "t = time.monotonic(); f.close(); took = time.monotonic() - t\n"
      "os._exit(0 if took < 5 else 1)\n",
      {mount_->m("dstate"), other.mountpoint()});
  ::kill(other.daemon_pid(), SIGCONT);
  EXPECT_EQ(r.status, 0) << "1: the close took 5 s or more; -1: held up; " << r.err;
  expect_sealed("dstate", "while a thread waits\n");
}

// The writer exits (normally) while its child still holds the descriptor.
TEST_P(FlushWaits, TheWriterExitsWhileItsChildHoldsTheDescriptor) {
  const auto r = python(
      "f = open(sys.argv[1], 'w'); f.write('complete\\n'); f.flush()\n"
      "r, w = os.pipe()\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    os.close(w); os.read(r, 1); os._exit(0)\n"  // holds f until the pipe closes
      "print(pid, flush=True); os._exit(0)\n",         // the child reads EOF once the parent is gone
      {mount_->m("orphaned_fd")});
  EXPECT_EQ(r.status, 0) << r.err;
  expect_sealed("orphaned_fd", "complete\n");
  // The orphaned child holds the mount busy until it has exited; it must, or
  // the unmount at the end of the test fails with EBUSY.
  const auto child = static_cast<pid_t>(std::atoi(r.out.c_str()));
  ASSERT_GT(child, 0) << r.out;
  EXPECT_TRUE(eventually([&] { return fuse::process_gone(child); }))
      << "the child " << child << " did not exit";
}

// A ptraced writer: every stop of it goes through its tracer (this test).
TEST_P(FlushWaits, APtracedWriter) {
  const std::string path = mount_->m("traced");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(90);
    ::raise(SIGSTOP);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, "traced\n", 7) != 7) ::_exit(91);
    ::_exit(::close(fd) == 0 ? 0 : 92);
  }
  const auto deadline = std::chrono::steady_clock::now() + kLimit;
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(child, &status, WNOHANG);
    if (got == child && (WIFEXITED(status) || WIFSIGNALED(status))) break;
    if (got == child && WIFSTOPPED(status)) {
      const int sig = WSTOPSIG(status) == SIGSTOP ? 0 : WSTOPSIG(status);
      ::ptrace(PTRACE_CONT, child, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      FAIL() << "the traced writer did not end within " << kLimit.count() << " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  expect_sealed("traced", "traced\n");
}

// A vfork'ed child closes its copy of the write descriptor and exits while
// the writer is suspended in vfork; then the writer writes more and closes.
TEST_P(FlushWaits, AVforkedChildClosesItsCopy) {
  const std::string path = mount_->m("vforked");
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, "before\n", 7) != 7) ::_exit(91);
    const pid_t v = ::vfork();
    if (v == 0) {
      ::close(fd);
      ::_exit(0);
    }
    int vs = 0;
    ::waitpid(v, &vs, 0);
    if (::write(fd, "after\n", 6) != 6) ::_exit(92);
    ::_exit(::close(fd) == 0 ? 0 : 93);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + kLimit;
  while (::waitpid(writer, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(writer, SIGKILL);
      ::waitpid(writer, &status, 0);
      FAIL() << "the vforking writer did not end within " << kLimit.count() << " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(decode_wait_status(status), 0);
  expect_sealed("vforked", "before\nafter\n");
}

INSTANTIATE_TEST_SUITE_P(NoOpenAndOpen, FlushWaits,
                         ::testing::Values("cache_timeout=1,no_open", "cache_timeout=1"),
                         [](const auto& param) { return param.index == 0 ? "NoOpen" : "Open"; });

}  // namespace
}  // namespace sealfs::test
