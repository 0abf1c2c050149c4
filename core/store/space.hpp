// A full B (issue 23 point 4, R4: "a full B can always be freed through M").
//
// Out of space (ENOSPC, EDQUOT) is a transient error, never evidence of
// damage and never a writer's failure that a plain directory would not give:
//  - Before an operation of the store (or a write through M) answers
//    ENOSPC/EDQUOT, the quarantine gives its space back, oldest slot first,
//    and the operation is tried again (with_room, Store::make_room).
//  - A file whose seal at its last close fails for want of space stays
//    visible, as while it was open (R4's "in progress"), and removable
//    through M; it is sealed when space comes back: at the next seal, unlink
//    or rmdir through M (PendingSeals). A pending seal lives in memory: a
//    file still pending at unmount is unsealed in B, hidden as foreign
//    content (R3) after a remount, and moved aside by R5 when its name is
//    needed.
//  - Moving a hidden object aside needs no free space: the quarantine takes
//    a slot directory made in advance (quarantine.hpp, "Spare slots").
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sealfs {

inline bool out_of_space(int code) { return code == ENOSPC || code == EDQUOT; }

// Files closed through M whose seal failed for want of space: shown as in
// progress (Policy::in_progress) while they are exactly what was closed
// (device, inode, size, mtime), until a later seal succeeds.
class PendingSeals {
 public:
  struct Item {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    struct timespec mtime {};
    std::string rel;  // where it was closed, below the root
  };

  void add(const struct stat& st, std::string rel);
  void erase(dev_t dev, ino_t ino);
  // st is a file closed through M whose seal waits for space.
  bool holds(const struct stat& st) const;
  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }
  std::vector<Item> items() const;
  // One retry at a time; false: another thread is retrying.
  bool begin_retry() { return !retrying_.exchange(true, std::memory_order_acquire); }
  void end_retry() { retrying_.store(false, std::memory_order_release); }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, Item> items_;  // under mu_
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> retrying_{false};
};

}  // namespace sealfs
