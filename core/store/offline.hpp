// The offline tools: `sealfs fsck` and `sealfs adopt [--resign]` over a
// store that no daemon serves. They take a Store& instead of living in its
// face (issue 26: faces by job); fsck judges each entry as a lookup does
// (Judge, at audit depth).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/result.hpp"
#include "core/store/progress.hpp"
#include "core/store/quarantine_report.hpp"
#include "core/store/store.hpp"

namespace sealfs {

struct FsckReport {
  std::uint64_t entries = 0;  // entries checked
  std::uint64_t valid = 0;
  std::uint64_t invalid = 0;          // entries that fail verification (quarantined with repair)
  std::uint64_t foreign = 0;          // unsealed regular files outside entries and volatile areas
  std::uint64_t unlisted = 0;         // files in an entry its manifest does not list
  std::uint64_t quarantined = 0;      // moved to quarantine by this run (--repair)
  std::uint64_t unchecked = 0;        // could not be checked (a transient error): neither valid nor damaged
  std::vector<std::string> problems;  // "<rel path>: <reason>", one per finding
  // The quarantine as this run found it, before it moved anything: what the
  // mount (or anything else) quarantined, and how much of it is new since
  // the last fsck (quarantine_report.hpp).
  QuarantineSummary quarantine;
  std::string quarantine_error;  // non-empty: the quarantine could not be read
  std::string marker_error;      // non-empty: what this run saw could not be recorded for the next
};

// What resign did: entries signed again, and those it left
// ("<rel path>: <reason>": files that do not match their manifest, …).
struct ResignReport {
  std::vector<std::string> signed_again;
  std::vector<std::string> refused;
};

// progress, when given, hears the plan (a stat-only walk first) and each
// item done (progress.hpp).
Result<FsckReport> fsck(Store& store, bool repair, OfflineProgress* progress = nullptr);
// Seal foreign content deliberately (trust on first use). rel paths relative
// to the root; empty = every foreign file and unsealed directory under the root.
Result<std::vector<std::string>> adopt(Store& store, const std::vector<std::string>& rel_paths,
                                       OfflineProgress* progress = nullptr);
// With keys (EINVAL without): every entry at or below rel_paths (empty:
// all of B) whose manifest is not signed by the first key for its place
// (unsigned, another key's, a MAC that does not match) is verified against
// that manifest, every file hashed, and signed with the first key where
// its files match (`sealfs adopt --resign`: trust on purpose).
Result<ResignReport> resign(Store& store, const std::vector<std::string>& rel_paths);

}  // namespace sealfs
