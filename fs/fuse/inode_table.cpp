#include "fs/fuse/inode_table.hpp"

#include <fcntl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/layout/known_names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/store.hpp"

namespace sealfs::fuse {

bool Inode::report(const struct stat& st) {
  const bool here = changed_here_.exchange(false);
  std::lock_guard lock(mu_);
  const bool changed =
      reported_ && (st.st_mtim.tv_sec != reported_mtime_.tv_sec ||
                    st.st_mtim.tv_nsec != reported_mtime_.tv_nsec || st.st_size != reported_size_);
  reported_ = true;
  reported_mtime_ = st.st_mtim;
  reported_size_ = st.st_size;
  return changed && !here;
}

void Inode::metadata_changed_here(const struct stat& st) {
  if (st.st_dev != dev || st.st_ino != ino) return;
  std::lock_guard lock(mu_);
  own_ctime_ = st.st_ctim;
}

bool Inode::ctime_made_here(const struct timespec& ctime) const {
  std::lock_guard lock(mu_);
  return (own_ctime_.tv_sec != 0 || own_ctime_.tv_nsec != 0) && own_ctime_.tv_sec == ctime.tv_sec &&
         own_ctime_.tv_nsec == ctime.tv_nsec;
}

namespace {
// Directories deeper than this, all detached at once, are not opened
// again (a cycle of stale places, left by renames behind the mount, ends
// here too): the request gets ESTALE and the kernel looks the name up anew.
constexpr std::size_t kMaxReopenDepth = 65536;

// name below dir_fd, if it is still the object (dev, ino).
UniqueFd open_same(int dir_fd, const std::string& name, dev_t dev, ino_t ino) {
  auto opened = open_beneath(dir_fd, name, O_PATH | O_NOFOLLOW);
  if (!opened) return {};
  auto st = stat_fd(opened->get());
  if (!st || st->st_dev != dev || st->st_ino != ino) return {};
  return std::move(*opened);
}
}  // namespace

std::shared_ptr<const UniqueFd> Inode::path_fd() const {
  {
    std::lock_guard lock(mu_);
    if (fd_) return fd_;
  }
  UniqueFd fd = reopen();
  if (!fd) return std::make_shared<const UniqueFd>();  // not kept: tried again next time
  std::lock_guard lock(mu_);
  attach_locked(std::move(fd));
  return fd_;
}

void Inode::attach_locked(UniqueFd fd) const {
  if (fd_) return;
  fd_ = std::make_shared<const UniqueFd>(std::move(fd));
  if (directory && attach_log_) attach_log_->note(id);
}

// Up from this inode to the nearest directory that holds its fd, then down
// again, each detached directory on the way opened by its name and kept.
UniqueFd Inode::reopen() const {
  std::vector<std::pair<std::shared_ptr<const Inode>, std::string>> chain;  // nearest first
  std::shared_ptr<const UniqueFd> base;
  Place place;
  {
    std::lock_guard lock(mu_);
    place = place_;
  }
  while (!base) {
    auto dir = place.dir.lock();
    if (!dir || chain.size() >= kMaxReopenDepth) return {};
    chain.emplace_back(dir, std::move(place.name));
    std::lock_guard lock(dir->mu_);
    if (dir->fd_)
      base = dir->fd_;
    else
      place = dir->place_;
  }
  // chain.back() holds base; each entry's name is that of the one before it.
  for (std::size_t i = chain.size() - 1; i > 0; --i) {
    const Inode& dir = *chain[i - 1].first;
    UniqueFd fd = open_same(base->get(), chain[i].second, dir.dev, dir.ino);
    if (!fd) return {};
    std::lock_guard lock(dir.mu_);
    dir.attach_locked(std::move(fd));
    base = dir.fd_;
  }
  return open_same(base->get(), chain.front().second, dev, ino);
}

Inode::SeenAt Inode::last_seen() const {
  Place place;
  {
    std::lock_guard lock(mu_);
    place = place_;
  }
  SeenAt seen{nullptr, std::move(place.name), place.parent};
  if (auto dir = place.dir.lock()) {
    auto fd = dir->path_fd();
    if (fd->valid()) seen.dir = std::move(fd);
  }
  return seen;
}

void Inode::unseen_at(const Inode& dir, std::string_view name) {
  std::lock_guard lock(mu_);
  const auto at = [&](const Place& p) { return p.parent == dir.id && p.name == name; };
  if (other_place_ && at(*other_place_)) {
    other_place_.reset();
  } else if (at(place_) && other_place_) {
    place_ = std::move(*other_place_);
    other_place_.reset();
  }
}

std::vector<KnownNames::Name> Inode::places() const {
  std::vector<KnownNames::Name> out;
  std::lock_guard lock(mu_);
  for (const Place* p : {static_cast<const Place*>(other_place_.get()), &place_}) {
    if (p == nullptr || p->parent == 0) continue;
    if (auto dir = p->dir.lock()) out.push_back(KnownNames::Name{ObjectId{dir->dev, dir->ino}, p->name});
  }
  return out;
}

void InodeTable::named(Inode& obj, const Inode& dir, std::string_view name, nlink_t nlink) {
  obj.seen_at(dir, name);
  if (obj.directory) return;
  const ObjectId id{obj.dev, obj.ino};
  // A second link seen now: the names this inode was seen by before count too.
  if (nlink >= 2)
    for (const auto& p : obj.places()) names_->seen(id, nlink, p.dir, p.name);
  else
    names_->seen(id, nlink, ObjectId{dir.dev, dir.ino}, name);
}

bool Inode::detach() {
  std::lock_guard lock(mu_);
  if (!fd_ || place_.dir.expired() || fd_.use_count() != 1) return false;
  fd_.reset();
  return true;
}

void InodeTable::set_root(Found root) {
  std::lock_guard lock(mu_);
  auto inode =
      std::make_shared<Inode>(FUSE_ROOT_ID, std::move(root.fd), root.st.st_dev, root.st.st_ino, true);
  inode->kind = ObjectKind::root;
  by_key_[{inode->dev, inode->ino}] = FUSE_ROOT_ID;
  // The kernel never forgets the root: a count of 1 that nothing lowers to 0.
  by_id_[FUSE_ROOT_ID] = Slot{std::move(inode), 1};
}

InodeRef InodeTable::remember(Found&& found) {
  std::lock_guard lock(mu_);
  const std::pair key{found.st.st_dev, found.st.st_ino};
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    Slot& slot = by_id_.at(it->second);
    slot.inode->touch();
    if (slot.inode->id != FUSE_ROOT_ID) {
      ++slot.nlookup;
      slot.inode->kind = found.kind;
      // A directory keeps the descriptor it has (it has one name, which an
      // O_PATH fd follows through renames) unless it was detached.
      if (found.fd && (!S_ISDIR(found.st.st_mode) || !slot.inode->attached())) {
        slot.inode->replace_path_fd(std::move(found.fd));
        sweepable_.emplace(slot.inode->id, slot.inode);
      }
    }
    return slot.inode;
  }
  const fuse_ino_t id = next_id_++;
  auto inode =
      std::make_shared<Inode>(id, std::move(found.fd), key.first, key.second, S_ISDIR(found.st.st_mode));
  inode->kind = found.kind;
  inode->attach_log_ = attach_log_;
  by_key_[key] = id;
  by_id_[id] = Slot{inode, 1};
  sweepable_.emplace(id, inode);
  if (!inode->directory) ++files_;
  return inode;
}

