// A MetricsSnapshot in Prometheus' text exposition format (version 0.0.4),
// the one renderer that `sealfs status --format=prometheus` and the daemon's
// metrics_file use, so that both print the same lines.
//
// Every family has HELP and TYPE lines and the prefix sealfs_; counters end
// in _total, the publish latency is a histogram in seconds, hidden and
// quarantined objects carry a reason label (HideReason's label values, every
// one listed, zeros included, so that rates exist from the first scrape).
// Every sample carries mountpoint="<path>" unless the path given is empty:
// node_exporter's textfile collector merges the files of several mounts, and
// their samples must not collide.
#pragma once

#include <string>
#include <string_view>

#include "core/base/metrics.hpp"

namespace sealfs {

std::string prometheus_text(const MetricsSnapshot& metrics, std::string_view mountpoint);

// A label value as the text format writes it: backslash, double quote and
// line feed escaped (\\, \", \n); every other byte as it is.
std::string escape_label_value(std::string_view value);

// Seconds from an integer count of nanoseconds or microseconds, exactly, in
// the shortest decimal form: 2500 µs → "0.0025", 1000000 µs → "1".
std::string seconds_from_ns(std::uint64_t ns);
std::string seconds_from_us(std::uint64_t us);

}  // namespace sealfs
