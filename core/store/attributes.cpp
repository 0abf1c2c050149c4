// Store: what the FUSE adapter needs besides the rules (store.hpp,
// "Attributes, links, extended attributes, space"): mode, owner, times,
// handles' metadata, links, xattrs and free space, so that fs/ makes no
// system call on B itself. Mode, owner and times are not sealed (R10); the
// only rules here are R4's tracking decision and the reserved xattr names.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/paths.hpp"
#include "core/store/impl.hpp"
#include "core/store/store.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kReservedXattrPrefix = "user.sealfs";

bool reserved_xattr(std::string_view name) { return name.starts_with(kReservedXattrPrefix); }

// POSIX ACLs are not supported on the mount, as on a filesystem mounted
// without acl: sealfs does not negotiate FUSE_POSIX_ACL, so the kernel checks
// mode bits only (default_permissions) and an ACL shown or set through the
// mount would promise access control that never happens.
bool acl_xattr(std::string_view name) {
  return name == "system.posix_acl_access" || name == "system.posix_acl_default";
}

// A security label that B does not hold is "no labels here" (EOPNOTSUPP),
// not ENODATA: an LSM that labels the mount answers security.selinux itself,
// so the question reaches the daemon only where no labels are kept, and
// `ls -l` (which remembers an unsupported device) stops asking for every name.
bool label_xattr(std::string_view name) { return name == "security.selinux"; }

// O_PATH fds take neither fchmod nor xattr calls; the /proc magic link names
// exactly the object behind the fd.
std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

Status status_of(int rc, const char* what) { return rc == 0 ? Status{} : errno_error(what); }

// errno of a failed call, never 0 (a library may leave it unset).
Error failure(const char* what) { return errno != 0 ? errno_error(what) : make_error(EIO, what); }

}  // namespace

