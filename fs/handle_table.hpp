// Open file and directory handles, addressed by the 64-bit fi->fh the kernel
// hands back. Ids, not pointers, so a wrong or repeated fh is an error
// (EBADF) and never a use-after-free.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace sealfs::fs {

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
    std::lock_guard lock(mu_);
    auto it = handles_.find(id);
    return it == handles_.end() ? nullptr : it->second;
  }
  // Removes and returns the handle (nullptr when unknown).
  std::shared_ptr<T> take(std::uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = handles_.find(id);
    if (it == handles_.end()) return nullptr;
    auto handle = std::move(it->second);
    handles_.erase(it);
    return handle;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return handles_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<T>> handles_;
  std::uint64_t next_id_ = 1;
};

}  // namespace sealfs::fs
