// cache_bench's phases: the stores, the timed runs, the scale phase.
#include "tests/bench/cache_bench_phases.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

namespace sealfs::bench {

namespace {

const std::string kNs = "bench";

double time_save(const Config& cfg, const Target& t, const std::vector<EntryFiles>& entries, int run) {
  const fsys::path backing = cfg.work / ("save-" + t.name + "-" + std::to_string(run));
  remove_tree(backing);
  make_dirs(backing);
  double elapsed = 0;
  {
    Mounted m(cfg, t, backing, cfg.work / "mnt");
    prepare_cache(m.root(), kNs);
    const bool careful = t.kind == Kind::kPlainFsync;
    const auto start = Clock::now();
    for (std::size_t i = 0; i < entries.size(); ++i)
      save_entry(m.root(), kNs, key_name(i), entries[i], careful);
    elapsed = seconds_since(start);
  }
  remove_tree(backing);
  return elapsed;
}

std::uint64_t load_all(const fsys::path& root, std::size_t n, std::size_t page) {
  std::uint64_t sum = 0;
  const fsys::path kernels = root / kNs / "kernels";
  for (std::size_t i = 0; i < n; ++i) sum += load_entry(kernels, key_name(i), page);
  return sum;
}

// Writes count small TileLang-shaped entries directly into store/rel and
// seals each as a directory entry offline (`sealfs adopt`, trust on first
// use; no fsync: this is setup, not what is measured).
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

void measure_loads(const Config& cfg, const Target& t, const fsys::path& store, std::size_t n, Results& r,
                   std::uint64_t& checksum) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  Mounted m(cfg, t, store, cfg.work / "mnt");
  auto start = Clock::now();
  checksum += load_all(m.root(), n, page);
  r.add("cold load", t, seconds_since(start));
  start = Clock::now();
  checksum += load_all(m.root(), n, page);
  r.add("warm load", t, seconds_since(start));
  start = Clock::now();
  const std::size_t listed = list_dir(m.root() / "big" / "kernels");
  r.add("readdir", t, seconds_since(start));
  if (listed != cfg.readdir_entries) {
    throw std::runtime_error(t.name + ": readdir listed " + std::to_string(listed) + " of " +
                             std::to_string(cfg.readdir_entries));
  }
}

}  // namespace

std::vector<EntryFiles> make_entries(const EntryShape& shape, std::size_t n) {
  std::vector<EntryFiles> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(entry_files(shape, i));
  return v;
}

void build_load_store(const Config& cfg, const Target& sealfs, const fsys::path& store,
                      const std::vector<EntryFiles>& entries) {
  remove_tree(store);
  make_dirs(store);
  {
    Mounted m(cfg, sealfs, store, cfg.work / "mnt");
    prepare_cache(m.root(), kNs);
    for (std::size_t i = 0; i < entries.size(); ++i)
      save_entry(m.root(), kNs, key_name(i), entries[i], false);
  }
  add_adopted_entries(cfg, store, "big/kernels", cfg.readdir_entries);
}

void measure_run(const Config& cfg, const std::vector<Target>& targets,
                 const std::vector<EntryFiles>& entries, const fsys::path& store, int run, Results& r,
                 std::uint64_t& checksum) {
  std::cerr << "run " << run + 1 << "/" << cfg.runs << "\n";
  // Alternate: each run starts with a different target.
  std::vector<Target> order = targets;
  std::rotate(order.begin(), order.begin() + (run % static_cast<int>(order.size())), order.end());
  for (const Target& t : order) {
    // floor-noopen differs from floor only in opens: its saves would say nothing new.
    if (cfg.saves && t.kind != Kind::kFloorNoOpen) r.add("save", t, time_save(cfg, t, entries, run));
  }
  for (const Target& t : order) {
    if (!cfg.loads || t.kind == Kind::kPlainFsync) continue;  // loads are the same as plain's
    measure_loads(cfg, t, store, cfg.entries, r, checksum);
  }
}

void scale_phase(const Config& cfg, Results& r, const std::vector<Target>& targets, const Target& sealfs) {
  const fsys::path store = cfg.work / "scale";
  remove_tree(store);
  auto start = Clock::now();
  add_adopted_entries(cfg, store, kNs + "/kernels", cfg.scale);
  std::cerr << "scale store: " << cfg.scale << " entries built in " << seconds_since(start) << " s\n";
  for (int run = 0; run < cfg.runs; ++run) {
    for (const Target& t : targets) {
      if (t.plain()) continue;
      Mounted m(cfg, t, store, cfg.work / "mnt");
      r.add("mount (" + std::to_string(cfg.scale) + " entries)", t, m.mount_seconds());
    }
  }
  // RSS after one lookup per name, 2 per entry (the entry and its params.pkl).
  // The daemon keeps an O_PATH fd per inode the kernel holds; where the fd
  // limit cannot hold them all (a container without CAP_SYS_RESOURCE), the
  // kernel is made to forget them every kBatch entries (drop_caches, root
  // only), as memory pressure would.
  Mounted m(cfg, sealfs, store, cfg.work / "mnt");
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

}  // namespace sealfs::bench
