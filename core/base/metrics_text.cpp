#include "core/base/metrics_text.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/metrics.hpp"

namespace sealfs {
namespace {

// A plain counter or gauge of the snapshot, with its Prometheus name and help.
struct Family {
  std::string_view name;
  std::string_view type;
  std::string_view help;
  std::uint64_t MetricsSnapshot::*field;
};

// In the order a reader would look for them: what lookups found, what moved
// to quarantine, what was published, what was hashed, the gauges.
constexpr Family kBeforeReasons[] = {
    {"sealfs_lookups_total", "counter", "Lookups of a name through the mount.", &MetricsSnapshot::lookups},
    {"sealfs_hits_total", "counter", "Lookups answered with a verified sealed object.",
     &MetricsSnapshot::hits},
    {"sealfs_misses_total", "counter",
     "Lookups answered ENOENT because the backing store holds no such name.", &MetricsSnapshot::misses},
    {"sealfs_judgements_total", "counter",
     "Names judged against the visibility rules, by lookups, listings, opens and publishes.",
     &MetricsSnapshot::judgements},
};
constexpr Family kAfterReasons[] = {
    {"sealfs_publishes_total", "counter", "Successful publishes (R1 rename, R10 link).",
     &MetricsSnapshot::publishes},
    {"sealfs_validator_rejections_total", "counter",
     "Publishes and seals refused with EBADMSG by a validator or a symlink rule.",
     &MetricsSnapshot::rejected},
    {"sealfs_seals_total", "counter", "Files written in place and sealed at their last close (R4).",
     &MetricsSnapshot::seals},
    {"sealfs_abandoned_writes_total", "counter", "Files written in place whose writer died of a signal (R4).",
     &MetricsSnapshot::abandoned},
    {"sealfs_unseen_writes_refused_total", "counter",
     "In-place writes refused (EPERM) because the daemon cannot see the writer's process (R4).",
     &MetricsSnapshot::unseen_writes_refused},
    {"sealfs_hashed_bytes_total", "counter", "Bytes hashed with SHA-256.", &MetricsSnapshot::bytes_hashed},
    {"sealfs_hashed_files_total", "counter", "Files hashed with SHA-256.", &MetricsSnapshot::files_hashed},
    {"sealfs_reads_total", "counter", "READ requests that reached the daemon.", &MetricsSnapshot::reads},
    {"sealfs_passthrough_opens_total", "counter",
     "Opens answered with a backing file (FUSE passthrough): their reads never reach the daemon.",
     &MetricsSnapshot::passthrough_opens},
    {"sealfs_pushed_bytes_total", "counter", "Verified bytes put into the kernel's page cache.",
     &MetricsSnapshot::bytes_pushed},
    {"sealfs_in_progress_files", "gauge", "Files open for writing through the mount, until sealed (R4).",
     &MetricsSnapshot::in_progress},
    {"sealfs_open_handles", "gauge", "Open file and directory handles of the mount.",
     &MetricsSnapshot::open_handles},
    {"sealfs_parked_handles", "gauge",
     "Handles that gave their descriptors back near the limit, opened again at their next use.",
     &MetricsSnapshot::parked_handles},
    {"sealfs_inodes", "gauge",
     "Inodes the kernel holds, each keeping one descriptor in the daemon while used.",
     &MetricsSnapshot::inodes},
    {"sealfs_inode_files", "gauge", "Of the inodes, those not directories: what the inode bound counts.",
     &MetricsSnapshot::inode_files},
    {"sealfs_inode_bound", "gauge",
     "The most files the daemon keeps; past it the kernel is asked to forget the least used.",
     &MetricsSnapshot::inode_bound},
    {"sealfs_descriptors", "gauge", "Descriptors the daemon has open.", &MetricsSnapshot::descriptors},
    {"sealfs_descriptor_limit", "gauge", "The daemon's descriptor limit (soft RLIMIT_NOFILE).",
     &MetricsSnapshot::descriptor_limit},
};

// Samples of one mount: its labels, and those of each sample after them.
class Writer {
 public:
  explicit Writer(std::string_view mountpoint)
      : mount_label_(mountpoint.empty() ? "" : "mountpoint=\"" + escape_label_value(mountpoint) + "\"") {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;  // constants of this file: no backslash, no line feed
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // extra: one more label, already rendered (key="value"), or empty.
  void sample(std::string_view name, std::string_view extra, std::string_view value) {
    out_ += name;
    if (!mount_label_.empty() || !extra.empty()) {
      out_ += '{';
      out_ += mount_label_;
      if (!mount_label_.empty() && !extra.empty()) out_ += ',';
      out_ += extra;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }

  void family(const Family& f, const MetricsSnapshot& m) {
    header(f.name, f.type, f.help);
    sample(f.name, "", std::to_string(m.*f.field));
  }

  void by_reason(std::string_view name, std::string_view help,
                 const std::array<std::uint64_t, kHideReasons>& counts) {
    header(name, "counter", help);
    for (std::size_t i = 0; i < kHideReasons; ++i)
      sample(name, "reason=\"" + std::string(label_of(static_cast<HideReason>(i))) + "\"",
             std::to_string(counts[i]));
  }

  // Buckets are cumulative in the text format; +Inf equals _count.
  void histogram(std::string_view name, std::string_view help, const HistogramSnapshot& h) {
    header(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      running += h.counts[i];
      const std::string le = i < h.bounds_us.size() ? seconds_from_us(h.bounds_us[i]) : "+Inf";
      sample(bucket, "le=\"" + le + "\"", std::to_string(running));
    }
    if (h.counts.empty()) sample(bucket, "le=\"+Inf\"", "0");  // a daemon without the histogram
    sample(std::string(name) + "_sum", "", seconds_from_ns(h.sum_ns));
    sample(std::string(name) + "_count", "", std::to_string(running));
  }

  std::string take() { return std::move(out_); }

 private:
  std::string mount_label_;
  std::string out_;
};

// integer / 10^digits as the shortest exact decimal.
std::string fixed_point(std::uint64_t value, int digits) {
  std::uint64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  std::string out = std::to_string(value / scale);
  std::string frac = std::to_string(value % scale);
  frac.insert(0, static_cast<std::size_t>(digits) - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  if (!frac.empty()) out += "." + frac;
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string seconds_from_ns(std::uint64_t ns) { return fixed_point(ns, 9); }
std::string seconds_from_us(std::uint64_t us) { return fixed_point(us, 6); }

std::string prometheus_text(const MetricsSnapshot& metrics, std::string_view mountpoint) {
  Writer w(mountpoint);
  for (const auto& f : kBeforeReasons) w.family(f, metrics);
  w.by_reason("sealfs_hidden_total",
              "Lookups answered ENOENT because the object is hidden (R2, R3, R4, R7), by reason.",
              metrics.hidden_by);
  w.by_reason("sealfs_quarantined_total", "Objects moved to quarantine, by reason.", metrics.quarantined_by);
  w.histogram("sealfs_publish_duration_seconds",
              "Time a successful publish took, from judging its source to its last fsync.",
              metrics.publish_seconds);
  for (const auto& f : kAfterReasons) w.family(f, metrics);
  return w.take();
}

}  // namespace sealfs
