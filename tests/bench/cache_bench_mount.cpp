// cache_bench's columns: targets, mounts, the daemons' RSS and fd limit.
#include "tests/bench/cache_bench_mount.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "tests/support/process.hpp"

namespace sealfs::bench {

namespace {

dev_t device_of(const fsys::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) die("stat " + p.string());
  return st.st_dev;
}

}  // namespace

int run_quiet(const std::vector<std::string>& argv) {
  return sealfs::test::run_process(argv, {}, std::chrono::minutes(10)).status;
}

Mounted::Mounted(const Config& cfg, const Target& t, const fsys::path& backing, const fsys::path& mountpoint)
    : mountpoint_(backing) {
  if (t.plain()) return;
  make_dirs(mountpoint);
  mountpoint_ = mountpoint;
  std::vector<std::string> argv;
  if (t.kind == Kind::kSealfs) {
    argv = {t.binary, "-f", "-o", t.options, backing.string(), mountpoint.string()};
  } else if (t.floor()) {
    argv = {cfg.fuse_floor, backing.string(), mountpoint.string()};
    if (t.kind == Kind::kFloorNoOpen) argv.insert(argv.begin() + 1, "--no-open");
  } else {
    argv = {cfg.bindfs, "-f", "--no-allow-other", backing.string(), mountpoint.string()};
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

Target sealfs_target(const Config& cfg) { return {Kind::kSealfs, "sealfs", cfg.sealfs, cfg.sealfs_options}; }

std::vector<Target> make_targets(const Config& cfg, const Target& sealfs) {
  std::vector<Target> targets = {{Kind::kPlain, "plain", "", ""}, {Kind::kPlainFsync, "plain+fsync", "", ""}};
  if (cfg.with_bindfs) targets.push_back({Kind::kBindfs, "bindfs", cfg.bindfs, ""});
  if (cfg.with_floor) {
    targets.push_back({Kind::kFloor, "floor", cfg.fuse_floor, ""});
    targets.push_back({Kind::kFloorNoOpen, "floor-noopen", cfg.fuse_floor, ""});
  }
  targets.push_back(sealfs);
  for (const auto& v : cfg.variants) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::runtime_error("--variant " + v + ": expected NAME=BINARY[|OPTIONS]");
    const auto bar = v.find('|', eq);
    targets.push_back({Kind::kSealfs, v.substr(0, eq),
                       v.substr(eq + 1, bar == std::string::npos ? bar : bar - eq - 1),
                       bar == std::string::npos ? cfg.sealfs_options : v.substr(bar + 1)});
  }
  if (!cfg.only.empty()) {
    std::erase_if(targets, [&](const Target& t) {
      return std::find(cfg.only.begin(), cfg.only.end(), t.name) == cfg.only.end();
    });
  }
  return targets;
}

}  // namespace sealfs::bench
