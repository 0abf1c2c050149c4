// cache_bench's columns: targets, mounts, the daemons' RSS and fd limit.
#include "tests/bench/cache_bench_mount.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "tests/support/process.hpp"

namespace sealfs::bench {

namespace {

dev_t device_of(const fsys::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) die("stat " + p.string());
  return st.st_dev;
}

// Is name (a path, or a command searched in PATH) an executable file?
bool executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    std::size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(at, end - at);
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    at = end + 1;
  }
  return false;
}

// A column that is not sealfs's.
Target column(Kind kind, const std::string& name, const std::string& binary) {
  return {kind, name, binary, "", Mode::kNone, ""};
}

// The saving, fresh and read-only columns of one sealfs build.
void add_sealfs_family(std::vector<Target>& targets, const std::string& family, const std::string& binary,
                       const std::string& options) {
  targets.push_back({Kind::kSealfs, family + "-saving", binary, options, Mode::kSaving, family});
  targets.push_back({Kind::kSealfs, family + "-fresh", binary, options, Mode::kFresh, family});
  targets.push_back({Kind::kSealfs, family + "-ro", binary, options + ",ro", Mode::kReadOnly, family});
}

void add_variant(std::vector<Target>& targets, const Config& cfg, const std::string& v) {
  const auto eq = v.find('=');
  if (eq == std::string::npos || eq == 0)
    throw std::runtime_error("--variant " + v + ": expected NAME=BINARY[|OPTIONS]");
  const auto bar = v.find('|', eq);
  add_sealfs_family(targets, v.substr(0, eq), v.substr(eq + 1, bar == std::string::npos ? bar : bar - eq - 1),
                    bar == std::string::npos ? cfg.sealfs_options : v.substr(bar + 1));
}

}  // namespace

bool Target::saves() const {
  return kind != Kind::kSeedCheck && kind != Kind::kFloorNoOpen && kind != Kind::kPeer &&
         (kind != Kind::kSealfs || mode == Mode::kSaving);
}

bool Target::loads() const { return kind != Kind::kPlainFsync; }

bool Target::lists() const {
  return kind == Kind::kPlain || kind == Kind::kBindfs || kind == Kind::kFloor ||
         (kind == Kind::kSealfs && mode == Mode::kFresh);
}

std::string resolve_sealfs(Config& cfg) {
  if (!cfg.sealfs.empty()) return "sealfs binary: " + cfg.sealfs + " (--sealfs)";
  const std::string install = SEALFS_INSTALL_BINARY_PATH;
  if (::access(install.c_str(), X_OK) != 0) {
    cfg.sealfs = SEALFS_BINARY_PATH;
    return "sealfs binary: " + cfg.sealfs + " (the test build's; note: no install build at " + install +
           "; `cmake --preset install && cmake --build --preset install` makes it)";
  }
  cfg.sealfs = install;
  std::string line = "sealfs binary: " + cfg.sealfs + " (the install preset's build)";
  std::error_code ec1, ec2;
  const auto mine = fsys::last_write_time(install, ec1);
  const auto tests = fsys::last_write_time(SEALFS_BINARY_PATH, ec2);
  if (!ec1 && !ec2 && mine < tests)
    line += "; note: older than the test build's, rebuild it with `cmake --build --preset install`";
  return line;
}

int run_quiet(const std::vector<std::string>& argv) {
  return sealfs::test::run_process(argv, {}, std::chrono::minutes(10)).status;
}

Mounted::Mounted(const Config& cfg, const Target& t, const fsys::path& backing, const fsys::path& mountpoint)
    : mountpoint_(backing) {
  if (!t.mounts()) return;
  make_dirs(mountpoint);
  mountpoint_ = mountpoint;
  std::vector<std::string> argv;
  if (t.kind == Kind::kSealfs) {
    argv = {t.binary, "-f", "-o", t.options, backing.string(), mountpoint.string()};
  } else if (t.floor()) {
    argv = {cfg.fuse_floor, backing.string(), mountpoint.string()};
    if (t.kind == Kind::kFloorNoOpen) argv.insert(argv.begin() + 1, "--no-open");
  } else if (t.kind == Kind::kPeer) {
    argv = {cfg.peer, "--foreground", backing.string(), mountpoint.string()};
  } else {
    argv = {cfg.bindfs,         "-f", "--no-allow-other", "-o", cfg.bindfs_options, backing.string(),
            mountpoint.string()};
  }
  const dev_t before = device_of(mountpoint);
  const auto start = Clock::now();
  pid_ = sealfs::test::spawn_process(argv, (cfg.work / "daemon.log").string());
  if (pid_ < 0) die("start " + argv[0]);
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error(t.name + " exited before mounting; see " + (cfg.work / "daemon.log").string());
    }
    struct stat st {};
    if (::stat(mountpoint.c_str(), &st) == 0 && st.st_dev != before) break;
    if (seconds_since(start) > 30) throw std::runtime_error(t.name + " did not mount");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  mount_seconds_ = seconds_since(start);
}

Mounted::~Mounted() {
  if (pid_ <= 0) return;
  run_quiet({"fusermount3", "-u", mountpoint_.string()});
  int status = 0;
  for (int i = 0; i < 200 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (::waitpid(pid_, &status, WNOHANG) == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    run_quiet({"umount", "-l", mountpoint_.string()});
  }
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

void raise_fd_limit_for_daemons() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = 1u << 20;
  if (lim.rlim_max < want) {
    struct rlimit more {
      want, want
    };
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0) return;
  }
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

std::vector<Target> make_targets(const Config& cfg, std::vector<std::string>& notes) {
  std::vector<Target> targets = {column(Kind::kPlain, "plain", ""),
                                 column(Kind::kPlainFsync, "plain+fsync", ""),
                                 column(Kind::kSeedCheck, "seed-check", "")};
  if (cfg.with_bindfs && !executable(cfg.bindfs)) {
    notes.push_back("bindfs: column skipped, " + cfg.bindfs + " is not installed (apt-get install bindfs)");
  } else if (cfg.with_bindfs) {
    targets.push_back(column(Kind::kBindfs, "bindfs", cfg.bindfs));
  }
  if (cfg.with_floor) {
    targets.push_back(column(Kind::kFloor, "floor", cfg.fuse_floor));
    targets.push_back(column(Kind::kFloorNoOpen, "floor-noopen", cfg.fuse_floor));
  }
  if (!cfg.peer.empty() && !executable(cfg.peer)) {
    notes.push_back("peer-hp: column skipped, " + cfg.peer +
                    " is not executable (tests/bench/build_peer.sh)");
  } else if (!cfg.peer.empty()) {
    targets.push_back(column(Kind::kPeer, "peer-hp", cfg.peer));
  }
  add_sealfs_family(targets, "sealfs", cfg.sealfs, cfg.sealfs_options);
  for (const auto& v : cfg.variants) add_variant(targets, cfg, v);
  if (!cfg.only.empty()) {
    std::erase_if(targets, [&](const Target& t) {
      auto wanted = [&](const std::string& n) { return !n.empty() && std::ranges::count(cfg.only, n) > 0; };
      return !wanted(t.name) && !wanted(t.family);
    });
  }
  return targets;
}

}  // namespace sealfs::bench
