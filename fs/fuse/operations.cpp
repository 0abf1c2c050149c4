// The FUSE low-level operations: a thin adapter from requests to Store calls.
// Every backing access goes through an fd from the inode table (O_PATH) or a
// handle, with *at() calls and no-follow flags.
//
// Locks: no lock operations are implemented, so the kernel handles POSIX and
// flock locks itself. They work between processes on this host (as on any
// local filesystem) but are not seen by other hosts sharing B.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // RENAME_EXCHANGE
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "core/base/cancel.hpp"
#include "fs/fuse/fd_bufvec.hpp"
#include "fs/fuse/filesystem.hpp"

namespace sealfs::fs {

void Filesystem::attach_hooks(StoreOptions& options) {
  options.in_progress = [this](dev_t dev, ino_t ino) { return writers.in_progress(dev, ino); };
  options.on_invalidate = [this](const Invalidation& event) { invalidator.post(event); };
}

namespace {

constexpr std::string_view kReservedXattrPrefix = "user.sealfs";
constexpr std::string_view kStatusXattr = "user.sealfs.status";

Filesystem& fs_of(fuse_req_t req) { return *static_cast<Filesystem*>(fuse_req_userdata(req)); }

bool request_interrupted(void* req) { return fuse_req_interrupted(static_cast<fuse_req_t>(req)) != 0; }

// Run a handler; any exception that a library let through becomes an errno
// here instead of unwinding into libfuse's C loop. While it runs, a hash it
// starts or waits for is abandoned if the caller gives up (FUSE INTERRUPT).
template <class Fn>
void guarded(fuse_req_t req, Fn&& fn) {
  CancelScope scope(request_interrupted, req);
  try {
    fn();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (...) {
    syslog(LOG_ERR, "sealfs: unexpected exception in a request handler");
    fuse_reply_err(req, EIO);
  }
}

// Requests without a reply (forget): same boundary, nothing to answer.
template <class Fn>
void guarded_noreply(fuse_req_t req, Fn&& fn) {
  try {
    fn();
  } catch (...) {
    syslog(LOG_ERR, "sealfs: unexpected exception in forget");
  }
  fuse_reply_none(req);
}

int errno_or(int fallback) { return errno != 0 ? errno : fallback; }

void reply_error(fuse_req_t req, const Error& error) {
  fuse_reply_err(req, error.code > 0 ? error.code : EIO);
}

// Sealed and verified objects are immutable through the mount: the kernel may
// cache them for cache_timeout (and is told when that stops being true).
// Volatile directories and files too: sealfs never hides, seals or replaces
// them behind the kernel's back, changes made through the mount update the
// kernel's own copy, and changes behind it are seen after cache_timeout (R9)
// as anywhere else. (Uncached, every path through tmp/ or a staging directory
// cost a LOOKUP and GETATTRs: a TileLang save 1.83x -> 1.41x of plain+fsync.)
// In progress files (sealed at their last close) and special objects: none.
double timeout_for(const Filesystem& fs, ObjectKind kind, mode_t mode) {
  switch (kind) {
    case ObjectKind::volatile_obj:
      return S_ISDIR(mode) || S_ISREG(mode) ? fs.cache_timeout : 0.0;
    case ObjectKind::in_progress:
    case ObjectKind::special:
      return 0.0;
    default:
      return fs.cache_timeout;
  }
}

bool is_sealed(ObjectKind kind) {
  return kind == ObjectKind::sealed_file || kind == ObjectKind::file_in_entry;
}

std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

int stat_fd(int fd, struct stat& st) {
  return ::fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno_or(EIO);
}

// Objects made through the mount belong to the caller (R10). The backing
// object was created by the daemon (root); a setgid parent keeps the group
// the backing filesystem already chose, as a native filesystem would. chown
// clears setuid and setgid, so the mode the caller asked for is set again.
void give_to_caller(const Filesystem& fs, fuse_req_t req, int parent_fd, Found& found, mode_t wanted) {
  if (!fs.chown_to_caller) return;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  struct stat parent {};
  const bool setgid_parent = stat_fd(parent_fd, parent) == 0 && (parent.st_mode & S_ISGID) != 0;
  const gid_t gid = setgid_parent ? static_cast<gid_t>(-1) : ctx->gid;
  if (::fchownat(found.fd.get(), "", ctx->uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
    syslog(LOG_WARNING, "sealfs: chown of a new object to %u: %s", ctx->uid, std::strerror(errno));
  stat_fd(found.fd.get(), found.st);
  const mode_t lost = wanted & (S_ISUID | S_ISGID) & ~found.st.st_mode;
  if (lost != 0 && !S_ISLNK(found.st.st_mode)) {
    // fchmod does not work on O_PATH fds; the /proc link names exactly this object.
    if (::chmod(proc_fd_path(found.fd.get()).c_str(), (found.st.st_mode & 07777) | lost) != 0)
      syslog(LOG_WARNING, "sealfs: mode of a new object: %s", std::strerror(errno));
    stat_fd(found.fd.get(), found.st);
  }
}

// Put a found object (seen as `name` in `dir`) into the inode table and
// describe it for the kernel.
fuse_entry_param remember(Filesystem& fs, Found&& found, const Inode& dir, std::string_view name) {
  fuse_entry_param e{};
  e.attr = found.st;
  const double timeout = timeout_for(fs, found.kind, found.st.st_mode);
  InodeRef inode = fs.inodes.remember(std::move(found));
  inode->seen_at(dir.path_fd(), name);
  e.ino = inode->id;
  e.generation = 0;  // ids are never reused within a mount
  e.attr_timeout = timeout;
  e.entry_timeout = timeout;
  return e;
}

void reply_entry(fuse_req_t req, Filesystem& fs, Found&& found, const Inode& dir, std::string_view name) {
  fuse_entry_param e = remember(fs, std::move(found), dir, name);
  // The request may have been interrupted: then the kernel never learns of
  // this lookup and must not be counted as holding it.
  if (fuse_reply_entry(req, &e) != 0) fs.inodes.forget(e.ino, 1);
}

InodeRef inode_or_reply(fuse_req_t req, fuse_ino_t ino) {
  InodeRef inode = fs_of(req).inodes.get(ino);
  if (!inode) fuse_reply_err(req, ESTALE);
  return inode;
}

std::shared_ptr<FileHandle> file_or_reply(fuse_req_t req, const fuse_file_info* fi) {
  auto handle = fi ? fs_of(req).files.get(fi->fh) : nullptr;
  if (!handle || !handle->fd) fuse_reply_err(req, EBADF);
  return handle;
}

bool opens_for_write(int flags) { return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0; }

// R4 applies to regular files outside volatile areas; volatile files are
// plain passthrough and FIFOs/sockets are never sealed.
bool tracked_kind(ObjectKind kind) {
  return kind != ObjectKind::volatile_obj && kind != ObjectKind::special && kind != ObjectKind::root &&
         kind != ObjectKind::container && kind != ObjectKind::entry_root && kind != ObjectKind::dir_in_entry;
}

// tracked_kind for a write open of an inode the kernel already had: decided
// by where the file is now. Its kind is from its last lookup, and the kernel
// keeps a name across a rename through the mount for the cache timeout, so a
// file moved out of tmp/ into an entry may still say volatile.
bool writes_tracked(Filesystem& fs, const Inode& inode) {
  const auto pfd_ref = inode.path_fd();
  struct stat st {};
  if (stat_fd(pfd_ref->get(), st) != 0) return tracked_kind(inode.kind);
  if (!S_ISREG(st.st_mode)) return false;  // FIFOs and sockets are never sealed
  const auto seen = inode.last_seen();
  auto in_volatile = fs.store->in_volatile_area(pfd_ref->get(), seen.hint());
  return in_volatile ? !*in_volatile : tracked_kind(inode.kind);
}

// The end of a file handle: close it and, when it was the last write handle
// of its file, seal it or abandon it (R4) while holding the file's gate.
void finish_handle(Filesystem& fs, FileHandle& handle) {
  handle.fd.reset();
  if (!handle.tracked) return;
  const InodeRef& inode = handle.inode;
  const HandleEnd end{handle.changed.load(), handle.abandoned.load() || !handle.flushed.load(), handle.made,
                      handle.closed_normally.load()};
  const auto last = fs.writers.released(inode->dev, inode->ino, end);
  if (!last) return;
  Status status;
  {
    // The file stops being in progress before its gate opens: a rename or
    // lookup waiting on the gate then finds it sealed, never in between.
    WriterTracking::Hold gate;
    if (*last != LastClose::untouched) {
      gate = fs.writers.hold(inode->dev, inode->ino);
      const auto pfd = inode->path_fd();
      const auto seen = inode->last_seen();
      status = *last == LastClose::abandon ? fs.store->abandon(pfd->get(), seen.hint())
                                           : fs.store->seal(pfd->get(), seen.hint());
    }
    fs.writers.finished(inode->dev, inode->ino);
  }
  if (!status)
    syslog(LOG_WARNING, "sealfs: %s at last close: %s", *last == LastClose::abandon ? "abandon" : "seal",
           status.error().message.c_str());
}

// The gate key of name in dir (absent: none, which holds nothing).
WriterTracking::Key key_of(int dir_fd, const char* name) {
  struct stat st {};
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

// ---- lookup and attributes ---------------------------------------------------

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    auto found = fs.store->lookup(dir->path_fd()->get(), name);
    if (!found) return reply_error(req, found.error());
    reply_entry(req, fs, std::move(*found), *dir, name);
  });
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  guarded_noreply(req, [&] { fs_of(req).inodes.forget(ino, nlookup); });
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  guarded_noreply(req, [&] {
    Filesystem& fs = fs_of(req);
    for (size_t i = 0; i < count; ++i) fs.inodes.forget(forgets[i].ino, forgets[i].nlookup);
  });
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    struct stat st {};
    if (int e = stat_fd(inode->path_fd()->get(), st)) return (void)fuse_reply_err(req, e);
    fuse_reply_attr(req, &st, timeout_for(fs, inode->kind, st.st_mode));
  });
}

// Mode, owner and times are not sealed (R10): they go straight to the
// backing object. A size change is content: through the store unless a
// handle is open, in which case the file is in progress anyway.
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    auto handle = fi ? fs.files.get(fi->fh) : nullptr;
    const int hfd = handle && handle->fd ? handle->fd.get() : -1;
    const auto pfd_ref = inode->path_fd();  // held: a concurrent lookup may replace it
    const int pfd = pfd_ref->get();
    // Never while the file is being sealed: new times or a new size in the
    // middle of its hash would fail the seal.
    auto gate = fs.writers.hold(inode->dev, inode->ino);

