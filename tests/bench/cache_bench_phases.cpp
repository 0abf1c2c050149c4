// cache_bench's phases: the stores, the timed saves and loads, the scale phase.
#include "tests/bench/cache_bench_phases.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

#include "core/base/digest.hpp"

namespace sealfs::bench {

namespace {

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// The save is timed from a clean page cache: what the column before left
// dirty (up to 1.6 GB with the 8 MiB libraries) is written back first, so
// that its writeback is not charged to this one.
double time_save(const Mounted& m, const std::vector<EntryFiles>& entries, bool careful) {
  prepare_cache(m.root(), kNs);
  ::sync();
  const auto start = Clock::now();
  for (std::size_t i = 0; i < entries.size(); ++i)
    save_entry(m.root(), kNs, key_name(i), entries[i], careful);
  return seconds_since(start);
}

// A save on a fresh backing directory, which is removed afterwards.
void measure_save(const Config& cfg, const Target& t, const LoadStore& s, int run, Results& r) {
  const fsys::path backing = cfg.work / ("save-" + t.name + "-" + std::to_string(run));
  remove_tree(backing);
  make_dirs(backing);
  {
    Mounted m(cfg, t, backing, cfg.work / "mnt");
    r.add(op_name("save", s.lib), t, time_save(m, s.entries, t.kind == Kind::kPlainFsync));
  }
  remove_tree(backing);
}

std::uint64_t load_all(const Target& t, const fsys::path& root, const LoadStore& s) {
  std::uint64_t sum = 0;
  const fsys::path kernels = root / kNs / "kernels";
  const std::size_t page = page_size();
  for (std::size_t i = 0; i < s.entries.size(); ++i) {
    sum += t.kind == Kind::kSeedCheck ? checked_load_entry(kernels, key_name(i), s.digest_file(i), page)
                                      : load_entry(kernels, key_name(i), page);
  }
  return sum;
}

// The first load (cold: after mounting, or on the saving mount after the
// save) and the next (warm).
void cold_and_warm(const Target& t, const fsys::path& root, const LoadStore& s, Results& r,
                   std::uint64_t& checksum) {
  auto start = Clock::now();
  checksum += load_all(t, root, s);
  r.add(op_name("cold load", s.lib), t, seconds_since(start));
  start = Clock::now();
  checksum += load_all(t, root, s);
  r.add(op_name("warm load", s.lib), t, seconds_since(start));
}

// The saving column: a sealfs mount over an empty backing saves the entries
// (the sealfs save measurement) and then loads them, as a user's mount does.
void saving_column(const Config& cfg, const Target& t, const LoadStore& s, int run, Results& r,
                   std::uint64_t& checksum) {
  const fsys::path backing = cfg.work / ("save-" + t.name + "-" + std::to_string(run));
  remove_tree(backing);
  make_dirs(backing);
  {
    Mounted m(cfg, t, backing, cfg.work / "mnt");
    const double saved = time_save(m, s.entries, false);
    if (cfg.saves) r.add(op_name("save", s.lib), t, saved);
    if (cfg.loads) cold_and_warm(t, m.root(), s, r, checksum);
  }
  remove_tree(backing);
}

// The daemons' log's last line (they all append to one).
std::string last_log_line(const Config& cfg) {
  std::ifstream in(cfg.work / "daemon.log");
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// A read-only mount may not be supported by the binary: its column is then
// left out of the rest of the bench, and the run goes on.
void read_only_column(const Config& cfg, const Target& t, const LoadStore& s, Results& r,
                      std::uint64_t& checksum) {
  std::string failure;
  try {
    Mounted m(cfg, t, s.root, cfg.work / "mnt");
    try {
      cold_and_warm(t, m.root(), s, r, checksum);
      return;
    } catch (const std::exception& e) {
      failure = "ro: the loads failed on " + t.name + ": " + e.what();
    }
  } catch (const std::exception& e) {
    failure = "ro: not supported by this binary (" + t.name + ": " + e.what() +
              "; it said: " + last_log_line(cfg) + ")";
  }
  std::cerr << failure << "\n";
  r.notes.push_back(failure);
  r.unsupported.insert(t.name);
}

void measure_loads(const Config& cfg, const Target& t, const LoadStore& s, Results& r,
                   std::uint64_t& checksum) {
  if (r.unsupported.count(t.name) != 0) return;
  if (t.mode == Mode::kReadOnly) return read_only_column(cfg, t, s, r, checksum);
  Mounted m(cfg, t, s.root, cfg.work / "mnt");
  cold_and_warm(t, m.root(), s, r, checksum);
}

Target sealfs_fresh(const Config& cfg) {
  return {Kind::kSealfs, "sealfs-fresh", cfg.sealfs, cfg.sealfs_options, Mode::kFresh, "sealfs"};
}

}  // namespace

LoadStore build_load_store(const Config& cfg, std::size_t lib) {
  LoadStore s;
  s.lib = lib;
  EntryShape shape;
  shape.lib = lib;
  s.entries.reserve(cfg.entries);
  for (std::size_t i = 0; i < cfg.entries; ++i) s.entries.push_back(entry_files(shape, i));
  s.root = cfg.work / ("store-" + std::to_string(lib));
  s.digests = cfg.work / ("seed-digests-" + std::to_string(lib));
  remove_tree(s.root);
  make_dirs(s.root);
  make_dirs(s.digests);
  Mounted m(cfg, sealfs_fresh(cfg), s.root, cfg.work / "mnt");
  prepare_cache(m.root(), kNs);
  for (std::size_t i = 0; i < s.entries.size(); ++i) {
    save_entry(m.root(), kNs, key_name(i), s.entries[i], false);
    write_file(s.digest_file(i), sha256_hex(s.entries[i].library()), false);
  }
  return s;
}

void add_adopted_entries(const Config& cfg, const fsys::path& store, const std::string& rel,
                         std::size_t count) {
  const fsys::path dir = store / rel;
  make_dirs(dir);
  const EntryShape tiny{64, 64, 256, 64};
  constexpr std::size_t kBatch = 4000;  // paths per adopt command (ARG_MAX)
  for (std::size_t first = 0; first < count; first += kBatch) {
    std::vector<std::string> argv = {cfg.sealfs, "adopt", "-o", cfg.sealfs_options + ",durability=none",
                                     store.string()};
    for (std::size_t i = first; i < std::min(count, first + kBatch); ++i) {
      const fsys::path e = dir / key_name(i);
      make_dirs(e);
      for (const auto& [name, data] : entry_files(tiny, i).files) write_file(e / name, data, false);
      argv.push_back(rel + "/" + key_name(i));
    }
    if (run_quiet(argv) != 0) throw std::runtime_error("sealfs adopt in " + dir.string() + " failed");
  }
}

double sha256_gbps() {
  const std::string block(8u << 20, '\x5a');
  Sha256Hasher h;
  std::size_t bytes = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < 0.25) {
    h.update(std::string_view(block));
    bytes += block.size();
    elapsed = seconds_since(start);
  }
  h.finish();
  return static_cast<double>(bytes) / elapsed / 1e9;
}

void measure_store(const Config& cfg, const std::vector<Target>& order, const LoadStore& s, int run,
                   Results& r, std::uint64_t& checksum) {
  for (const Target& t : order) {
    if (t.mode == Mode::kSaving && (cfg.saves || cfg.loads)) {
      saving_column(cfg, t, s, run, r, checksum);
    } else if (cfg.saves && t.saves()) {
      measure_save(cfg, t, s, run, r);
    }
  }
  for (const Target& t : order) {
    if (cfg.loads && t.loads() && t.mode != Mode::kSaving) measure_loads(cfg, t, s, r, checksum);
  }
}

// RSS after one lookup per name, 2 per entry (the entry and its params.pkl).
// The daemon keeps an O_PATH fd per inode the kernel holds; where the fd
// limit cannot hold them all (a container without CAP_SYS_RESOURCE), the
// kernel is made to forget them every batch entries (drop_caches, root
// only), as memory pressure would.
void rss_after_lookups(const Config& cfg, const fsys::path& store, Results& r) {
  Mounted m(cfg, sealfs_fresh(cfg), store, cfg.work / "mnt");
  const double mib = 1024;
  r.scalars["sealfs rss after mount (MiB)"] = static_cast<double>(rss_kib(m.pid())) / mib;
  struct rlimit lim {};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  const std::size_t batch = std::min<std::size_t>(cfg.scale, lim.rlim_cur / 4);
  std::size_t found = 0;
  long peak = 0;
  int drops = 0;
  struct stat st {};
  const fsys::path mk = m.root() / kNs / "kernels";
  for (std::size_t i = 0; i < cfg.scale; ++i) {
    found += ::stat((mk / key_name(i) / "params.pkl").c_str(), &st) == 0;
    if ((i + 1) % batch == 0 && i + 1 < cfg.scale) {
      const long now = rss_kib(m.pid());
      if (drops == 0) {
        r.scalars["sealfs rss holding " + std::to_string(2 * batch) + " inodes (MiB)"] =
            static_cast<double>(now) / mib;
      }
      peak = std::max(peak, now);
      std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
      ++drops;
    }
  }
  const long end = rss_kib(m.pid());
  r.scalars["lookups"] = static_cast<double>(2 * cfg.scale);
  r.scalars["kernel cache drops during the lookups"] = drops;
  r.scalars["sealfs rss after lookups (MiB)"] = static_cast<double>(end) / mib;
  r.scalars["sealfs rss peak seen (MiB)"] = static_cast<double>(std::max(peak, end)) / mib;
  if (found != cfg.scale)
    throw std::runtime_error("scale: only " + std::to_string(found) + " entries visible");
}

void scale_phase(const Config& cfg, Results& r, const std::vector<Target>& targets) {
  const fsys::path store = cfg.work / "scale";
  remove_tree(store);
  auto start = Clock::now();
  add_adopted_entries(cfg, store, kNs + "/kernels", cfg.scale);
  std::cerr << "scale store: " << cfg.scale << " entries built in " << seconds_since(start) << " s\n";
  for (int run = 0; run < cfg.runs; ++run) {
    for (const Target& t : targets) {
      // One sealfs column per build: its saving and ro mounts mount the same way.
      if (!t.mounts() || (t.kind == Kind::kSealfs && t.mode != Mode::kFresh)) continue;
      Mounted m(cfg, t, store, cfg.work / "mnt");
      r.add("mount (" + std::to_string(cfg.scale) + " entries)", t, m.mount_seconds());
    }
  }
  rss_after_lookups(cfg, store, r);
  remove_tree(store);
}

}  // namespace sealfs::bench
