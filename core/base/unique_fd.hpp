// RAII owner of one file descriptor.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <utility>

namespace sealfs {

namespace detail {
// UniqueFd::live(): one count for the process.
inline std::atomic<std::int64_t> unique_fd_live{0};
}  // namespace detail

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) { count(fd, 1); }
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() {
    count(fd_, -1);
    return std::exchange(fd_, -1);
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) {
      ::close(fd_);
      count(fd_, -1);
    }
    fd_ = fd;
    count(fd_, 1);
  }

  // Descriptors owned by UniqueFds in this process now: what a daemon holds
  // for its own use, counted without reading /proc (issue 24).
  static std::int64_t live() { return detail::unique_fd_live.load(std::memory_order_relaxed); }

 private:
  static void count(int fd, int delta) {
    if (fd >= 0) detail::unique_fd_live.fetch_add(delta, std::memory_order_relaxed);
  }
  int fd_ = -1;
};

}  // namespace sealfs
