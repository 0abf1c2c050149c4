// Keeps the descriptors the daemon holds for inodes under a bound derived
// from its descriptor limit (issue 24). The kernel forgets an inode only
// when its dentries go, which without memory pressure is never. This thread
// closes the descriptors of the inodes no request used lately
// (Inode::detach: they are opened again by name when used), and past the
// bound in files asks the kernel to drop the names of cold files
// (fuse_lowlevel_notify_inval_entry, as a rename behind the mount would);
// the kernel answers with FORGET. Directories are detached, never dropped:
// one may be a process's working directory. Needs nothing of B, so it
// works on every filesystem (GlusterFS has no file handles to keep instead
// of descriptors). A name dropped is looked up again when used.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "fs/fuse/descriptors.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/kernel_notices.hpp"

namespace sealfs::fuse {

class InodeEvictor {
 public:
  explicit InodeEvictor(InodeTable& inodes) : inodes_(inodes) {}
  ~InodeEvictor() { stop(); }
  InodeEvictor(const InodeEvictor&) = delete;
  InodeEvictor& operator=(const InodeEvictor&) = delete;

  // The most inodes kept for a descriptor limit: a third of what the
  // headroom leaves (an inode may hold a read handle too, and the rest is
  // for other open handles), at most kMaxBound.
  static std::uint64_t bound_for(std::uint64_t limit);
  static constexpr std::uint64_t kMaxBound = 65536;

  // The bound for the limit read at the last sweep (prlimit(1) may change it).
  std::uint64_t bound() const { return bound_.load(std::memory_order_relaxed); }
  // Past the bound in files: directories are never asked to be forgotten.
  bool over() const { return inodes_.files() > bound(); }
  // Sweep now rather than at the next tick (a lookup took the table past
  // the bound, or a request is waiting for descriptors).
  void wake();
  // Names the kernel was asked to drop so far.
  std::uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  // Closes now, in the caller's thread, the descriptors of the inodes no
  // request used since the last look (make_room: the evictor's thread may
  // be waiting in an invalidation for a lock the caller's request holds).
  void detach_cold();
  // Inodes whose descriptor was closed while the kernel still remembered them.
  std::uint64_t detached() const { return detached_.load(std::memory_order_relaxed); }

  // keep: inodes never to evict (files being written); pressure: whether
  // descriptors run low, when every cold file's descriptor goes. notices
  // must outlive the thread: call stop() before destroying them.
  void start(KernelNotices* notices, std::function<bool(const Inode&)> keep,
             std::function<bool()> pressure = {});
  void stop();

 private:
  void run();
  void sweep();
  // cold less the inodes to keep, each detached where nothing holds it.
  std::vector<InodeTable::Cold> detach(std::vector<InodeTable::Cold> cold);

  InodeTable& inodes_;
  std::atomic<std::uint64_t> bound_{bound_for(descriptor_limit())};
  std::atomic<std::uint64_t> evicted_{0};
  std::atomic<std::uint64_t> detached_{0};
  std::chrono::steady_clock::time_point dirs_detached_at_{};  // the sweeping thread's
  std::function<bool(const Inode&)> keep_;
  std::function<bool()> pressure_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool stopping_ = false;
  KernelNotices* notices_ = nullptr;
  std::thread thread_;
};

}  // namespace sealfs::fuse
