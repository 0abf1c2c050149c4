// cache_bench's listing phase (see cache_bench.cpp): the programs a user runs
// over a kernel cache (`ls -la`, `find -type f`, `du -s`), timed on a warm
// mount of a store of --list-entries entries.
#pragma once

#include "tests/bench/cache_bench_mount.hpp"
#include "tests/bench/cache_bench_report.hpp"

namespace sealfs::bench {

// The listing store: --list-entries small TileLang-shaped entries in
// <ns>/kernels, sealed offline.
fsys::path build_listing_store(const Config& cfg);

// Mounts t over store, runs each program once to warm the mount, then times
// each --list-repeat times (the sample is their mean).
void measure_listing(const Config& cfg, const Target& t, const fsys::path& store, Results& r);

}  // namespace sealfs::bench
