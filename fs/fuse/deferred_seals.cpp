#include "fs/fuse/deferred_seals.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

#include "fs/fuse/running_thread.hpp"

namespace sealfs::fuse {

void DeferredSeals::start(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  if (running_) return;
  delay_ = delay;
  running_ = true;
  thread_ = start_running_thread([this] { run(); });
}

bool DeferredSeals::post(Key key, Seal seal) {
  Seal earlier;
  {
    std::lock_guard lock(mu_);
    if (!running_) return false;
    auto it = items_.find(key);
    if (it != items_.end()) earlier = std::move(it->second.seal);  // cannot happen: a new writer cancels it
    items_[key] = Item{std::move(seal), std::chrono::steady_clock::now() + delay_};
  }
  if (earlier) earlier();
  cv_.notify_one();
  return true;
}

bool DeferredSeals::cancel(Key key) {
  std::lock_guard lock(mu_);
  return items_.erase(key) != 0;
}

void DeferredSeals::run_now(Key key) {
  Seal seal;
  {
    std::lock_guard lock(mu_);
    auto it = items_.find(key);
    if (it == items_.end()) return;
    seal = std::move(it->second.seal);
    items_.erase(it);
  }
  seal();
}

void DeferredSeals::run_all() {
  std::map<Key, Item> due;
  {
    std::lock_guard lock(mu_);
    due.swap(items_);
  }
  for (auto& [key, item] : due) item.seal();
}

void DeferredSeals::stop() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::map<Key, Item> left;
  {
    std::lock_guard lock(mu_);
    left.swap(items_);
  }
  for (auto& [key, item] : left) item.seal();
}

std::size_t DeferredSeals::waiting() const {
  std::lock_guard lock(mu_);
  return items_.size();
}

void DeferredSeals::run() {
  std::unique_lock lock(mu_);
  while (running_) {
    if (items_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto first = std::min_element(items_.begin(), items_.end(), [](const auto& a, const auto& b) {
      return a.second.due < b.second.due;
    });
    if (first->second.due > std::chrono::steady_clock::now()) {
      // A copy: the item may be taken (run_now, cancel) while this waits.
      const auto due = first->second.due;
      cv_.wait_until(lock, due);
      continue;
    }
    Seal seal = std::move(first->second.seal);
    items_.erase(first);
    lock.unlock();
    seal();
    lock.lock();
  }
}

}  // namespace sealfs::fuse