    if (to_set & FUSE_SET_ATTR_MODE) {
      struct stat st {};
      if (int e = stat_fd(pfd, st)) return (void)fuse_reply_err(req, e);
      if (S_ISLNK(st.st_mode)) return (void)fuse_reply_err(req, EOPNOTSUPP);  // as lchmod(2) on Linux
      // fchmod does not work on O_PATH fds; the /proc link names exactly this object.
      const int rc =
          hfd >= 0 ? ::fchmod(hfd, attr->st_mode) : ::chmod(proc_fd_path(pfd).c_str(), attr->st_mode);
      if (rc != 0) return (void)fuse_reply_err(req, errno_or(EIO));
    }
    if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
      const uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : static_cast<uid_t>(-1);
      const gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : static_cast<gid_t>(-1);
      if (::fchownat(pfd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
        return (void)fuse_reply_err(req, errno_or(EIO));
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
      if (hfd >= 0) {
        if (::ftruncate(hfd, attr->st_size) != 0) return (void)fuse_reply_err(req, errno_or(EIO));
        handle->changed = true;
      } else if (Status s = fs.store->truncate(pfd, attr->st_size, inode->last_seen().hint()); !s) {
        return reply_error(req, s.error());
      }
    }
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
      struct timespec tv[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
      if (to_set & FUSE_SET_ATTR_ATIME_NOW)
        tv[0].tv_nsec = UTIME_NOW;
      else if (to_set & FUSE_SET_ATTR_ATIME)
        tv[0] = attr->st_atim;
      if (to_set & FUSE_SET_ATTR_MTIME_NOW)
        tv[1].tv_nsec = UTIME_NOW;
      else if (to_set & FUSE_SET_ATTR_MTIME)
        tv[1] = attr->st_mtim;
      const int rc =
          hfd >= 0 ? ::futimens(hfd, tv) : ::utimensat(pfd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
      if (rc != 0) return (void)fuse_reply_err(req, errno_or(EIO));
    }
    if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
      // Who may read the file changed: so does who may read its manifest.
      if (Status s = fs.store->refresh_manifest_access(pfd, inode->last_seen().hint()); !s)
        syslog(LOG_WARNING, "sealfs: access of a manifest after chmod/chown: %s", s.error().message.c_str());
    }
    struct stat st {};
    if (int e = stat_fd(pfd, st)) return (void)fuse_reply_err(req, e);
    fuse_reply_attr(req, &st, timeout_for(fs, inode->kind, st.st_mode));
  });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    char buf[PATH_MAX + 1];
    const ssize_t n = ::readlinkat(inode->path_fd()->get(), "", buf, sizeof buf);
    if (n < 0) return (void)fuse_reply_err(req, errno_or(EIO));
    if (static_cast<size_t>(n) >= sizeof buf) return (void)fuse_reply_err(req, ENAMETOOLONG);
    buf[n] = '\0';
    fuse_reply_readlink(req, buf);
  });
}

