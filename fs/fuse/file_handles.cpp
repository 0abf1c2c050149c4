#include "fs/fuse/file_handles.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/writers/writer_tracking.hpp"
#include "fs/fuse/close_journal.hpp"
#include "fs/fuse/fd_bufvec.hpp"
#include "fs/fuse/file_handle.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/parked_handles.hpp"
#include "fs/fuse/request.hpp"
#include "fs/fuse/writer_tasks.hpp"

namespace sealfs::fuse {
namespace {

// How often a request retries when the implicit writer it found ended under
// it (its process closed the file meanwhile): each retry makes a new one.
constexpr int kWriterAttempts = 16;

// R2's promise for a READ: ENOENT from the store means the file is no longer
// what the kernel opened (hidden, quarantined): EIO, as for a READ whose
// bytes changed. ESTALE means it is gone from B (replaced and dropped on a
// network filesystem): ESTALE, as NFS answers, since no byte is wrong.
// Transient errors stay what they are.
int read_errno(const Error& error) { return error.code == ENOENT ? EIO : error.code; }

bool readable(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_ACCMODE) != O_WRONLY;
}

Result<std::shared_ptr<FileHandle>> make_reader(Filesystem& fs, const InodeRef& inode) {
  auto fd = fs.store->open_file(inode->path_fd()->get(), O_RDONLY, inode->last_seen().hint());
  if (!fd) return fd.error();
  auto handle = make_file_handle(std::move(*fd), inode, false);
  // Every READ checks the stamp (R2) unless the file is being written: the
  // inode's kind is that of its last lookup and may be stale.
  if (!fs.writers.in_progress(inode->dev, inode->ino)) {
    auto st = fs.store->attributes(handle->fd.get());
    if (!st) return st.error();
    handle->check_reads_against(*st);
  }
  return handle;
}

// The implicit write handle made at a file's first change: opened for
// reading and writing (write-only when the daemon may not read it). EPERM
// for a tracked file whose first changer tid cannot be seen (tid 0: the
// kernel's writeback, which follows a change already counted).
Result<std::shared_ptr<FileHandle>> make_writer(Filesystem& fs, const InodeRef& inode, pid_t tid) {
  if (!fs.make_room()) return make_error(ENFILE, "descriptors low");
  const bool tracked =
      fs.store->writes_tracked(inode->path_fd()->get(), inode->kind, inode->last_seen().hint());
  if (tracked && tid != 0 && !writer_seen(fs, tid)) return make_error(EPERM, "writer cannot be seen (R4)");
  fs.implicit.forget(inode->id);  // its reader's stamp is about to go stale
  auto fd = open_tracked(fs, *inode, O_RDWR, tracked);
  if (!fd && fd.code() == EACCES) fd = open_tracked(fs, *inode, O_WRONLY, tracked);
  if (!fd) return fd.error();
  return make_file_handle(std::move(*fd), inode, tracked);
}

// Undoes make_writer for a handle that lost the race to another first change.
void drop_writer(Filesystem& fs, FileHandle& handle) {
  handle.fd.reset();
  if (handle.tracked) fs.writers.cancelled(handle.inode->dev, handle.inode->ino);
}

// Empty when the writer ended meanwhile, or when its parked descriptor
// cannot be opened again (status says why).
HandleInUse hold_writer(Filesystem& fs, std::shared_ptr<ImplicitHandles::Writer> writer, Status& status) {
  HandleInUse held;
  held.in_use = std::shared_lock(writer->in_use);
  if (writer->ended) return {};
  status = hold_descriptor(fs, *writer->handle, held.descriptor);
  if (!status) return {};
  held.handle = writer->handle;
  held.writer = std::move(writer);
  return held;
}

// fi's own handle, its descriptor held; replies and returns empty on failure.
HandleInUse own_handle(fuse_req_t req, Filesystem& fs, const fuse_file_info* fi) {
  HandleInUse own{file_or_reply(req, fi), nullptr, {}, {}};
  if (!own) return {};
  if (Status s = hold_descriptor(fs, *own.handle, own.descriptor); !s) {
    fuse_reply_err(req, s.code());
    return {};
  }
  return own;
}

}  // namespace

bool writer_seen(const Filesystem& fs, pid_t tid) { return fs.proc_is_ours && writer_visible(tid); }

