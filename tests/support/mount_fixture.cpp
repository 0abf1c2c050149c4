#include "tests/support/mount_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/process.hpp"

namespace sealfs::test {
namespace {

constexpr auto kMountWait = std::chrono::seconds(20);
constexpr auto kExitWait = std::chrono::seconds(20);

// mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo.
std::string unescape_mountinfo(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct(s.substr(i + 1, 3));
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string::npos) {
        out.push_back(static_cast<char>(std::stoi(oct, nullptr, 8)));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

}  // namespace

bool running_under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

std::string fuse_unusable_reason() {
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open /dev/fuse: ") + std::strerror(errno);
  ::close(fd);
  if (::geteuid() != 0 && ::access("/usr/bin/fusermount3", X_OK) != 0 &&
      ::access("/bin/fusermount3", X_OK) != 0)
    return "not root and no fusermount3";
  if (sealfs_binary().empty()) return "SEALFS_BINARY is not set";
  return {};
}

std::string sealfs_binary() {
  const char* path = std::getenv("SEALFS_BINARY");
  return path ? path : "";
}

bool is_fuse_mount(const std::string& path) {
  const std::string want = real_path(path);
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  bool mounted = false;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options [optional…] - fstype source super
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    // The last mount on a path is the one that shows; later lines win.
    if (unescape_mountinfo(point) == want) mounted = fstype.rfind("fuse", 0) == 0;
  }
  return mounted;
}

Mount::Mount(MountConfig config) {
  dirs_ = std::make_unique<TempDir>("sealfs-mount");
  log_path_ = *dirs_ / "daemon.log";
  if (config.backing) {
    backing_ = *config.backing;
  } else {
    backing_ = *dirs_ / "B";
    make_dirs(backing_);
  }
  if (config.over_backing) {
    mountpoint_ = backing_;
  } else {
    mountpoint_ = *dirs_ / "M";
    make_dirs(mountpoint_);
  }
  std::vector<std::string> argv = config.launcher;
  argv.push_back(sealfs_binary());
  argv.push_back("-f");
  for (const auto& o : config.options) {
    argv.push_back("-o");
    argv.push_back(o);
  }
  argv.push_back(backing_);
  argv.push_back(mountpoint_);
  pid_ = spawn_process(argv, log_path_, config.env);
  if (pid_ < 0) {
    error_ = std::string("cannot start ") + argv[0] + ": " + std::strerror(errno);
    unmounted_ = true;
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + kMountWait;
  while (!is_fuse_mount(mountpoint_)) {
    const int status = wait_process(pid_, std::chrono::milliseconds(0));
    if (status != -1) {
      error_ = "sealfs exited with status " + std::to_string(status) + " before mounting: " + log();
      exit_status_ = status;
      unmounted_ = true;
      pid_ = -1;
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      error_ = "sealfs did not mount within the time limit: " + log();
      ::kill(pid_, SIGKILL);
      wait_process(pid_, kExitWait);
      unmounted_ = true;
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Mount::unmount() {
  if (unmounted_) return exit_status_;
  unmounted_ = true;
  ProcessResult r = run_process({"fusermount3", "-u", mountpoint_}, {}, std::chrono::seconds(30));
  if (r.status != 0 && is_fuse_mount(mountpoint_)) {
    ADD_FAILURE() << "fusermount3 -u " << mountpoint_ << " failed (" << r.err << "); using umount -l";
    run_process({"umount", "-l", mountpoint_}, {}, std::chrono::seconds(30));
  }
  if (reaped_) {
    pid_ = -1;
    return exit_status_;
  }
  exit_status_ = wait_process(pid_, kExitWait);
  if (exit_status_ == -1) {
    ADD_FAILURE() << "sealfs did not exit after unmount; killing it. Log: " << log();
    ::kill(pid_, SIGKILL);
    wait_process(pid_, kExitWait);
  }
  pid_ = -1;
  return exit_status_;
}

Mount::~Mount() {
  if (pid_ > 0) {
    const int status = unmount();
    if (status != expected_status_)
      ADD_FAILURE() << "sealfs exited with status " << status << " (expected " << expected_status_
                    << "). Log: " << log();
  }
  if (is_fuse_mount(mountpoint_)) {
    ADD_FAILURE() << "a mount was left behind on " << mountpoint_;
    run_process({"umount", "-l", mountpoint_}, {}, std::chrono::seconds(30));
  }
}

int Mount::wait_for_exit(std::chrono::milliseconds limit) {
  if (reaped_ || pid_ <= 0) return exit_status_;
  const int status = wait_process(pid_, limit);
  if (status != -1) {
    exit_status_ = status;
    reaped_ = true;
  }
  return status;
}

std::string Mount::log() const { return read_file(log_path_).value_or(""); }

}  // namespace sealfs::test
