// cache_bench's targets (issue 14), read off the medians: one line each,
// PASS or MISS (informational: the benchmark's exit status does not depend
// on them).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tests/bench/cache_bench_report.hpp"

namespace sealfs::bench {

struct Goal {
  std::string what;          // "warm load (512 KiB): sealfs-fresh <= 1.15x floor-noopen"
  double value = 0;          // the column's median (s)
  double limit = 0;          // what it must not exceed (s)
  std::string detail;        // how the limit is made, with the ratio
  std::optional<bool> pass;  // empty: a column it needs was not measured
};

std::vector<Goal> goals(const Config& cfg, const Results& r, const std::vector<Target>& targets);

void print_goals(const std::vector<Goal>& g, std::ostream& out);

// Each sealfs column's load medians as ratios to floor-noopen, bindfs,
// seed-check, and (saving) to the fresh mount.
void print_sealfs_ratios(const Results& r, const std::vector<Target>& targets, std::ostream& out);

}  // namespace sealfs::bench