void refuse_unseen_writer(fuse_req_t req, Filesystem& fs, pid_t tid) {
  fs.store->metrics().unseen_writes_refused.fetch_add(1, std::memory_order_relaxed);
  if (!fs.unseen_writer_logged.exchange(true))
    syslog(LOG_WARNING,
           "sealfs: a writer the daemon cannot see (pid %d: another pid namespace, or a /proc it may not "
           "read) cannot be told dying from closing, so its in-place writes outside volatile areas are "
           "refused with EPERM (R4); write in a volatile area and rename, or run the daemon in the "
           "writers' pid namespace with read access to their /proc (the sidecar's shareProcessNamespace "
           "and SYS_PTRACE). Logged once; counted as unseen_writes_refused.",
           static_cast<int>(tid));
  fuse_reply_err(req, EPERM);
}

Result<std::shared_ptr<FileHandle>> implicit_reader(Filesystem& fs, const InodeRef& inode) {
  // A reader is kept only for a file no one writes (its stamp is then
  // checked at every READ) on a connection without OPEN; near the
  // descriptor limit, or while the file is in progress, one is made for
  // this use only. Each READ that reaches the daemon opens the inode's
  // O_PATH fd again if it was detached: a reader holding thousands of files
  // open would run the table out (EMFILE at its READ) faster than the
  // evictor's sweeps detach them, so near the limit it waits for room.
  if (fs.descriptors_low()) (void)fs.make_room();
  const bool keep = (fs.no_open || fs.shared_read_opens) && !fs.descriptors_low() &&
                    !fs.writers.in_progress(inode->dev, inode->ino);
  return keep ? fs.implicit.reader(inode->id, [&] { return make_reader(fs, inode); })
              : make_reader(fs, inode);
}

bool shared_reader_fresh(Filesystem& fs, const InodeRef& inode) {
  if (!fs.shared_read_opens || fs.writers.in_progress(inode->dev, inode->ino)) return false;
  auto reader = fs.implicit.reader(inode->id, [&]() -> Result<std::shared_ptr<FileHandle>> {
    // A new kept reader takes a descriptor: not near the limit (the full
    // path then answers as it does for any open).
    if (fs.descriptors_low()) return make_error(ENFILE, "descriptors low");
    return make_reader(fs, inode);
  });
  if (!reader || !(*reader)->sealed_read) return false;
  FileHandle& handle = **reader;
  auto st = fs.store->attributes(handle.fd.get());
  bool fresh = false;
  if (st) {
    std::lock_guard lock(handle.stamp_mu);
    // The same test a READ makes of this reader (unverified_errno), and no
    // more: a stamp under a second old is trusted as it is at READ. Sending
    // such opens down the full path re-judged every file a saving mount had
    // just written: its warm loads took 1.4x those without OPEN (cache_bench).
    fresh = Stamp::of(*st) == handle.verified;
  }
  if (!fresh) fs.implicit.forget(inode->id);
  return fresh;
}

bool keep_as_reader(Filesystem& fs, const InodeRef& inode, const std::shared_ptr<FileHandle>& handle) {
  if (!fs.shared_read_opens || !handle->sealed_read || fs.descriptors_low() ||
      fs.writers.in_progress(inode->dev, inode->ino))
    return false;
  fs.implicit.forget(inode->id);  // an older reader, whose stamp did not hold
  // A racing READ or OPEN may have kept another reader meanwhile: it was
  // verified too, and serves as well.
  return fs.implicit.reader(inode->id, [&]() -> Result<std::shared_ptr<FileHandle>> { return handle; }).ok();
}

HandleInUse implicit_writer_of(Filesystem& fs, fuse_ino_t ino) {
  auto writer = fs.implicit.writer(ino);
  Status status;
  return writer ? hold_writer(fs, std::move(writer), status) : HandleInUse{};
}

HandleInUse handle_to_read(fuse_req_t req, fuse_ino_t ino, const fuse_file_info* fi) {
  Filesystem& fs = fs_of(req);
  if (fi != nullptr && fi->fh != 0) return own_handle(req, fs, fi);
  // In progress: the writer's own descriptor, when it can read (a file
  // created O_WRONLY cannot); no stamp to check.
  if (auto held = implicit_writer_of(fs, ino); held && readable(held->fd.get())) return held;
  InodeRef inode = inode_or_reply(req, ino);
  if (!inode) return {};
  auto reader = implicit_reader(fs, inode);
  if (!reader) {
    fuse_reply_err(req, read_errno(reader.error()));
    return {};
  }
  return HandleInUse{std::move(*reader), nullptr, {}, {}};
}

