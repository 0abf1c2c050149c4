// How a long offline job (fsck, adopt: offline.hpp) tells its caller how far
// it has come. The store only counts; what a caller shows (a progress line on
// a terminal, a summary) is its own business (fs/cli/progress_line.hpp).
#pragma once

#include <cstdint>

namespace sealfs {

// Items (fsck: entries; adopt: files, or a directory adopted whole) and the
// bytes of the files the profile hashes.
struct Work {
  std::uint64_t items = 0;
  std::uint64_t bytes = 0;
};

class OfflineProgress {
 public:
  virtual ~OfflineProgress() = default;
  // Once, before the work starts: what a stat-only walk of the same tree
  // found (no manifest read, nothing hashed). An estimate: entries found
  // invalid on the way are not descended into, already sealed content is
  // not adopted again, and size-only files listed in no manifest are not
  // told apart.
  virtual void planned(const Work& total) = 0;
  // After each item: how many are done and the bytes hashed so far.
  virtual void advanced(const Work& done) = 0;
};

}  // namespace sealfs
