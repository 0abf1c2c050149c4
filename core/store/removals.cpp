// Removals through the mount in flight (removals.hpp).
#include "core/store/removals.hpp"

#include <iterator>
#include <limits>
#include <mutex>

namespace sealfs {

void RemovalsInFlight::note(const struct stat& root, pid_t remover, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (noted_.size() > kPruneAbove) {
    for (auto it = noted_.begin(); it != noted_.end();)
      it = now - it->second > kWindow ? noted_.erase(it) : std::next(it);
  }
  noted_[Key{root.st_dev, root.st_ino, remover}] = now;
}

bool RemovalsInFlight::recent(const struct stat& root, Clock::time_point now) const {
  std::lock_guard lock(mu_);
  for (auto it = noted_.lower_bound(Key{root.st_dev, root.st_ino, std::numeric_limits<pid_t>::min()});
       it != noted_.end() && std::get<0>(it->first) == root.st_dev && std::get<1>(it->first) == root.st_ino;
       ++it)
    if (now - it->second <= kWindow) return true;
  return false;
}

bool RemovalsInFlight::recent_by(const struct stat& root, pid_t remover, Clock::time_point now) const {
  if (remover == 0) return false;
  std::lock_guard lock(mu_);
  auto it = noted_.find(Key{root.st_dev, root.st_ino, remover});
  return it != noted_.end() && now - it->second <= kWindow;
}

void RemovalsInFlight::forget(const struct stat& root) {
  std::lock_guard lock(mu_);
  auto it = noted_.lower_bound(Key{root.st_dev, root.st_ino, std::numeric_limits<pid_t>::min()});
  while (it != noted_.end() && std::get<0>(it->first) == root.st_dev && std::get<1>(it->first) == root.st_ino)
    it = noted_.erase(it);
}

}  // namespace sealfs
