// Requests on names and attributes: lookup, forget, getattr, setattr,
// readlink, mkdir, symlink, mknod, link, unlink, rmdir, rename. Each maps onto
// the store; the requests that could race with a seal hold the file's gate
// (WriterTracking::hold, R4).
#include <sys/stat.h>
#include <syslog.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>  // RENAME_EXCHANGE
#include <ctime>
#include <optional>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/layout/known_names.hpp"
#include "core/store/store.hpp"
#include "core/writers/writer_tracking.hpp"
#include "fs/fuse/close_journal.hpp"
#include "fs/fuse/file_handles.hpp"
#include "fs/fuse/handlers.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/page_push.hpp"
#include "fs/fuse/parked_handles.hpp"
#include "fs/fuse/request.hpp"

namespace sealfs::fuse {
namespace {

void reply_created(fuse_req_t req, Filesystem& fs, const InodeRef& dir, std::string_view name,
                   Result<Found> found, mode_t mode) {
  if (!found) return reply_error(req, found.error());
  give_to_caller(fs, req, dir->path_fd()->get(), *found, mode);
  reply_entry(req, fs, std::move(*found), *dir, name);
}

// The gate key of name in dir (absent: none, which holds nothing).
WriterTracking::Key key_of(const StoreAttributes& store, int dir_fd, const char* name) {
  auto st = store.attributes_at(dir_fd, name);
  if (!st) return {0, 0};
  return {st->st_dev, st->st_ino};
}

void times_to_set(const struct stat& attr, int to_set, struct timespec (&tv)[2]) {
  tv[0] = tv[1] = {0, UTIME_OMIT};
  if (to_set & FUSE_SET_ATTR_ATIME_NOW)
    tv[0].tv_nsec = UTIME_NOW;
  else if (to_set & FUSE_SET_ATTR_ATIME)
    tv[0] = attr.st_atim;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW)
    tv[1].tv_nsec = UTIME_NOW;
  else if (to_set & FUSE_SET_ATTR_MTIME)
    tv[1] = attr.st_mtim;
}

// Mode, owner and times are not sealed (R10): they go straight to the
// backing object. A size change is content: through the store unless a
// handle is open, in which case the file is in progress anyway.
Status change_attributes(Store& store, const Inode& inode, FileHandle* handle, const struct stat& attr,
                         int to_set) {
  const int hfd = handle != nullptr && handle->fd ? handle->fd.get() : -1;
  const auto pfd_ref = inode.path_fd();  // held: a concurrent lookup may replace it
  const int pfd = pfd_ref->get();
  if (to_set & FUSE_SET_ATTR_MODE)
    if (Status s = store.change_mode(pfd, attr.st_mode, hfd); !s) return s;
  if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    const uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr.st_uid : static_cast<uid_t>(-1);
    const gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr.st_gid : static_cast<gid_t>(-1);
    if (Status s = store.change_owner(pfd, uid, gid); !s) return s;
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (hfd >= 0) {
      if (Status s = store.truncate_handle(hfd, attr.st_size); !s) return s;
      handle->life.change();
    } else if (Status s = store.truncate(pfd, attr.st_size, inode.last_seen().hint()); !s) {
      return s;
    }
  }
  if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
    struct timespec tv[2];
    times_to_set(attr, to_set, tv);
    if (Status s = store.change_times(pfd, tv, hfd); !s) return s;
  }
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    // Who may read the file changed: so does who may read its manifest.
    if (Status s = store.refresh_manifest_access(pfd, inode.last_seen().hint()); !s)
      syslog(LOG_WARNING, "sealfs: access of a manifest after chmod/chown: %s", s.error().message.c_str());
  }
  return {};
}

