// cache_bench's results: medians, derived figures, the table and the JSON.
#include "tests/bench/cache_bench_report.hpp"

#include <cstdio>

namespace sealfs::bench {

namespace {

void print_table(const Results& r, const std::vector<Target>& targets, std::ostream& out) {
  std::vector<std::string> cols;
  for (const Target& t : targets) cols.push_back(t.name);
  out << std::left;
  char line[256];
  std::snprintf(line, sizeof line, "%-26s", "operation (median s)");
  out << line;
  for (const auto& c : cols) {
    std::snprintf(line, sizeof line, "%14s", c.c_str());
    out << line;
  }
  out << "   ratios to plain\n";
  for (const auto& op : r.op_order) {
    std::snprintf(line, sizeof line, "%-26s", op.c_str());
    out << line;
    for (const auto& c : cols) {
      auto it = r.samples.at(op).find(c);
      if (it == r.samples.at(op).end()) {
        std::snprintf(line, sizeof line, "%14s", "-");
      } else {
        std::snprintf(line, sizeof line, "%14.4f", median(it->second));
      }
      out << line;
    }
    const std::string base = op == "save" ? "plain+fsync" : "plain";
    const double b = r.med(op, base);
    out << "   ";
    for (const auto& c : cols) {
      if (c == "plain" || c == "plain+fsync" || b <= 0 || r.samples.at(op).count(c) == 0) continue;
      std::snprintf(line, sizeof line, "%s %.2fx  ", c.c_str(), r.med(op, c) / b);
      out << line;
    }
    if (op == "save") out << "(to plain+fsync)";
    out << "\n";
  }
  for (const auto& [k, v] : r.scalars) out << k << ": " << v << "\n";
}

void print_json(const Config& cfg, const Results& r, std::ostream& out) {
  out << "{\"entries\":" << cfg.entries << ",\"readdir_entries\":" << cfg.readdir_entries
      << ",\"runs\":" << cfg.runs << ",\"sealfs_options\":\"" << cfg.sealfs_options << "\",\"operations\":{";
  bool first_op = true;
  for (const auto& op : r.op_order) {
    out << (first_op ? "" : ",") << "\"" << op << "\":{";
    first_op = false;
    bool first_t = true;
    for (const auto& [t, v] : r.samples.at(op)) {
      out << (first_t ? "" : ",") << "\"" << t << "\":{\"median\":" << median(v) << ",\"samples\":[";
      first_t = false;
      for (std::size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
      out << "]}";
    }
    out << "}";
  }
  out << "},\"scalars\":{";
  bool first = true;
  for (const auto& [k, v] : r.scalars) {
    out << (first ? "" : ",") << "\"" << k << "\":" << v;
    first = false;
  }
  out << "}}\n";
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void add_estimates(const Config& cfg, const EntryShape& shape, Results& r) {
  const double lib_bytes = static_cast<double>(cfg.entries * shape.lib);
  r.scalars["cold load budget: plain + libs at 1.5 GB/s (s)"] =
      r.med("cold load", "plain") + lib_bytes / 1.5e9;
  if (r.med("save", "floor") > 0 && r.med("save", "plain") > 0 && r.med("save", "plain+fsync") > 0) {
    // fuse_floor does not fsync: what R1's fsyncs add on the plain directory,
    // added to the floor's save, is the least any durable FUSE layer can take.
    r.scalars["save floor with R1's fsyncs, estimated: floor + (plain+fsync - plain) (s)"] =
        r.med("save", "floor") + r.med("save", "plain+fsync") - r.med("save", "plain");
  }
}

void report(const Config& cfg, const Results& r, const std::vector<Target>& targets, std::ostream& out) {
  if (cfg.json) {
    print_json(cfg, r, out);
  } else {
    out << cfg.entries << " entries (24 KiB + 8 KiB sources, 512 KiB library, 300 B params), listing of "
        << cfg.readdir_entries << ", " << cfg.runs << " runs, sealfs -o " << cfg.sealfs_options << "\n";
    print_table(r, targets, out);
  }
}

}  // namespace sealfs::bench
