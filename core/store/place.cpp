// Where a directory or file sits below the backing root (place.hpp).
#include "core/store/place.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/layout/known_names.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {

Locator::Locator(int root_fd, std::string root_path, const struct stat& root_st, const Profile& profile,
                 std::chrono::nanoseconds context_ttl, std::size_t max_contexts)
    : root_fd_(root_fd),
      root_path_(std::move(root_path)),
      root_st_(root_st),
      profile_(profile),
      contexts_(context_ttl, max_contexts) {}

// The kernel names an object by the name it was opened through; once that
// name is unlinked, /proc reads "<path> (deleted)" (fd_path: ESTALE), although
// a hard-linked file still has other names, in any directory (R4: a file is
// an inode, not a name). They are found by what the adapter saw (known
// names, the caller's hint) and, for names nobody saw through the mount, in
// the directory of the unlinked name by inode number.
Result<std::string> Locator::another_name(int fd, PlaceHint hint) const {
  auto st = stat_fd(fd);
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode) || st->st_nlink == 0) return make_error(ESTALE, "object was deleted");
  if (auto known = known_rels(*st); !known.empty()) return std::move(known.front());
  if (hint.dir_fd >= 0)
    if (auto rel = rel_if_same(hint.dir_fd, hint.name, *st)) return std::move(*rel);
  return other_name_of(fd, *st);
}

std::optional<std::string> Locator::rel_if_same(int dir_fd, std::string_view name,
                                                const struct stat& st) const {
  if (!is_valid_name(name) || is_reserved_name(name)) return std::nullopt;
  auto now = stat_at(dir_fd, name);
  if (!now || !same_object(*now, st)) return std::nullopt;
  auto parent = rel_of(dir_fd);
  if (!parent) return std::nullopt;
  return join_rel(*parent, name);
}

std::vector<std::string> Locator::known_rels(const struct stat& st) const {
  std::vector<std::string> rels;
  if (!names_ || !directory_of_) return rels;
  for (const auto& n : names_->names_of(ObjectId::of(st))) {
    auto dir = directory_of_(n.dir);
    if (!dir || !dir->valid()) continue;
    if (auto rel = rel_if_same(dir->get(), n.name, st)) rels.push_back(std::move(*rel));
  }
  return rels;
}

Result<std::string> Locator::other_name_of(int fd, const struct stat& st) const {
  constexpr std::string_view kDeleted = " (deleted)";
  std::string path(PATH_MAX + 1, '\0');
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), path.data(), path.size());
  if (n < 0) return errno_error("readlink " + link);
  if (static_cast<std::size_t>(n) >= path.size()) return make_error(ENAMETOOLONG, "path of fd too long");
  path.resize(static_cast<std::size_t>(n));
  const Error stale = make_error(ESTALE, "object was deleted: " + path);
  if (!path.ends_with(kDeleted)) return stale;
  path.resize(path.size() - kDeleted.size());
  auto rel = rel_below(root_path_, path);
  if (!rel) return stale;
  auto [parent_rel, name] = split_parent(*rel);
  auto parent = open_beneath(root_fd_, parent_rel, O_PATH | O_DIRECTORY);
  if (!parent) return stale;
  auto children = read_dir(parent->get());
  if (!children) return children.error();
  for (const auto& c : *children) {
    if (c.ino != st.st_ino || is_reserved_name(c.name)) continue;
    if (auto now = stat_at(parent->get(), c.name); now && same_object(*now, st))
      return join_rel(parent_rel, c.name);
  }
  return stale;
}

std::vector<std::pair<Placed, DirContext>> Locator::other_places(const struct stat& st,
                                                                 std::string_view except) const {
  std::vector<std::pair<Placed, DirContext>> out;
  if (!S_ISREG(st.st_mode) || st.st_nlink < 2) return out;
  std::vector<std::string> seen{std::string(except)};
  for (auto& rel : known_rels(st)) {
    if (std::find(seen.begin(), seen.end(), rel) != seen.end()) continue;
    seen.push_back(rel);
    auto [parent_rel, name] = split_parent(rel);
    auto parent = open_beneath(root_fd_, parent_rel, O_PATH | O_DIRECTORY);
    if (!parent) continue;
    auto now = stat_at(parent->get(), name);
    if (!now || !same_object(*now, st)) continue;
    auto ctx = context_of(parent->get());
    if (!ctx) continue;
    out.emplace_back(Placed{std::move(*parent), std::move(name), std::move(rel), *now}, std::move(*ctx));
  }
  return out;
}

