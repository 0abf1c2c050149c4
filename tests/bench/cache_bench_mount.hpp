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

// seed-check is the plain directory with the seed's in-process check (the
// library's SHA-256 compared with the digest saved at save time) before each
// load. peer-hp is libfuse 3.17's own passthrough_hp (FUSE passthrough on, no
// checks at all): what the fastest FUSE daemon does on this kernel, issue
// 25's peer for the cold load.
enum class Kind { kPlain, kPlainFsync, kSeedCheck, kBindfs, kFloor, kFloorNoOpen, kPeer, kSealfs };

// How a sealfs column meets its store: the mount that saved the entries and
// then loads them, a fresh mount over the saved store, or a fresh read-only
// one (-o ro).
enum class Mode { kNone, kSaving, kFresh, kReadOnly };

// One column of the table: what is mounted, and for sealfs which binary with
// which options (variants compare a lever or an older build in the same run).
struct Target {
  Kind kind = Kind::kPlain;
  std::string name;
  std::string binary;   // sealfs only
  std::string options;  // sealfs only
  Mode mode = Mode::kNone;
  std::string family;  // sealfs: the name its three columns share ("sealfs", a variant's)
  bool mounts() const {
    return kind != Kind::kPlain && kind != Kind::kPlainFsync && kind != Kind::kSeedCheck;
  }
  bool floor() const { return kind == Kind::kFloor || kind == Kind::kFloorNoOpen; }
  bool saves() const;  // has a save measurement
  bool loads() const;  // has load measurements
  bool lists() const;  // has listing measurements
};

struct Config {
  std::string sealfs;  // empty: the install preset's build, else the test build's (resolve_sealfs)
  std::string sealfs_options = "profile=tilelang,cache_timeout=600";
  std::string bindfs = "bindfs";
  std::string bindfs_options = "kernel_cache,entry_timeout=600,attr_timeout=600";
  std::string fuse_floor = FUSE_FLOOR_PATH;
  std::string peer;  // passthrough_hp (tests/bench/build_peer.sh); empty: no peer-hp column
  fsys::path work;
  std::size_t entries = 200;
  std::vector<std::size_t> lib_sizes = {512u << 10, 8u << 20};
  std::size_t list_entries = 2000;
  int list_repeat = 3;
  std::size_t scale = 100000;
  int runs = 7;
  bool json = false;
  bool with_bindfs = true;
  bool with_floor = true;
  std::vector<std::string> only;      // target names to run (empty: all)
  std::vector<std::string> variants;  // NAME=BINARY[|OPTIONS]: more sealfs columns
  bool saves = true;
  bool loads = true;
};

// Which sealfs binary: --sealfs, else the install preset's build (the
// README's install command), else the test build's; cfg.sealfs is set and a
// line saying which is returned.
std::string resolve_sealfs(Config& cfg);

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

// Every column in table order: plain, plain+fsync, seed-check, bindfs and the
// floors unless left out, sealfs's saving, fresh and ro columns, then those of
// each --variant; only --targets if given. Columns left out for a reason
// (bindfs not installed) are said in notes.
std::vector<Target> make_targets(const Config& cfg, std::vector<std::string>& notes);

}  // namespace sealfs::bench
