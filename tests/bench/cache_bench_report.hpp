// cache_bench's results (see cache_bench.cpp): samples per operation and
// target, the figures derived from them, and the table or JSON printed at
// the end.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "tests/bench/cache_bench_mount.hpp"

namespace sealfs::bench {

double median(std::vector<double> v);

// printf into a string (up to 511 characters).
__attribute__((format(printf, 1, 2))) std::string fmt(const char* f, ...);

// "512 KiB", "8 MiB".
std::string size_label(std::size_t bytes);

// The operation on libraries of lib bytes: "warm load (512 KiB)".
std::string op_name(const std::string& what, std::size_t lib);

struct Results {
  // operation -> target -> samples (seconds)
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;
  std::vector<std::string> op_order;
  std::map<std::string, double> scalars;
  std::vector<double> sha256_gbps;    // one per run
  std::string sealfs_binary;          // which binary, and why
  std::vector<std::string> notes;     // columns left out, and why
  std::set<std::string> unsupported;  // columns given up during the run
  void add(const std::string& op, const Target& t, double s) {
    if (std::find(op_order.begin(), op_order.end(), op) == op_order.end()) op_order.push_back(op);
    samples[op][t.name].push_back(s);
  }
  bool has(const std::string& op, const std::string& target) const {
    auto o = samples.find(op);
    return o != samples.end() && o->second.count(target) != 0;
  }
  double med(const std::string& op, const std::string& target) const {
    return has(op, target) ? median(samples.at(op).at(target)) : 0;
  }
};

// The figures derived from the medians: the in-process SHA-256 throughput
// and the estimated floor of a durable save.
void add_estimates(const Config& cfg, Results& r);

// The results as tables with issue 14's targets or, with --json, as JSON.
void report(const Config& cfg, const Results& r, const std::vector<Target>& targets, std::ostream& out);

}  // namespace sealfs::bench