// ---- creation and removal ------------------------------------------------------

void reply_created(fuse_req_t req, Filesystem& fs, const InodeRef& dir, std::string_view name,
                   Result<Found> found, mode_t mode) {
  if (!found) return reply_error(req, found.error());
  give_to_caller(fs, req, dir->path_fd()->get(), *found, mode);
  reply_entry(req, fs, std::move(*found), *dir, name);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    reply_created(req, fs, dir, name, fs.store->mkdir(dir->path_fd()->get(), name, mode), mode);
  });
}

void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    reply_created(req, fs, dir, name, fs.store->symlink(dir->path_fd()->get(), name, target), 0);
  });
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    reply_created(req, fs, dir, name, fs.store->mknod(dir->path_fd()->get(), name, mode, rdev), mode);
  });
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    InodeRef dir = inode_or_reply(req, newparent);
    if (!dir) return;
    auto gate = fs.writers.hold(inode->dev, inode->ino);  // a link publishes what a seal settles
    const auto seen = inode->last_seen();
    auto found = fs.store->link(inode->path_fd()->get(), dir->path_fd()->get(), newname, seen.hint());
    if (!found) return reply_error(req, found.error());
    reply_entry(req, fs, std::move(*found), *dir, newname);  // a link keeps the object's owner
  });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    Filesystem& fs = fs_of(req);
    const auto dfd = dir->path_fd();
    auto gate = fs.writers.hold({key_of(dfd->get(), name)});
    fuse_reply_err(req, fs.store->unlink(dfd->get(), name).code());
  });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    fuse_reply_err(req, fs_of(req).store->rmdir(dir->path_fd()->get(), name).code());
  });
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned int flags) {
  guarded(req, [&] {
    InodeRef src = inode_or_reply(req, parent);
    if (!src) return;
    InodeRef dst = inode_or_reply(req, newparent);
    if (!dst) return;
    Filesystem& fs = fs_of(req);
    const auto sfd = src->path_fd();
    const auto dfd = dst->path_fd();
    // A file closed a moment ago may still be being sealed: move it (or
    // replace it) only once its seal has settled.
    const WriterTracking::Key moved = key_of(sfd->get(), name);
    const WriterTracking::Key swapped = key_of(dfd->get(), newname);
    auto gate = fs.writers.hold({moved, swapped});
    const Status renamed = fs.store->rename(sfd->get(), name, dfd->get(), newname, flags);
    if (renamed) {
      // The kernel keeps its names across a rename and looks nothing up:
      // the moved objects are seen where they went (Inode::seen_at).
      if (auto inode = fs.inodes.find(moved.first, moved.second)) inode->seen_at(dfd, newname);
      if ((flags & RENAME_EXCHANGE) != 0)
        if (auto inode = fs.inodes.find(swapped.first, swapped.second)) inode->seen_at(sfd, name);
    }
    fuse_reply_err(req, renamed.code());
  });
}

