// Private to the store's .cpp files: the state behind sealfs::Store, as the
// parts that hold it (StoreState, called Store::Impl inside core/store). It
// only owns them and wires them together; each part keeps its own state
// private:
//   Policy        what the options decide (fsync, in progress, crash points)
//   Locator       where an object sits below the root; the DirContext cache
//   Judge         the visibility verdict on a name (no side effects)
//   Consequences  what follows from a verdict: quarantine, invalidation
//   Records       file records and manifest edits (and the seal of one file)
//   LinkRecords   records of hard-linked inodes, for their other names (links.hpp)
//   ListingMemory what each directory's previous listing showed
//
// Locks (none is ever held while on_invalidate runs, and none while hashing
// files that the locked data does not cover):
//   - Verifier::Impl::mu        the stamp→digest cache (core/verify/verifier.cpp)
//   - EntryVerifier::mu_        the verdict cache (core/verify/entry.cpp)
//   - Quarantine::mu_           quarantine slots and bounds
//   - Records::manifest_lock    one stripe per directory holding a manifest
//                               (records.hpp)
//   - LinkRecords::lock_of      one stripe per inode record (links.hpp); never
//                               held with a manifest lock
//   - ListingMemory::mu_        the previous listings
//   - EntryBounds::mu_          where directory entries begin (entry_bounds.hpp):
//                               taken before any manifest lock, exclusively
//                               around a directory's publish, shared around
//                               a container's sidecar write
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/store/consequences.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/in_flight.hpp"
#include "core/store/judge.hpp"
#include "core/store/links.hpp"
#include "core/store/listing.hpp"
#include "core/store/place.hpp"
#include "core/store/policy.hpp"
#include "core/store/quarantine.hpp"
#include "core/store/records.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

struct StoreState {
  StoreState(UniqueFd root, std::string root_path, const struct stat& root_st, Profile profile,
             StoreOptions options);

  // Declared in the order they are built: each part refers to those above it.
  UniqueFd root_fd;
  struct stat root_st {};
  Profile profile;
  StoreOptions options;
  PendingSeals pending;     // seals that wait for space (space.hpp)
  FilesInFlight in_flight;  // files a rename moves into an entry (in_flight.hpp)
  EntryBounds bounds;       // where directory entries begin (entry_bounds.hpp)
  Policy policy;
  Metrics metrics;
  Verifier verifier;
  EntryVerifier entries;
  Quarantine quarantine;
  Locator places;
  Records records;
  LinkRecords links;
  Judge judge;
  Consequences consequences;
  ListingMemory listings;
};

// Transactions with crash steps hold their invalidations until they end
// (Consequences::DeferredInvalidations says why).
using DeferredInvalidations = Consequences::DeferredInvalidations;

// Runs op; while it fails for want of space (ENOSPC, EDQUOT) and the
// quarantine gave some back, runs it again (space.hpp).
template <class Op>
auto with_room(Store::Impl& s, Op&& op) -> decltype(op()) {
  auto result = op();
  while (!result && out_of_space(result.code()) && s.quarantine.make_room()) result = op();
  return result;
}
// The seal of a file closed through M (Store::seal), with_room; one that
// still fails for want of space is kept visible and sealed later (space.hpp).
// record, same_as: as Records::seal_at's sealed and same_as.
Status seal_with_room(Store::Impl& s, const DirContext& ctx, const Placed& placed,
                      std::optional<FileRecord>* record = nullptr, const FileRecord* same_as = nullptr);
// Seals that wait for space, tried again (one thread at a time).
void retry_pending_seals(Store::Impl& s);

// Whether the object behind path_fd lies in a volatile area now
// (StoreReading::in_volatile_area; also R4's tracking decision).
Result<bool> in_volatile_area(const Store::Impl& s, int path_fd, PlaceHint hint);
// The counters with the daemon's gauges (Store::status, kStatusXattr).
MetricsSnapshot status_of(const Store::Impl& s);

// dir_fd/name opened O_PATH as a Found of the given kind; ENOENT when it is
// no longer `expect` (replaced meanwhile).
Result<Found> found_at(int dir_fd, std::string_view name, ObjectKind kind,
                       const struct stat* expect = nullptr);

}  // namespace sealfs
