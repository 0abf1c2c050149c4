#include "core/base/metrics.hpp"

#include <string_view>
#include <utility>

namespace sealfs {

std::string Metrics::to_json() const {
  // Keys in byte order, written by hand: every key is a fixed identifier and
  // every value an unsigned integer, so no escaping can be needed. Relaxed
  // loads: each counter is exact, the set is not a snapshot (nor needs to be).
  const std::pair<std::string_view, const std::atomic<std::uint64_t>*> counters[] = {
      {"abandoned", &abandoned},
      {"bytes_hashed", &bytes_hashed},
      {"bytes_pushed", &bytes_pushed},
      {"files_hashed", &files_hashed},
      {"hidden", &hidden},
      {"hits", &hits},
      {"lookups", &lookups},
      {"publishes", &publishes},
      {"quarantined", &quarantined},
      {"reads", &reads},
      {"rejected", &rejected},
      {"seals", &seals},
  };
  std::string out = "{";
  for (const auto& [key, counter] : counters) {
    if (out.size() > 1) out += ',';
    out += '"';
    out += key;
    out += "\":";
    out += std::to_string(counter->load(std::memory_order_relaxed));
  }
  out += '}';
  return out;
}

}  // namespace sealfs