// ---- files -------------------------------------------------------------------

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    if (fs.descriptors_low()) return (void)fuse_reply_err(req, ENFILE);
    auto created = fs.store->create(dir->path_fd()->get(), name, mode, fi->flags);
    if (!created) return reply_error(req, created.error());
    give_to_caller(fs, req, dir->path_fd()->get(), created->found, mode);
    // A new file is in progress whatever the open mode: O_CREAT with
    // O_RDONLY makes a file that is sealed empty at its close (R10).
    const bool writer = opens_for_write(fi->flags);
    const bool tracked = (writer || created->made) && tracked_kind(created->found.kind);
    auto handle = std::make_shared<FileHandle>();
    handle->fd = std::move(created->open_fd);
    handle->tracked = tracked;
    handle->made = created->made;
    handle->changed = (fi->flags & O_TRUNC) != 0 && !created->made;
    fuse_entry_param e = remember(fs, std::move(created->found), *dir, name);
    handle->inode = fs.inodes.get(e.ino);
    if (tracked) fs.writers.opened(handle->inode->dev, handle->inode->ino);
    fi->fh = fs.files.add(handle);
    fi->keep_cache = 0;
    if (fuse_reply_create(req, &e, fi) != 0) {
      if (auto taken = fs.files.take(fi->fh)) finish_handle(fs, *taken);
      fs.inodes.forget(e.ino, 1);
    }
  });
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    if (fs.descriptors_low()) return (void)fuse_reply_err(req, ENFILE);
    const int flags = fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY);
    const bool writer = opens_for_write(flags);
    const ObjectKind kind = inode->kind;
    const bool tracked = writer && writes_tracked(fs, *inode);
    // In progress from before the open, so that the store never judges the
    // file half written by this very handle; a seal still running from the
    // last writer's close finishes first (a second writer waits for it).
    Result<UniqueFd> fd = make_error(EIO, "not opened");
    {
      WriterTracking::Hold gate;
      if (tracked) {
        gate = fs.writers.hold(inode->dev, inode->ino);
        fs.writers.opened(inode->dev, inode->ino);
      }
      fd = fs.store->open_file(inode->path_fd()->get(), flags, inode->last_seen().hint());
    }
    if (!fd) {
      if (tracked) fs.writers.cancelled(inode->dev, inode->ino);
      // The kernel resolved the name to this inode before it was replaced or
      // unlinked (R6 swaps, link-then-unlink). ESTALE makes the VFS redo the
      // open with a fresh lookup, which finds the current object or answers
      // ENOENT itself; a native filesystem would never say ENOENT here.
      if (fd.code() == ENOENT) return (void)fuse_reply_err(req, ESTALE);
      return reply_error(req, fd.error());
    }
    auto handle = std::make_shared<FileHandle>();
    handle->fd = std::move(*fd);
    handle->inode = inode;
    handle->tracked = tracked;
    handle->changed = tracked && (flags & O_TRUNC) != 0;
    if (!writer && is_sealed(kind)) {
      struct stat st {};
      handle->sealed_read = stat_fd(handle->fd.get(), st) == 0;
      handle->verified = Stamp::of(st);
    }
    fi->fh = fs.files.add(handle);
    // Verified sealed content cannot change through the mount without an
    // invalidation: keep the page cache across opens.
    fi->keep_cache = !writer && is_sealed(kind);
    // FLUSH only matters to write handles (R4 tells a clean last close from
    // an abandoned one by it): a read-only close costs no round trip.
    fi->noflush = !tracked;
    if (fuse_reply_open(req, fi) != 0) {
      if (auto taken = fs.files.take(fi->fh)) finish_handle(fs, *taken);
    }
  });
}

