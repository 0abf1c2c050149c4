// What each directory's previous listing showed, so that a listing can say
// whether it differs (Listing::epoch, Listing::settled). The daemon lets the
// kernel keep a copy of a listing (FOPEN_CACHE_DIR) and drops that copy when
// the listing changes: this is how it knows.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/store/store.hpp"

namespace sealfs {

class ListingMemory {
 public:
  // How long a listing must stay the same after a change to be settled.
  static constexpr std::chrono::seconds kSettle{1};

  // max_dirs bounds the directories remembered (each costs its items): a
  // directory forgotten gets a new epoch at its next listing.
  explicit ListingMemory(std::size_t max_dirs = 1u << 14) : max_dirs_(max_dirs == 0 ? 1 : max_dirs) {}

  // Records listing.items as what directory (dev, ino) shows now and sets
  // listing.epoch and listing.settled. A directory seen for the first time
  // is settled: there is no earlier listing that a copy could hold.
  void note(dev_t dev, ino_t ino, Listing& listing);

 private:
  struct Seen {
    std::vector<DirItem> items;
    std::uint64_t epoch = 0;
    std::chrono::steady_clock::time_point changed{};  // when the items last differed
  };
  std::size_t max_dirs_;
  std::mutex mu_;
  std::uint64_t last_epoch_ = 0;  // guarded by mu_
  std::map<std::pair<dev_t, ino_t>, Seen> seen_;
};

}  // namespace sealfs
