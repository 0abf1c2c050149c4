#include "core/store/listing.hpp"

namespace sealfs {

void ListingMemory::note(dev_t dev, ino_t ino, Listing& listing) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  const std::pair<dev_t, ino_t> key{dev, ino};
  auto it = seen_.find(key);
  if (it == seen_.end()) {
    if (seen_.size() >= max_dirs_) seen_.erase(seen_.begin());  // bounded; any victim will do
    it = seen_.emplace(key, Seen{listing.items, ++last_epoch_, {}}).first;
    listing.epoch = it->second.epoch;
    listing.settled = true;
    return;
  }
  Seen& seen = it->second;
  if (seen.items != listing.items) {
    seen.items = listing.items;
    seen.epoch = ++last_epoch_;
    seen.changed = now;
  }
  listing.epoch = seen.epoch;
  listing.settled = now - seen.changed >= kSettle;
}

}  // namespace sealfs