// The kernel dropped nlookup references to ino; when that was the last, its
// implicit read handle goes with it (it would keep an unlinked file's space).
void forget_inode(Filesystem& fs, fuse_ino_t ino, uint64_t nlookup) {
  if (fs.inodes.forget(ino, nlookup)) {
    fs.implicit.forget(ino);
    fs.implicit_dirs.forget(ino);
  }
}

}  // namespace

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    fs.make_room();  // a lookup needs one descriptor, which the headroom has
    // The caller: a process removing an entry finds its names (R5).
    const pid_t caller = fuse_req_ctx(req)->pid;
    auto found = fs.store->lookup(dir->path_fd()->get(), name, caller);
    // Out of descriptors for a moment: no answer about the name (issue 24).
    if (!found && (found.code() == EMFILE || found.code() == ENFILE) && fs.make_room())
      found = fs.store->lookup(dir->path_fd()->get(), name, caller);
    if (!found) return reply_error(req, found.error());
    const ObjectKind kind = found->kind;
    const struct stat st = found->st;
    const fuse_ino_t ino = reply_entry(req, fs, std::move(*found), *dir, name);
    // After the answer: the kernel must know the inode to take its pages.
    if (ino != 0) push_after_lookup(fs, ino, kind, st);
  });
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  guarded_noreply(req, [&] { forget_inode(fs_of(req), ino, nlookup); });
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  guarded_noreply(req, [&] {
    Filesystem& fs = fs_of(req);
    for (size_t i = 0; i < count; ++i) forget_inode(fs, forgets[i].ino, forgets[i].nlookup);
  });
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    reply_attributes(req, fs_of(req), *inode);
  });
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    // R4's unseen-writer policy (file_handles.hpp): a size change is the
    // first step of an in-place rewrite (open with O_TRUNC comes here without
    // a handle), so it is refused like the writes that would follow it.
    if ((to_set & FUSE_SET_ATTR_SIZE) != 0 && !(fi != nullptr && fi->fh != 0) &&
        !writer_seen(fs, fuse_req_ctx(req)->pid) &&
        fs.store->writes_tracked(inode->path_fd()->get(), inode->kind, inode->last_seen().hint()))
      return refuse_unseen_writer(req, fs, fuse_req_ctx(req)->pid);
    // Readers of its passthrough opens read B's file itself (passthrough.hpp).
    if ((to_set & FUSE_SET_ATTR_SIZE) != 0 && !fs.passthrough.wait_unused(ino, PassthroughOpens::kCloseWait))
      return (void)fuse_reply_err(req, ETXTBSY);
    // The handle the change goes through: the caller's own; without OPEN an
    // ftruncate (fh 0) is the file's first change or one more (R4); any other
    // change of a file in progress goes through its writer's handle.
    HandleInUse held;
    if (fi != nullptr && fi->fh != 0) {
      held.handle = fs.files.get(fi->fh);
      // A handle already finished changes nothing: the change goes by name.
      if (held.handle)
        if (Status s = hold_descriptor(fs, *held.handle, held.descriptor); !s && s.code() != EBADF)
          return reply_error(req, s.error());
    } else if (fi != nullptr && (to_set & FUSE_SET_ATTR_SIZE) != 0) {
      held = handle_to_change(req, ino, fi);
      if (!held) return;
    } else {
      held = implicit_writer_of(fs, ino);
    }
    // Never while the file is being sealed: new times or a new size in the
    // middle of its hash would fail the seal.
    settle_seals(fs, {{inode->dev, inode->ino}});
    auto gate = fs.writers.hold(inode->dev, inode->ino);
    // A size change is content: in progress until its seal has amended
    // every name's manifest (by path it seals at once; by handle it is).
    WriterTracking::Change change;
    if ((to_set & FUSE_SET_ATTR_SIZE) != 0) change = fs.writers.changing(inode->dev, inode->ino);
    inode->changed_here();  // a size or times set here: the kernel's pages stay right
    if (Status s = change_attributes(*fs.store, *inode, held.handle.get(), *attr, to_set); !s)
      return reply_error(req, s.error());
    if ((to_set & FUSE_SET_ATTR_SIZE) == 0)  // R10: mode, owner and times are not sealed
      journal_attributes_set(fs, *inode, (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) != 0);
    if ((to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) != 0)
      note_metadata_change(fs, inode->dev, inode->ino);
    reply_attributes(req, fs, *inode);
  });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    auto target = fs_of(req).store->read_link(inode->path_fd()->get());
    if (!target) return reply_error(req, target.error());
    fuse_reply_readlink(req, target->c_str());
  });
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
    settle_seals(fs, {{inode->dev, inode->ino}});
    auto gate = fs.writers.hold(inode->dev, inode->ino);  // a link publishes what a seal settles
    const auto seen = inode->last_seen();
    auto found = fs.store->link(inode->path_fd()->get(), dir->path_fd()->get(), newname, seen.hint());
    if (!found) return reply_error(req, found.error());
    note_metadata_change(fs, inode->dev, inode->ino);
    reply_entry(req, fs, std::move(*found), *dir, newname);  // a link keeps the object's owner
  });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    Filesystem& fs = fs_of(req);
    const auto dfd = dir->path_fd();
    const WriterTracking::Key removed = key_of(*fs.store, dfd->get(), name);
    settle_seals(fs, {removed});
    // Its parked handles hold a descriptor again: the object outlives the name.
    auto unparked = unpark_object(fs, removed.first, removed.second);
    if (!unparked) return reply_error(req, unparked.error());
    auto gate = fs.writers.hold({removed});
    const Status s = fs.store->unlink(dfd->get(), name, fuse_req_ctx(req)->pid);
    // Another name of the object (a hard link) is where it is opened again.
    if (s) {
      if (InodeRef inode = fs.inodes.find(removed.first, removed.second)) inode->unseen_at(*dir, name);
      fs.inodes.names()->removed(ObjectId{dir->dev, dir->ino}, name);
      note_metadata_change(fs, removed.first, removed.second);
    }
    fuse_reply_err(req, s.code());
  });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    fuse_reply_err(req, fs_of(req).store->rmdir(dir->path_fd()->get(), name, fuse_req_ctx(req)->pid).code());
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
    const WriterTracking::Key moved = key_of(*fs.store, sfd->get(), name);
    const WriterTracking::Key swapped = key_of(*fs.store, dfd->get(), newname);
    settle_seals(fs, {moved, swapped});
    auto unparked = unpark_object(fs, swapped.first, swapped.second);  // as for unlink
    if (!unparked) return reply_error(req, unparked.error());
    auto gate = fs.writers.hold({moved, swapped});
    const Status renamed = fs.store->rename(sfd->get(), name, dfd->get(), newname, flags);
    if (renamed) {
      note_metadata_change(fs, moved.first, moved.second);
      note_metadata_change(fs, swapped.first, swapped.second);
      // The kernel keeps its names across a rename and looks nothing up:
      // the moved objects are seen where they went (Inode::seen_at).
      if (auto inode = fs.inodes.find(moved.first, moved.second)) inode->seen_at(*dst, newname);
      if ((flags & RENAME_EXCHANGE) != 0)
        if (auto inode = fs.inodes.find(swapped.first, swapped.second)) inode->seen_at(*src, name);
      fs.inodes.names()->renamed(ObjectId{moved.first, moved.second}, ObjectId{src->dev, src->ino}, name,
                                 ObjectId{dst->dev, dst->ino}, newname,
                                 (flags & RENAME_EXCHANGE) != 0
                                     ? std::optional<ObjectId>(ObjectId{swapped.first, swapped.second})
                                     : std::nullopt);
    }
    fuse_reply_err(req, renamed.code());
  });
}

}  // namespace sealfs::fuse
