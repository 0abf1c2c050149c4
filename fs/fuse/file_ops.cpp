// Requests on files and their handles: create, open, read, write, flush,
// release, fsync, fallocate, lseek. R4 lives here on the adapter's side: a
// write handle outside volatile areas is tracked (WriterTracking) from its
// open to the seal or abandon after its last release.
//
// Data path: READ and WRITE move bytes between /dev/fuse and the handle the
// store opened (libfuse's splice or copy, fd_bufvec); that is the only I/O on
// B the adapter does itself (fs/README.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>

#include <memory>

#include "fs/fuse/fd_bufvec.hpp"
#include "fs/fuse/handlers.hpp"
#include "fs/fuse/request.hpp"

namespace sealfs::fuse {
namespace {

bool opens_for_write(int flags) { return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0; }

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
      const auto pfd = handle.opened_as ? handle.opened_as : inode->path_fd();
      const auto seen = handle.opened_as ? handle.opened_at : inode->last_seen();
      status = *last == LastClose::abandon ? fs.store->abandon(pfd->get(), seen.hint())
                                           : fs.store->seal(pfd->get(), seen.hint());
    }
    fs.writers.finished(inode->dev, inode->ino);
  }
  if (!status)
    syslog(LOG_WARNING, "sealfs: %s at last close: %s", *last == LastClose::abandon ? "abandon" : "seal",
           status.error().message.c_str());
}

// The handle of a new file from Store::create, tracked when it writes or made
// the file: O_CREAT with O_RDONLY makes a file that is sealed empty at its
// close (R10).
std::shared_ptr<FileHandle> created_handle(Store::Created& created, int flags) {
  auto handle = std::make_shared<FileHandle>();
  handle->fd = std::move(created.open_fd);
  handle->tracked = (opens_for_write(flags) || created.made) && Store::tracked_kind(created.found.kind);
  handle->made = created.made;
  handle->changed = (flags & O_TRUNC) != 0 && !created.made;
  return handle;
}

// open_file for an inode, counted in progress from before the open when it
// is tracked, so that the store never judges the file half written by this
// very handle; a seal still running from the last writer's close finishes
// first (a second writer waits for it).
Result<UniqueFd> open_tracked(Filesystem& fs, const Inode& inode, int flags, bool tracked) {
  Result<UniqueFd> fd = make_error(EIO, "not opened");
  {
    WriterTracking::Hold gate;
    if (tracked) {
      gate = fs.writers.hold(inode.dev, inode.ino);
      fs.writers.opened(inode.dev, inode.ino);
    }
    fd = fs.store->open_file(inode.path_fd()->get(), flags, inode.last_seen().hint());
  }
  if (!fd && tracked) fs.writers.cancelled(inode.dev, inode.ino);
  return fd;
}

// R2: a READ that reaches the daemon (a page the kernel does not hold) serves
// only bytes that were verified. The backing file's stamp is compared with
// the one verified at open; a file changed since is verified again (and
// quarantined if damaged), and EIO is the answer unless it still checks out.
bool still_verified(Filesystem& fs, FileHandle& handle) {
  auto st = fs.store->attributes(handle.fd.get());
  if (!st) return false;
  const Stamp now = Stamp::of(*st);
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
  auto again = fs.store->attributes(fresh->get());
  if (!again || again->st_dev != st->st_dev || again->st_ino != st->st_ino) return false;
  std::lock_guard lock(handle.stamp_mu);
  handle.verified = Stamp::of(*again);
  return true;
}

}  // namespace

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    if (fs.descriptors_low()) return (void)fuse_reply_err(req, ENFILE);
    auto created = fs.store->create(dir->path_fd()->get(), name, mode, fi->flags);
    if (!created) return reply_error(req, created.error());
    give_to_caller(fs, req, dir->path_fd()->get(), created->found, mode);
    auto handle = created_handle(*created, fi->flags);
    fuse_entry_param e = remember(fs, std::move(created->found), *dir, name);
    handle->inode = fs.inodes.get(e.ino);
    if (handle->tracked) {
      handle->opened_as = handle->inode->path_fd();
      handle->opened_at = handle->inode->last_seen();
      fs.writers.opened(handle->inode->dev, handle->inode->ino);
    }
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
    const bool tracked =
        writer && fs.store->writes_tracked(inode->path_fd()->get(), kind, inode->last_seen().hint());
    auto fd = open_tracked(fs, *inode, flags, tracked);
    // The kernel resolved the name to this inode before it was replaced or
    // unlinked (R6 swaps, link-then-unlink). ESTALE makes the VFS redo the
    // open with a fresh lookup, which finds the current object or answers
    // ENOENT itself; a native filesystem would never say ENOENT here.
    if (!fd && fd.code() == ENOENT) return (void)fuse_reply_err(req, ESTALE);
    if (!fd) return reply_error(req, fd.error());
    auto handle = std::make_shared<FileHandle>();
    handle->fd = std::move(*fd);
    handle->inode = inode;
    if (tracked) {
      handle->opened_as = inode->path_fd();
      handle->opened_at = inode->last_seen();
    }
    handle->tracked = tracked;
    handle->changed = tracked && (flags & O_TRUNC) != 0;
    if (!writer && is_sealed(kind)) {
      auto st = fs.store->attributes(handle->fd.get());
      handle->sealed_read = st.ok();
      if (st) handle->verified = Stamp::of(*st);
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
    reply_status(req, fs_of(req).store->sync_handle(handle->fd.get(), datasync != 0));
  });
}

void op_fallocate(fuse_req_t req, fuse_ino_t /*ino*/, int mode, off_t off, off_t len, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    handle->changed = true;
    reply_status(req, fs_of(req).store->allocate(handle->fd.get(), mode, off, len));
  });
}

void op_lseek(fuse_req_t req, fuse_ino_t /*ino*/, off_t off, int whence, fuse_file_info* fi) {
  guarded(req, [&] {
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    auto pos = fs_of(req).store->seek(handle->fd.get(), off, whence);
    if (!pos) return reply_error(req, pos.error());
    fuse_reply_lseek(req, *pos);
  });
}

}  // namespace sealfs::fuse
