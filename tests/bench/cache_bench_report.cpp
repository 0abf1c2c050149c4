// cache_bench's results: medians, derived figures, the tables and the JSON.
#include "tests/bench/cache_bench_report.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "tests/bench/cache_bench_goals.hpp"

namespace sealfs::bench {

namespace {

constexpr int kOpWidth = 24;

std::string pad(const std::string& s, int width, bool left) {
  const auto w = static_cast<std::size_t>(width);
  if (s.size() >= w) return " " + s;
  return left ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

// The columns with at least one sample, in table order.
std::vector<std::string> measured_columns(const Results& r, const std::vector<Target>& targets) {
  std::vector<std::string> cols;
  for (const Target& t : targets) {
    for (const auto& op : r.op_order) {
      if (r.has(op, t.name)) {
        cols.push_back(t.name);
        break;
      }
    }
  }
  return cols;
}

// ratios: each median over plain's (plain+fsync's for saves) instead of the median.
void print_grid(const Results& r, const std::vector<std::string>& cols, bool ratios, std::ostream& out) {
  std::size_t width = 8;
  for (const auto& c : cols) width = std::max(width, c.size() + 2);
  out << "\n" << pad(ratios ? "ratio to plain" : "median (s)", kOpWidth, true);
  for (const auto& c : cols) out << pad(c, static_cast<int>(width), false);
  out << "\n";
  for (const auto& op : r.op_order) {
    const bool save = op.rfind("save", 0) == 0;
    const double base = r.med(op, save ? "plain+fsync" : "plain");
    if (ratios && base <= 0) continue;  // nothing to compare with (mount times)
    out << pad(op, kOpWidth, true);
    for (const auto& c : cols) {
      std::string v = "-";
      if (r.has(op, c) && !ratios) v = fmt("%.4g", r.med(op, c));
      if (r.has(op, c) && ratios && base > 0) v = fmt("%.2fx", r.med(op, c) / base);
      out << pad(v, static_cast<int>(width), false);
    }
    out << (ratios && save ? "  (to plain+fsync)" : "") << "\n";
  }
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(u));
      out += buf;
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void print_json_operations(const Results& r, std::ostream& out) {
  out << "\"operations\":{";
  bool first_op = true;
  for (const auto& op : r.op_order) {
    out << (first_op ? "" : ",") << json_string(op) << ":{";
    first_op = false;
    bool first_t = true;
    for (const auto& [t, v] : r.samples.at(op)) {
      out << (first_t ? "" : ",") << json_string(t) << ":{\"median\":" << median(v) << ",\"samples\":[";
      first_t = false;
      for (std::size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
      out << "]}";
    }
    out << "}";
  }
  out << "}";
}

void print_json_goals(const std::vector<Goal>& goals, std::ostream& out) {
  out << "\"targets\":[";
  for (std::size_t i = 0; i < goals.size(); ++i) {
    const Goal& g = goals[i];
    out << (i ? "," : "") << "{\"what\":" << json_string(g.what) << ",\"value\":" << g.value
        << ",\"limit\":" << g.limit << ",\"pass\":"
        << (!g.pass   ? "null"
            : *g.pass ? "true"
                      : "false")
        << ",\"detail\":" << json_string(g.detail) << "}";
  }
  out << "]";
}

void print_json(const Config& cfg, const Results& r, const std::vector<Target>& targets, std::ostream& out) {
  out << "{\"entries\":" << cfg.entries << ",\"lib_sizes\":[";
  for (std::size_t i = 0; i < cfg.lib_sizes.size(); ++i) out << (i ? "," : "") << cfg.lib_sizes[i];
  out << "],\"list_entries\":" << cfg.list_entries << ",\"runs\":" << cfg.runs
      << ",\"sealfs_binary\":" << json_string(cfg.sealfs)
      << ",\"sealfs_options\":" << json_string(cfg.sealfs_options)
      << ",\"bindfs_options\":" << json_string(cfg.bindfs_options) << ",";
  print_json_operations(r, out);
  out << ",\"scalars\":{";
  bool first = true;
  for (const auto& [k, v] : r.scalars) {
    out << (first ? "" : ",") << json_string(k) << ":" << v;
    first = false;
  }
  out << "},\"notes\":[";
  for (std::size_t i = 0; i < r.notes.size(); ++i) out << (i ? "," : "") << json_string(r.notes[i]);
  out << "],";
  print_json_goals(goals(cfg, r, targets), out);
  out << "}\n";
}

void print_header(const Config& cfg, const Results& r, std::ostream& out) {
  out << r.sealfs_binary << "\nsealfs -o " << cfg.sealfs_options << "; bindfs -o " << cfg.bindfs_options
      << "\n"
      << cfg.entries << " entries (24 KiB + 8 KiB sources, 300 B params) with libraries of";
  for (std::size_t i = 0; i < cfg.lib_sizes.size(); ++i)
    out << (i ? " and " : " ") << size_label(cfg.lib_sizes[i]);
  out << "; listings of " << cfg.list_entries << " entries (each program run " << cfg.list_repeat
      << "x per sample); medians of " << cfg.runs << " runs, the columns alternated\n";
  for (const auto& n : r.notes) out << "note: " << n << "\n";
}

}  // namespace

std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string size_label(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string op_name(const std::string& what, std::size_t lib) { return what + " (" + size_label(lib) + ")"; }

void add_estimates(const Config& cfg, Results& r) {
  if (!r.sha256_gbps.empty()) r.scalars["sha256 in-process (GB/s)"] = median(r.sha256_gbps);
  for (std::size_t lib : cfg.lib_sizes) {
    const std::string save = op_name("save", lib);
    if (r.has(save, "floor") && r.has(save, "plain") && r.has(save, "plain+fsync")) {
      // fuse_floor does not fsync: what R1's fsyncs add on the plain directory,
      // added to the floor's save, is the least any durable FUSE layer can take.
      r.scalars[save + " floor with R1's fsyncs, estimated: floor + (plain+fsync - plain) (s)"] =
          r.med(save, "floor") + r.med(save, "plain+fsync") - r.med(save, "plain");
    }
  }
}

void report(const Config& cfg, const Results& r, const std::vector<Target>& targets, std::ostream& out) {
  if (cfg.json) return print_json(cfg, r, targets, out);
  print_header(cfg, r, out);
  const auto cols = measured_columns(r, targets);
  print_grid(r, cols, false, out);
  print_grid(r, cols, true, out);
  print_sealfs_ratios(r, targets, out);
  out << "\n";
  for (const auto& [k, v] : r.scalars) out << k << ": " << v << "\n";
  print_goals(goals(cfg, r, targets), out);
}

}  // namespace sealfs::bench