Result<std::string> Locator::rel_of(int fd, PlaceHint hint) const {
  auto rel = [&]() -> Result<std::string> {
    auto path = fd_path(fd);
    if (path) return rel_below(root_path_, *path);
    if (path.code() == ESTALE) return another_name(fd, hint);
    if (path.code() != ENAMETOOLONG) return path.error();
    return rel_beyond_path_max(fd, hint);
  }();
  if (!rel) return rel.error();
  // Anything under B/.sealfs (the quarantine included) is not ours to show.
  auto parts = split_rel(*rel);
  if (!parts.empty() && is_reserved_name(parts.front()))
    return make_error(ENOENT, "inside " + std::string(kStateDir));
  return rel;
}

// /proc names no object deeper than PATH_MAX, but paths inside B have no such
// limit (R10). A directory can climb ".." to the root; a file's O_PATH fd
// cannot, so it is found through the caller's hint, once the hint checks out.
Result<std::string> Locator::rel_beyond_path_max(int fd, PlaceHint hint) const {
  auto st = stat_fd(fd);
  if (!st) return st.error();
  if (S_ISDIR(st->st_mode)) return dir_rel_by_climbing(fd, root_st_);
  if (hint.dir_fd >= 0 && is_valid_name(hint.name)) {
    auto now = stat_at(hint.dir_fd, hint.name);
    if (now && same_object(*now, *st)) {
      auto parent = rel_of(hint.dir_fd);
      if (!parent) return parent.error();
      return join_rel(*parent, hint.name);
    }
  }
  if (st->st_nlink == 0) return make_error(ESTALE, "object was deleted");
  return make_error(ENAMETOOLONG, "path beyond PATH_MAX, and no hint of where the file is");
}

// Walks down from the root along ctx.rel without following symlinks, noting
// the deepest directory that holds an entry manifest (ctx.entry). Returns the
// directory reached (empty for the root itself); the caller checks that it is
// the object it expected, since the path may have changed meanwhile.
Result<UniqueFd> Locator::walk_context(DirContext& ctx) const {
  ctx.is_volatile = profile_.is_volatile(ctx.rel);
  std::vector<std::string> parts = split_rel(ctx.rel);
  if (static_cast<int>(parts.size()) > kMaxTreeDepth) return make_error(ELOOP, "directory too deep");
  UniqueFd cur;
  std::string walked;
  for (const auto& part : parts) {
    int raw =
        ::openat(cur ? cur.get() : root_fd_, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) {
      // Gone or replaced by a non-directory: it moved. EMFILE and the like
      // are answered as themselves (R2: never a verdict).
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
        return make_error(ESTALE, "directory moved while being placed");
      return errno_error("open " + part + " while placing");
    }
    cur.reset(raw);
    walked = join_rel(walked, part);
    if (ctx.is_volatile) continue;
    auto manifest = stat_at(cur.get(), kDirManifest);
    if (manifest && S_ISREG(manifest->st_mode)) {
      int dup = ::openat(cur.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dup < 0) return errno_error("reopen entry root");
      EntryRoot e;
      e.fd.reset(dup);
      auto est = stat_fd(dup);
      if (!est) return est.error();
      e.st = *est;
      e.rel = walked;
      ctx.entry = std::move(e);
    }
  }
  if (ctx.entry)
    ctx.sub = ctx.rel.size() > ctx.entry->rel.size() ? ctx.rel.substr(ctx.entry->rel.size() + 1) : "";
  return cur;
}

Result<DirContext> Locator::context_of(int dir_fd) const {
  auto st = stat_fd(dir_fd);
  if (!st) return st.error();
  if (!S_ISDIR(st->st_mode)) return make_error(ENOTDIR, "not a directory");
  auto rel = rel_of(dir_fd);
  if (!rel) return rel.error();
  // dir_fd is at rel now (its path was just read), so a context stored for
  // the same object at rel is its context.
  if (auto cached = contexts_.find(*rel); cached && same_object(cached->st, *st)) {
    cached->st = *st;
    return std::move(*cached);
  }
  const std::uint64_t generation = contexts_.generation();
  DirContext ctx;
  ctx.st = *st;
  ctx.rel = std::move(*rel);
  auto cur = walk_context(ctx);
  if (!cur) return cur.error();
  // The walk must end at dir_fd's own object, or the path changed meanwhile.
  if (*cur) {
    auto end = stat_fd(cur->get());
    if (!end || !same_object(*end, ctx.st)) return make_error(ESTALE, "directory moved while being placed");
  } else if (!same_object(ctx.st, root_st_)) {
    return make_error(ESTALE, "not the backing root");
  }
  contexts_.put(generation, dir_fd, ctx);
  return ctx;
}

