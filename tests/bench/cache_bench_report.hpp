// cache_bench's results (see cache_bench.cpp): samples per operation and
// target, the derived figures, and the table or JSON printed at the end.
#pragma once

#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tests/bench/cache_bench_mount.hpp"

namespace sealfs::bench {

double median(std::vector<double> v);

struct Results {
  // operation -> target -> samples (seconds)
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;
  std::vector<std::string> op_order;
  std::map<std::string, double> scalars;
  void add(const std::string& op, const Target& t, double s) {
    if (std::find(op_order.begin(), op_order.end(), op) == op_order.end()) op_order.push_back(op);
    samples[op][t.name].push_back(s);
  }
  double med(const std::string& op, const std::string& target) const {
    auto o = samples.find(op);
    if (o == samples.end()) return 0;
    auto t = o->second.find(target);
    return t == o->second.end() ? 0 : median(t->second);
  }
};

// The figures derived from the medians: the cold-load budget and the
// estimated floor of a durable save.
void add_estimates(const Config& cfg, const EntryShape& shape, Results& r);

// The results as a table (with a line on the workload) or, with --json, as JSON.
void report(const Config& cfg, const Results& r, const std::vector<Target>& targets, std::ostream& out);

}  // namespace sealfs::bench
