#include "fs/fuse/inode_evictor.hpp"

#include <algorithm>
#include <chrono>

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

void InodeEvictor::start(fuse_session* session, std::function<bool(const Inode&)> keep,
                         std::function<bool()> pressure) {
  std::lock_guard lock(mu_);
  session_ = session;
  keep_ = std::move(keep);
  pressure_ = std::move(pressure);
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void InodeEvictor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  session_ = nullptr;
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
void InodeEvictor::sweep() {
  bound_.store(bound_for(descriptor_limit()), std::memory_order_relaxed);
  const std::uint64_t size = inodes_.size();
  const std::uint64_t target = bound() * kTargetPercent / 100;
  // Low on descriptors (open handles, seals in flight): every cold file
  // gives its descriptor back, even under the bound.
  const bool pressed = pressure_ && pressure_();
  if (size <= bound() && !pressed) return;
  std::uint64_t to_evict = size > bound() ? size - target : 0;
  for (const InodeTable::Cold& cold : inodes_.cold(pressed ? size : size - target)) {
    if (keep_ && keep_(*cold.inode)) continue;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    // The descriptor goes now, whatever the kernel does: it forgets only
    // when it can take the directory's lock, which a burst of creates in
    // that directory holds most of the time.
    if (cold.inode->detach()) detached_.fetch_add(1, std::memory_order_relaxed);
    if (to_evict == 0) continue;
    --to_evict;
    // ENOENT: the kernel no longer holds the parent or the name; it forgets
    // (or already forgot) the inode by itself.
    fuse_lowlevel_notify_inval_entry(session_, cold.seen.parent, cold.seen.name.data(),
                                     cold.seen.name.size());
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace sealfs::fuse