// R2: a READ that reaches the daemon (a page the kernel does not hold) serves
// only bytes that were verified. The backing file's stamp is compared with
// the one verified at open; a file changed since is verified again (and
// quarantined if damaged), and EIO is the answer unless it still checks out.
bool still_verified(Filesystem& fs, FileHandle& handle) {
  struct stat st {};
  if (stat_fd(handle.fd.get(), st) != 0) return false;
  const Stamp now = Stamp::of(st);
  {
    std::lock_guard lock(handle.stamp_mu);
    if (now == handle.verified) return true;
  }
  auto fresh =
      fs.store->open_file(handle.inode->path_fd()->get(), O_RDONLY, handle.inode->last_seen().hint());
  if (!fresh) {
    syslog(LOG_WARNING, "sealfs: read of a file changed behind the mount refused: %s",
           fresh.error().message.c_str());
    return false;
  }
  struct stat again {};
  if (stat_fd(fresh->get(), again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)
    return false;
  std::lock_guard lock(handle.stamp_mu);
  handle.verified = Stamp::of(again);
  return true;
}

void op_read(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    if (handle->sealed_read && !still_verified(fs_of(req), *handle)) return (void)fuse_reply_err(req, EIO);
    fuse_bufvec buf = fd_bufvec(size, handle->fd.get(), off);
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
  });
}