Result<struct stat> StoreAttributes::attributes(int path_fd) const {
  struct stat st {};
  if (::fstatat(path_fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return gone_or(failure("fstat"));
  return st;
}

Result<struct stat> StoreAttributes::attributes_at(int dir_fd, std::string_view name) const {
  struct stat st {};
  if (::fstatat(dir_fd, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return failure("fstatat");
  return st;
}

Status StoreAttributes::change_mode(int path_fd, mode_t mode, int handle_fd) {
  auto st = attributes(path_fd);
  if (!st) return st.error();
  if (S_ISLNK(st->st_mode)) return make_error(EOPNOTSUPP, "chmod of a symlink");
  const int rc = handle_fd >= 0 ? ::fchmod(handle_fd, mode) : ::chmod(proc_fd_path(path_fd).c_str(), mode);
  return rc == 0 ? Status{} : failure("chmod");
}

Status StoreAttributes::change_owner(int path_fd, uid_t uid, gid_t gid) {
  if (::fchownat(path_fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return failure("chown");
  return {};
}

Status StoreAttributes::change_times(int path_fd, const struct timespec (&times)[2], int handle_fd) {
  const int rc = handle_fd >= 0 ? ::futimens(handle_fd, times)
                                : ::utimensat(path_fd, "", times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? Status{} : failure("utimensat");
}

Status StoreAttributes::truncate_handle(int handle_fd, off_t size) {
  return ::ftruncate(handle_fd, size) == 0 ? Status{} : failure("ftruncate");
}

Status StoreAttributes::allocate(int handle_fd, int mode, off_t offset, off_t length) {
  return with_room(*impl_, [&] {
    return ::fallocate(handle_fd, mode, offset, length) == 0 ? Status{} : failure("fallocate");
  });
}

bool StoreAttributes::make_room() { return impl_->quarantine.make_room(); }

Result<off_t> StoreAttributes::seek(int handle_fd, off_t offset, int whence) {
  const off_t pos = ::lseek(handle_fd, offset, whence);
  if (pos < 0) return failure("lseek");
  return pos;
}

Status StoreAttributes::buffered_io(int handle_fd) {
  const int flags = ::fcntl(handle_fd, F_GETFL);
  if (flags < 0) return failure("fcntl F_GETFL");
  if ((flags & O_DIRECT) == 0) return {};
  return ::fcntl(handle_fd, F_SETFL, flags & ~O_DIRECT) == 0 ? Status{} : failure("fcntl F_SETFL");
}

Status StoreAttributes::sync_handle(int handle_fd, bool data_only) {
  const int rc = data_only ? ::fdatasync(handle_fd) : ::fsync(handle_fd);
  return rc == 0 ? Status{} : failure("fsync");
}

Status StoreAttributes::sync_directory(int path_fd, bool data_only) {
  // O_PATH fds cannot be fsync'ed: open the directory itself for this.
  UniqueFd fd(::openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return failure("open directory");
  const int rc = data_only ? ::fdatasync(fd.get()) : ::fsync(fd.get());
  return rc == 0 ? Status{} : failure("fsync directory");
}

Result<std::string> StoreAttributes::read_link(int path_fd) const {
  std::string target(PATH_MAX + 1, '\0');
  const ssize_t n = ::readlinkat(path_fd, "", target.data(), target.size());
  if (n < 0) return failure("readlink");
  if (static_cast<std::size_t>(n) >= target.size())
    return make_error(ENAMETOOLONG, "symlink target too long");
  target.resize(static_cast<std::size_t>(n));
  return target;
}

Result<struct statvfs> StoreAttributes::space() const {
  struct statvfs sv {};
  if (::fstatvfs(impl_->root_fd.get(), &sv) != 0) return failure("statvfs");
  return sv;
}

Status StoreAttributes::give_to(Found& found, int parent_fd, uid_t uid, gid_t gid, mode_t wanted) {
  Status first;
  auto keep = [&first](Status s) {
    if (first && !s) first = std::move(s);
  };
  auto parent = attributes(parent_fd);
  const bool setgid_parent = parent && (parent->st_mode & S_ISGID) != 0;
  const gid_t group = setgid_parent ? static_cast<gid_t>(-1) : gid;
  keep(status_of(::fchownat(found.fd.get(), "", uid, group, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW),
                 "chown of a new object to its caller"));
  if (auto now = attributes(found.fd.get())) found.st = *now;
  const mode_t lost = wanted & (S_ISUID | S_ISGID) & ~found.st.st_mode;
  if (lost != 0 && !S_ISLNK(found.st.st_mode)) {
    keep(status_of(::chmod(proc_fd_path(found.fd.get()).c_str(), (found.st.st_mode & 07777) | lost),
                   "mode of a new object"));
    if (auto now = attributes(found.fd.get())) found.st = *now;
  }
  return first;
}

bool StoreAttributes::tracked_kind(ObjectKind kind) {
  return kind != ObjectKind::volatile_obj && kind != ObjectKind::special && kind != ObjectKind::root &&
         kind != ObjectKind::container && kind != ObjectKind::entry_root && kind != ObjectKind::dir_in_entry;
}

bool StoreAttributes::writes_tracked(int path_fd, ObjectKind last_kind, PlaceHint hint) {
  auto st = attributes(path_fd);
  if (!st) return tracked_kind(last_kind);
  if (!S_ISREG(st->st_mode)) return false;  // FIFOs and sockets are never sealed
  auto in_volatile = sealfs::in_volatile_area(*impl_, path_fd, hint);
  return in_volatile ? !*in_volatile : tracked_kind(last_kind);
}

Result<Store::XattrValue> StoreAttributes::get_xattr(int path_fd, std::string_view name,
                                                     std::size_t capacity) {
  XattrValue out;
  if (reserved_xattr(name)) {
    auto st = attributes(path_fd);
    auto root_st = attributes(impl_->root_fd.get());
    if (name != kStatusXattr || !st || !root_st || !same_object(*st, *root_st))
      return make_error(ENODATA, "reserved extended attribute");
    out.value = status_of(*impl_).to_json();
    out.length = out.value.size();
    if (capacity == 0) out.value.clear();
    if (out.length > capacity && capacity != 0)
      return make_error(ERANGE, "getxattr: value larger than the buffer");
    return out;
  }
  if (acl_xattr(name)) return make_error(EOPNOTSUPP, "POSIX ACLs are not supported on the mount");
  out.value.assign(capacity, '\0');
  const ssize_t got = ::getxattr(proc_fd_path(path_fd).c_str(), std::string(name).c_str(),
                                 capacity == 0 ? nullptr : out.value.data(), capacity);
  if (got < 0 && errno == ENODATA && label_xattr(name)) return make_error(EOPNOTSUPP, "no security labels");
  if (got < 0) return failure("getxattr");
  out.length = static_cast<std::size_t>(got);
  out.value.resize(capacity == 0 ? 0 : out.length);
  return out;
}

Result<std::string> StoreAttributes::list_xattrs(int path_fd) const {
  const std::string path = proc_fd_path(path_fd);
  std::string names;
  for (int attempt = 0; attempt < 8; ++attempt) {  // the list may grow between the two calls
    const ssize_t want = ::listxattr(path.c_str(), nullptr, 0);
    if (want < 0) return failure("listxattr");
    names.assign(static_cast<std::size_t>(want), '\0');
    const ssize_t got = want == 0 ? 0 : ::listxattr(path.c_str(), names.data(), names.size());
    if (got >= 0) {
      names.resize(static_cast<std::size_t>(got));
      break;
    }
    if (errno != ERANGE) return failure("listxattr");
  }
  std::string shown;
  for (std::size_t pos = 0; pos < names.size();) {
    const std::size_t end = names.find('\0', pos);
    const std::string_view one(names.data() + pos, (end == std::string::npos ? names.size() : end) - pos);
    if (!one.empty() && !reserved_xattr(one) && !acl_xattr(one)) {
      shown.append(one);
      shown.push_back('\0');
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return shown;
}

Status StoreAttributes::set_xattr(int path_fd, std::string_view name, std::string_view value, int flags) {
  if (reserved_xattr(name)) return make_error(EPERM, "reserved extended attribute");
  if (acl_xattr(name)) return make_error(EOPNOTSUPP, "POSIX ACLs are not supported on the mount");
  const std::string key(name);
  if (::setxattr(proc_fd_path(path_fd).c_str(), key.c_str(), value.data(), value.size(), flags) != 0)
    return failure("setxattr");
  return {};
}

Status StoreAttributes::remove_xattr(int path_fd, std::string_view name) {
  if (reserved_xattr(name)) return make_error(EPERM, "reserved extended attribute");
  if (acl_xattr(name)) return make_error(EOPNOTSUPP, "POSIX ACLs are not supported on the mount");
  const std::string key(name);
  if (::removexattr(proc_fd_path(path_fd).c_str(), key.c_str()) != 0) return failure("removexattr");
  return {};
}

}  // namespace sealfs
