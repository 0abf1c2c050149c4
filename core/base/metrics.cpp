#include "core/base/metrics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/json_dom.hpp"
#include "core/base/result.hpp"

namespace sealfs {
namespace {

// The flat keys of the JSON form: every counter and gauge.
using Field = std::uint64_t MetricsSnapshot::*;
constexpr std::pair<std::string_view, Field> kScalars[] = {
    {"abandoned", &MetricsSnapshot::abandoned},
    {"bytes_hashed", &MetricsSnapshot::bytes_hashed},
    {"bytes_pushed", &MetricsSnapshot::bytes_pushed},
    {"descriptor_limit", &MetricsSnapshot::descriptor_limit},
    {"descriptors", &MetricsSnapshot::descriptors},
    {"files_hashed", &MetricsSnapshot::files_hashed},
    {"hidden", &MetricsSnapshot::hidden},
    {"hits", &MetricsSnapshot::hits},
    {"in_progress", &MetricsSnapshot::in_progress},
    {"inode_bound", &MetricsSnapshot::inode_bound},
    {"inode_files", &MetricsSnapshot::inode_files},
    {"inodes", &MetricsSnapshot::inodes},
    {"judgements", &MetricsSnapshot::judgements},
    {"lookups", &MetricsSnapshot::lookups},
    {"misses", &MetricsSnapshot::misses},
    {"open_handles", &MetricsSnapshot::open_handles},
    {"parked_handles", &MetricsSnapshot::parked_handles},
    {"passthrough_opens", &MetricsSnapshot::passthrough_opens},
    {"publishes", &MetricsSnapshot::publishes},
    {"quarantined", &MetricsSnapshot::quarantined},
    {"reads", &MetricsSnapshot::reads},
    {"rejected", &MetricsSnapshot::rejected},
    {"seals", &MetricsSnapshot::seals},
    {"unseen_writes_refused", &MetricsSnapshot::unseen_writes_refused},
};

constexpr std::string_view kHiddenBy = "hidden_by_reason";
constexpr std::string_view kQuarantinedBy = "quarantined_by_reason";
constexpr std::string_view kPublishSeconds = "publish_seconds";

// Every key is a fixed identifier and every value an unsigned integer, so
// the JSON is written by hand and needs no escaping.
std::string json_array(const std::vector<std::uint64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i == 0 ? "" : ",") + std::to_string(values[i]);
  return out + "]";
}

std::string json_object(const std::map<std::string_view, std::string>& members) {
  std::string out = "{";
  for (const auto& [key, value] : members) {
    if (out.size() > 1) out += ',';
    out += '"';
    out += key;
    out += "\":";
    out += value;
  }
  return out + "}";
}

std::string json_by_reason(const std::array<std::uint64_t, kHideReasons>& counts) {
  std::map<std::string_view, std::string> members;
  for (std::size_t i = 0; i < kHideReasons; ++i) members[kHideReasonLabels[i]] = std::to_string(counts[i]);
  return json_object(members);
}

constexpr json::ErrorStyle kStatusError{EBADMSG, "status"};

Result<std::uint64_t> unsigned_of(const rapidjson::Value& v, std::string_view what) {
  if (!v.IsUint64()) return kStatusError(std::string(what) + " is not an unsigned integer");
  return v.GetUint64();
}

Status read_by_reason(const rapidjson::Value& v, std::string_view what,
                      std::array<std::uint64_t, kHideReasons>& out) {
  if (!v.IsObject()) return kStatusError(std::string(what) + " is not an object");
  for (const auto& m : v.GetObject()) {
    HideReason r{};
    if (!reason_from_label(json::string_of(m.name), r)) continue;  // a newer daemon's reason
    auto n = unsigned_of(m.value, what);
    if (!n) return n.error();
    out[static_cast<std::size_t>(r)] = *n;
  }
  return {};
}

Result<std::vector<std::uint64_t>> read_array(const rapidjson::Value& v, std::string_view what) {
  if (!v.IsArray()) return kStatusError(std::string(what) + " is not an array");
  std::vector<std::uint64_t> out;
  for (const auto& item : v.GetArray()) {
    auto n = unsigned_of(item, what);
    if (!n) return n.error();
    out.push_back(*n);
  }
  return out;
}

Result<HistogramSnapshot> read_histogram(const rapidjson::Value& v) {
  if (!v.IsObject() || !v.HasMember("bounds_us") || !v.HasMember("counts") || !v.HasMember("sum_ns"))
    return kStatusError("publish_seconds needs bounds_us, counts and sum_ns");
  HistogramSnapshot h;
  auto bounds = read_array(v["bounds_us"], "publish_seconds.bounds_us");
  if (!bounds) return bounds.error();
  auto counts = read_array(v["counts"], "publish_seconds.counts");
  if (!counts) return counts.error();
  auto sum = unsigned_of(v["sum_ns"], "publish_seconds.sum_ns");
  if (!sum) return sum.error();
  if (counts->size() != bounds->size() + 1)
    return kStatusError("publish_seconds: one count per bucket and +Inf");
  for (std::size_t i = 1; i < bounds->size(); ++i)
    if ((*bounds)[i] <= (*bounds)[i - 1]) return kStatusError("publish_seconds: bounds not increasing");
  h.bounds_us = std::move(*bounds);
  h.counts = std::move(*counts);
  h.sum_ns = *sum;
  return h;
}

}  // namespace

