// Quarantine (R2, R5): damaged or unwanted objects are moved, not deleted,
// into B/.sealfs/quarantine/<UTC time>-<pid>-<seq>/ beside a reason.json, and
// the oldest slots are removed once the configured bounds are exceeded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/metrics.hpp"
#include "core/result.hpp"

namespace sealfs {

class Quarantine {
 public:
  // root_fd: the backing root (must outlive this object). B/.sealfs/quarantine
  // must exist (Store::open creates it).
  Quarantine(int root_fd, std::uint64_t max_objects, std::uint64_t max_bytes, Metrics& metrics);

  struct Request {
    int parent_fd = -1;      // directory holding the object
    std::string name;        // the object's name there
    dev_t dev = 0;           // what was judged invalid: moved only if the name still holds it
    ino_t ino = 0;
    std::string rel;         // its path below the root, for reason.json and the log
    std::string reason;
    std::vector<std::string> companions;  // moved along when present (a file entry's sidecar)
  };

  // true: moved (counted, logged once); false: the name no longer holds the
  // judged object (someone replaced or removed it meanwhile), nothing done.
  Result<bool> move(const Request& request);

  // Slots currently held (for tests and status).
  Result<std::vector<std::string>> slots() const;

 private:
  Status enforce_bounds(const std::string& keep);

  int root_fd_;
  std::uint64_t max_objects_;
  std::uint64_t max_bytes_;
  Metrics& metrics_;
  // Serialises slot creation, moves and bound enforcement, so two threads
  // never evict the same slot or count a half-moved one. Hashing never
  // happens under it.
  mutable std::mutex mu_;
  std::uint64_t seq_ = 0;
};

}  // namespace sealfs
