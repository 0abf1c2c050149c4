// The names of objects with several links (known_names.hpp).
#include "core/layout/known_names.hpp"

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sealfs {

KnownNames::KnownNames(std::size_t names_per_object, std::size_t max_objects)
    : names_per_object_(std::max<std::size_t>(names_per_object, 1)), max_objects_(max_objects) {}

void KnownNames::drop_locked(const NameKey& key) {
  auto at = by_name_.find(key);
  if (at == by_name_.end()) return;
  auto obj = by_object_.find(at->second);
  by_name_.erase(at);
  if (obj == by_object_.end()) return;
  std::erase_if(obj->second, [&](const Name& n) { return n.dir == key.first && n.name == key.second; });
  if (obj->second.empty()) by_object_.erase(obj);
}

void KnownNames::add_locked(ObjectId obj, ObjectId dir, std::string_view name) {
  NameKey key{dir, std::string(name)};
  auto held = by_name_.find(key);
  if (held != by_name_.end() && held->second == obj) {
    // Known already: it becomes the newest.
    auto& names = by_object_[obj];
    auto it = std::find_if(names.begin(), names.end(),
                           [&](const Name& n) { return n.dir == dir && n.name == name; });
    if (it != names.end()) std::rotate(names.begin(), it, it + 1);
    return;
  }
  drop_locked(key);
  auto found = by_object_.find(obj);
  if (found == by_object_.end()) {
    if (by_object_.size() >= max_objects_) {
      ++refused_;
      return;
    }
    found = by_object_.emplace(obj, std::vector<Name>{}).first;
  }
  auto& names = found->second;
  names.insert(names.begin(), Name{dir, key.second});
  by_name_.emplace(std::move(key), obj);
  while (names.size() > names_per_object_) {
    by_name_.erase(NameKey{names.back().dir, names.back().name});
    names.pop_back();
  }
}

void KnownNames::seen(ObjectId obj, nlink_t nlink, ObjectId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  if (nlink < 2 && by_object_.find(obj) == by_object_.end()) {
    // A single name: /proc follows it. Whatever this name meant before is gone.
    drop_locked(NameKey{dir, std::string(name)});
    return;
  }
  add_locked(obj, dir, name);
}

void KnownNames::removed(ObjectId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  drop_locked(NameKey{dir, std::string(name)});
}

void KnownNames::renamed(ObjectId moved, ObjectId from_dir, std::string_view from, ObjectId to_dir,
                         std::string_view to, std::optional<ObjectId> exchanged) {
  std::lock_guard lock(mu_);
  const bool moved_known = by_object_.find(moved) != by_object_.end();
  const bool exchanged_known = exchanged && by_object_.find(*exchanged) != by_object_.end();
  drop_locked(NameKey{from_dir, std::string(from)});
  drop_locked(NameKey{to_dir, std::string(to)});
  if (moved_known) add_locked(moved, to_dir, to);
  if (exchanged_known) add_locked(*exchanged, from_dir, from);
}

void KnownNames::forget(ObjectId obj) {
  std::lock_guard lock(mu_);
  auto found = by_object_.find(obj);
  if (found == by_object_.end()) return;
  for (const auto& n : found->second) by_name_.erase(NameKey{n.dir, n.name});
  by_object_.erase(found);
}

std::vector<KnownNames::Name> KnownNames::names_of(ObjectId obj) const {
  std::lock_guard lock(mu_);
  auto found = by_object_.find(obj);
  if (found == by_object_.end()) return {};
  return found->second;
}

std::size_t KnownNames::objects() const {
  std::lock_guard lock(mu_);
  return by_object_.size();
}

std::size_t KnownNames::names() const {
  std::lock_guard lock(mu_);
  return by_name_.size();
}

std::uint64_t KnownNames::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace sealfs