void op_write_buf(fuse_req_t req, fuse_ino_t /*ino*/, fuse_bufvec* in, off_t off, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    handle->changed = true;
    fuse_bufvec out = fd_bufvec(fuse_buf_size(in), handle->fd.get(), off);
    const ssize_t n = fuse_buf_copy(&out, in, static_cast<fuse_buf_copy_flags>(0));
    if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
    fuse_reply_write(req, static_cast<size_t>(n));
  });
}

// FLUSH comes from the closing task itself, so this is where R4 can see
// whether that task is dying of a signal or a failure.
void op_flush(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    if (handle->tracked) {
      if (closer_state_of(fuse_req_ctx(req)->pid) == CloserState::abandoned)
        handle->abandoned = true;
      else
        handle->closed_normally = true;
    }
    handle->flushed = true;
    fuse_reply_err(req, 0);
  });
}

void op_release(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    fs.test_step("release");  // tests widen the close → seal window here
    auto handle = fs.files.take(fi->fh);
    if (handle) finish_handle(fs, *handle);
    fuse_reply_err(req, 0);
  });
}

void op_fsync(fuse_req_t req, fuse_ino_t /*ino*/, int datasync, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    const int rc = datasync ? ::fdatasync(handle->fd.get()) : ::fsync(handle->fd.get());
    fuse_reply_err(req, rc == 0 ? 0 : errno_or(EIO));
  });
}

void op_fallocate(fuse_req_t req, fuse_ino_t /*ino*/, int mode, off_t off, off_t len, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    handle->changed = true;
    fuse_reply_err(req, ::fallocate(handle->fd.get(), mode, off, len) == 0 ? 0 : errno_or(EIO));
  });
}

void op_lseek(fuse_req_t req, fuse_ino_t /*ino*/, off_t off, int whence, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    const off_t pos = ::lseek(handle->fd.get(), off, whence);
    if (pos < 0) return (void)fuse_reply_err(req, errno_or(EIO));
    fuse_reply_lseek(req, pos);
  });
}

// ---- directories ---------------------------------------------------------------

Status load_listing(Filesystem& fs, DirHandle& dir) {
  auto items = fs.store->list(dir.inode->path_fd()->get());
  if (!items) return items.error();
  dir.items = std::move(*items);
  return {};
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    auto dir = std::make_shared<DirHandle>();
    dir->inode = inode;
    if (Status s = load_listing(fs, *dir); !s) return reply_error(req, s.error());
    fi->fh = fs.dirs.add(dir);
    if (fuse_reply_open(req, fi) != 0) fs.dirs.take(fi->fh);
  });
}

