// Which handle a request on an open file works with, and how a write handle
// ends (R4). A handle is either the file's own (fi->fh, from CREATE, or from
// OPEN when the connection keeps OPEN: verify=always) or, on a connection
// without OPEN, the file's implicit one (fh 0, ImplicitHandles).
#pragma once

#include <fuse_lowlevel.h>

#include <memory>
#include <shared_mutex>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "fs/fuse/filesystem.hpp"

namespace sealfs::fuse {

// A handle held for the duration of one request. An implicit writer's is
// held shared, so that its end (the seal) waits for the request; so is the
// handle's descriptor (descriptor: park_mu shared, parked_handles.hpp).
// Members in this order: each lock is let go before what it belongs to.
struct HandleInUse {
  std::shared_ptr<FileHandle> handle;
  std::shared_ptr<ImplicitHandles::Writer> writer;
  std::shared_lock<std::shared_mutex> in_use;
  std::shared_lock<std::shared_mutex> descriptor;
  explicit operator bool() const { return handle != nullptr; }
  FileHandle* operator->() const { return handle.get(); }
};

// For requests that read the file or its position (READ, lseek, fsync): fi's
// own handle; with fh 0, the file's implicit writer while it has one, else
// its implicit reader. Replies with an error and returns empty on failure.
HandleInUse handle_to_read(fuse_req_t req, fuse_ino_t ino, const fuse_file_info* fi);
// For requests that change the file (WRITE, fallocate, SETATTR of the size):
// fi's own handle; with fh 0, the implicit writer, made at the file's first
// change (which makes it in progress, R4). Replies on failure.
HandleInUse handle_to_change(fuse_req_t req, fuse_ino_t ino, const fuse_file_info* fi);
// The same for the kernel's writeback of a shared mapping (fi->writepage):
// it counts no process as a writer.
// The implicit writer of ino while it has one (a truncate by name then
// changes the file through it); empty otherwise. Never replies.
HandleInUse implicit_writer_of(Filesystem& fs, fuse_ino_t ino);

// A FLUSH with fh 0 from tid: when tid's process changed the file, its close
// is counted (normal or abandoned, R4), and the last one ends the writer: the
// file is sealed or abandoned before the FLUSH is answered.
void flush_implicit(Filesystem& fs, fuse_ino_t ino, pid_t tid);
// The reaper's end of a writer whose processes all exited without a FLUSH
// (reaper.hpp): abandoned (R4).
void end_orphaned_writer(Filesystem& fs, fuse_ino_t ino);
// After a WRITE from the writeback of a shared mapping: when no process
// holds the file for writing any more (they all closed it; no RELEASE will
// come at munmap without OPEN), the file is sealed now.
void end_unheld_writer(Filesystem& fs, fuse_ino_t ino);

// R4's policy for a writer the daemon cannot see (DESIGN.md R4; another pid
// namespace sends pid 0, and a /proc the daemon may not read hides the exit
// code): it could not tell the writer's death from its close, so it never
// guesses. An in-place write outside volatile areas (a create, a write open,
// a first change) is refused with EPERM, while a rename-publish out of a
// volatile area, which needs no such judgement, keeps working.
// writer_seen says whether tid can be seen; refuse_unseen_writer answers
// the request, counts it in status and logs the policy once per mount.
bool writer_seen(const Filesystem& fs, pid_t tid);
void refuse_unseen_writer(fuse_req_t req, Filesystem& fs, pid_t tid);

// open_file for an inode, counted in progress from before the open when it
// is tracked (a seal still running from the last writer's close finishes
// first).
Result<UniqueFd> open_tracked(Filesystem& fs, const Inode& inode, int flags, bool tracked);

// R4's late seals (deferred_seals.hpp). take_over_seal: a new writer of the
// file (counted by opened() already) takes over a seal that still waits.
// settle_seals: a request that needs the seal's result (rename, link,
// unlink, setattr) runs those of its files first, before it takes the gate.
void take_over_seal(Filesystem& fs, dev_t dev, ino_t ino);
void settle_seals(Filesystem& fs, const std::vector<WriterTracking::Key>& keys);
// After a request through the mount changed only the metadata of the object
// (dev, ino): its inode learns the ctime that change left (Inode::
// metadata_changed_here), so that reads of its open handles go on.
void note_metadata_change(Filesystem& fs, dev_t dev, ino_t ino);

// The end of a file handle: close it and, when it was the last write handle
// of its file, seal it or abandon it (R4) while holding the file's gate.
void finish_handle(Filesystem& fs, FileHandle& handle);
// The session's end (after its loop, before the seal thread stops): the
// kernel drops the RELEASEs it had not sent yet when the connection goes (an
// unmount right after many closes leaves hundreds queued), so every handle
// whose file was closed (FLUSH came) is finished here, as its RELEASE would
// have finished it: the file is sealed as at any last close. Handles never
// closed are dropped as they are. Returns how many were finished.
std::size_t release_closed_handles(Filesystem& fs);

// A read handle of inode opened after the store judged it, with the stamp
// it was verified at (sealed_read, verified): kept for later READs with fh 0
// (without OPEN, or after an OPEN answered by shared_reader_fresh), else made
// for the caller alone.
Result<std::shared_ptr<FileHandle>> implicit_reader(Filesystem& fs, const InodeRef& inode);

// Whether a read-only OPEN of inode may be answered fh 0, its READs then
// served by the inode's kept reader as without OPEN: a sealed file no one
// writes, whose kept reader still has the stamp it was verified at (one
// fstat, the test every READ on it makes). A reader whose stamp moved is
// dropped, and the OPEN takes the full path (Store::open_file re-judges:
// damage behind the mount is a miss at this open, as with a handle of its
// own).
bool shared_reader_fresh(Filesystem& fs, const InodeRef& inode);
// After a full read OPEN of a sealed file: handle (just verified) becomes the
// inode's kept reader, so that the OPEN can be answered fh 0 and hold no
// descriptor of its own. False when it cannot be kept (the file is being
// written, descriptors are low, kept readers are off).
bool keep_as_reader(Filesystem& fs, const InodeRef& inode, const std::shared_ptr<FileHandle>& handle);

// R2: whether a READ on a sealed file's handle may serve its bytes (0: the
// backing file still has the stamp verified, or verifies again), else the
// READ's errno: EIO when the bytes are not what was verified, ESTALE when
// the file is gone from B.
int unverified_errno(Filesystem& fs, FileHandle& handle);
// R2 for the bytes themselves: a READ of a sealed file's handle reads into
// buf and then compares the stamp again. A write behind the mount moves the
// file's times before its data (the kernel updates them first), so bytes
// changed between the first check and the read show in the second; such a
// read is done again after the file is verified again (unverified_errno).
// The bytes read (short at the end of the file), or the READ's errno.
Result<std::size_t> read_verified(Filesystem& fs, FileHandle& handle, char* buf, std::size_t size, off_t off);

}  // namespace sealfs::fuse