// The object was at parent_rel/name when its path was read; a stored
// directory that holds it under that name is that parent (for an object with
// one link; others take the walk).
std::optional<Placed> Locator::place_by_cache(const std::string& parent_rel, std::string& name,
                                              std::string& rel, const struct stat& st,
                                              DirContext& parent_ctx) const {
  if (st.st_nlink != 1 && !S_ISDIR(st.st_mode)) return std::nullopt;
  UniqueFd cached_fd;
  auto cached = contexts_.find(parent_rel, &cached_fd);
  if (!cached) return std::nullopt;
  auto now = stat_at(cached_fd.get(), name);
  auto pst = stat_fd(cached_fd.get());
  if (!now || !same_object(*now, st) || !pst) return std::nullopt;
  parent_ctx = std::move(*cached);
  parent_ctx.st = *pst;
  return Placed{std::move(cached_fd), std::move(name), std::move(rel), st};
}

Result<Placed> Locator::place(int path_fd, DirContext* parent_ctx, const struct stat* known,
                              PlaceHint hint) const {
  Result<struct stat> st = known != nullptr ? Result<struct stat>(*known) : stat_fd(path_fd);
  if (!st) return st.error();
  auto rel = rel_of(path_fd, hint);
  if (!rel) return rel.error();
  if (rel->empty()) return make_error(EINVAL, "the root has no parent");
  auto [parent_rel, name] = split_parent(*rel);
  if (parent_ctx != nullptr) {
    if (auto p = place_by_cache(parent_rel, name, *rel, *st, *parent_ctx)) return std::move(*p);
  }
  const std::uint64_t generation = contexts_.generation();
  Result<UniqueFd> parent = make_error(ENOENT, "");
  if (parent_ctx != nullptr) {
    // One walk finds the parent and its context (what context_of would find
    // again): the hot path of every open of a sealed file.
    parent_ctx->rel = parent_rel;
    parent = walk_context(*parent_ctx);
    if (parent && !*parent) parent = open_beneath(root_fd_, "", O_PATH | O_DIRECTORY);
  } else {
    parent = open_beneath(root_fd_, parent_rel, O_PATH | O_DIRECTORY);
  }
  if (!parent) return parent.code() == ESTALE ? make_error(ENOENT, "object moved meanwhile") : parent.error();
  // The object must still be this name in that parent (which also proves the
  // walk reached the right directory).
  auto now = stat_at(parent->get(), name);
  if (!now || !same_object(*now, *st)) return make_error(ENOENT, "object moved meanwhile");
  if (parent_ctx != nullptr) {
    auto pst = stat_fd(parent->get());
    if (!pst) return pst.error();
    parent_ctx->st = *pst;
    contexts_.put(generation, parent->get(), *parent_ctx);
  }
  return Placed{std::move(*parent), std::move(name), std::move(*rel), *st};
}

// Where a file closed through M is now. Its directory may be renamed between
// reading the file's path and reaching it (the closer goes on while the seal
// runs): then the file is followed to its new place as long as it exists.
// Absent (unlinked, moved out of B) → ENOENT: nothing to seal.
Result<std::pair<Placed, DirContext>> Locator::place_closed_file(int path_fd, PlaceHint hint) const {
  constexpr int kMovesFollowed = 64;
  for (int attempt = 0;; ++attempt) {
    auto placed = place(path_fd, nullptr, nullptr, hint);
    if (placed) {
      auto ctx = context_of(placed->parent.get());
      if (ctx) return std::pair{std::move(*placed), std::move(*ctx)};
      if (ctx.code() != ESTALE) return ctx.error();
    } else if (placed.code() != ESTALE && placed.code() != ENOENT) {
      return placed.error();
    }
    auto st = stat_fd(path_fd);
    if (!st || st->st_nlink == 0) return make_error(ENOENT, "gone before its seal");
    if (attempt == kMovesFollowed) return make_error(EBUSY, "moved too often while being sealed");
  }
}

EntryLocation dir_entry_location(int dir_fd, const struct stat& st, std::string_view rel) {
  EntryLocation where;
  where.rel = std::string(rel);
  where.base_fd = dir_fd;
  where.manifest_name = std::string(kDirManifest);
  where.dev = st.st_dev;
  where.ino = st.st_ino;
  return where;
}

EntryLocation dir_entry_location(const EntryRoot& entry) {
  return dir_entry_location(entry.fd.get(), entry.st, entry.rel);
}

EntryLocation file_entry_location(int parent_fd, std::string_view name, const struct stat& st,
                                  std::string_view parent_rel) {
  EntryLocation where;
  where.rel = std::string(parent_rel);
  where.base_fd = parent_fd;
  where.manifest_name = sidecar_name(name);
  where.dev = st.st_dev;
  where.ino = st.st_ino;
  where.file_name = std::string(name);
  where.file_entry = true;
  return where;
}

}  // namespace sealfs
