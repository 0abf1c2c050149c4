#include "core/store/listing.hpp"

#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/base/digest.hpp"
#include "core/store/store.hpp"

namespace sealfs {
namespace {

// Names hold any byte but '/' and NUL, so a NUL after each keeps the items apart.
Sha256 digest_of(const std::vector<DirItem>& items) {
  Sha256Hasher h;
  for (const auto& item : items) {
    h.update(item.name);
    h.update(std::string_view("\0", 1));
    h.update(std::as_bytes(std::span(&item.ino, 1)));
    h.update(std::as_bytes(std::span(&item.type, 1)));
  }
  return h.finish();
}

}  // namespace

bool ListingMemory::KeptBasis::holds(const ListingBasis& now) const {
  return dir == now.dir && rel == now.rel && entry_root == now.entry_root && now.entry &&
         entry.lock() == now.entry;
}

void ListingMemory::settle(const Seen& seen, Listing& listing) const {
  listing.epoch = seen.epoch;
  listing.settled = std::chrono::steady_clock::now() - seen.changed >= kSettle;
}

void ListingMemory::note(dev_t dev, ino_t ino, Listing& listing, std::optional<ListingBasis> basis) {
  const Sha256 digest = digest_of(listing.items);
  std::lock_guard lock(mu_);
  const std::pair<dev_t, ino_t> key{dev, ino};
  auto it = seen_.find(key);
  if (it == seen_.end()) {
    if (seen_.size() >= max_dirs_) seen_.erase(seen_.begin());  // bounded; any victim will do
    it = seen_.emplace(key, Seen{digest, ++last_epoch_, {}, std::nullopt, {}}).first;
  } else if (it->second.digest != digest) {
    it->second.digest = digest;
    it->second.epoch = ++last_epoch_;
    it->second.changed = std::chrono::steady_clock::now();
  }
  Seen& seen = it->second;
  seen.basis.reset();
  seen.items.clear();
  if (basis) {
    seen.basis = KeptBasis{basis->dir, std::move(basis->rel), basis->entry, basis->entry_root};
    seen.items = listing.items;
  }
  settle(seen, listing);
}

bool ListingMemory::repeat(dev_t dev, ino_t ino, const ListingBasis& now, Listing& listing) {
  if (now.dir.too_recent()) return false;
  std::lock_guard lock(mu_);
  auto it = seen_.find({dev, ino});
  if (it == seen_.end() || !it->second.basis || !it->second.basis->holds(now)) return false;
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
