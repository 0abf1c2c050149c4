#include "core/store/listing.hpp"

namespace sealfs {

void ListingMemory::settle(const Seen& seen, Listing& listing) const {
  listing.epoch = seen.epoch;
  listing.settled = std::chrono::steady_clock::now() - seen.changed >= kSettle;
}

void ListingMemory::note(dev_t dev, ino_t ino, Listing& listing, std::optional<ListingBasis> basis) {
  std::lock_guard lock(mu_);
  const std::pair<dev_t, ino_t> key{dev, ino};
  auto it = seen_.find(key);
  if (it == seen_.end()) {
    if (seen_.size() >= max_dirs_) seen_.erase(seen_.begin());  // bounded; any victim will do
    it = seen_.emplace(key, Seen{listing.items, ++last_epoch_, {}, std::move(basis)}).first;
    settle(it->second, listing);
    return;
  }
  Seen& seen = it->second;
  if (seen.items != listing.items) {
    seen.items = listing.items;
    seen.epoch = ++last_epoch_;
    seen.changed = std::chrono::steady_clock::now();
  }
  seen.basis = std::move(basis);
  settle(seen, listing);
}

bool ListingMemory::repeat(dev_t dev, ino_t ino, const ListingBasis& now, Listing& listing) {
  if (now.dir.too_recent()) return false;
  std::lock_guard lock(mu_);
  auto it = seen_.find({dev, ino});
  if (it == seen_.end() || !it->second.basis || !it->second.basis->same_as(now)) return false;
  listing.items = it->second.items;
  settle(it->second, listing);
  return true;
}

std::optional<std::string> ListingMemory::entry_root_at(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = seen_.find({dev, ino});
  if (it == seen_.end() || !it->second.basis || !it->second.basis->entry_root) return std::nullopt;
  return it->second.basis->rel;
}

}  // namespace sealfs
