// Live counters, shared by the store and the daemon; read by `sealfs status`.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace sealfs {

struct Metrics {
  std::atomic<std::uint64_t> lookups{0};
  std::atomic<std::uint64_t> hits{0};         // lookups answered with a verified sealed object
  std::atomic<std::uint64_t> hidden{0};       // lookups answered ENOENT because of R2/R3/R4/R7
  std::atomic<std::uint64_t> quarantined{0};  // objects moved to quarantine
  std::atomic<std::uint64_t> publishes{0};    // successful R1/R10 publishes
  std::atomic<std::uint64_t> rejected{0};     // publishes refused by a validator (EBADMSG)
  std::atomic<std::uint64_t> seals{0};        // R4 seals at last close
  std::atomic<std::uint64_t> abandoned{0};    // R4 abandoned writes
  std::atomic<std::uint64_t> bytes_hashed{0};
  std::atomic<std::uint64_t> files_hashed{0};
  std::atomic<std::uint64_t> reads{0};         // READ requests that reached the daemon
  std::atomic<std::uint64_t> bytes_pushed{0};  // verified bytes put into the kernel's page cache

  std::string to_json() const;  // {"hits":…,…} one line, keys sorted
};

}  // namespace sealfs
