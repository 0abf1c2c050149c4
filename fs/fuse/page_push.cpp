#include "fs/fuse/page_push.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/cancel.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/fd_bufvec.hpp"
#include "fs/fuse/file_handles.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/kernel_notices.hpp"

namespace sealfs::fuse {
namespace {

// One notify_store per chunk: a bounded copy in the daemon, and a bounded
// message through /dev/fuse.
constexpr std::size_t kChunk = 1 << 20;
// How long a push after a LOOKUP waits for the kernel to make the inode the
// reply told it of (the task that looked it up does that when it wakes).
constexpr int kInodeWaits = 40;
constexpr std::chrono::microseconds kInodeWait{50};

// One notify_store; ENOENT (no such inode yet) retried for a moment when
// wait_for_inode. No splice: the bytes are in our buffer already.
bool store_chunk(KernelNotices& notices, fuse_ino_t ino, off_t off, char* data, std::size_t len,
                 bool wait_for_inode) {
  fuse_bufvec bufv = mem_bufvec(len, data);
  for (int attempt = 0;; ++attempt) {
    const int rc = notices.store(ino, off, &bufv);
    if (rc == 0) return true;
    if (rc != -ENOENT || !wait_for_inode || attempt >= kInodeWaits) return false;
    std::this_thread::sleep_for(kInodeWait);
  }
}

// Pushes [from, to) of handle's file into ino's pages. Each chunk is read,
// then the stamp is checked against the verified one (R2: the bytes read
// while it held are the verified bytes), then stored. A change stops it.
void push_range(Filesystem& fs, fuse_ino_t ino, FileHandle& handle, off_t from, off_t to,
                bool wait_for_inode) {
  if (!fs.pusher.try_begin()) return;
  struct End {
    PagePusher& pusher;
    ~End() { pusher.end(); }
  } end{fs.pusher};
  // A buffer per thread: a fresh megabyte per push would cost its page
  // faults every time.
  thread_local std::vector<char> buf;
  buf.resize(std::min(static_cast<std::size_t>(to - from), kChunk));
  std::uint64_t pushed = 0;
  for (off_t off = from; off < to;) {
    const std::size_t len = std::min(kChunk, static_cast<std::size_t>(to - off));
    // A short read: the file shrank, and the stamp check would fail anyway.
    const auto got = pread_up_to(handle.fd.get(), buf.data(), len, off);
    if (!got || *got != len || unverified_errno(fs, handle) != 0) break;
    KernelNotices* notices = fs.pusher.notices();
    if (notices == nullptr ||
        !store_chunk(*notices, ino, off, buf.data(), len, wait_for_inode && off == from))
      break;
    off += static_cast<off_t>(len);
    pushed += len;
  }
  fs.store->metrics().bytes_pushed.fetch_add(pushed, std::memory_order_relaxed);
}

}  // namespace

void push_after_lookup(Filesystem& fs, fuse_ino_t ino, ObjectKind kind, const struct stat& st) {
  if (fs.pusher.notices() == nullptr || !is_sealed(kind) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      st.st_size > fs.pusher.max_file)
    return;
  // The request was answered and is gone: nothing may ask it whether it was
  // interrupted (a hash in implicit_reader would). A shutdown still cancels.
  CancelScope after_reply([](void*) { return false; }, nullptr);
  // Only the lookup that made the kernel's inode: one it held before (made
  // by CREATE, say) has pages from its writes, and a READ push fills the rest.
  if (fs.inodes.lookups(ino) != 1) return;
  InodeRef inode = fs.inodes.get(ino);
  if (!inode || inode->pages_pushed.exchange(true)) return;
  if (fs.writers.in_progress(inode->dev, inode->ino) || fs.descriptors_low()) return;
  auto reader = implicit_reader(fs, inode);
  if (!reader || !(*reader)->sealed_read) return;
  push_range(fs, ino, **reader, 0, st.st_size, true);
}

void push_rest_at_read(Filesystem& fs, fuse_ino_t ino, FileHandle& handle, off_t off, std::size_t size) {
  if (fs.pusher.notices() == nullptr || !handle.sealed_read || !handle.inode ||
      handle.inode->pages_pushed.exchange(true))
    return;
  off_t file_size = 0;
  {
    std::lock_guard lock(handle.stamp_mu);
    file_size = handle.verified.size;
  }
  if (file_size > fs.pusher.max_file) return;
  const off_t end_of_read = off + static_cast<off_t>(size);
  if (end_of_read < file_size) push_range(fs, ino, handle, end_of_read, file_size, false);
  if (off > 0) push_range(fs, ino, handle, 0, std::min(off, file_size), false);
}

}  // namespace sealfs::fuse
