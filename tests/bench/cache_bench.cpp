// The kernel-cache benchmark of issues 6 and 14: a TileLang-like workload on
// the plain backing directory, with the seed's in-process check, on bindfs
// (the no-verification FUSE peer), on fuse_floor (the cheapest FUSE
// passthrough there is, no checks and no fsync: the floor of what any FUSE
// layer costs) and on sealfs (the mount that saved the entries, a fresh one,
// a read-only one), in one run, alternated, medians of several runs, ratios
// to plain and issue 14's targets read off them.
//
// Entries are what TileLang's KernelCache writes: <ns>/kernels/<key>/ with
// device_kernel.cu (24 KiB), host_kernel.cu (8 KiB), kernel_lib.so (512 KiB
// and 8 MiB by default: --lib-sizes, an ELF header and filler) and
// params.pkl (300 B).
//   save       the TileLang protocol: each file written to tmp/ and renamed
//              into <ns>/.staging/<key>_<pid>/, which is renamed to
//              kernels/<key>. TileLang itself never fsyncs; "plain+fsync" is
//              the careful writer R1 is compared with (fsync each file, the
//              staging directory and kernels/).
//   cold load  the first load of every entry after mounting (sealfs hashes);
//              on the saving mount, the first load after the save.
//   warm load  the next load: the four files exist, params.pkl is read,
//              kernel_lib.so is mapped and every page touched.
//   listing    `ls -la`, `find -type f` and `du -s` of a kernels/ of
//              --list-entries entries, on a warm mount.
// The scale phase (--scale N) builds a store of N entries and measures the
// mount time and the daemon's RSS after N lookups.
//
// Figures depend on the machine and its load: this is run by hand, never by
// ctest, except as a smoke test at tiny sizes.
//
// Split by responsibility: cache_bench_workload (the entries' files, save,
// load), cache_bench_mount (targets, configuration, mounts), cache_bench_phases
// (the stores and the timed saves and loads), cache_bench_listing (the
// listing programs), cache_bench_report and cache_bench_goals (results).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tests/bench/cache_bench_listing.hpp"
#include "tests/bench/cache_bench_mount.hpp"
#include "tests/bench/cache_bench_phases.hpp"
#include "tests/bench/cache_bench_report.hpp"
#include "tests/bench/cache_bench_workload.hpp"

