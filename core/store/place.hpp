// Where an object sits below the backing root: its path (from /proc, or
// found another way beyond PATH_MAX), its directory's DirContext (container,
// entry, volatile area; cached in a DirContextCache), and its parent
// directory with its name there (place).
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/known_names.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {

// An object found in its parent directory: the parent's fd, the object's
// name there, its path below the root and its stat.
struct Placed {
  UniqueFd parent;
  std::string name;
  std::string rel;
  struct stat st {};
};

class Locator {
 public:
  // root_fd, root_st: the backing root (the fd must outlive the locator);
  // root_path: its path, as /proc names it. profile must outlive it.
  Locator(int root_fd, std::string root_path, const struct stat& root_st, const Profile& profile,
          std::chrono::nanoseconds context_ttl, std::size_t max_contexts = 1024);
  // R4, a file is an inode: the names the adapter saw hard-linked files by,
  // and its directories' descriptors by identity (StoreOptions). Unset: a
  // file whose /proc name was unlinked is looked for by the hint and in its
  // directory only.
  void set_known_names(std::shared_ptr<const KnownNames> names,
                       std::function<std::shared_ptr<const UniqueFd>(ObjectId)> directory_of) {
    names_ = std::move(names);
    directory_of_ = std::move(directory_of);
  }

  // fd's path below the root, from /proc; beyond PATH_MAX by climbing (a
  // directory) or from hint (a file); for a file whose name /proc gives was
  // unlinked, another live name of it (another_name). ENOENT inside B/.sealfs.
  Result<std::string> rel_of(int fd, PlaceHint hint = {}) const;
  // Every place of the regular file st other than `except` (a path below
  // the root) that its known names lead to now, each checked to be the same
  // object, with its directory's context: where a change made through one
  // name must be recorded too. Errors leave a place out.
  std::vector<std::pair<Placed, DirContext>> other_places(const struct stat& st,
                                                          std::string_view except) const;
  Result<DirContext> context_of(int dir_fd) const;
  // Opens the parent directory of the object behind path_fd and gives its
  // name there; ESTALE when deleted, ENOENT when no longer below the root or
  // when the name no longer holds that object.
  // With parent_ctx, also that parent's context (as context_of), from one walk.
  // known: a stat of path_fd the caller already has.
  Result<Placed> place(int path_fd, DirContext* parent_ctx = nullptr, const struct stat* known = nullptr,
                       PlaceHint hint = {}) const;
  // place() and the parent's context for a file closed through M, followed
  // across directory renames; ENOENT when it no longer exists.
  Result<std::pair<Placed, DirContext>> place_closed_file(int path_fd, PlaceHint hint) const;

  // The contexts of recently used directories: every change through the
  // mount that moves, removes or quarantines a directory calls moved()
  // (DirMoveGuard).
  DirContextCache& contexts() const { return contexts_; }

 private:
  Result<std::string> rel_beyond_path_max(int fd, PlaceHint hint) const;
  // For a file whose name /proc gives was unlinked: another live name of
  // it (known names, then the hint, then its old directory), or ESTALE.
  Result<std::string> another_name(int fd, PlaceHint hint) const;
  // name in the directory dir_fd, as a path below the root, if it is the object st.
  std::optional<std::string> rel_if_same(int dir_fd, std::string_view name, const struct stat& st) const;
  // The known names of st that hold it now, as paths below the root.
  std::vector<std::string> known_rels(const struct stat& st) const;
  // Another of its names in the directory its /proc path names, or ESTALE.
  Result<std::string> other_name_of(int fd, const struct stat& st) const;
  // The walk context_of does from the root along ctx.rel; the directory reached.
  Result<UniqueFd> walk_context(DirContext& ctx) const;
  // place() through a stored context of the parent, when one still holds it.
  std::optional<Placed> place_by_cache(const std::string& parent_rel, std::string& name, std::string& rel,
                                       const struct stat& st, DirContext& parent_ctx) const;

  int root_fd_;
  std::string root_path_;
  struct stat root_st_ {};
  const Profile& profile_;
  mutable DirContextCache contexts_;
  std::shared_ptr<const KnownNames> names_;
  std::function<std::shared_ptr<const UniqueFd>(ObjectId)> directory_of_;
};

// Where the manifest of an entry is. rel: the entry directory's path below
// the root; parent_rel: the file entry's directory's (the profile decides on
// rel/<manifest key>). The fds are borrowed.
EntryLocation dir_entry_location(int dir_fd, const struct stat& st, std::string_view rel);
EntryLocation dir_entry_location(const EntryRoot& entry);
EntryLocation file_entry_location(int parent_fd, std::string_view name, const struct stat& st,
                                  std::string_view parent_rel);

}  // namespace sealfs
