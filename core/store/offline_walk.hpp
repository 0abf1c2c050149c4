// Private to the offline tools (fsck.cpp, offline.cpp): what a job plans
// (a stat-only walk of the tree it will walk) and how it tells its progress.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "core/base/metrics.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/progress.hpp"

namespace sealfs {

// What a walk counts as one item of work.
enum class ItemIs {
  entry,    // fsck: a directory holding a manifest, a file with a sidecar
  file,     // adopt: every regular file and symlink
  nothing,  // adopt of a directory whole: one item for all, counted by the caller
};

// The plan of an offline job (OfflineProgress::planned): a walk of the tree
// the job will walk, with stats only. Bytes: regular files the profile hashes.
struct PlanWalk {
  const Profile& profile;
  ItemIs item;
  Work total;

  void add_file(const std::string& rel, const struct stat& st);
  void walk(int dir_fd, const std::string& rel, bool in_entry, int depth);
};

// Tells progress (when there is one) each item done, with the bytes hashed
// since the job began (the store's own counter: the verifier counts every
// byte it hashes, for verification and for new records alike).
class Tally {
 public:
  Tally(const Metrics& metrics, OfflineProgress* progress)
      : metrics_(metrics), progress_(progress), start_(metrics.bytes_hashed.load()) {}
  void planned(const Work& total) const {
    if (progress_ != nullptr) progress_->planned(total);
  }
  void item() {
    if (progress_ == nullptr) return;
    ++done_.items;
    done_.bytes = metrics_.bytes_hashed.load() - start_;
    progress_->advanced(done_);
  }

 private:
  const Metrics& metrics_;
  OfflineProgress* progress_;
  std::uint64_t start_;
  Work done_;
};

}  // namespace sealfs
