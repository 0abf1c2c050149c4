// Turns the store's on_invalidate events into kernel cache invalidations.
// libfuse forbids calling fuse_lowlevel_notify_inval_entry from the handler
// of a request that holds the directory's lock (it would deadlock), and the
// store reports invalidations from inside request handlers, so they are
// queued here and sent from a thread of their own.
#pragma once

#include <fuse_lowlevel.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/store/store.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/kernel_notices.hpp"

namespace sealfs::fuse {

class Invalidator {
 public:
  explicit Invalidator(const InodeTable& inodes) : inodes_(inodes) {}
  ~Invalidator() { stop(); }
  Invalidator(const Invalidator&) = delete;
  Invalidator& operator=(const Invalidator&) = delete;

  // Never blocks on the kernel; safe from any thread, inside a request or not.
  // Events queued before start() wait; they are dropped if stop() comes first.
  void post(const Invalidation& event);
  // The same, sent once delay has passed (a listing that may still change
  // within the directory's timestamp tick, dir_ops.cpp).
  void post_later(const Invalidation& event, std::chrono::steady_clock::duration delay);

  // Drops what the kernel caches of inode id (attributes, pages; for a
  // directory its cached listing) before returning, unlike post(). Safe
  // inside a request handler (the kernel takes no directory lock for it).
  // False when it could not be done.
  bool invalidate_now(fuse_ino_t id);

  // notices must outlive the thread: call stop() before destroying them.
  void start(KernelNotices* notices);
  void stop();

 private:
  void run();
  void send(const Invalidation& event);

  const InodeTable& inodes_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Invalidation> queue_;
  std::multimap<std::chrono::steady_clock::time_point, Invalidation> later_;
  bool stopping_ = false;
  KernelNotices* notices_ = nullptr;
  std::thread thread_;
};

}  // namespace sealfs::fuse
