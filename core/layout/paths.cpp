#include "core/layout/paths.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"

namespace sealfs {
namespace {

std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// Set once the kernel answered ENOSYS, so later calls go straight to the walk.
std::atomic<bool> g_openat2_missing{false};

Result<UniqueFd> openat2_beneath(int dir_fd, const std::string& rel, int flags) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, dir_fd, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (errno == EINTR || errno == EAGAIN) continue;  // EAGAIN: a concurrent rename raced the lookup
    if (errno == EXDEV) errno = ENOENT;               // a path leaving the root does not exist for us
    return errno_error("openat2 " + rel);
  }
}

Result<UniqueFd> walk_beneath(int dir_fd, const std::vector<std::string>& parts, int flags) {
  UniqueFd cur;  // empty: dir_fd itself
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    int fd =
        ::openat(cur ? cur.get() : dir_fd, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno_error("openat " + parts[i]);
    cur.reset(fd);
  }
  int fd = ::openat(cur ? cur.get() : dir_fd, parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_error("openat " + parts.back());
  return UniqueFd(fd);
}

}  // namespace

Result<std::string> fd_path(int fd) {
  std::string buf(PATH_MAX + 1, '\0');
  ssize_t n = ::readlink(proc_fd_path(fd).c_str(), buf.data(), buf.size());
  if (n < 0) return errno_error("readlink /proc/self/fd");
  if (static_cast<std::size_t>(n) >= buf.size()) return make_error(ENAMETOOLONG, "path of fd too long");
  buf.resize(static_cast<std::size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (buf.empty() || buf[0] != '/' ||
      (buf.size() > kDeleted.size() &&
       buf.compare(buf.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0))
    return make_error(ESTALE, "object was deleted: " + buf);
  return buf;
}

namespace {

// The name under which parent holds the object `child` (a directory): the
// entry whose d_ino matches, confirmed by fstatat; then, for mount points
// (whose d_ino is the covered directory's), every directory entry by fstatat.
// ENOENT when none holds it (it moved meanwhile).
Result<std::string> name_in(int parent_fd, const struct stat& child) {
  auto children = read_dir(parent_fd);
  if (!children) return children.error();
  auto holds = [&](const std::string& name) {
    struct stat st {};
    return ::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && same_object(st, child);
  };
  for (const auto& c : *children)
    if (c.ino == child.st_ino && holds(c.name)) return c.name;
  for (const auto& c : *children)
    if ((c.type == DT_DIR || c.type == DT_UNKNOWN) && c.ino != child.st_ino && holds(c.name)) return c.name;
  return make_error(ENOENT, "directory not found in its parent (moved meanwhile)");
}

}  // namespace

Result<std::string> dir_rel_by_climbing(int dir_fd, const struct stat& root_st) {
  int raw = ::openat(dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (raw < 0) return errno_error("openat .");
  UniqueFd cur(raw);
  auto first = stat_fd(cur.get());
  if (!first) return first.error();
  struct stat st = *first;
  std::vector<std::string> names;  // leaf first
  while (!same_object(st, root_st)) {
    // The store walks no deeper than this (walk_context), so neither does the climb.
    if (static_cast<int>(names.size()) >= kMaxTreeDepth) return make_error(ELOOP, "directory too deep");
    // ".." of a deleted directory is ENOENT: deleted objects are not below the root.
    raw = ::openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (raw < 0) return errno_error("openat ..");
    UniqueFd parent(raw);
    auto pst = stat_fd(parent.get());
    if (!pst) return pst.error();
    if (same_object(*pst, st)) return make_error(ENOENT, "outside the backing root");  // reached "/"
    auto name = name_in(parent.get(), st);
    if (!name) return name.error();
    names.push_back(std::move(*name));
    cur = std::move(parent);
    st = *pst;
  }
  std::string rel;
  std::reverse(names.begin(), names.end());  // climbed leaf first
  for (const auto& name : names) rel = join_rel(rel, name);
  return rel;
}

Result<std::string> rel_below(std::string_view root_path, std::string_view path) {
  if (path == root_path) return std::string();
  std::string prefix(root_path);
  if (prefix != "/") prefix += '/';
  if (path.size() <= prefix.size() || path.substr(0, prefix.size()) != prefix)
    return make_error(ENOENT, "outside the backing root: " + std::string(path));
  return std::string(path.substr(prefix.size()));
}

std::string join_rel(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string out(dir);
  out += '/';
  out += name;
  return out;
}

std::vector<std::string> split_rel(std::string_view rel) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= rel.size()) {
    std::size_t slash = rel.find('/', start);
    if (slash == std::string_view::npos) slash = rel.size();
    if (slash > start) parts.emplace_back(rel.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

std::pair<std::string, std::string> split_parent(std::string_view rel) {
  std::size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) return {std::string(), std::string(rel)};
  return {std::string(rel.substr(0, slash)), std::string(rel.substr(slash + 1))};
}

Result<UniqueFd> open_beneath(int dir_fd, std::string_view rel, int flags) {
  if ((flags & O_CREAT) != 0) return make_error(EINVAL, "open_beneath: O_CREAT not allowed");
  std::vector<std::string> parts = split_rel(rel);
  if (parts.empty()) {
    int fd = ::openat(dir_fd, ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC);
    if (fd < 0) return errno_error("openat .");
    return UniqueFd(fd);
  }
  if (static_cast<int>(parts.size()) > kMaxTreeDepth) return make_error(ELOOP, "path too deep");
  for (const auto& p : parts)
    if (p == "." || p == "..") return make_error(ENOENT, "'..' or '.' in a backing path");
  std::string joined;
  for (const auto& p : parts) joined = join_rel(joined, p);
  // openat2 takes one path string, which the kernel caps at PATH_MAX; deeper
  // paths (R10) take the walk, whose components are each short.
  if (joined.size() < PATH_MAX && !g_openat2_missing.load(std::memory_order_relaxed)) {
    auto r = openat2_beneath(dir_fd, joined, flags);
    if (r.ok() || (r.code() != ENOSYS && r.code() != ENAMETOOLONG)) return r;
    if (r.code() == ENOSYS) g_openat2_missing.store(true, std::memory_order_relaxed);
  }
  return walk_beneath(dir_fd, parts, flags);
}

Result<UniqueFd> reopen_fd(int path_fd, int flags, const struct stat* known) {
  // An fd always names the same object: a stat the caller already has of
  // path_fd serves as well as a new one.
  Result<struct stat> st = known != nullptr ? Result<struct stat>(*known) : stat_fd(path_fd);
  if (!st) return st.error();
  if (S_ISLNK(st->st_mode)) return make_error(ELOOP, "cannot open a symlink for I/O");
  // O_NOFOLLOW would refuse the magic link itself; the fstat above is the
  // no-follow guarantee. O_CREAT/O_EXCL make no sense on an existing object.
  const std::string proc = proc_fd_path(path_fd);
  flags = (flags & ~(O_NOFOLLOW | O_CREAT | O_EXCL)) | O_CLOEXEC;
  int fd = ::open(proc.c_str(), flags);
  if (fd < 0 && errno == EPERM && (flags & O_NOATIME) != 0) fd = ::open(proc.c_str(), flags & ~O_NOATIME);
  if (fd < 0) return gone_or(errno_error("reopen"));
  UniqueFd out(fd);
  auto now = stat_fd(out.get());
  if (!now) return now.error();
  if (!same_object(*st, *now)) return make_error(ESTALE, "object changed during reopen");
  return out;
}

int openat_noatime(int dir_fd, const char* name, int flags) {
  int fd = ::openat(dir_fd, name, flags | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::openat(dir_fd, name, flags & ~O_NOATIME);
  return fd;
}

Error gone_or(Error error) {
  if (error.code == ENOENT || error.code == ESTALE)
    return make_error(ESTALE, error.message + ": the object is gone from the backing store");
  return error;
}

Result<UniqueFd> open_dir_readable(int dir_fd) {
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("open directory");
  return UniqueFd(fd);
}

Result<struct stat> stat_at(int dir_fd, std::string_view name) {
  struct stat st {};
  if (::fstatat(dir_fd, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno_error("fstatat " + std::string(name));
  return st;
}

Result<struct stat> stat_fd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("fstat");
  return st;
}

Result<std::string> read_link_at(int dir_fd, std::string_view name) {
  std::string buf(PATH_MAX + 1, '\0');
  ssize_t n = ::readlinkat(dir_fd, std::string(name).c_str(), buf.data(), buf.size());
  if (n < 0) return errno_error("readlinkat " + std::string(name));
  if (static_cast<std::size_t>(n) >= buf.size()) return make_error(ENAMETOOLONG, "symlink target too long");
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

Result<std::vector<DirChild>> read_dir(int dir_fd) {
  auto fd = open_dir_readable(dir_fd);
  if (!fd) return fd.error();
  // getdents64 itself: a DIR stream costs an fstat and two fcntls more per
  // listing, and every opendir through the mount lists its directory.
  std::vector<char> buf(std::size_t{32} * 1024);
  std::vector<DirChild> out;
  for (;;) {
    const ssize_t n = ::getdents64(fd->get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("getdents64");
    if (n == 0) break;
    for (ssize_t at = 0; at < n;) {
      struct dirent64 de {};
      std::memcpy(&de, buf.data() + at, std::min(sizeof de, static_cast<std::size_t>(n - at)));
      const std::string_view name(buf.data() + at + offsetof(struct dirent64, d_name));
      if (de.d_reclen == 0) return make_error(EIO, "getdents64: empty record");
      at += de.d_reclen;
      if (name == "." || name == "..") continue;
      out.push_back(DirChild{std::string(name), de.d_ino, de.d_type});
    }
  }
  return out;
}

Status sync_fd(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno_error("fsync");
  }
  return {};
}

Status sync_dir(int dir_fd) {
  auto fd = open_dir_readable(dir_fd);
  if (!fd) return fd.error();
  return sync_fd(fd->get());
}

namespace {
Status remove_tree_rec(int dir_fd, const std::string& name, int depth) {
  if (depth > kMaxTreeDepth) return make_error(ELOOP, "tree too deep to remove");
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return {};
  if (errno != EISDIR && errno != EPERM) return errno_error("unlinkat " + name);
  int fd = ::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_error("openat " + name);
  UniqueFd sub(fd);
  auto children = read_dir(sub.get());
  if (!children) return children.error();
  for (const auto& c : *children) {
    Status s = remove_tree_rec(sub.get(), c.name, depth + 1);
    if (!s) return s;
  }
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return errno_error("rmdir " + name);
  return {};
}
}  // namespace

Status remove_tree_at(int dir_fd, std::string_view name) {
  return remove_tree_rec(dir_fd, std::string(name), 0);
}

bool same_object(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace sealfs
