#include "fs/fuse/reaper.hpp"

#include <functional>
#include <mutex>
#include <utility>

#include "fs/fuse/running_thread.hpp"

namespace sealfs::fuse {

void Reaper::post(fuse_ino_t ino) {
  {
    std::lock_guard lock(mu_);
    if (!running_) return;
    queue_.push_back(ino);
  }
  cv_.notify_one();
}

void Reaper::start(std::function<void(fuse_ino_t)> end) {
  std::lock_guard lock(mu_);
  end_ = std::move(end);
  running_ = true;
  thread_ = start_running_thread([this] { run(); });
}

void Reaper::stop() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  queue_.clear();
}

void Reaper::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !running_ || !queue_.empty(); });
    if (!running_) return;
    const fuse_ino_t ino = queue_.front();
    queue_.pop_front();
    lock.unlock();
    end_(ino);
    lock.lock();
  }
}

}  // namespace sealfs::fuse
