// Where a directory sits as the rules see it (DirContext), and a short-lived
// cache of those contexts: finding one walks down from the backing root and
// stats a manifest at every level, and nearly every request needs one (the
// parent of each lookup, create and rename; the directory of each open).
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/base/unique_fd.hpp"
#include "core/layout/paths.hpp"

namespace sealfs {

// The nearest ancestor-or-self directory holding a regular .sealfs-manifest.
struct EntryRoot {
  UniqueFd fd;  // O_PATH
  struct stat st {};
  std::string rel;  // below the backing root
};

// Where a directory sits, as the rules see it.
struct DirContext {
  std::string rel;  // below the backing root ("" = root)
  struct stat st {};
  bool is_volatile = false;
  std::optional<EntryRoot> entry;  // set when the directory is (inside) an entry
  std::string sub;                 // the directory's path inside that entry ("" = the entry itself)

  std::string child_rel(std::string_view name) const { return join_rel(rel, name); }
  std::string entry_key(std::string_view name) const { return join_rel(sub, name); }
};

// Contexts found by walks, by the directory's path below the root, for at
// most `ttl` (the mount's cache_timeout: what R9 allows for changes made
// behind the mount). Changes made through the mount that can alter a stored
// context (a directory renamed, removed or quarantined) call moved(), which
// empties the cache; a walk that began before that is not stored (its
// generation is stale). What find() returns still has to be checked against
// the object at hand: the caller knows which directory it expects.
// Each stored context holds an O_PATH fd of its directory (and one of its
// entry root), so no inode number is reused while it is stored; expired
// contexts are dropped when found and when the cache is full, so a directory
// removed behind the mount is not held open for long.
class DirContextCache {
 public:
  explicit DirContextCache(std::chrono::nanoseconds ttl, std::size_t max_entries = 1024);

  // Read before a walk; hand it to put() with the walk's result.
  std::uint64_t generation();
  // The stored context of rel, with a fresh fd of its entry root; when dir_fd
  // is given, also a fresh O_PATH fd of the directory. The entry root must
  // still hold its manifest. Otherwise nothing.
  std::optional<DirContext> find(std::string_view rel, UniqueFd* dir_fd = nullptr);
  // Stores ctx (as found by a walk that began at `generation`) for dir_fd.
  void put(std::uint64_t generation, int dir_fd, const DirContext& ctx);
  // A directory moved, vanished or stopped being an entry: forget them all.
  void moved();

 private:
  struct Stored {
    UniqueFd dir;
    DirContext ctx;
    std::chrono::steady_clock::time_point at;
  };
  std::chrono::nanoseconds ttl_;
  std::size_t max_entries_;
  std::mutex mu_;
  std::uint64_t generation_ = 0;  // guarded by mu_
  std::unordered_map<std::string, Stored> by_rel_;
};

// Calls cache.moved() when it goes out of scope, once armed: for the
// transactions that may move or remove a directory, on every way out (a
// failure half-way may have moved it already).
class DirMoveGuard {
 public:
  explicit DirMoveGuard(DirContextCache& cache, bool armed = false) : cache_(cache), armed_(armed) {}
  ~DirMoveGuard() {
    if (armed_) cache_.moved();
  }
  DirMoveGuard(const DirMoveGuard&) = delete;
  DirMoveGuard& operator=(const DirMoveGuard&) = delete;
  void arm() { armed_ = true; }

 private:
  DirContextCache& cache_;
  bool armed_;
};

}  // namespace sealfs