bool InodeTable::forget(fuse_ino_t id, std::uint64_t nlookup) {
  if (id == FUSE_ROOT_ID) return false;
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  Slot& slot = it->second;
  slot.nlookup = nlookup >= slot.nlookup ? 0 : slot.nlookup - nlookup;
  if (slot.nlookup == 0) {
    by_key_.erase({slot.inode->dev, slot.inode->ino});
    if (!slot.inode->directory) names_->forget(ObjectId{slot.inode->dev, slot.inode->ino});
    if (!slot.inode->directory) --files_;
    sweepable_.erase(id);
    by_id_.erase(it);
    return true;
  }
  return false;
}

InodeRef InodeTable::get(fuse_ino_t id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return nullptr;
  it->second.inode->touch();
  return it->second.inode;
}

std::uint64_t InodeTable::lookups(fuse_ino_t id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? 0 : it->second.nlookup;
}

InodeRef InodeTable::find(dev_t dev, ino_t ino) const {
  std::lock_guard lock(mu_);
  auto it = by_key_.find({dev, ino});
  return it == by_key_.end() ? nullptr : by_id_.at(it->second).inode;
}

std::size_t InodeTable::size() const {
  std::lock_guard lock(mu_);
  return by_id_.size();
}

std::size_t InodeTable::files() const {
  std::lock_guard lock(mu_);
  return files_;
}

std::vector<InodeTable::Cold> InodeTable::cold(std::size_t n) {
  std::vector<Cold> files;
  std::vector<Cold> dirs;
  if (n == 0) return files;
  {
    std::lock_guard lock(mu_);
    for (const fuse_ino_t id : attach_log_->take())
      if (auto it = by_id_.find(id); it != by_id_.end()) sweepable_.emplace(id, it->second.inode);
    // Ids grow with each new inode: the lowest were looked up longest ago.
    for (auto it = sweepable_.begin(); it != sweepable_.end();) {
      const InodeRef& inode = it->second;
      if (inode->directory && !inode->attached()) {
        it = sweepable_.erase(it);  // nothing to give back until it is opened again
        continue;
      }
      Inode::Name seen;
      if (!inode->used_.exchange(false, std::memory_order_relaxed)) seen = inode->last_name();
      if (seen.parent != 0) (inode->directory ? dirs : files).push_back(Cold{inode, std::move(seen)});
      ++it;
    }
  }
  if (files.size() >= n) {
    files.resize(n);
    return files;
  }
  for (auto d = dirs.rbegin(); d != dirs.rend() && files.size() < n; ++d) files.push_back(std::move(*d));
  return files;
}

}  // namespace sealfs::fuse
