// Small helpers shared by the mount tests.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "tests/support/mount_fixture.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

// The TileLang stand-in: "save"/"load" CACHE KEY [args…]. Exit codes: see the script.
inline ProcessResult tilelang(const std::string& command, const std::string& cache, const std::string& key,
                              std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"),
                                   command, cache, key};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_process(argv, {"PYTHONDONTWRITEBYTECODE=1"});
}

inline constexpr int kHit = 0;
inline constexpr int kMiss = 3;
inline constexpr int kCorrupt = 4;

// Poll pred until true or the limit passes; the last answer. For effects that
// follow a close asynchronously (the kernel sends RELEASE after close returns).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// errno of lstat(path), 0 when it exists.
inline int lstat_errno(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? 0 : errno;
}

inline std::set<std::string> list_dir(const std::string& path) {
  std::set<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) names.insert(e->d_name);
  ::closedir(d);
  return names;
}

// Every regular file under dir (recursively), as paths relative to it.
inline std::vector<std::string> files_under(const std::string& dir, const std::string& prefix = "") {
  std::vector<std::string> out;
  for (const auto& name : list_dir(dir)) {
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      auto sub = files_under(path, prefix + name + "/");
      out.insert(out.end(), sub.begin(), sub.end());
    } else {
      out.push_back(prefix + name);
    }
  }
  return out;
}

inline std::vector<std::string> quarantined_files(const Mount& mount) {
  return files_under(mount.b(".sealfs/quarantine"));
}

// errno of a syscall-style return value: 0 on success.
inline int err_of(int rc) { return rc == 0 ? 0 : errno; }

// Overwrites a file with zeros in place (same inode, same size), as bit rot or
// a bad copy would; false if it could not.
inline bool zero_in_place(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return false;
  const std::string zeros(static_cast<size_t>(st.st_size), '\0');
  return ::pwrite(fd.get(), zeros.data(), zeros.size(), 0) == static_cast<ssize_t>(zeros.size());
}

// Pull one counter out of Metrics::to_json()'s flat object (sealfs status).
inline long counter(const std::string& json, const std::string& name) {
  const auto at = json.find("\"" + name + "\":");
  if (at == std::string::npos) return -1;
  return std::atol(json.c_str() + at + name.size() + 3);
}

// One of a mount's live counters now (sealfs status); -1 when unreadable.
inline long daemon_counter(const Mount& mount, const std::string& name) {
  ProcessResult status = run_process({sealfs_binary(), "status", mount.mountpoint()});
  return status.status == 0 ? counter(status.out, name) : -1;
}

// Reads the first byte of a file on M after asking the kernel to drop its
// pages, so that the READ reaches the daemon (without OPEN the kernel keeps
// verified pages across opens): 0 when a byte came back, else the errno.
inline int read_errno_past_page_cache(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno;
  if (::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) != 0) return EINVAL;
  char byte = 0;
  return ::pread(fd.get(), &byte, 1, 0) == 1 ? 0 : errno;
}

}  // namespace sealfs::test