HandleInUse handle_to_change(fuse_req_t req, fuse_ino_t ino, const fuse_file_info* fi) {
  Filesystem& fs = fs_of(req);
  if (fi != nullptr && fi->fh != 0) {
    HandleInUse own = own_handle(req, fs, fi);
    if (own && own->inode) own->inode->changed_here();
    return own;
  }
  InodeRef inode = inode_or_reply(req, ino);
  if (!inode) return {};
  const bool writeback = fi != nullptr && fi->writepage;
  const pid_t tid = writeback ? 0 : fuse_req_ctx(req)->pid;
  // A task of another pid namespace (pid 0) joining a file someone else
  // writes is refused here too; make_writer asks at a first change.
  if (!writeback && (tid == 0 || !fs.proc_is_ours) &&
      fs.store->writes_tracked(inode->path_fd()->get(), inode->kind, inode->last_seen().hint())) {
    refuse_unseen_writer(req, fs, tid);
    return {};
  }
  for (int attempt = 0; attempt < kWriterAttempts; ++attempt) {
    auto writer = fs.implicit.writer_for_change(
        ino, tid, [&] { return make_writer(fs, inode, tid); }, [&](FileHandle& h) { drop_writer(fs, h); });
    if (!writer && writer.code() == EAGAIN) continue;
    if (!writer && writer.code() == EPERM) {
      refuse_unseen_writer(req, fs, tid);
      return {};
    }
    if (!writer) {
      // The name the kernel opened was replaced or removed behind it: the
      // write cannot reach the object the caller holds (ESTALE, as NFS says).
      fuse_reply_err(req, writer.code() == ENOENT ? ESTALE : writer.code());
      return {};
    }
    Status status;
    if (auto held = hold_writer(fs, std::move(*writer), status)) {
      held->life.change();
      inode->changed_here();
      return held;
    }
    if (!status) {
      fuse_reply_err(req, status.code());
      return {};
    }
  }
  fuse_reply_err(req, EAGAIN);
  return {};
}

namespace {

// Ends an implicit writer that left the table: once requests still using it
// are done, its handle is finished (sealed or abandoned, R4).
void end_writer(Filesystem& fs, ImplicitHandles::Writer& writer) {
  std::unique_lock end(writer.in_use);
  writer.ended = true;
  writer.handle->life.flush();
  finish_handle(fs, *writer.handle);
}

}  // namespace

void flush_implicit(Filesystem& fs, fuse_ino_t ino, pid_t tid) {
  // Asked only when tid's process changed the file: a read-only close (every
  // close without OPEN) costs one map lookup and nothing else.
  auto flushed = fs.implicit.flushed_by(ino, tid, [&](pid_t group) {
    const InodeRef inode = fs.inodes.get(ino);
    if (inode == nullptr) return false;
    // The closer may see the mount from another mount namespace (a
    // sidecar's app), under IDs of its own: matched by the mount's device.
    // Read for every closer: asking first whether it shares the daemon's
    // mount namespace (a stat of /proc/<pid>/ns/mnt) waits for a process in
    // exec, and ExecWithAWriteDescriptor hung with it (tried, reverted).
    auto ids = fuse_mount_ids_seen_by(group, fs.mount_device());
    const std::uint64_t own = fs.mount_id.load(std::memory_order_relaxed);
    if (ids.empty() && own != 0) ids.push_back(own);  // still empty: by inode alone
    return process_holds(group, inode->ino, ids);
  });
  if (!flushed.writer) return;  // a close that changed nothing
  FileHandle& handle = *flushed.writer->handle;
  if (handle.tracked) handle.life.closer(closer_state_of(tid) != CloserState::abandoned);
  if (flushed.last) end_writer(fs, *flushed.writer);
}

void end_orphaned_writer(Filesystem& fs, fuse_ino_t ino) {
  if (auto writer = fs.implicit.take_orphaned(ino, process_gone)) {
    writer->handle->life.abandon();
    end_writer(fs, *writer);
    fs.implicit.orphan_ended(ino);
  }
}

void end_unheld_writer(Filesystem& fs, fuse_ino_t ino) {
  if (auto writer = fs.implicit.take_if_unheld(ino)) {
    writer->handle->life.closer(true);
    end_writer(fs, *writer);
  }
}