// Offsets: 1 is ".", 2 is "..", 3 + i is items[i]; the offset stored with an
// entry is where the next readdir continues.
void do_readdir(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    auto dir = fs.dirs.get(fi->fh);
    if (!dir) return (void)fuse_reply_err(req, EBADF);
    std::lock_guard lock(dir->mu);
    if (off == 0) {  // (re)start: rewinddir sees what is visible now
      if (Status s = load_listing(fs, *dir); !s) return reply_error(req, s.error());
    }
    std::string buf(size, '\0');
    size_t used = 0;
    const size_t total = dir->items.size() + 2;
    for (size_t index = static_cast<size_t>(off < 0 ? 0 : off); index < total; ++index) {
      const off_t next = static_cast<off_t>(index + 1);
      const bool dots = index < 2;
      const std::string name = dots ? (index == 0 ? "." : "..") : dir->items[index - 2].name;
      size_t entsize = 0;
      if (!plus) {
        struct stat st {};
        st.st_ino = dots ? dir->inode->ino : dir->items[index - 2].ino;
        st.st_mode = dots ? S_IFDIR : static_cast<mode_t>(dir->items[index - 2].type) << 12;
        entsize = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, next);
      } else if (dots) {
        // No attributes for "." and "..": the kernel creates no dentry for them.
        fuse_entry_param e{};
        e.attr.st_ino = dir->inode->ino;
        e.attr.st_mode = S_IFDIR;
        entsize = fuse_add_direntry_plus(req, buf.data() + used, size - used, name.c_str(), &e, next);
      } else {
        // readdir never hashes (R8): attributes go along only for objects
        // whose verdict is already known; the rest go with node id 0, which
        // tells the kernel to LOOKUP them when (and if) they are used.
        const DirItem& item = dir->items[index - 2];
        auto found = fs.store->lookup_verified(dir->inode->path_fd()->get(), name);
        if (!found && found.code() != EAGAIN) continue;  // hidden or gone since the listing
        if (!found) {
          fuse_entry_param e{};
          e.attr.st_ino = item.ino;
          e.attr.st_mode = static_cast<mode_t>(item.type) << 12;
          entsize = fuse_add_direntry_plus(req, buf.data() + used, size - used, name.c_str(), &e, next);
        } else {
          fuse_entry_param e = remember(fs, std::move(*found), *dir->inode, name);
          entsize = fuse_add_direntry_plus(req, buf.data() + used, size - used, name.c_str(), &e, next);
          // Only entries whose attributes reached the kernel count as looked up.
          if (entsize > size - used) fs.inodes.forget(e.ino, 1);
        }
      }
      if (entsize > size - used) break;
      used += entsize;
    }
    fuse_reply_buf(req, buf.data(), used);
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off, fuse_file_info* fi) {
  do_readdir(req, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off, fuse_file_info* fi) {
  do_readdir(req, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  guarded(req, [&] {
    fs_of(req).dirs.take(fi->fh);
    fuse_reply_err(req, 0);
  });
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* /*fi*/) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    // O_PATH fds cannot be fsync'ed: open the directory itself for this.
    UniqueFd fd(::openat(inode->path_fd()->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return (void)fuse_reply_err(req, errno_or(EIO));
    const int rc = datasync ? ::fdatasync(fd.get()) : ::fsync(fd.get());
    fuse_reply_err(req, rc == 0 ? 0 : errno_or(EIO));
  });
}

void op_statfs(fuse_req_t req, fuse_ino_t /*ino*/) {
  guarded(req, [&] {
    struct statvfs sv {};
    if (::fstatvfs(fs_of(req).store->root_fd(), &sv) != 0) return (void)fuse_reply_err(req, errno_or(EIO));
    fuse_reply_statfs(req, &sv);
  });
}

// ---- extended attributes ---------------------------------------------------------
// O_PATH fds cannot carry xattr calls; /proc/self/fd/N names exactly the object.
// "user.sealfs*" is sealfs's own: never set or removed through the mount,
// never listed; "user.sealfs.status" on the root answers `sealfs status`.

bool reserved_xattr(const char* name) { return std::string_view(name).starts_with(kReservedXattrPrefix); }

void reply_xattr_value(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (value.size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    if (reserved_xattr(name)) {
      if (ino == FUSE_ROOT_ID && name == kStatusXattr)
        return reply_xattr_value(req, fs.store->metrics().to_json(), size);
      return (void)fuse_reply_err(req, ENODATA);
    }
    const auto pfd_ref = inode->path_fd();  // held while the /proc path is in use
    const std::string path = proc_fd_path(pfd_ref->get());
    std::string value(size, '\0');
    const ssize_t n = ::getxattr(path.c_str(), name, size ? value.data() : nullptr, size);
    if (n < 0) return (void)fuse_reply_err(req, errno_or(EIO));
    if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
    fuse_reply_buf(req, value.data(), static_cast<size_t>(n));
  });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    const auto pfd_ref = inode->path_fd();  // held while the /proc path is in use
    const std::string path = proc_fd_path(pfd_ref->get());
    std::string names;
    for (int attempt = 0; attempt < 8; ++attempt) {  // the list may grow between the two calls
      const ssize_t want = ::listxattr(path.c_str(), nullptr, 0);
      if (want < 0) return (void)fuse_reply_err(req, errno_or(EIO));
      names.assign(static_cast<size_t>(want), '\0');
      const ssize_t got = want == 0 ? 0 : ::listxattr(path.c_str(), names.data(), names.size());
      if (got >= 0) {
        names.resize(static_cast<size_t>(got));
        break;
      }
      if (errno != ERANGE) return (void)fuse_reply_err(req, errno_or(EIO));
    }
    std::string shown;
    for (size_t pos = 0; pos < names.size();) {
      const size_t end = names.find('\0', pos);
      const std::string_view one(names.data() + pos, (end == std::string::npos ? names.size() : end) - pos);
      if (!one.empty() && !one.starts_with(kReservedXattrPrefix)) {
        shown.append(one);
        shown.push_back('\0');
      }
      if (end == std::string::npos) break;
      pos = end + 1;
    }
    reply_xattr_value(req, shown, size);
  });
}

