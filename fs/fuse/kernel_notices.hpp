// The daemon's notifications to the kernel (invalidations, pages stored),
// all through one gate. fuse_session_unmount closes /dev/fuse's descriptor
// while the notifiers' threads may be about to write to it, and a number
// closed there can be handed at once to a backing file another thread
// opens: a notification would then be written into that file. close() ends
// every later notification before the unmount.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <shared_mutex>
#include <string_view>

namespace sealfs::fuse {

class KernelNotices {
 public:
  // Notifications go to se's kernel from now on.
  void open(fuse_session* se) { se_.store(se); }
  // No notification starts after this. Waits up to limit for those sent
  // already; false when one is still in the kernel then: waiting on a lock
  // that only the unmount releases (the reason it comes first). Such a
  // write holds its own reference to the device, so the close is safe for it.
  bool close(std::chrono::milliseconds limit);

  // fuse_lowlevel_notify_*: 0 or -errno; -ENOTCONN when not open.
  int inval_inode(fuse_ino_t ino);
  int inval_entry(fuse_ino_t parent, std::string_view name);
  int store(fuse_ino_t ino, off_t off, fuse_bufvec* bufv);

 private:
  template <class Send>
  int send(const Send& send_to);

  std::atomic<fuse_session*> se_{nullptr};
  std::shared_timed_mutex sending_;  // shared by each notification in flight
};

}  // namespace sealfs::fuse
