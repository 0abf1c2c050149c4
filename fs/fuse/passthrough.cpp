#include "fs/fuse/passthrough.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <utility>

#include "fs/fuse/file_handle.hpp"

namespace sealfs::fuse {
namespace {

// The same backing file: the device and inode number its verification saw
// (no system call on B here: fs/README.md).
[[maybe_unused]] std::pair<dev_t, ino_t> file_of(FileHandle& handle) {
  std::lock_guard lock(handle.stamp_mu);
  return {handle.verified.dev, handle.verified.ino};
}

[[maybe_unused]] bool same_file(FileHandle& a, FileHandle& b) { return file_of(a) == file_of(b); }

}  // namespace

int PassthroughOpens::acquire(fuse_req_t req, fuse_ino_t ino, const std::shared_ptr<FileHandle>& handle,
                              int& errno_out) {
  errno_out = 0;
#if SEALFS_HAVE_PASSTHROUGH
  if (!granted()) return 0;
  std::lock_guard lock(mu_);
  auto it = entries_.find(ino);
  if (it != entries_.end() && it->second.cached > 0) return 0;
  if (it != entries_.end() && it->second.backing_id > 0) {
    if (same_file(*it->second.handle, *handle)) {
      ++it->second.passthrough;
      opens_.fetch_add(1, std::memory_order_relaxed);
      return it->second.backing_id;
    }
    if (it->second.passthrough > 0) return 0;
    // A dormant id (its open's reply failed) of a file no longer served.
    fuse_passthrough_close(req, it->second.backing_id);
    it->second.backing_id = 0;
    it->second.handle.reset();
    descriptors_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (!enabled()) return 0;
  errno = 0;
  const int id = fuse_passthrough_open(req, handle->fd.get());
  if (id <= 0) {
    errno_out = errno != 0 ? errno : EIO;
    failed_.store(true, std::memory_order_relaxed);
    return 0;
  }
  Entry& entry = entries_[ino];
  entry.backing_id = id;
  entry.passthrough = 1;
  entry.handle = handle;
  opens_.fetch_add(1, std::memory_order_relaxed);
  descriptors_.fetch_add(1, std::memory_order_relaxed);
  return id;
#else
  (void)req;
  (void)ino;
  (void)handle;
  return 0;
#endif
}

std::shared_ptr<FileHandle> PassthroughOpens::shared_handle(fuse_ino_t ino) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(ino);
  return it == entries_.end() ? nullptr : it->second.handle;
}

void PassthroughOpens::release(fuse_req_t req, fuse_ino_t ino) {
  std::shared_ptr<FileHandle> last;  // closed outside the lock
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(ino);
    if (it == entries_.end() || it->second.passthrough == 0) return;
    released_.notify_all();
    opens_.fetch_sub(1, std::memory_order_relaxed);
    if (--it->second.passthrough > 0 || req == nullptr) return;  // no request: the id stays, dormant
#if SEALFS_HAVE_PASSTHROUGH
    if (it->second.backing_id > 0) fuse_passthrough_close(req, it->second.backing_id);
#endif
    it->second.backing_id = 0;
    last = std::move(it->second.handle);
    descriptors_.fetch_sub(1, std::memory_order_relaxed);
    if (it->second.cached == 0) entries_.erase(it);
  }
}

bool PassthroughOpens::cached_begin(fuse_ino_t ino, std::chrono::milliseconds limit) {
  if (!granted()) return true;
  std::unique_lock lock(mu_);
  const bool free = released_.wait_for(lock, limit, [&] {
    auto it = entries_.find(ino);
    return it == entries_.end() || it->second.passthrough == 0;
  });
  if (free) ++entries_[ino].cached;
  return free;
}

CachedOpen::~CachedOpen() {
  if (counted_) opens_.cached_released(ino_);
}

bool CachedOpen::begin(std::chrono::milliseconds limit) {
  counted_ = opens_.cached_begin(ino_, limit);
  return counted_;
}

void PassthroughOpens::cached_released(fuse_ino_t ino) {
  if (!granted()) return;
  std::lock_guard lock(mu_);
  auto it = entries_.find(ino);
  if (it == entries_.end() || it->second.cached == 0) return;
  if (--it->second.cached == 0 && it->second.backing_id == 0) entries_.erase(it);
}

bool PassthroughOpens::has_passthrough(fuse_ino_t ino) const {
  if (!granted()) return false;
  std::lock_guard lock(mu_);
  auto it = entries_.find(ino);
  return it != entries_.end() && it->second.passthrough > 0;
}

bool PassthroughOpens::wait_unused(fuse_ino_t ino, std::chrono::milliseconds limit) {
  if (!granted()) return true;
  std::unique_lock lock(mu_);
  return released_.wait_for(lock, limit, [&] {
    auto it = entries_.find(ino);
    return it == entries_.end() || it->second.passthrough == 0;
  });
}

bool PassthroughOpens::has_cached(fuse_ino_t ino) const {
  if (!granted()) return false;
  std::lock_guard lock(mu_);
  auto it = entries_.find(ino);
  return it != entries_.end() && it->second.cached > 0;
}

}  // namespace sealfs::fuse