// Counted in progress before the open, so that the store never judges the
// file half written by this very handle.
Result<UniqueFd> open_tracked(Filesystem& fs, const Inode& inode, int flags, bool tracked) {
  Result<UniqueFd> fd = make_error(EIO, "not opened");
  {
    WriterTracking::Hold gate;
    if (tracked) {
      gate = fs.writers.hold(inode.dev, inode.ino);
      fs.writers.opened(inode.dev, inode.ino);
      take_over_seal(fs, inode.dev, inode.ino);
    }
    fd = fs.store->open_file(inode.path_fd()->get(), flags, inode.last_seen().hint());
  }
  if (!fd && tracked) fs.writers.cancelled(inode.dev, inode.ino);
  return fd;
}

void take_over_seal(Filesystem& fs, dev_t dev, ino_t ino) {
  if (fs.deferred.cancel({dev, ino})) fs.writers.resumed(dev, ino);
}

void settle_seals(Filesystem& fs, const std::vector<WriterTracking::Key>& keys) {
  for (const auto& key : keys)
    if (key != WriterTracking::Key{0, 0}) fs.deferred.run_now(key);
}

void note_metadata_change(Filesystem& fs, dev_t dev, ino_t ino) {
  const InodeRef inode = fs.inodes.find(dev, ino);
  if (!inode || inode->directory) return;
  const auto pfd = inode->path_fd();
  if (!pfd || !pfd->valid()) return;
  if (auto st = fs.store->attributes(pfd->get())) inode->metadata_changed_here(*st);
}

namespace {

// Errors that say nothing about the file (out of descriptors, memory or
// space, interrupted, busy): a seal that meets one is tried again later.
// Left unsealed, a file closed normally would be hidden for good, and its
// name's next create would move it to quarantine (R5).
bool transient(int code) {
  return code == EMFILE || code == ENFILE || code == ENOMEM || code == ENOSPC || code == EDQUOT ||
         code == EINTR || code == EAGAIN || code == EBUSY;
}

// How often, and so for how long (DeferredSeals' delay apart), a last close
// meeting transient errors is tried before the file is left unsealed.
constexpr int kLastCloseAttempts = 20;

// What a last close leads to: the seal or the abandon of the file, under its
// gate. The file stops being in progress before its gate opens: a rename or
// lookup waiting on the gate then finds it sealed, never in between. While
// the work fails for a transient reason it stays in progress and the seal
// thread tries again (a new writer takes that over, a rename or unlink runs
// it first: settle_seals).
void end_last_close(Filesystem& fs, const InodeRef& inode, const std::shared_ptr<const UniqueFd>& pfd,
                    const Inode::SeenAt& seen, LastClose what, int attempt) {
  Status status;
  {
    WriterTracking::Hold gate;
    if (what != LastClose::untouched) {
      gate = fs.writers.hold(inode->dev, inode->ino);
      if (const int injected = fs.test_errno("last_close"); injected != 0)
        status = make_error(injected, "injected by SEALFS_FAULT_ERRNO");
      else
        status = what == LastClose::abandon ? fs.store->abandon(pfd->get(), seen.hint())
                                            : fs.store->seal(pfd->get(), seen.hint());
    }
    if (!status && transient(status.code()) && attempt + 1 < kLastCloseAttempts) {
      if (status.code() == EMFILE || status.code() == ENFILE) (void)fs.make_room();
      const bool posted = fs.deferred.post({inode->dev, inode->ino}, [&fs, inode, pfd, seen, what, attempt] {
        end_last_close(fs, inode, pfd, seen, what, attempt + 1);
      });
      if (posted) return;
    }
    journal_done(fs, inode->dev, inode->ino);
    fs.writers.finished(inode->dev, inode->ino);
  }
  if (!status)
    syslog(LOG_WARNING, "sealfs: %s at last close (attempt %d): %s",
           what == LastClose::abandon ? "abandon" : "seal", attempt + 1, status.error().message.c_str());
}

// A seal after a last close that may wait (DeferredSeals): the file is
// large enough for its hash to cost, and the seal thread runs.
bool seal_later(Filesystem& fs, FileHandle& handle, const std::shared_ptr<const UniqueFd>& pfd,
                const Inode::SeenAt& seen) {
  auto st = fs.store->attributes(pfd->get());
  // Above the profile's cap the seal fails at once (EFBIG, the file hidden):
  // nothing to wait for.
  if (!st || !S_ISREG(st->st_mode) || st->st_size < DeferredSeals::kMinBytes ||
      static_cast<std::uint64_t>(st->st_size) > fs.store->profile().max_file_size)
    return false;
  const InodeRef inode = handle.inode;
  journal_deferred(fs, *inode);  // before this FLUSH (without OPEN) returns
  return fs.deferred.post({inode->dev, inode->ino}, [&fs, inode, pfd, seen] {
    end_last_close(fs, inode, pfd, seen, LastClose::seal, 0);
  });
}

}  // namespace

