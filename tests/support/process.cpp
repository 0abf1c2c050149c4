#include "tests/support/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "tests/support/temp_dir.hpp"

extern char** environ;

namespace sealfs::test {
namespace {

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& x : extra) overridden = overridden || x.substr(0, x.find('=')) == name;
    if (!overridden) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

pid_t spawn_with_files(const std::vector<std::string>& argv, const std::string& out_path,
                       const std::string& err_path, const std::vector<std::string>& extra_env) {
  std::vector<std::string> args = argv;
  std::vector<std::string> env = environment_with(extra_env);
  auto c_args = c_strings(args);
  auto c_env = c_strings(env);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, c_args[0], &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

}  // namespace

int decode_wait_status(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return -1;
}

int wait_process(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int wstatus = 0;
    const pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) return decode_wait_status(wstatus);
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

pid_t spawn_process(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::vector<std::string>& extra_env) {
  return spawn_with_files(argv, log_path, log_path, extra_env);
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                          std::chrono::milliseconds limit) {
  TempDir logs("sealfs-proc");
  ProcessResult result;
  const pid_t pid = spawn_with_files(argv, logs / "out", logs / "err", extra_env);
  if (pid < 0) return result;
  result.status = wait_process(pid, limit);
  if (result.status == -1) {
    ::kill(pid, SIGKILL);
    wait_process(pid, std::chrono::seconds(10));
  }
  result.out = read_file(logs / "out").value_or("");
  result.err = read_file(logs / "err").value_or("");
  return result;
}

namespace {

// What the child tells the parent: 'r' (ready), or the step that failed
// ('o' open, 'w' pwrite) and its errno.
struct WriterReport {
  char step = 0;
  int err = 0;
};

// In the child after fork: async-signal-safe steps only.
[[noreturn]] void hold_written_file(const char* path, const std::string& data, off_t offset, int ready,
                                    int go) {
  WriterReport report{'r', 0};
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    report = {'o', errno};
  else if (::pwrite(fd, data.data(), data.size(), offset) != static_cast<ssize_t>(data.size()))
    report = {'w', errno};
  (void)!::write(ready, &report, sizeof report);
  if (report.step != 'r') ::_exit(100);
  unsigned char how = 0;
  if (::read(go, &how, 1) != 1 || how == 0xff) ::kill(::getpid(), SIGKILL);
  ::_exit(how);
}

// Both ends of a new pipe (close-on-exec), or none with errno set.
bool make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  return true;
}

}  // namespace

HeldWriter::HeldWriter(const std::string& path, const std::string& data, off_t offset) {
  UniqueFd ready_read, ready_write, go_read;
  if (!make_pipe(ready_read, ready_write) || !make_pipe(go_read, go_)) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) hold_written_file(path.c_str(), data, offset, ready_write.get(), go_read.get());
  if (pid_ < 0) {
    error_ = std::string("fork: ") + std::strerror(errno);
    return;
  }
  ready_write.reset();  // so that a writer's death reads as EOF
  WriterReport report;
  if (::read(ready_read.get(), &report, sizeof report) != sizeof report)
    error_ = "the writer died before it wrote";
  else if (report.step != 'r')
    error_ = std::string(report.step == 'o' ? "open: " : "pwrite: ") + std::strerror(report.err) +
             " (errno " + std::to_string(report.err) + ")";
}

int HeldWriter::end(int how) {
  if (pid_ <= 0) return -1;
  // A child that failed has exited: nothing reads the pipe (SIGPIPE).
  const unsigned char code = how == kKilled ? 0xff : static_cast<unsigned char>(how);
  if (error_.empty()) (void)!::write(go_.get(), &code, 1);
  go_.reset();
  int wstatus = 0;
  const pid_t waited = ::waitpid(pid_, &wstatus, 0);
  pid_ = -1;
  return waited > 0 ? decode_wait_status(wstatus) : -1;
}

HeldWriter::~HeldWriter() {
  if (pid_ > 0) (void)end(kKilled);
}

}  // namespace sealfs::test