// setxattr/removexattr: reserved names refused, the rest applied to the
// backing object through its /proc path by change(path) (0 or -1 with errno).
template <class Change>
void change_xattr(fuse_req_t req, fuse_ino_t ino, const char* name, Change change) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    if (reserved_xattr(name)) return (void)fuse_reply_err(req, EPERM);
    const auto pfd_ref = inode->path_fd();  // held while the /proc path is in use
    const std::string path = proc_fd_path(pfd_ref->get());
    fuse_reply_err(req, change(path.c_str()) == 0 ? 0 : errno_or(EIO));
  });
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                 int flags) {
  change_xattr(req, ino, name, [&](const char* path) { return ::setxattr(path, name, value, size, flags); });
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  change_xattr(req, ino, name, [&](const char* path) { return ::removexattr(path, name); });
}

// ---- session -------------------------------------------------------------------

void op_init(void* userdata, fuse_conn_info* conn) {
  // O_TRUNC arrives with open, so a truncating open is one store call.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // Reads of backing files may be spliced instead of copied.
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
  // The user's connection options (-o max_write=, no_splice_write, …) may
  // change the defaults above, not the rules below.
  if (auto* fs = static_cast<Filesystem*>(userdata); fs != nullptr) {
    if (fs->conn_opts) fuse_apply_conn_info_opts(fs->conn_opts.get(), conn);
    if (fs->max_read != 0) conn->max_read = fs->max_read;  // libfuse checks it equals -o max_read
  }
  // Lookups and listings of one directory run in parallel: a slow hash for
  // one name never holds up lookups of the others (R2).
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  // No NFS export: inode ids only live as long as the kernel's lookup counts.
  conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;
  // Writes must reach the backing file before FLUSH/RELEASE (R4 seals at
  // last close): no writeback cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

fuse_lowlevel_ops make_operations() {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.readlink = op_readlink;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.open = op_open;
  ops.read = op_read;
  ops.write_buf = op_write_buf;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.fsync = op_fsync;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.readdirplus = op_readdirplus;
  ops.releasedir = op_releasedir;
  ops.fsyncdir = op_fsyncdir;
  ops.statfs = op_statfs;
  ops.setxattr = op_setxattr;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.removexattr = op_removexattr;
  ops.create = op_create;
  ops.fallocate = op_fallocate;
  ops.lseek = op_lseek;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& operations() {
  static const fuse_lowlevel_ops ops = make_operations();
  return ops;
}

}  // namespace sealfs::fs
