// Notifications to the kernel through one gate (kernel_notices.hpp).
#include "fs/fuse/kernel_notices.hpp"

#include <cerrno>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <string_view>

namespace sealfs::fuse {

template <class Send>
int KernelNotices::send(const Send& send_to) {
  std::shared_lock sending(sending_);
  fuse_session* se = se_.load();
  if (se == nullptr) return -ENOTCONN;
  return send_to(se);
}

bool KernelNotices::close(std::chrono::milliseconds limit) {
  se_.store(nullptr);
  // Exclusive once every notification that saw the session has returned.
  std::unique_lock drained(sending_, std::defer_lock);
  return drained.try_lock_for(limit);
}

int KernelNotices::inval_inode(fuse_ino_t ino) {
  return send([&](fuse_session* se) { return fuse_lowlevel_notify_inval_inode(se, ino, 0, 0); });
}

int KernelNotices::inval_entry(fuse_ino_t parent, std::string_view name) {
  return send([&](fuse_session* se) {
    return fuse_lowlevel_notify_inval_entry(se, parent, name.data(), name.size());
  });
}

int KernelNotices::store(fuse_ino_t ino, off_t off, fuse_bufvec* bufv) {
  return send(
      [&](fuse_session* se) { return fuse_lowlevel_notify_store(se, ino, off, bufv, FUSE_BUF_NO_SPLICE); });
}

}  // namespace sealfs::fuse
