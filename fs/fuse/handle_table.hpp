// Open file and directory handles, addressed by the 64-bit fi->fh the kernel
// hands back. Ids, not pointers, so a wrong or repeated fh is an error
// (EBADF) and never a use-after-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define SEALFS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SEALFS_TSAN 1
#endif
#endif
#ifdef SEALFS_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace sealfs::fuse {

template <class T>
class HandleTable {
 public:
  std::uint64_t add(std::shared_ptr<T> handle) {
    std::lock_guard lock(mu_);
    const std::uint64_t id = next_id_++;
    handles_.emplace(id, std::move(handle));
    return id;
  }
  std::shared_ptr<T> get(std::uint64_t id) const {
    std::shared_ptr<T> handle;
    {
      std::lock_guard lock(mu_);
      auto it = handles_.find(id);
      if (it != handles_.end()) handle = it->second;
    }
#ifdef SEALFS_TSAN
    // ThreadSanitizer builds only. The kernel sends RELEASE for a handle
    // after every request on it has been answered, but TSan cannot see that
    // order: it passes through the kernel and libfuse's splice()s on
    // /dev/fuse. Each user of a handle releases it when done, and take()
    // acquires those releases, so TSan sees the order the kernel keeps.
    if (handle) {
      T* raw = handle.get();
      return std::shared_ptr<T>(raw, [keep = std::move(handle)](T* p) mutable {
        __tsan_release(p);
        keep.reset();
      });
    }
#endif
    return handle;
  }
  // Removes and returns the handle (nullptr when unknown).
  std::shared_ptr<T> take(std::uint64_t id) {
    std::shared_ptr<T> handle;
    {
      std::lock_guard lock(mu_);
      auto it = handles_.find(id);
      if (it == handles_.end()) return nullptr;
      handle = std::move(it->second);
      handles_.erase(it);
    }
#ifdef SEALFS_TSAN
    // A request answered just before RELEASE may still be leaving its
    // handler: wait (bounded) for it to let go, then take its release.
    for (int i = 0; i < 1000 && handle.use_count() > 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    __tsan_acquire(handle.get());
#endif
    return handle;
  }
  // Removes and returns every handle (the session's end: no request is
  // left to use one).
  std::vector<std::shared_ptr<T>> take_all() {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(handles_.size());
    for (auto& [id, handle] : handles_) out.push_back(std::move(handle));
    handles_.clear();
    return out;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return handles_.size();
  }
  // Every handle open now (parked_handles.hpp: a scan near the descriptor
  // limit, never on a request's usual path).
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(handles_.size());
    for (const auto& [id, handle] : handles_) out.push_back(handle);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<T>> handles_;
  std::uint64_t next_id_ = 1;
};

}  // namespace sealfs::fuse
