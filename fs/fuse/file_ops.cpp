// Requests on files and their handles: create, open, read, write, flush,
// release, fsync, fallocate, lseek. R4 lives here on the adapter's side: a
// write handle outside volatile areas is tracked (WriterTracking) from its
// open (CREATE, or without OPEN its first change: file_handles.hpp) to the
// seal or abandon after its last close.
//
// Data path: READ and WRITE move bytes between /dev/fuse and the handle the
// store opened (libfuse's splice or copy, fd_bufvec); that is the only I/O on
// B the adapter does itself (fs/README.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/close_journal.hpp"
#include "fs/fuse/direct_io.hpp"
#include "fs/fuse/fd_bufvec.hpp"
#include "fs/fuse/file_handle.hpp"
#include "fs/fuse/file_handles.hpp"
#include "fs/fuse/handle_life.hpp"
#include "fs/fuse/handlers.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/page_push.hpp"
#include "fs/fuse/passthrough.hpp"
#include "fs/fuse/request.hpp"
#include "fs/fuse/writer_tasks.hpp"

namespace sealfs::fuse {
namespace {

constexpr auto kPassthroughCloseWait = PassthroughOpens::kCloseWait;

bool opens_for_write(int flags) { return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0; }

// Without OPEN the kernel sends no RELEASE at all, not even for a file from
// CREATE: the new file's handle becomes its implicit writer, with the
// creator's process counted, and ends at that process's FLUSH (fh 0).
void reply_created_implicit(fuse_req_t req, Filesystem& fs, const fuse_entry_param& e, fuse_file_info* fi,
                            std::shared_ptr<FileHandle> handle) {
  const pid_t creator = fuse_req_ctx(req)->pid;  // req is gone once answered
  auto writer = fs.implicit.writer_for_change(
      e.ino, creator, [&]() -> Result<std::shared_ptr<FileHandle>> { return handle; },
      [](FileHandle& /*ours*/) {});
  if (!writer) {
    finish_handle(fs, *handle);
    fs.inodes.forget(e.ino, 1);
    return reply_error(req, writer.error());
  }
  if ((*writer)->handle != handle) {
    // A writer of this file was there first (a CREATE of an existing name):
    // it carries on, and this open counts as one more of its writers.
    if ((*writer)->handle && handle->life.changed()) (*writer)->handle->life.change();  // O_TRUNC
    handle->fd.reset();
    if (handle->tracked) fs.writers.cancelled(handle->inode->dev, handle->inode->ino);
  }
  fi->fh = 0;
  if (fuse_reply_create(req, &e, fi) != 0) {
    flush_implicit(fs, e.ino, creator);  // as if the creator closed it at once
    fs.inodes.forget(e.ino, 1);
  }
}

// The handle of an OPEN. Every READ of a read handle checks the backing
// stamp (R2). The inode's kind is that of its last lookup, which a publish
// by rename does not renew (a file published from tmp/ still says
// volatile), so the check does not depend on it.
std::shared_ptr<FileHandle> opened_handle(Filesystem& fs, const InodeRef& inode, UniqueFd fd, int flags,
                                          bool tracked) {
  auto handle = make_file_handle(std::move(fd), inode, tracked, {false, tracked && (flags & O_TRUNC) != 0});
  if (!opens_for_write(flags)) {
    auto st = fs.store->attributes(handle->fd.get());
    if (st) handle->check_reads_against(*st);
  }
  return handle;
}

// A read OPEN served by the inode's kept reader (file_handles.hpp
// shared_reader_fresh, keep_as_reader): fh 0, so its READs go where they go
// without OPEN, the page cache kept and no FLUSH at close.
void reply_open_shared(fuse_req_t req, CachedOpen& cached, fuse_file_info* fi) {
  fi->fh = 0;
  fi->keep_cache = 1;
  fi->noflush = 1;
  if (fuse_reply_open(req, fi) == 0) cached.keep();
}

void log_passthrough_refused(int err) {
  syslog(LOG_WARNING,
         "sealfs: FUSE passthrough: the kernel refused a backing file (%s; EPERM: no CAP_SYS_ADMIN in the "
         "initial user namespace, ELOOP: B is on a stacked filesystem): new opens take the normal path. "
         "Logged once.",
         std::strerror(err));
}

// Issue 25 (passthrough.hpp): a read-only OPEN of a sealed file, judged by
// the store now as any open is (R2: damage behind the mount is a miss here,
// a replaced name ESTALE, a quarantined file not found), answered with the
// inode's backing id. False when the open takes the normal path instead
// (nothing answered): passthrough off, the file open in cached mode, in
// progress, not sealed (a volatile area's), not a regular file, or the
// kernel refused the descriptor.
bool open_passthrough(fuse_req_t req, Filesystem& fs, const InodeRef& inode, int flags, fuse_file_info* fi) {
  const bool active = fs.passthrough.has_passthrough(inode->id);
  if (!active && (!fs.passthrough.enabled() || fs.passthrough.has_cached(inode->id))) return false;
  // A file in progress with passthrough opens cannot open in cached mode.
  const bool in_progress =
      inode->kind == ObjectKind::in_progress || fs.writers.in_progress(inode->dev, inode->ino);
  if (in_progress) return active ? (fuse_reply_err(req, ETXTBSY), true) : false;
  // Sealed files only: not a volatile area's (nor one published from there
  // through this mount, whose inode says volatile until its next lookup).
  if (!is_sealed(inode->kind) && !active) return false;
  if (!active && !fs.make_room()) return false;
  auto fd = open_tracked(fs, *inode, flags, false);
  if (!fd && fd.code() == ENOENT) return fuse_reply_err(req, ESTALE), true;
  if (!fd) return reply_error(req, fd.error()), true;
  auto handle = opened_handle(fs, inode, std::move(*fd), flags, false);
  handle->passthrough = true;
  int refused = 0;
  const int id = handle->sealed_read ? fs.passthrough.acquire(req, inode->id, handle, refused) : 0;
  if (refused != 0) log_passthrough_refused(refused);
  if (id <= 0) return active ? (fuse_reply_err(req, EIO), true) : false;
  fi->fh = fs.files.add(fs.passthrough.shared_handle(inode->id));
#if SEALFS_HAVE_PASSTHROUGH
  fi->backing_id = id;
#endif
  fi->keep_cache = 0;  // the kernel refuses FOPEN_KEEP_CACHE with passthrough
  fi->direct_io = 0;
  fi->noflush = 1;
  fs.store->metrics().passthrough_opens.fetch_add(1, std::memory_order_relaxed);
  if (fuse_reply_open(req, fi) != 0) {
    fs.files.take(fi->fh);
    fs.passthrough.release(nullptr, inode->id);  // the request is gone
  }
  return true;
}

// A CREATE of a name whose file has passthrough opens (passthrough.hpp): the
// kernel would fail its open in cached mode after the store had truncated
// the file under those readers. Refused first.
bool has_passthrough_child(Filesystem& fs, const Inode& dir, const char* name) {
  if (!fs.passthrough.granted()) return false;
  auto st = fs.store->attributes_at(dir.path_fd()->get(), name);
  if (!st) return false;
  const InodeRef child = fs.inodes.find(st->st_dev, st->st_ino);
  return child && !fs.passthrough.wait_unused(child->id, kPassthroughCloseWait);
}

// in's bytes written at off of handle's file: libfuse's copy or splice, or
// for a direct WRITE on a direct handle, staged in aligned memory first.
// Any other WRITE makes a direct handle buffered for good: a page of a
// mapping written back, or a caller that dropped O_DIRECT, may be unaligned,
// and a plain directory takes it. The bytes written, or -errno.
ssize_t write_to_handle(Filesystem& fs, FileHandle& handle, fuse_bufvec* in, off_t off, bool direct) {
  constexpr auto kCopy = static_cast<fuse_buf_copy_flags>(0);
  fuse_bufvec staged{};
  fuse_bufvec* src = in;
  if (handle.direct.load(std::memory_order_relaxed)) {
    if (direct) {
      const std::size_t size = fuse_buf_size(in);
      staged = mem_bufvec(size, direct_scratch(size));
      const ssize_t got = fuse_buf_copy(&staged, in, kCopy);
      if (got < 0) return got;
      staged = mem_bufvec(static_cast<std::size_t>(got), staged.buf[0].mem);
      src = &staged;
    } else {
      if (Status buffered = fs.store->buffered_io(handle.fd.get()); !buffered) return -buffered.code();
      handle.direct.store(false, std::memory_order_relaxed);
    }
  }
  fuse_bufvec out = fd_bufvec(fuse_buf_size(src), handle.fd.get(), off);
  ssize_t n = fuse_buf_copy(&out, src, kCopy);
  // B out of space: the quarantine gives its space back first (issue 23 point 4).
  while ((n == -ENOSPC || n == -EDQUOT) && (src->buf[0].flags & FUSE_BUF_IS_FD) == 0 && fs.store->make_room())
    n = fuse_buf_copy(&out, src, kCopy);
  return n;
}

}  // namespace

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    InodeRef dir = inode_or_reply(req, parent);
    if (!dir) return;
    if (!fs.make_room()) return (void)fuse_reply_err(req, ENFILE);
    fs.wait_for_release_backlog();
    if (has_passthrough_child(fs, *dir, name)) return (void)fuse_reply_err(req, ETXTBSY);
    // R4's unseen-writer policy (file_handles.hpp): refused before anything
    // is made. A read-only O_CREAT makes an empty file, which no death can
    // leave partial: it stays allowed.
    if (opens_for_write(fi->flags) && !writer_seen(fs, fuse_req_ctx(req)->pid)) {
      auto in_volatile = fs.store->child_in_volatile_area(dir->path_fd()->get(), name);
      if (in_volatile && !*in_volatile) return refuse_unseen_writer(req, fs, fuse_req_ctx(req)->pid);
    }
    auto created = fs.store->create(dir->path_fd()->get(), name, mode, fi->flags);
    if (!created) return reply_error(req, created.error());
    give_to_caller(fs, req, dir->path_fd()->get(), created->found, mode);
    // Tracked when it writes or made the file: O_CREAT with O_RDONLY makes a
    // file that is sealed empty at its close (R10).
    const bool tracked =
        (opens_for_write(fi->flags) || created->made) && Store::tracked_kind(created->found.kind);
    // What its open did: made the file, or truncated an existing one.
    const HandleLife::Origin origin{created->made, (fi->flags & O_TRUNC) != 0 && !created->made};
    UniqueFd fd = std::move(created->open_fd);
    fuse_entry_param e = remember(fs, std::move(created->found), *dir, name);
    auto handle = make_file_handle(std::move(fd), fs.inodes.get(e.ino), tracked, origin);
    handle->direct = (fi->flags & O_DIRECT) != 0;  // B opened with the caller's flags
    if (handle->tracked) {
      fs.writers.opened(handle->inode->dev, handle->inode->ino);
      take_over_seal(fs, handle->inode->dev, handle->inode->ino);
    }
    fi->keep_cache = 0;
    if (fs.no_open) return reply_created_implicit(req, fs, e, fi, std::move(handle));
    fi->fh = fs.files.add(handle);
    fs.passthrough.cached_opened(e.ino);
    if (fuse_reply_create(req, &e, fi) != 0) {
      if (auto taken = fs.files.take(fi->fh)) finish_handle(fs, *taken);
      fs.passthrough.cached_released(e.ino);
      fs.inodes.forget(e.ino, 1);
    }
  });
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    // No OPEN round trip (fs/README.md): ENOSYS tells the kernel to stop
    // sending OPEN and RELEASE for the whole connection; it then keeps each
    // file's page cache across opens, and requests come with fh 0.
    if (fs.no_open) return (void)fuse_reply_err(req, ENOSYS);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    const int flags = fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY);
    const bool writer = opens_for_write(flags);
    const bool direct = (flags & O_DIRECT) != 0;
    const ObjectKind kind = inode->kind;
    // With FUSE passthrough, a read of a sealed file: the kernel reads B
    // through a backing file of its own, opened with the caller's flags
    // (O_DIRECT included); the daemon's descriptor only names the file.
    if (!writer && open_passthrough(req, fs, inode, flags & ~O_DIRECT, fi)) return;
    // A cached open from here on (passthrough.hpp): none while the file has
    // passthrough opens (a write open of it is refused, as for a running
    // executable, once those closed just before have been released).
    CachedOpen cached(fs.passthrough, inode->id);
    if (!cached.begin(kPassthroughCloseWait)) return (void)fuse_reply_err(req, ETXTBSY);
    // A warm load: the inode's kept reader serves it (fh 0, no FLUSH, the
    // page cache kept), so an open costs one fstat and no descriptor. Not a
    // direct one, which reaches B with O_DIRECT on a handle of its own.
    if (!writer && !direct && kind != ObjectKind::in_progress && shared_reader_fresh(fs, inode))
      return reply_open_shared(req, cached, fi);
    // Near the limit: wait for the kernel to forget cold inodes (InodeEvictor).
    if (!fs.make_room()) return (void)fuse_reply_err(req, ENFILE);
    const bool tracked =
        writer && fs.store->writes_tracked(inode->path_fd()->get(), kind, inode->last_seen().hint());
    if (tracked && !writer_seen(fs, fuse_req_ctx(req)->pid))
      return refuse_unseen_writer(req, fs, fuse_req_ctx(req)->pid);
    if (writer) fs.implicit.forget(inode->id);  // its kept reader's stamp is about to go stale
    auto fd = open_tracked(fs, *inode, flags, tracked);
    // The kernel resolved the name to this inode before it was replaced or
    // unlinked (R6 swaps, link-then-unlink). ESTALE makes the VFS redo the
    // open with a fresh lookup, which finds the current object or answers
    // ENOENT itself; a native filesystem would never say ENOENT here.
    if (!fd && fd.code() == ENOENT) return (void)fuse_reply_err(req, ESTALE);
    if (!fd) return reply_error(req, fd.error());
    auto handle = opened_handle(fs, inode, std::move(*fd), flags, tracked);
    handle->direct = direct;
    if (!writer && !direct && keep_as_reader(fs, inode, handle)) return reply_open_shared(req, cached, fi);
    fi->fh = fs.files.add(handle);
    // Keep the page cache across read opens: what it holds was served by
    // the checks above, and the adapter drops it when it sees a change it did
    // not make (Inode::report) or the store hides or replaces the file. Keyed
    // to the kind, a file saved through the mount (kind still volatile) lost
    // its pages at every open: the saving mount read every library again.
    fi->keep_cache = !writer;
    // FLUSH only matters to write handles (R4 tells a clean last close from
    // an abandoned one by it): a read-only close costs no round trip.
    fi->noflush = !tracked;
    if (fuse_reply_open(req, fi) != 0) {
      if (auto taken = fs.files.take(fi->fh)) finish_handle(fs, *taken);
    } else {
      cached.keep();
    }
  });
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  guarded(req, [&] {
    fs_of(req).store->metrics().reads.fetch_add(1, std::memory_order_relaxed);
    auto held = handle_to_read(req, ino, fi);
    if (!held) return;
    const bool direct = held->direct.load(std::memory_order_relaxed);
    if (held->sealed_read || direct) {
      // Into memory, not spliced: a sealed file's bytes are checked after
      // they are read (read_verified), and bytes in a pipe cannot be taken
      // back; a direct handle reads into aligned memory (direct_io.hpp).
      thread_local std::vector<char> bytes;
      if (!direct) bytes.resize(size);
      char* buf = direct ? direct_scratch(size) : bytes.data();
      auto n = held->sealed_read ? read_verified(fs_of(req), *held.handle, buf, size, off)
                                 : pread_up_to(held->fd.get(), buf, size, off);
      if (!n) return (void)fuse_reply_err(req, n.code());
      // A direct open asked for no cache: nothing is pushed into M's pages.
      if (!direct) push_rest_at_read(fs_of(req), ino, *held.handle, off, size);
      return (void)fuse_reply_buf(req, buf, *n);
    }
    push_rest_at_read(fs_of(req), ino, *held.handle, off, size);
    fuse_bufvec buf = fd_bufvec(size, held->fd.get(), off);
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
  });
}

