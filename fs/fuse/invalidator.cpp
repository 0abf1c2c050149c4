#include "fs/fuse/invalidator.hpp"

#include <syslog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "core/store/store.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/kernel_notices.hpp"
#include "fs/fuse/running_thread.hpp"

namespace sealfs::fuse {
namespace {
// Beyond this many waiting events the kernel is clearly not keeping up;
// dropping the oldest only means a cache lives until its timeout (R9).
constexpr std::size_t kMaxQueued = 65536;
}  // namespace

void Invalidator::post(const Invalidation& event) {
  try {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (queue_.size() >= kMaxQueued) queue_.pop_front();
    queue_.push_back(event);
  } catch (const std::bad_alloc&) {
    return;  // see kMaxQueued: a lost invalidation ends with the cache timeout
  }
  cv_.notify_one();
}

void Invalidator::post_later(const Invalidation& event, std::chrono::steady_clock::duration delay) {
  try {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (later_.size() >= kMaxQueued) later_.erase(later_.begin());
    later_.emplace(std::chrono::steady_clock::now() + delay, event);
  } catch (const std::bad_alloc&) {
    return;  // as in post()
  }
  cv_.notify_one();
}

void Invalidator::start(KernelNotices* notices) {
  std::lock_guard lock(mu_);
  notices_ = notices;
  stopping_ = false;
  thread_ = start_running_thread([this] { run(); });
}

void Invalidator::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  queue_.clear();
  later_.clear();
  notices_ = nullptr;
}

bool Invalidator::invalidate_now(fuse_ino_t id) {
  KernelNotices* notices = nullptr;
  {
    std::lock_guard lock(mu_);
    notices = stopping_ ? nullptr : notices_;
  }
  if (notices == nullptr) return false;
  // ENOENT: the kernel holds no such inode, so nothing of it either.
  const int rc = notices->inval_inode(id);
  if (rc != 0 && rc != -ENOENT) syslog(LOG_DEBUG, "sealfs: inval_inode: %s", std::strerror(-rc));
  return rc == 0 || rc == -ENOENT;
}

void Invalidator::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    const auto due = [this] {
      return !later_.empty() && later_.begin()->first <= std::chrono::steady_clock::now();
    };
    const auto ready = [&] { return stopping_ || !queue_.empty() || due(); };
    if (later_.empty())
      cv_.wait(lock, ready);
    else
      cv_.wait_until(lock, std::chrono::steady_clock::time_point(later_.begin()->first), ready);
    if (stopping_) return;
    if (queue_.empty() && !due()) continue;
    Invalidation event;
    if (!queue_.empty()) {
      event = std::move(queue_.front());
      queue_.pop_front();
    } else {
      event = std::move(later_.begin()->second);
      later_.erase(later_.begin());
    }
    lock.unlock();
    send(event);
    lock.lock();
  }
}

void Invalidator::send(const Invalidation& event) {
  // Only what the kernel was told about can be in its caches: objects not in
  // the inode table need nothing (ENOENT from the kernel is normal as well).
  if (!event.name.empty()) {
    if (InodeRef parent = inodes_.find(event.parent_dev, event.parent_ino)) {
      const int rc = notices_->inval_entry(parent->id, event.name);
      if (rc != 0 && rc != -ENOENT)
        syslog(LOG_DEBUG, "sealfs: inval_entry %s: %s", event.name.c_str(), std::strerror(-rc));
    }
  }
  if (InodeRef inode = inodes_.find(event.dev, event.ino)) {
    const int rc = notices_->inval_inode(inode->id);
    if (rc != 0 && rc != -ENOENT) syslog(LOG_DEBUG, "sealfs: inval_inode: %s", std::strerror(-rc));
  }
}

}  // namespace sealfs::fuse