namespace sealfs::bench {
namespace {

// A new working directory under /var/tmp.
fsys::path make_work_dir() {
  char tmpl[] = "/var/tmp/sealfs-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
  return tmpl;
}

// One run: the in-process SHA-256 speed, then every store's saves and loads,
// then the listings, the targets in an order rotated by the run's number.
void measure_run(const Config& cfg, const std::vector<Target>& targets, const std::vector<LoadStore>& stores,
                 const fsys::path& listing, int run, Results& r, std::uint64_t& checksum) {
  std::cerr << "run " << run + 1 << "/" << cfg.runs << "\n";
  const auto start = Clock::now();
  r.sha256_gbps.push_back(sha256_gbps());
  std::vector<Target> order = targets;
  std::rotate(order.begin(), order.begin() + (run % static_cast<int>(order.size())), order.end());
  for (const LoadStore& s : stores) measure_store(cfg, order, s, run, r, checksum);
  for (const Target& t : order) {
    if (!listing.empty() && t.lists()) measure_listing(cfg, t, listing, r);
  }
  std::cerr << "run " << run + 1 << " took " << seconds_since(start) << " s\n";
}

int run_bench(Config cfg) {
  raise_fd_limit_for_daemons();
  Results r;
  r.sealfs_binary = resolve_sealfs(cfg);
  std::cerr << r.sealfs_binary << "\n";
  const std::vector<Target> targets = make_targets(cfg, r.notes);
  for (const auto& n : r.notes) std::cerr << n << "\n";
  if (targets.empty()) throw std::runtime_error("no columns to measure");
  if (cfg.work.empty()) cfg.work = make_work_dir();
  make_dirs(cfg.work);
  std::cerr << "building the stores (" << cfg.entries << " entries per library size, listing of "
            << cfg.list_entries << ") in " << cfg.work << "\n";
  std::vector<LoadStore> stores;
  if (cfg.saves || cfg.loads) {
    for (std::size_t lib : cfg.lib_sizes) stores.push_back(build_load_store(cfg, lib));
  }
  const fsys::path listing = cfg.list_entries > 0 ? build_listing_store(cfg) : fsys::path();
  std::uint64_t checksum = 0;
  for (int run = 0; run < cfg.runs; ++run) measure_run(cfg, targets, stores, listing, run, r, checksum);
  if (cfg.scale > 0) scale_phase(cfg, r, targets);
  add_estimates(cfg, r);
  report(cfg, r, targets, std::cout);
  std::cerr << "(checksum " << checksum << ")\n";
  remove_tree(cfg.work);
  return 0;
}

// "512K", "8M", "8MiB", "65536": bytes.
std::size_t parse_size(const std::string& text) {
  std::size_t used = 0;
  const unsigned long long n = std::stoull(text, &used);
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  if (unit.empty()) return n;
  if (unit == "K" || unit == "k") return n << 10;
  if (unit == "M" || unit == "m") return n << 20;
  if (unit == "G" || unit == "g") return n << 30;
  throw std::invalid_argument("not a size: " + text);
}

void add_options(CLI::App& app, Config& cfg) {
  app.add_option("--entries", cfg.entries, "entries saved and loaded per run and library size")
      ->capture_default_str();
  app.add_option("--list-entries", cfg.list_entries, "entries of the listed kernels/ (0: no listing phase)")
      ->capture_default_str();
  app.add_option("--list-repeat", cfg.list_repeat, "times each listing program runs per sample")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--scale", cfg.scale, "entries of the mount-time and RSS store (0: skip)")
      ->capture_default_str();
  app.add_option("--runs", cfg.runs, "runs (medians are reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--sealfs", cfg.sealfs,
                 "the sealfs binary (default: the install preset's build, " SEALFS_INSTALL_BINARY_PATH
                 ", else the test build's)");
  app.add_option("--sealfs-options", cfg.sealfs_options, "sealfs -o list")->capture_default_str();
  app.add_option("--bindfs", cfg.bindfs, "the bindfs binary")->capture_default_str();
  app.add_option("--bindfs-options", cfg.bindfs_options, "bindfs -o list")->capture_default_str();
  app.add_flag("!--no-bindfs", cfg.with_bindfs, "leave bindfs out");
  app.add_option("--fuse-floor", cfg.fuse_floor, "the fuse_floor binary")->capture_default_str();
  app.add_flag(
      "!--no-floor", cfg.with_floor,
      "leave out the floor columns (fuse_floor: FUSE with no checks; -noopen: without OPEN/RELEASE)");
  app.add_option("--peer", cfg.peer,
                 "libfuse's passthrough_hp (3.17, FUSE passthrough on): a peer-hp column; "
                 "tests/bench/build_peer.sh builds it");
  app.add_option("--targets", cfg.only,
                 "run only these columns (plain, plain+fsync, seed-check, bindfs, floor, floor-noopen, "
                 "peer-hp, sealfs-saving, sealfs-fresh, sealfs-ro; sealfs or a variant's name: its three)")
      ->delimiter(',');
  app.add_option("--variant", cfg.variants,
                 "NAME=BINARY[|OPTIONS]: three more sealfs columns (another build, other -o options)");
  app.add_flag("!--no-saves", cfg.saves, "skip the save measurements");
  app.add_flag("!--no-loads", cfg.loads, "skip the load measurements");
  app.add_flag("--json", cfg.json, "print the results as JSON");
}

}  // namespace
}  // namespace sealfs::bench

int main(int argc, char** argv) {
  sealfs::bench::Config cfg;
  CLI::App app{"sealfs kernel-cache benchmark: plain, seed-check, bindfs, fuse_floor and sealfs",
               "cache_bench"};
  sealfs::bench::add_options(app, cfg);
  std::string work;
  app.add_option("--work", work, "working directory (default: a new one under /var/tmp, removed at the end)");
  std::vector<std::string> libs = {"512K", "8M"};
  app.add_option("--lib-sizes", libs, "library sizes, each with its own store (K, M suffixes)")
      ->delimiter(',')
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    cfg.lib_sizes.clear();
    for (const auto& l : libs) cfg.lib_sizes.push_back(sealfs::bench::parse_size(l));
  } catch (const std::exception& e) {
    std::cerr << "cache_bench: --lib-sizes: " << e.what() << "\n";
    return 2;
  }
  cfg.work = work;
  // The smoke test (ctest -L bench) runs this with tiny sizes; where FUSE is
  // unusable it skips (77), except in CI, where that is a failure.
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    const char* ci = std::getenv("CI");
    std::cerr << "cache_bench: /dev/fuse is not usable here: " << std::strerror(errno) << "\n";
    return ci != nullptr && std::string_view(ci) == "true" ? 1 : 77;
  }
  try {
    return sealfs::bench::run_bench(cfg);
  } catch (const std::exception& e) {
    std::cerr << "cache_bench: " << e.what() << "\n";
    return 1;
  }
}
