// A mounted daemon's soft RLIMIT_NOFILE lowered with prlimit for a scope, for
// the tests of running out of descriptors; restored when destroyed or by
// restore(). The hard limit, and every descriptor the daemon holds, are kept.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {

// Exactly n more descriptors fit below the limit (0: every open fails).
struct FreeDescriptors {
  int n;
};
// The soft limit itself.
struct SoftLimit {
  rlim_t n;
};

class DaemonFdLimit {
 public:
  DaemonFdLimit(pid_t pid, FreeDescriptors free) : pid_(pid) {
    if (!save()) return;
    std::set<int> used;
    for (const auto& n : list_dir("/proc/" + std::to_string(pid_) + "/fd"))
      if (n != "." && n != "..") used.insert(std::atoi(n.c_str()));
    // New descriptors take the lowest free numbers: the limit is the
    // number past the n-th free one.
    rlim_t limit = 0;
    for (int left = free.n;; ++limit) {
      if (!used.count(static_cast<int>(limit))) {
        if (left == 0) break;
        --left;
      }
    }
    lower(limit);
  }
  DaemonFdLimit(pid_t pid, SoftLimit soft) : pid_(pid) {
    if (save()) lower(soft.n);
  }
  ~DaemonFdLimit() { restore(); }
  DaemonFdLimit(const DaemonFdLimit&) = delete;
  DaemonFdLimit& operator=(const DaemonFdLimit&) = delete;

  bool ok() const { return lowered_; }
  const std::string& error() const { return error_; }
  // The limit as it was; false (error() says why) when that failed.
  bool restore() {
    if (!lowered_) return error_.empty();
    lowered_ = false;
    if (::prlimit(pid_, RLIMIT_NOFILE, &saved_, nullptr) == 0) return true;
    error_ = std::string("prlimit (restore): ") + std::strerror(errno);
    return false;
  }

 private:
  bool save() {
    if (::prlimit(pid_, RLIMIT_NOFILE, nullptr, &saved_) == 0) return true;
    error_ = std::string("prlimit (read): ") + std::strerror(errno);
    return false;
  }
  void lower(rlim_t soft) {
    struct rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    lowered_ = ::prlimit(pid_, RLIMIT_NOFILE, &lowered, nullptr) == 0;
    if (!lowered_) error_ = std::string("prlimit (lower): ") + std::strerror(errno);
  }

  pid_t pid_;
  struct rlimit saved_ {};
  bool lowered_ = false;
  std::string error_;
};

}  // namespace sealfs::test
