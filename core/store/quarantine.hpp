// Quarantine (R2, R5): damaged or unwanted objects are moved, not deleted,
// into B/.sealfs/quarantine/<UTC time>-<pid>-<seq>/ beside a reason.json.
//
// Bounds: at most max_objects slots holding at most max_bytes, where a slot's
// bytes are what it really occupies: st_blocks × 512 of every inode in it
// (the slot directory, reason.json and the object's tree), never st_size, so
// a sparse file of any apparent size costs only the blocks it has.
// After each quarantine, in this order:
//  1. A new slot whose bytes alone exceed max_bytes keeps its reason.json
//     only: the object (and its companions) are deleted, reason.json gains
//     "dropped" (the bytes, the cap and the outcome) and the log says so.
//     Nothing older is ever evicted for it, so no single object can flush
//     the quarantine. If the deletion itself fails the slot stays whole and,
//     again, nothing older is evicted for it.
//  2. Older slots that alone exceed max_bytes (left by older versions or a
//     failed deletion) are removed: they would not have been kept whole.
//  3. The oldest slots are removed, one by one, while there are more than
//     max_objects or (when the new slot fits under max_bytes alone) the total
//     exceeds max_bytes: newest first within the bounds, and eviction only
//     ever makes room for a slot that fits.
// Every removal is logged on stderr with the slot, its path and the bound.
// If a slot cannot be measured (a transient error such as EMFILE) the byte
// bound is not applied that time (the count bound still is): evidence is
// never removed on a guess.
// Sizes are cached per slot, keyed by the slot directory's inode, mtime and
// ctime (a move into a slot changes them), so each quarantine measures only
// the new slot; slots younger than a second are measured again each time,
// since another process may still be filling them within one time tick.
//
//  4. B's free space: the quarantine never holds more bytes than B has
//     available (statvfs f_bavail), so a B short of space is not kept short
//     by evidence. A new slot bigger than that keeps its reason.json only
//     ("dropped", as rule 1); older slots are removed, oldest first, while
//     the total is bigger.
// And when B is out of space (an ENOSPC or EDQUOT of the store, or of a
// write through M), make_room() removes the oldest slot that holds more than
// its reason.json, and the caller tries again (space.hpp).
//
// Spare slots: moving a hidden object aside needs no free space (R4). A few
// slot directories, each with a reason.json of kSpareReasonBytes allocated,
// wait in B/.sealfs/spare/, made while there was space (at open and after
// each quarantine). When mkdir of a new slot fails with ENOSPC or EDQUOT, a
// spare is renamed into the quarantine instead (a rename allocates no
// blocks) and its reason.json is overwritten in place. reason.json is best
// effort when B is out of space: a slot whose reason could not be written
// keeps the object, and the log says why.
//
// A quarantine that cannot complete leaves nothing behind: until the object
// is in its slot, every failure (slot directory made but not openable, say
// under EMFILE; reason.json not written; the rename refused) removes the
// slot again, which needs no new descriptor. Once the object is in, the slot
// stays, and reason.json records what did not go as planned: companions
// left behind ("left_behind") or the bytes dropped ("dropped").
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/metrics.hpp"
#include "core/base/result.hpp"

namespace sealfs {

class Quarantine {
 public:
  // root_fd: the backing root (must outlive this object). B/.sealfs/quarantine
  // must exist (Store::open_backing creates it).
  Quarantine(int root_fd, std::uint64_t max_objects, std::uint64_t max_bytes, Metrics& metrics);

  struct Request {
    int parent_fd = -1;  // directory holding the object
    std::string name;    // the object's name there
    dev_t dev = 0;       // what was judged invalid: moved only if the name still holds it
    ino_t ino = 0;
    std::string rel;  // its path below the root, for reason.json and the log
    std::string reason;
    HideReason cause = HideReason::foreign;  // reason's kind, for the counters
    std::vector<std::string> companions;     // moved along when present (a file entry's sidecar)
  };

  // true: moved (counted, logged once); false: the name no longer holds the
  // judged object (someone replaced or removed it meanwhile), nothing done.
  // An error: nothing was moved and no slot is left behind.
  Result<bool> move(const Request& request);

  // Slots currently held (for tests and status), oldest first.
  Result<std::vector<std::string>> slots() const;

  // B is out of space: removes the oldest slot holding more than its
  // reason.json (logged). True when one was removed (try again), false when
  // the quarantine has nothing more to give.
  bool make_room();
  // Makes spare slots until kSpares wait (best effort: on a full or
  // read-only B, none are made and nothing is said).
  void replenish_spares();

  static constexpr std::size_t kSpares = 4;
  static constexpr std::size_t kSpareReasonBytes = 8192;

 private:
  struct CachedSize {
    ino_t ino = 0;
    struct timespec mtime {};
    struct timespec ctime {};
    std::uint64_t bytes = 0;
  };

  struct SlotSize {
    std::string name;
    std::uint64_t bytes = 0;
    bool gone = false;
  };

  std::string next_slot_name(const struct timespec& now);  // under mu_
  Result<std::uint64_t> slot_bytes(int qdir_fd, const std::string& slot, bool settled);
  Status enforce_bounds(int qdir_fd, const std::string& keep);
  bool measure(int qdir_fd, std::vector<SlotSize>& slots, const std::string& keep, std::uint64_t& total,
               std::uint64_t& keep_bytes);
  bool evict(int qdir_fd, SlotSize& s, const std::string& why);
  // A spare slot renamed to qdir_fd/slot; false when none could be taken.
  bool take_spare(int qdir_fd, const std::string& slot);
  void replenish_spares_locked();

  int root_fd_;
  std::uint64_t max_objects_;
  std::uint64_t max_bytes_;
  Metrics& metrics_;
  // Serialises slot creation, moves and bound enforcement, so two threads
  // never evict the same slot or count a half-moved one. Hashing never
  // happens under it.
  mutable std::mutex mu_;
  std::uint64_t seq_ = 0;
  std::map<std::string, CachedSize> sizes_;  // by slot name; under mu_
  std::uint64_t spare_seq_ = 0;              // under mu_
};

}  // namespace sealfs
