// cache_bench's phases (see cache_bench.cpp): the stores built for them, the
// timed saves, loads and listings of one run, and the scale phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tests/bench/cache_bench_mount.hpp"
#include "tests/bench/cache_bench_report.hpp"
#include "tests/bench/cache_bench_workload.hpp"

namespace sealfs::bench {

// Each key's files, made once (content generation is not what is measured).
std::vector<EntryFiles> make_entries(const EntryShape& shape, std::size_t n);

// Builds B with entries (through a sealfs mount, so they are sealed) and a
// large listing directory big/kernels (sealed offline with `sealfs adopt`).
void build_load_store(const Config& cfg, const Target& sealfs, const fsys::path& store,
                      const std::vector<EntryFiles>& entries);

// One run: every target's save, then every target's loads and listing, the
// targets in an order rotated by the run's number.
void measure_run(const Config& cfg, const std::vector<Target>& targets,
                 const std::vector<EntryFiles>& entries, const fsys::path& store, int run, Results& r,
                 std::uint64_t& checksum);

// Mount time of a store of --scale entries, and the daemon's RSS as it is walked.
void scale_phase(const Config& cfg, Results& r, const std::vector<Target>& targets, const Target& sealfs);

}  // namespace sealfs::bench
