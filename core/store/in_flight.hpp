// Files a rename is moving into a directory entry right now. Publisher::
// amend_file renames a file in unlisted, then lists it; in between a
// judgement of it (a lookup, a listing, R5's look at a rename's destination)
// found it unlisted and hidden, and a rename onto its directory then moved
// the directory to quarantine as "holding only hidden objects" (fsmix
// multi-entry seed 3 under ASan). Shown as in progress for that moment
// (Policy::in_progress), as a file being written is.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace sealfs {

class FilesInFlight {
 public:
  using Key = std::pair<dev_t, ino_t>;

  // In flight for the life of the guard.
  class Guard {
   public:
    Guard(FilesInFlight& owner, const struct stat& st) : owner_(&owner), key_{st.st_dev, st.st_ino} {
      std::lock_guard lock(owner_->mu_);
      ++owner_->files_[key_];
      owner_->count_.fetch_add(1, std::memory_order_release);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() {
      std::lock_guard lock(owner_->mu_);
      auto it = owner_->files_.find(key_);
      if (it != owner_->files_.end() && --it->second == 0) owner_->files_.erase(it);
      owner_->count_.fetch_sub(1, std::memory_order_release);
    }

   private:
    FilesInFlight* owner_;
    Key key_;
  };

  // Every judgement of a file asks (Policy::in_progress): no lock while
  // nothing is in flight, as PendingSeals::holds.
  bool holds(const struct stat& st) const {
    if (count_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard lock(mu_);
    return files_.count({st.st_dev, st.st_ino}) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::map<Key, unsigned> files_;      // under mu_: how many guards hold each
  std::atomic<std::size_t> count_{0};  // guards alive
};

}  // namespace sealfs
