// The handles of a connection that runs without OPEN (no_open: OPEN is
// answered ENOSYS, so the kernel keeps page caches across opens and sends
// neither OPEN nor RELEASE for existing files; fs/README.md). Requests on a
// file opened by open(2) then come with fh 0; only CREATE still hands out a
// handle of its own. This table stands in for what OPEN made, per inode:
//  - a write handle, from the first request that changes the file (WRITE,
//    SETATTR of the size with a handle, fallocate) until the FLUSH of a close
//    by the last process that changed it, where R4 seals or abandons it;
//  - a read handle (an fd opened after the store judged the file, and the
//    stamp it was verified at, R2) for the READs that reach the daemon.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/result.hpp"

namespace sealfs::fuse {

struct FileHandle;

class ImplicitHandles {
 public:
  struct Writer {
    explicit Writer(std::shared_ptr<FileHandle> h) : handle(std::move(h)) {}
    const std::shared_ptr<FileHandle> handle;
    // Requests using handle->fd hold it shared; the end (seal or abandon)
    // holds it unique, so no WRITE lands in a file after its seal hashed it.
    std::shared_mutex in_use;
    bool ended = false;  // under in_use, unique
  };
  using MakeHandle = std::function<Result<std::shared_ptr<FileHandle>>()>;
  using UndoHandle = std::function<void(FileHandle&)>;

  // The write handle of ino, made by make() at the first change; the thread
  // group of tid is counted among the file's writers. make runs outside the
  // table's lock (it may wait for a seal); when two first changes race, the
  // loser's handle is handed to undo.
  // tid 0 counts no one: the kernel's writeback of a shared mapping, whose
  // writes may come after every close (see take_if_unheld).
  Result<std::shared_ptr<Writer>> writer_for_change(fuse_ino_t ino, pid_t tid, const MakeHandle& make,
                                                    const UndoHandle& undo);
  // The writer of ino when no process holds it any more (only writeback
  // changed it since the last FLUSH): it leaves the table, to be ended.
  std::shared_ptr<Writer> take_if_unheld(fuse_ino_t ino);
  std::shared_ptr<Writer> writer(fuse_ino_t ino) const;  // nullptr: none

  // A FLUSH by tid. writer: set when its thread group changed the file; the
  // group stops being counted unless still_open(group) says it holds the
  // file by another descriptor. last: no group is counted any more; the
  // writer has left the table and must be ended by the caller.
  struct Flushed {
    std::shared_ptr<Writer> writer;
    bool last = false;
  };
  Flushed flushed_by(fuse_ino_t ino, pid_t tid, const std::function<bool(pid_t)>& still_open);

  // Whether ino has a writer every counting process of which is gone
  // (gone(group) says so): no FLUSH will end it.
  bool writer_orphaned(fuse_ino_t ino, const std::function<bool(pid_t)>& gone) const;
  // Takes such a writer out of the table (to be ended as abandoned); ino
  // still counts as orphaned until orphan_ended(ino), so that no judgement in
  // between sees the file in progress again.
  std::shared_ptr<Writer> take_orphaned(fuse_ino_t ino, const std::function<bool(pid_t)>& gone);
  void orphan_ended(fuse_ino_t ino);
  // The id of the writer, kept or being ended as an orphan, whose handle
  // matches: for a file whose inode the kernel forgot while its writer
  // lived on (a creator killed before its open returned sends no FLUSH,
  // and a lookup that finds the file hidden lets the kernel forget it).
  std::optional<fuse_ino_t> writer_id_where(const std::function<bool(const FileHandle&)>& matches) const;

  // The read handle of ino, made by make() when there is none. At most
  // max_readers() are kept (least recently used leave first; a READ still
  // using one keeps it alive until it is done).
  Result<std::shared_ptr<FileHandle>> reader(fuse_ino_t ino, const MakeHandle& make);
  // The kernel forgot ino: its read handle goes.
  void forget(fuse_ino_t ino);

  // Descriptors held (for the daemon's headroom check).
  std::size_t size() const;
  // The handles of the writers in the table now (parked_handles.hpp).
  std::vector<std::shared_ptr<FileHandle>> writer_handles() const;

  static constexpr std::size_t kMaxReaders = 1024;
  // Fewer for a daemon with few descriptors (issue 24: the inode bound).
  void set_max_readers(std::size_t n) {
    max_readers_.store(std::min(n, kMaxReaders), std::memory_order_relaxed);
  }
  std::size_t max_readers() const { return max_readers_.load(std::memory_order_relaxed); }
  // Descriptors run low: all but the keep most recently used readers go.
  void shed_readers(std::size_t keep);

 private:
  struct WriterSlot {
    std::shared_ptr<Writer> writer;
    std::map<pid_t, pid_t> groups_of;  // tid → thread group, of tasks that changed the file
    std::set<pid_t> groups;            // thread groups that changed it and have not flushed
  };
  struct ReaderSlot {
    std::shared_ptr<FileHandle> handle;
    std::list<fuse_ino_t>::iterator age;
  };
  void shed_locked(std::size_t keep);  // under mu_
  std::atomic<std::size_t> max_readers_{kMaxReaders};
  mutable std::mutex mu_;
  std::unordered_map<fuse_ino_t, WriterSlot> writers_;
  std::unordered_map<fuse_ino_t, ReaderSlot> readers_;
  std::list<fuse_ino_t> reader_age_;  // front: most recently used
  // Taken by take_orphaned, not ended yet (with their handles, for writer_id_where).
  std::unordered_map<fuse_ino_t, std::shared_ptr<FileHandle>> orphans_;
};

}  // namespace sealfs::fuse