void finish_handle(Filesystem& fs, FileHandle& handle) {
  {
    std::unique_lock lock(handle.park_mu);
    handle.fd.reset();
    if (std::exchange(handle.parked, false)) fs.parked_handles.fetch_sub(1, std::memory_order_relaxed);
  }
  if (handle.life.take_awaited_release()) fs.closed_unreleased.fetch_sub(1, std::memory_order_relaxed);
  if (!handle.tracked) return;
  const InodeRef& inode = handle.inode;
  const auto last = fs.writers.released(inode->dev, inode->ino, handle.life.end());
  if (!last) return;
  const auto [pfd, seen] = name_opened_as(handle);
  if (*last == LastClose::seal && seal_later(fs, handle, pfd, seen)) return;
  end_last_close(fs, inode, pfd, seen, *last, 0);
}

std::size_t release_closed_handles(Filesystem& fs) {
  std::size_t finished = 0;
  for (const auto& handle : fs.files.take_all()) {
    if (!handle || handle->passthrough || !handle->life.flushed()) continue;
    finish_handle(fs, *handle);
    ++finished;
  }
  return finished;
}

// R2: a READ that reaches the daemon (a page the kernel does not hold) serves
// only bytes that were verified. The backing file's stamp is compared with
// the one verified at open; a file changed since is verified again (and
// quarantined if damaged), and EIO is the answer unless it still checks out
// (ESTALE when the file is gone from B, read_errno).
int unverified_errno(Filesystem& fs, FileHandle& handle) {
  auto st = fs.store->attributes(handle.fd.get());
  if (!st) return read_errno(st.error());
  const Stamp now = Stamp::of(*st);
  {
    std::lock_guard lock(handle.stamp_mu);
    if (now == handle.verified) return 0;
    // Only its ctime moved, to the one a link, unlink, rename, chmod or
    // xattr through the mount left: the bytes are the ones verified (an
    // open file whose name was removed reads on, as on a native filesystem).
    const Stamp& was = handle.verified;
    if (now.dev == was.dev && now.ino == was.ino && now.size == was.size &&
        now.mtime.tv_sec == was.mtime.tv_sec && now.mtime.tv_nsec == was.mtime.tv_nsec &&
        handle.inode->ctime_made_here(now.ctime)) {
      handle.verified = now;
      return 0;
    }
  }
  auto fresh =
      fs.store->open_file(handle.inode->path_fd()->get(), O_RDONLY, handle.inode->last_seen().hint());
  if (!fresh) {
    syslog(LOG_WARNING, "sealfs: read of a file changed behind the mount refused: %s",
           fresh.error().message.c_str());
    return read_errno(fresh.error());
  }
  auto again = fs.store->attributes(fresh->get());
  if (!again || again->st_dev != st->st_dev || again->st_ino != st->st_ino) return EIO;
  std::lock_guard lock(handle.stamp_mu);
  handle.verified = Stamp::of(*again);
  return 0;
}

Result<std::size_t> read_verified(Filesystem& fs, FileHandle& handle, char* buf, std::size_t size,
                                  off_t off) {
  // A file rewritten behind the mount again and again is refused after a
  // few tries rather than chased.
  constexpr int kAttempts = 3;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    fs.test_step("read_checked");  // tests change the file here
    auto n = pread_up_to(handle.fd.get(), buf, size, off);
    if (!n) return n.error();
    // One stamp check per READ, after the read: unchanged, the bytes read
    // are the bytes verified. Changed, they are not trusted even if the file
    // verifies again (it may have changed back): verified again, read again.
    auto st = fs.store->attributes(handle.fd.get());
    if (!st) return make_error(read_errno(st.error()), st.error().message);
    {
      std::lock_guard lock(handle.stamp_mu);
      if (Stamp::of(*st) == handle.verified) return *n;
    }
    if (const int err = unverified_errno(fs, handle); err != 0) return make_error(err, "read: not verified");
  }
  syslog(LOG_WARNING, "sealfs: a READ found its file changed behind the mount during each of %d reads",
         kAttempts);
  return make_error(EIO, "read: the file changed during every read");
}

}  // namespace sealfs::fuse
