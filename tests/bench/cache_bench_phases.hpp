// cache_bench's phases (see cache_bench.cpp): the stores built for them, the
// timed saves and loads of one run, and the scale phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/bench/cache_bench_mount.hpp"
#include "tests/bench/cache_bench_report.hpp"
#include "tests/bench/cache_bench_workload.hpp"

namespace sealfs::bench {

inline const std::string kNs = "bench";

// The saved store of one library size: its entries (saved through a sealfs
// mount, so they are sealed) and the seed's digests of their libraries, one
// file of lowercase hex per key, written at save time.
struct LoadStore {
  std::size_t lib = 0;
  std::vector<EntryFiles> entries;
  fsys::path root;
  fsys::path digests;
  fsys::path digest_file(std::size_t i) const { return digests / (key_name(i) + ".sha256"); }
};

// Makes the entries of a store of libraries of lib bytes and saves them.
LoadStore build_load_store(const Config& cfg, std::size_t lib);

// Writes count small TileLang-shaped entries directly into store/rel and
// seals each as a directory entry offline (`sealfs adopt`, trust on first
// use; no fsync: this is setup, not what is measured).
void add_adopted_entries(const Config& cfg, const fsys::path& store, const std::string& rel,
                         std::size_t count);

// SHA-256 throughput of this process (OpenSSL, in memory), GB/s.
double sha256_gbps();

// One run's saves and loads of one store, the targets in order.
void measure_store(const Config& cfg, const std::vector<Target>& order, const LoadStore& s, int run,
                   Results& r, std::uint64_t& checksum);

// Mount time of a store of --scale entries, and the daemon's RSS as it is walked.
void scale_phase(const Config& cfg, Results& r, const std::vector<Target>& targets);

}  // namespace sealfs::bench
