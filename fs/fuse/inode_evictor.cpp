#include "fs/fuse/inode_evictor.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "fs/fuse/descriptors.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/kernel_notices.hpp"
#include "fs/fuse/running_thread.hpp"

namespace sealfs::fuse {
namespace {
// When over the bound, a sweep evicts down to this share of it, so that the
// kernel's FORGETs come in batches rather than one per lookup.
constexpr std::uint64_t kTargetPercent = 75;
// Sweeps: at this pace while over the bound (FORGETs follow an invalidation
// at once, but the reference marks need one pass to clear), else rarely.
constexpr auto kBusyTick = std::chrono::milliseconds(10);
constexpr auto kIdleTick = std::chrono::seconds(1);
constexpr std::uint64_t kMinBound = 32;
}  // namespace

std::uint64_t InodeEvictor::bound_for(std::uint64_t limit) {
  const std::uint64_t headroom = descriptor_headroom(limit);
  if (limit < headroom + 2 * kMinBound) return kMinBound;
  return std::min((limit - headroom) / 3, kMaxBound);
}

void InodeEvictor::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void InodeEvictor::start(KernelNotices* notices, std::function<bool(const Inode&)> keep,
                         std::function<bool()> pressure) {
  std::lock_guard lock(mu_);
  notices_ = notices;
  keep_ = std::move(keep);
  pressure_ = std::move(pressure);
  stopping_ = false;
  thread_ = start_running_thread([this] { run(); });
}

void InodeEvictor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  notices_ = nullptr;
}

void InodeEvictor::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, over() ? kBusyTick : kIdleTick, [this] { return stopping_ || woken_; });
    if (stopping_) break;
    woken_ = false;
    lock.unlock();
    sweep();
    lock.lock();
  }
}

// Outside mu_: an invalidation waits for the parent directory's lock in the
// kernel, which a request in that directory may hold for a while.
// Every descriptor at once, whatever the kernel does: an invalidation waits
// for its directory's lock, which a burst of creates holds most of the time,
// and so may a create waiting for descriptors (make_room).
std::vector<InodeTable::Cold> InodeEvictor::detach(std::vector<InodeTable::Cold> cold) {
  std::erase_if(cold, [this](const InodeTable::Cold& c) { return keep_ && keep_(*c.inode); });
  for (const InodeTable::Cold& c : cold)
    if (c.inode->detach()) detached_.fetch_add(1, std::memory_order_relaxed);
  return cold;
}

void InodeEvictor::detach_cold() { (void)detach(inodes_.cold(inodes_.size())); }

void InodeEvictor::sweep() {
  bound_.store(bound_for(descriptor_limit()), std::memory_order_relaxed);
  const std::uint64_t size = inodes_.size();
  const std::uint64_t files = inodes_.files();
  const std::uint64_t target = bound() * kTargetPercent / 100;
  // Low on descriptors (open handles, seals in flight): every cold inode
  // gives its descriptor back, even under the bound. So do the directories
  // once a second when there are many: the kernel keeps them (see below).
  const bool pressed = pressure_ && pressure_();
  const auto now = std::chrono::steady_clock::now();
  const bool dirs_due = size - files > bound() / 2 && now - dirs_detached_at_ >= kIdleTick;
  if (files <= bound() && !pressed && !dirs_due) return;
  if (dirs_due) dirs_detached_at_ = now;
  std::vector<InodeTable::Cold> cold =
      detach(inodes_.cold(pressed || dirs_due ? size : files - std::min(files, target)));
  if (files <= bound()) return;
  // Only files are forgotten: the kernel unhashes the dentry of a name it
  // is asked to drop, and a directory may be a process's working directory
  // (getcwd then fails with ENOENT: git did). A detached directory costs
  // memory only, and the kernel lets it go under memory pressure.
  std::erase_if(cold, [](const InodeTable::Cold& c) { return c.inode->directory; });
  if (cold.size() > files - target) cold.resize(files - target);
  for (const InodeTable::Cold& c : cold) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    // ENOENT: the kernel no longer holds the parent or the name; it forgets
    // (or already forgot) the inode by itself.
    notices_->inval_entry(c.seen.parent, c.seen.name);
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace sealfs::fuse