void op_write_buf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    ssize_t n = 0;
    {
      auto held = handle_to_change(req, ino, fi);
      if (!held) return;
      held->life.change();
      n = write_to_handle(fs, *held.handle, in, off, direct_write(fi));
    }
    if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
    // Sealed before the answer: the request (and its interruption) must
    // still be alive while the seal hashes.
    if (fi != nullptr && fi->fh == 0 && fi->writepage) end_unheld_writer(fs, ino);
    fuse_reply_write(req, static_cast<size_t>(n));
  });
}

// FLUSH comes from the closing task itself, so this is where R4 can see
// whether that task is dying of a signal or a failure. Without OPEN it comes
// at every close, and only a close by a process that changed the file costs
// more than a map lookup.
void op_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    // A read-only mount changes nothing: ENOSYS makes the kernel stop
    // sending FLUSH at all.
    if (fs.read_only) return (void)fuse_reply_err(req, ENOSYS);
    if (fi == nullptr || fi->fh == 0) {
      flush_implicit(fs, ino, fuse_req_ctx(req)->pid);
      return (void)fuse_reply_err(req, 0);
    }
    auto handle = file_or_reply(req, fi);
    if (!handle) return;
    if (handle->tracked)
      handle->life.closer(closer_state_of(fuse_req_ctx(req)->pid) != CloserState::abandoned);
    handle->life.flush();
    journal_close(fs, *handle);  // R4: before close() returns, a normal last close is recorded
    if (handle->tracked && handle->life.await_release())
      fs.closed_unreleased.fetch_add(1, std::memory_order_relaxed);
    fuse_reply_err(req, 0);
  });
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    fs.test_step("release");  // tests widen the close → seal window here
    auto handle = fs.files.take(fi->fh);
    if (handle && handle->passthrough) {
      fs.passthrough.release(req, ino);  // the shared handle stays the inode's
    } else {
      if (handle) finish_handle(fs, *handle);
      fs.passthrough.cached_released(ino);
    }
    fuse_reply_err(req, 0);
  });
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  guarded(req, [&] {
    auto held = handle_to_read(req, ino, fi);
    if (!held) return;
    reply_status(req, fs_of(req).store->sync_handle(held->fd.get(), datasync != 0));
  });
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, fuse_file_info* fi) {
  guarded(req, [&] {
    auto held = handle_to_change(req, ino, fi);
    if (!held) return;
    held->life.change();
    reply_status(req, fs_of(req).store->allocate(held->fd.get(), mode, off, len));
  });
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi) {
  guarded(req, [&] {
    auto held = handle_to_read(req, ino, fi);
    if (!held) return;
    auto pos = fs_of(req).store->seek(held->fd.get(), off, whence);
    if (!pos) return reply_error(req, pos.error());
    fuse_reply_lseek(req, *pos);
  });
}

}  // namespace sealfs::fuse