void LatencyHistogram::observe(std::chrono::nanoseconds took) {
  const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(took.count(), 0));
  std::size_t i = 0;
  while (i < kBoundsUs.size() && ns > kBoundsUs[i] * 1000) ++i;  // le: the bound itself belongs to it
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

std::vector<std::uint64_t> LatencyHistogram::counts() const {
  std::vector<std::uint64_t> out;
  out.reserve(buckets_.size());
  for (const auto& b : buckets_) out.push_back(b.load(std::memory_order_relaxed));
  return out;
}

std::uint64_t HistogramSnapshot::count() const {
  return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
}

MetricsSnapshot Metrics::snapshot(const Gauges& gauges) const {
  // Relaxed loads: each counter is exact, the set is not a snapshot (nor needs to be).
  MetricsSnapshot s;
  s.abandoned = abandoned.load(std::memory_order_relaxed);
  s.bytes_hashed = bytes_hashed.load(std::memory_order_relaxed);
  s.bytes_pushed = bytes_pushed.load(std::memory_order_relaxed);
  s.files_hashed = files_hashed.load(std::memory_order_relaxed);
  s.hidden = hidden.load(std::memory_order_relaxed);
  s.hits = hits.load(std::memory_order_relaxed);
  s.lookups = lookups.load(std::memory_order_relaxed);
  s.judgements = judgements.load(std::memory_order_relaxed);
  s.misses = misses.load(std::memory_order_relaxed);
  s.passthrough_opens = passthrough_opens.load(std::memory_order_relaxed);
  s.publishes = publishes.load(std::memory_order_relaxed);
  s.quarantined = quarantined.load(std::memory_order_relaxed);
  s.reads = reads.load(std::memory_order_relaxed);
  s.rejected = rejected.load(std::memory_order_relaxed);
  s.seals = seals.load(std::memory_order_relaxed);
  s.unseen_writes_refused = unseen_writes_refused.load(std::memory_order_relaxed);
  s.in_progress = gauges.in_progress;
  s.open_handles = gauges.open_handles;
  s.parked_handles = gauges.parked_handles;
  s.inodes = gauges.inodes;
  s.inode_files = gauges.inode_files;
  s.inode_bound = gauges.inode_bound;
  s.descriptors = gauges.descriptors;
  s.descriptor_limit = gauges.descriptor_limit;
  for (std::size_t i = 0; i < kHideReasons; ++i) {
    s.hidden_by[i] = hidden_by.get(static_cast<HideReason>(i));
    s.quarantined_by[i] = quarantined_by.get(static_cast<HideReason>(i));
  }
  s.publish_seconds.bounds_us.assign(LatencyHistogram::kBoundsUs.begin(), LatencyHistogram::kBoundsUs.end());
  s.publish_seconds.counts = publish_seconds.counts();
  s.publish_seconds.sum_ns = publish_seconds.sum_ns();
  return s;
}

std::string MetricsSnapshot::to_json() const {
  std::map<std::string_view, std::string> members;  // sorted by key, bytewise
  for (const auto& [key, field] : kScalars) members[key] = std::to_string(this->*field);
  members[kHiddenBy] = json_by_reason(hidden_by);
  members[kQuarantinedBy] = json_by_reason(quarantined_by);
  members[kPublishSeconds] = json_object({{"bounds_us", json_array(publish_seconds.bounds_us)},
                                          {"counts", json_array(publish_seconds.counts)},
                                          {"sum_ns", std::to_string(publish_seconds.sum_ns)}});
  return json_object(members);
}

Result<MetricsSnapshot> MetricsSnapshot::from_json(std::string_view text) {
  auto doc = json::parse_document(text, 8, kStatusError);
  if (!doc) return doc.error();
  if (!doc->IsObject()) return kStatusError("not a JSON object");
  // Const iterators: C++20 finds RapidJSON's non-const iterator == ambiguous.
  const rapidjson::Value& root = *doc;
  MetricsSnapshot s;
  for (const auto& [key, field] : kScalars) {
    auto it = root.FindMember(rapidjson::StringRef(key.data(), key.size()));
    if (it == root.MemberEnd()) continue;
    auto n = unsigned_of(it->value, key);
    if (!n) return n.error();
    s.*field = *n;
  }
  for (auto [key, out] : {std::pair{kHiddenBy, &s.hidden_by}, std::pair{kQuarantinedBy, &s.quarantined_by}}) {
    auto it = root.FindMember(rapidjson::StringRef(key.data(), key.size()));
    if (it == root.MemberEnd()) continue;
    if (Status r = read_by_reason(it->value, key, *out); !r) return r.error();
  }
  auto it = root.FindMember(rapidjson::StringRef(kPublishSeconds.data(), kPublishSeconds.size()));
  if (it != root.MemberEnd()) {
    auto h = read_histogram(it->value);
    if (!h) return h.error();
    s.publish_seconds = std::move(*h);
  }
  return s;
}

}  // namespace sealfs
