// FUSE passthrough (issue 25): a read-only OPEN of a sealed file that the
// store has just verified is answered with a backing id for the verified
// descriptor, and the kernel then reads (and maps) B's file itself: no READ
// reaches the daemon, and the pages are B's own page cache.
//
// Needs libfuse 3.17 (fuse_passthrough_open; the `passthrough` preset), a
// kernel with CONFIG_FUSE_PASSTHROUGH that offers FUSE_CAP_PASSTHROUGH, a
// daemon with CAP_SYS_ADMIN (the kernel's backing-file ioctl demands it) and a
// connection that keeps OPEN. Without any of them every open takes the
// normal path, as on libfuse 3.14.
//
// The kernel's rules (fs/fuse/iomode.c), which this table mirrors per inode:
//  - every passthrough open of an inode must name the same backing file
//    (another one: EBUSY), so one backing id is kept per inode while any of
//    its passthrough opens lasts, and closed at the last one's RELEASE (the
//    kernel holds its own reference on the file meanwhile);
//  - while an inode has passthrough opens, an open without passthrough
//    fails (EIO to the caller), and while it has cached opens a passthrough
//    open does: a write open of a file being read through passthrough is
//    refused here with ETXTBSY (as a running executable is), a read open of
//    a file open in cached mode takes the normal path;
//  - FOPEN_KEEP_CACHE with passthrough fails the open: not set.
// Our counts go down at RELEASE, which the kernel sends once its own counts
// went down (so they never claim less than the kernel holds): shown by
// tests (passthrough_test.cpp, racing opens and closes), not read in the
// kernel's source.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#if defined(FUSE_MAJOR_VERSION) && defined(FUSE_MINOR_VERSION) && \
    FUSE_MAKE_VERSION(FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION) >= FUSE_MAKE_VERSION(3, 17)
#define SEALFS_HAVE_PASSTHROUGH 1
#else
#define SEALFS_HAVE_PASSTHROUGH 0
#endif

namespace sealfs::fuse {

struct FileHandle;
class PassthroughOpens;

// One cached open on its way to the reply: counted by begin, released at
// destruction unless the reply went out (keep).
class CachedOpen {
 public:
  CachedOpen(PassthroughOpens& opens, fuse_ino_t ino) : opens_(opens), ino_(ino) {}
  CachedOpen(const CachedOpen&) = delete;
  CachedOpen& operator=(const CachedOpen&) = delete;
  ~CachedOpen();
  bool begin(std::chrono::milliseconds limit);
  void keep() { counted_ = false; }  // answered: its RELEASE ends it

 private:
  PassthroughOpens& opens_;
  fuse_ino_t ino_;
  bool counted_ = false;
};

class PassthroughOpens {
 public:
  // Whether this build's libfuse has the passthrough API.
  static constexpr bool kBuilt = SEALFS_HAVE_PASSTHROUGH != 0;
  // How long a write open, truncate or create waits for the RELEASE of
  // passthrough opens closed just before it (cached_begin, wait_unused)
  // before it is refused with ETXTBSY. Under TSan a RELEASE was seen to
  // arrive about a second after the close; 250 ms was too short there.
  static constexpr std::chrono::milliseconds kCloseWait{1000};

  // At init: the kernel granted FUSE_CAP_PASSTHROUGH. Opens are counted from
  // then on; before it (and on a 3.14 build) every call below is a no-op.
  void grant() { granted_.store(true, std::memory_order_relaxed); }
  bool granted() const { return granted_.load(std::memory_order_relaxed); }
  // New backing ids are made while enabled (granted, and no backing-file
  // ioctl failed); an inode that has one keeps it either way.
  bool enabled() const { return granted() && !failed_.load(std::memory_order_relaxed); }

  // The backing id for a passthrough open of ino, whose verified read handle
  // is handle: the inode's own while it has one (handle then must be of the
  // same file: the same device and inode number, else 0), else a new one
  // for handle's descriptor. Counted as one passthrough open. 0: no
  // passthrough for this open (counted nowhere; errno_out says why when the
  // kernel refused the descriptor, which turns new ids off for the mount).
  int acquire(fuse_req_t req, fuse_ino_t ino, const std::shared_ptr<FileHandle>& handle, int& errno_out);
  // The handle the inode's passthrough opens share (their fh), or null.
  std::shared_ptr<FileHandle> shared_handle(fuse_ino_t ino) const;
  // One passthrough open of ino ended (its RELEASE, or a reply that failed):
  // the last one closes the backing id. req must not have been answered yet;
  // null after a failed reply (libfuse has freed the request): the id then
  // stays, dormant, for the inode's next passthrough open.
  void release(fuse_req_t req, fuse_ino_t ino);

  // A cached (non-passthrough) open of ino, counted before its reply (so
  // that no passthrough open of ino is answered meanwhile) once ino has no
  // passthrough open, waiting up to limit for one to end; false when one is
  // still open then. cached_released: its RELEASE, or a reply that failed.
  bool cached_begin(fuse_ino_t ino, std::chrono::milliseconds limit);
  void cached_opened(fuse_ino_t ino) { (void)cached_begin(ino, std::chrono::milliseconds(0)); }
  void cached_released(fuse_ino_t ino);

  bool has_passthrough(fuse_ino_t ino) const;
  // Waits up to limit for ino's passthrough opens to end: a reader's close
  // reaches the daemon as a RELEASE after the close returned, and a write
  // open that follows at once must not find it still counted. False when
  // one is still open then.
  bool wait_unused(fuse_ino_t ino, std::chrono::milliseconds limit);
  bool has_cached(fuse_ino_t ino) const;
  // Passthrough opens counted now (each a handle in the file table), and the
  // descriptors they hold (one per inode, and any dormant one).
  std::size_t opens() const { return opens_.load(std::memory_order_relaxed); }
  std::size_t descriptors() const { return descriptors_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    int backing_id = 0;
    std::size_t passthrough = 0;
    std::size_t cached = 0;
    std::shared_ptr<FileHandle> handle;  // the descriptor the backing id was made for
  };
  std::atomic<bool> granted_{false};
  std::atomic<bool> failed_{false};
  std::atomic<std::size_t> opens_{0};        // sum of Entry::passthrough
  std::atomic<std::size_t> descriptors_{0};  // entries with a handle
  mutable std::mutex mu_;
  std::condition_variable released_;               // a passthrough open's count went down
  std::unordered_map<fuse_ino_t, Entry> entries_;  // under mu_; no entry: no open counted
};

}  // namespace sealfs::fuse
