// Live counters, shared by the store and the daemon; read by `sealfs status`
// and the daemon's metrics_file. Metrics is what the store counts into
// (atomics, relaxed); MetricsSnapshot is one reading of it plus the daemon's
// gauges, in the one data form that travels: JSON (to_json/from_json, the
// status xattr). core/base/metrics_text.hpp renders a snapshot for
// Prometheus.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"

namespace sealfs {

// One counter per HideReason.
class CountsByReason {
 public:
  void add(HideReason r) { counts_[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t get(HideReason r) const {
    return counts_[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<std::uint64_t>, kHideReasons> counts_{};
};

// A histogram of durations with fixed buckets (Prometheus' "le" bounds),
// lock-free: one atomic per bucket and one for the sum.
class LatencyHistogram {
 public:
  // Upper bounds in microseconds, from 0.5 ms to 10 s: a publish without
  // fsync takes well under a millisecond, one that fsyncs megabytes on a
  // busy disk seconds. Past the last: the +Inf bucket.
  static constexpr std::array<std::uint64_t, 14> kBoundsUs = {500,     1000,    2500,    5000,    10000,
                                                              25000,   50000,   100000,  250000,  500000,
                                                              1000000, 2500000, 5000000, 10000000};

  void observe(std::chrono::nanoseconds took);
  // Counts per bucket (not cumulative; the last is +Inf) and the sum.
  std::vector<std::uint64_t> counts() const;
  std::uint64_t sum_ns() const { return sum_ns_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, kBoundsUs.size() + 1> buckets_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

// What the daemon adds to the store's counters: values of now, not totals.
struct Gauges {
  std::uint64_t in_progress = 0;     // files open for writing through the mount, until sealed (R4)
  std::uint64_t open_handles = 0;    // open file and directory handles
  std::uint64_t parked_handles = 0;  // handles holding no descriptor until their next use
  std::uint64_t inodes = 0;          // objects the kernel holds (a descriptor each while used)
  std::uint64_t inode_files = 0;     // of inodes, those not directories: what the bound counts
  std::uint64_t inode_bound = 0;     // the most files kept; past it the kernel is asked to forget
  std::uint64_t descriptors = 0;     // the daemon's open descriptors
  std::uint64_t descriptor_limit = 0;
};

// A histogram as read: bounds (µs), counts per bucket (one more than bounds:
// the last is +Inf; not cumulative) and the sum of the observations.
struct HistogramSnapshot {
  std::vector<std::uint64_t> bounds_us;
  std::vector<std::uint64_t> counts;
  std::uint64_t sum_ns = 0;
  std::uint64_t count() const;
  bool operator==(const HistogramSnapshot&) const = default;
};

// One reading of the counters and gauges. Each value is exact; the set is not
// taken at one instant (nor needs to be).
struct MetricsSnapshot {
  std::uint64_t abandoned = 0;
  std::uint64_t bytes_hashed = 0;
  std::uint64_t bytes_pushed = 0;
  std::uint64_t files_hashed = 0;
  std::uint64_t hidden = 0;
  std::uint64_t hits = 0;
  std::uint64_t lookups = 0;
  std::uint64_t judgements = 0;
  std::uint64_t misses = 0;
  std::uint64_t passthrough_opens = 0;
  std::uint64_t publishes = 0;
  std::uint64_t quarantined = 0;
  std::uint64_t reads = 0;
  std::uint64_t rejected = 0;
  std::uint64_t seals = 0;
  std::uint64_t unseen_writes_refused = 0;
  std::uint64_t in_progress = 0;       // gauge
  std::uint64_t open_handles = 0;      // gauge
  std::uint64_t parked_handles = 0;    // gauge
  std::uint64_t inodes = 0;            // gauge
  std::uint64_t inode_files = 0;       // gauge
  std::uint64_t inode_bound = 0;       // gauge
  std::uint64_t descriptors = 0;       // gauge
  std::uint64_t descriptor_limit = 0;  // gauge
  std::array<std::uint64_t, kHideReasons> hidden_by{};
  std::array<std::uint64_t, kHideReasons> quarantined_by{};
  HistogramSnapshot publish_seconds;

  // {"abandoned":…,…} one line, keys sorted, unsigned integers only: the
  // counters as flat keys (the names `sealfs status` always had), the gauges
  // too, "hidden_by_reason" and "quarantined_by_reason" as objects of label
  // → count, "publish_seconds" as {"bounds_us":[…],"counts":[…],"sum_ns":…}.
  std::string to_json() const;
  // The inverse, from a daemon of this or an older version: keys it does not
  // know are ignored, keys it lacks read as 0 (an older daemon's histogram:
  // none). EBADMSG when the text is not such an object.
  static Result<MetricsSnapshot> from_json(std::string_view text);
};

struct Metrics {
  std::atomic<std::uint64_t> lookups{0};
  // Names judged against the rules (Judge::judge): a request that judges a
  // name more than once shows here (issue 26: one judgement per name).
  std::atomic<std::uint64_t> judgements{0};
  std::atomic<std::uint64_t> hits{0};    // lookups answered with a verified sealed object
  std::atomic<std::uint64_t> misses{0};  // lookups answered ENOENT: B holds no such name
  // Lookups answered ENOENT because of R2/R3/R4/R7, in total and by reason
  // (count_hidden keeps both).
  std::atomic<std::uint64_t> hidden{0};
  std::atomic<std::uint64_t> quarantined{0};  // objects moved to quarantine (count_quarantined)
  std::atomic<std::uint64_t> publishes{0};    // successful R1/R10 publishes
  std::atomic<std::uint64_t> rejected{0};     // publishes and seals refused by a validator (EBADMSG)
  std::atomic<std::uint64_t> seals{0};        // R4 seals at last close
  std::atomic<std::uint64_t> abandoned{0};    // R4 abandoned writes
  // R4: in-place writes refused because the daemon could not see the writer
  // (another pid namespace, or a /proc it may not read): it could not tell
  // the writer's death from its close.
  std::atomic<std::uint64_t> unseen_writes_refused{0};
  std::atomic<std::uint64_t> bytes_hashed{0};
  std::atomic<std::uint64_t> files_hashed{0};
  std::atomic<std::uint64_t> reads{0};  // READ requests that reached the daemon
  // Opens answered with a backing file (FUSE passthrough, issue 25): their
  // reads go to B's file in the kernel and never reach the daemon.
  std::atomic<std::uint64_t> passthrough_opens{0};
  std::atomic<std::uint64_t> bytes_pushed{0};  // verified bytes put into the kernel's page cache
  CountsByReason hidden_by;
  CountsByReason quarantined_by;
  LatencyHistogram publish_seconds;  // successful publishes, from judging the source to the last fsync

  void count_hidden(HideReason why) {
    hidden.fetch_add(1, std::memory_order_relaxed);
    hidden_by.add(why);
  }
  void count_quarantined(HideReason why) {
    quarantined.fetch_add(1, std::memory_order_relaxed);
    quarantined_by.add(why);
  }

  MetricsSnapshot snapshot(const Gauges& gauges = {}) const;
  std::string to_json() const { return snapshot().to_json(); }
};

}  // namespace sealfs
