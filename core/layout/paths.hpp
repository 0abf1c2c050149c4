// Safe path handling below the backing root: every walk is relative to a
// directory fd, never follows a symlink, and never leaves the root. Paths of
// objects are derived from their fds (/proc/self/fd), so renames made behind
// the mount's back are seen, not remembered wrongly; beyond PATH_MAX, where
// /proc cannot name them, directories climb ".." (dir_rel_by_climbing).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"

namespace sealfs {

// Deepest tree the store walks; deeper paths answer ELOOP instead of
// recursing without bound.
inline constexpr int kMaxTreeDepth = 256;

struct DirChild {
  std::string name;
  ino_t ino = 0;
  unsigned char type = 0;  // DT_* as getdents reports it (may be DT_UNKNOWN)
};

// Absolute path the kernel holds for fd. ESTALE when the object was deleted.
Result<std::string> fd_path(int fd);
// Path below the root (root_st: the root's stat; "" for the root itself) of
// the directory dir_fd, found without /proc: climbing ".." to the root and
// finding each directory's name in its parent by a scan. For directories
// deeper than PATH_MAX, which the kernel cannot name (fd_path answers
// ENAMETOOLONG); O(depth × directory size), so only as the fallback. The
// answer may be stale by the time it returns: callers check it by walking
// down again. ENOENT when dir_fd is not below the root (or was deleted),
// ELOOP beyond kMaxTreeDepth levels.
Result<std::string> dir_rel_by_climbing(int dir_fd, const struct stat& root_st);
// rel of `path` below `root_path`: "" for the root itself. ENOENT when path
// is not below the root (moved out behind our back).
Result<std::string> rel_below(std::string_view root_path, std::string_view path);

// '/'-separated relative path helpers. Components are never empty.
std::string join_rel(std::string_view dir, std::string_view name);
std::vector<std::string> split_rel(std::string_view rel);
// ("a/b", "c") for "a/b/c"; ("", "c") for "c".
std::pair<std::string, std::string> split_parent(std::string_view rel);

// Opens rel below dir_fd with flags (no O_CREAT), refusing symlinks at every
// component (the last included unless flags has O_PATH|O_NOFOLLOW, which opens
// the link itself) and ".." anywhere. openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS) where the kernel has it, else a walk of
// O_NOFOLLOW openat() calls (also for rel of PATH_MAX or more, which openat2
// cannot take). rel "" reopens dir_fd itself.
Result<UniqueFd> open_beneath(int dir_fd, std::string_view rel, int flags);
// Opens the object behind an O_PATH fd with new flags, through its
// /proc/self/fd magic link (as libfuse's passthrough_ll does): no name is
// resolved, so nothing can be swapped in. Refuses symlinks (ELOOP).
// O_NOATIME in flags is a wish: where it is not permitted (EPERM: the caller
// neither owns the file nor has CAP_FOWNER) the open is made without it.
Result<UniqueFd> reopen_fd(int path_fd, int flags, const struct stat* known = nullptr);
// openat(dir_fd, name, flags | O_NOATIME), or without O_NOATIME where it is
// not permitted (EPERM): every read sealfs makes for its own purposes
// (digests at seal, publish and verification, manifests) leaves B's access
// times as they were (issue 23 point 6). A raw fd, or -1 with errno set.
int openat_noatime(int dir_fd, const char* name, int flags);
// A readable fd of the directory dir_fd (which may be O_PATH): for fsync and
// getdents, which O_PATH fds do not allow.
Result<UniqueFd> open_dir_readable(int dir_fd);

Result<struct stat> stat_at(int dir_fd, std::string_view name);  // AT_SYMLINK_NOFOLLOW
Result<struct stat> stat_fd(int fd);
// An error of a call on a descriptor's own object (fstat, reopen): ENOENT
// there means the object itself is gone, which only a network filesystem
// says of a file we hold (GlusterFS, once another host replaced it): ESTALE,
// as NFS answers. Any other error is returned as it is.
Error gone_or(Error error);
Result<std::string> read_link_at(int dir_fd, std::string_view name);
// Every child of dir_fd except "." and "..".
Result<std::vector<DirChild>> read_dir(int dir_fd);

// fsync(fd), retried on EINTR.
Status sync_fd(int fd);
// fsync of the directory dir_fd (reopened readable when O_PATH).
Status sync_dir(int dir_fd);

// Removes name below dir_fd and, if it is a directory, everything in it,
// without following symlinks. ELOOP beyond kMaxTreeDepth.
Status remove_tree_at(int dir_fd, std::string_view name);

bool same_object(const struct stat& a, const struct stat& b);

// FIFOs, sockets and device nodes: no content to seal (R10).
inline bool is_special_file(mode_t mode) {
  return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}

}  // namespace sealfs
