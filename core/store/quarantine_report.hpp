// What the quarantine holds, read back for `sealfs fsck`: each slot's
// reason.json (read as untrusted input: B is written by others), its bytes
// as the quarantine's byte cap counts them (allocated blocks), and which
// slots are new since the last fsck.
//
// "Since the last fsck": B/.sealfs/fsck-seen (kFsckSeenFile) holds the name
// of the newest slot the last fsck saw. Only fsck writes it, at its end
// (temporary name, fsync, rename, fsync of B/.sealfs). Slot names begin with
// their UTC time and sort by age (quarantine.hpp), so the new slots are those
// whose names sort after it. Those names come from the clock of the daemon
// that made each slot, not fsck's own, so an fsck on another host sharing B
// draws the same line. Without a readable marker every slot is new.
//
// Nothing in the quarantine is skipped silently: a name that is no slot (a
// file someone put there, a directory not named as the quarantine names its
// slots) or a slot whose reason.json cannot be read is listed as unreadable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"

namespace sealfs {

// One slot's record, as its reason.json tells it.
struct QuarantinedSlot {
  std::string slot;         // its name in B/.sealfs/quarantine
  std::string path;         // the object's path below the root
  std::string reason;       // why it was moved aside
  std::string time;         // when (UTC, to the second)
  std::string dropped;      // non-empty: only the record was kept (the object was over a bound), and why
  std::uint64_t bytes = 0;  // what the slot occupies on B
};

struct QuarantineSummary {
  std::uint64_t held = 0;  // names in the quarantine: slots, and anything else found there
  std::uint64_t held_bytes = 0;
  std::uint64_t fresh = 0;  // slots newer than the marker (readable or not)
  std::uint64_t fresh_bytes = 0;
  std::vector<QuarantinedSlot> newest;  // fresh slots with a readable reason, newest first (bounded)
  std::vector<std::string> unreadable;  // "<name>: why", of any age, in name order
  std::string marker;                   // the slot name the last fsck saw last; "": none, every slot is new
  std::string marker_problem;           // non-empty: the marker could not be read (treated as absent)
  bool measured = true;                 // false: a slot could not be measured, the bytes are a floor
};

// How many of the fresh slots' reasons a summary keeps.
inline constexpr std::size_t kNewestReasons = 5;

// The quarantine below root_fd as it is now. An error only when the
// quarantine directory itself cannot be read (an absent one holds nothing).
Result<QuarantineSummary> summarize_quarantine(int root_fd, std::size_t newest_max = kNewestReasons);

// The newest slot name in the quarantine now ("" when it holds none).
Result<std::string> newest_quarantine_slot(int root_fd);

// Records `slot` as the newest the last fsck saw, durably.
Status mark_quarantine_seen(int root_fd, std::string_view slot);

// Removes the marker (one that could not be read, with no slot to name).
Status forget_quarantine_marker(int root_fd);

// Whether name is shaped as the quarantine names its slots:
// <YYYYMMDD>T<HHMMSS>.<nanoseconds>Z-<pid>-<seq>.
bool is_slot_name(std::string_view name);

// Allocated bytes (st_blocks × 512) of dir_fd/name and everything under it,
// not following symlinks: what the quarantine's byte cap counts. A child
// that vanished counts 0; levels beyond kMaxTreeDepth are not counted.
// Other failures (EMFILE…) are errors.
Result<std::uint64_t> allocated_bytes(int dir_fd, const std::string& name, int depth = 0);

}  // namespace sealfs
