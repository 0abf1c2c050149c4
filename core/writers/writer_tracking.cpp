#include "core/writers/writer_tracking.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace sealfs {

void WriterTracking::opened(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  ++files_[{dev, ino}].writers;
}

std::optional<LastClose> WriterTracking::released(dev_t dev, ino_t ino, HandleEnd end) {
  std::lock_guard lock(mu_);
  auto it = files_.find({dev, ino});
  if (it == files_.end() || it->second.writers == 0) return std::nullopt;
  State& s = it->second;
  s.changed = s.changed || end.changed || end.made;
  // R10: a writer that exits abnormally abandons a file it wrote, truncated
  // or allocated. One it only created is abandoned when no close of it was
  // normal (a writer killed before its first write: R4, nothing visible);
  // a lock file whose creator closed it and whose last holder, a child
  // sharing the descriptor, was killed is sealed as it is.
  s.abandoned = s.abandoned || (end.abandoned && (end.changed || (end.made && !end.closed_normally)));
  if (--s.writers > 0) return std::nullopt;
  ++s.sealing;
  const LastClose what = !s.changed    ? LastClose::untouched
                         : s.abandoned ? LastClose::abandon
                                       : LastClose::seal;
  s.changed = false;
  s.abandoned = false;
  return what;
}

void WriterTracking::finished(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = files_.find({dev, ino});
  if (it == files_.end()) return;
  if (it->second.sealing > 0) --it->second.sealing;
  erase_if_idle(it);
}

void WriterTracking::resumed(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = files_.find({dev, ino});
  if (it == files_.end()) return;
  if (it->second.sealing > 0) --it->second.sealing;
  it->second.changed = true;
}

void WriterTracking::cancelled(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = files_.find({dev, ino});
  if (it == files_.end()) return;
  if (it->second.writers > 0) --it->second.writers;
  erase_if_idle(it);
}

void WriterTracking::erase_if_idle(std::map<Key, State>::iterator it) {
  const State& s = it->second;
  if (s.writers == 0 && s.sealing == 0 && s.changing == 0) files_.erase(it);
}

bool WriterTracking::last_writer_seals(dev_t dev, ino_t ino, bool handle_changes) const {
  std::lock_guard lock(mu_);
  auto it = files_.find({dev, ino});
  return it != files_.end() && it->second.writers == 1 && !it->second.abandoned &&
         (handle_changes || it->second.changed);
}

bool WriterTracking::in_progress(dev_t dev, ino_t ino) const {
  std::lock_guard lock(mu_);
  auto it = files_.find({dev, ino});
  return it != files_.end() && (it->second.writers > 0 || it->second.sealing > 0 || it->second.changing > 0);
}

std::size_t WriterTracking::in_progress_count() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, state] : files_)
    if (state.writers > 0 || state.sealing > 0 || state.changing > 0) ++n;
  return n;
}

WriterTracking::Change WriterTracking::changing(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  ++files_[{dev, ino}].changing;
  Change c;
  c.owner_ = this;
  c.key_ = {dev, ino};
  return c;
}

void WriterTracking::Change::end() {
  if (owner_ == nullptr) return;
  {
    std::lock_guard lock(owner_->mu_);
    auto it = owner_->files_.find(key_);
    if (it != owner_->files_.end()) {
      if (it->second.changing > 0) --it->second.changing;
      owner_->erase_if_idle(it);
    }
  }
  owner_ = nullptr;
}

WriterTracking::Change::Change(Change&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), key_(std::exchange(other.key_, Key{0, 0})) {}

WriterTracking::Change& WriterTracking::Change::operator=(Change&& other) noexcept {
  if (this != &other) {
    end();
    owner_ = std::exchange(other.owner_, nullptr);
    key_ = std::exchange(other.key_, Key{0, 0});
  }
  return *this;
}

WriterTracking::Change::~Change() { end(); }

WriterTracking::Hold WriterTracking::hold(std::vector<Key> keys) {
  std::erase(keys, Key{0, 0});
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::unique_lock lock(gate_mu_);
  gate_cv_.wait(lock, [&] {
    return std::none_of(keys.begin(), keys.end(), [&](const Key& k) { return held_.count(k) != 0; });
  });
  held_.insert(keys.begin(), keys.end());
  Hold h;
  h.owner_ = this;
  h.keys_ = std::move(keys);
  return h;
}

void WriterTracking::Hold::release() {
  if (owner_ == nullptr) return;
  {
    std::lock_guard lock(owner_->gate_mu_);
    for (const Key& k : keys_) owner_->held_.erase(k);
  }
  owner_->gate_cv_.notify_all();
  owner_ = nullptr;
  keys_.clear();
}

WriterTracking::Hold::Hold(Hold&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), keys_(std::move(other.keys_)) {}

WriterTracking::Hold& WriterTracking::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    keys_ = std::move(other.keys_);
  }
  return *this;
}

WriterTracking::Hold::~Hold() { release(); }

}  // namespace sealfs
