// The kernel-cache benchmark of issue 6: a TileLang-like workload on the plain
// backing directory, on bindfs (the no-verification FUSE peer), on fuse_floor
// (the cheapest FUSE passthrough there is, no checks and no fsync: the floor
// of what any FUSE layer costs) and on sealfs, in one run, alternated,
// medians of several runs, ratios to plain.
//
// Entries are what TileLang's KernelCache writes: <ns>/kernels/<key>/ with
// device_kernel.cu (24 KiB), host_kernel.cu (8 KiB), kernel_lib.so (512 KiB,
// an ELF header and filler) and params.pkl (300 B).
//   save       the TileLang protocol: each file written to tmp/ and renamed
//              into <ns>/.staging/<key>_<pid>/, which is renamed to
//              kernels/<key>. TileLang itself never fsyncs; "plain+fsync" is
//              the careful writer R1 is compared with (fsync each file, the
//              staging directory and kernels/).
//   cold load  the first load of every entry after mounting (sealfs hashes).
//   warm load  the next load: the four files exist, params.pkl is read,
//              kernel_lib.so is mapped and every page touched.
//   readdir    a full listing of a kernels/ with --readdir-entries entries.
// The scale phase (--scale N) builds a store of N entries and measures the
// mount time and the daemon's RSS after N lookups.
//
// Figures depend on the machine and its load: this is run by hand, never by
//
// Split by responsibility: cache_bench_workload (the entries' files, save,
// load, list), cache_bench_mount (targets, configuration, mounts),
// cache_bench_phases (the timed phases) and cache_bench_report (results).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

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

int run_bench(Config cfg) {
  raise_fd_limit_for_daemons();
  const Target sealfs = sealfs_target(cfg);
  const std::vector<Target> targets = make_targets(cfg, sealfs);
  if (cfg.work.empty()) cfg.work = make_work_dir();
  make_dirs(cfg.work);
  const EntryShape shape;
  const auto entries = make_entries(shape, cfg.entries);
  Results r;
  std::uint64_t checksum = 0;
  const fsys::path store = cfg.work / "store";
  std::cerr << "building the load store (" << cfg.entries << " entries, listing of " << cfg.readdir_entries
            << ") in " << cfg.work << "\n";
  build_load_store(cfg, sealfs, store, entries);
  for (int run = 0; run < cfg.runs; ++run) measure_run(cfg, targets, entries, store, run, r, checksum);
  if (cfg.scale > 0) scale_phase(cfg, r, targets, sealfs);
  add_estimates(cfg, shape, r);
  report(cfg, r, targets, std::cout);
  std::cerr << "(checksum " << checksum << ")\n";
  remove_tree(cfg.work);
  return 0;
}

}  // namespace
}  // namespace sealfs::bench

int main(int argc, char** argv) {
  sealfs::bench::Config cfg;
  CLI::App app{"sealfs kernel-cache benchmark: plain vs bindfs vs sealfs", "cache_bench"};
  std::string work;
  app.add_option("--entries", cfg.entries, "entries saved and loaded per run")->capture_default_str();
  app.add_option("--readdir-entries", cfg.readdir_entries, "entries in the listed kernels/")
      ->capture_default_str();
  app.add_option("--scale", cfg.scale, "entries of the mount-time and RSS store (0: skip)")
      ->capture_default_str();
  app.add_option("--runs", cfg.runs, "runs (medians are reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--sealfs", cfg.sealfs, "the sealfs binary")->capture_default_str();
  app.add_option("--sealfs-options", cfg.sealfs_options, "sealfs -o list")->capture_default_str();
  app.add_option("--bindfs", cfg.bindfs, "the bindfs binary")->capture_default_str();
  app.add_flag("!--no-bindfs", cfg.with_bindfs, "leave bindfs out");
  app.add_option("--fuse-floor", cfg.fuse_floor, "the fuse_floor binary")->capture_default_str();
  app.add_flag(
      "!--no-floor", cfg.with_floor,
      "leave out the floor columns (fuse_floor: FUSE with no checks; -noopen: without OPEN/RELEASE)");
  app.add_option("--targets", cfg.only,
                 "run only these columns (plain, plain+fsync, bindfs, sealfs, variants)")
      ->delimiter(',');
  app.add_option("--variant", cfg.variants,
                 "NAME=BINARY[|OPTIONS]: one more sealfs column (another build, other -o options)");
  app.add_flag("!--no-saves", cfg.saves, "skip the save measurements");
  app.add_flag("!--no-loads", cfg.loads, "skip the load and readdir measurements");
  app.add_option("--work", work, "working directory (default: a new one under /var/tmp, removed at the end)");
  app.add_flag("--json", cfg.json, "print the results as JSON");
  CLI11_PARSE(app, argc, argv);
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
