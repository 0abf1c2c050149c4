// cache_bench's columns (see cache_bench.cpp): the targets compared, the
// benchmark's configuration, and a FUSE daemon mounted for one measurement.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "tests/bench/cache_bench_workload.hpp"

namespace sealfs::bench {

// A command run to its end, its output dropped; its exit status.
int run_quiet(const std::vector<std::string>& argv);

enum class Kind { kPlain, kPlainFsync, kBindfs, kFloor, kFloorNoOpen, kSealfs };

// One column of the table: what is mounted, and for sealfs which binary with
// which options (variants compare a lever or an older build in the same run).
struct Target {
  Kind kind = Kind::kPlain;
  std::string name;
  std::string binary;   // sealfs only
  std::string options;  // sealfs only
  bool plain() const { return kind == Kind::kPlain || kind == Kind::kPlainFsync; }
  bool floor() const { return kind == Kind::kFloor || kind == Kind::kFloorNoOpen; }
};

struct Config {
  std::string sealfs = SEALFS_BINARY_PATH;
  std::string sealfs_options = "profile=tilelang";
  std::string bindfs = "bindfs";
  std::string fuse_floor = FUSE_FLOOR_PATH;
  fsys::path work;
  std::size_t entries = 200;
  std::size_t readdir_entries = 10000;
  std::size_t scale = 100000;
  int runs = 5;
  bool json = false;
  bool with_bindfs = true;
  bool with_floor = true;
  std::vector<std::string> only;      // target names to run (empty: all)
  std::vector<std::string> variants;  // NAME=BINARY[|OPTIONS]: more sealfs columns
  bool saves = true;
  bool loads = true;
};

// A FUSE daemon in the foreground over backing at mountpoint; unmounted and
// reaped by the destructor. Plain targets mount nothing.
class Mounted {
 public:
  Mounted(const Config& cfg, const Target& t, const fsys::path& backing, const fsys::path& mountpoint);
  Mounted(const Mounted&) = delete;
  Mounted& operator=(const Mounted&) = delete;
  ~Mounted();
  const fsys::path& root() const { return mountpoint_; }
  pid_t pid() const { return pid_; }
  double mount_seconds() const { return mount_seconds_; }

 private:
  fsys::path mountpoint_;
  pid_t pid_ = -1;
  double mount_seconds_ = 0;
};

// VmRSS of pid in KiB.
long rss_kib(pid_t pid);

// The daemons inherit this process's limits; sealfs keeps an fd per inode
// the kernel holds, and the scale phase holds 2 per entry. Root may raise the
// hard limit too (as LimitNOFILE= in the systemd unit does).
void raise_fd_limit_for_daemons();

// The sealfs column of cfg.
Target sealfs_target(const Config& cfg);

// Every column in table order: plain, plain+fsync, bindfs and the floors
// unless left out, sealfs, then each --variant; only --targets if given.
std::vector<Target> make_targets(const Config& cfg, const Target& sealfs);

}  // namespace sealfs::bench
