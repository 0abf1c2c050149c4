#include "fs/fuse/inode_table.hpp"

#include <fcntl.h>

#include <algorithm>

#include "core/layout/paths.hpp"

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

std::shared_ptr<const UniqueFd> Inode::path_fd() const {
  std::lock_guard lock(mu_);
  if (fd_) return fd_;
  // Detached: only files that were seen under a name are (detach()).
  UniqueFd fd;
  if (seen_.dir) {
    auto opened = open_beneath(seen_.dir->get(), seen_.name, O_PATH | O_NOFOLLOW);
    if (opened) {
      auto st = stat_fd(opened->get());
      if (st && st->st_dev == dev && st->st_ino == ino) fd = std::move(*opened);
    }
  }
  if (!fd) return std::make_shared<const UniqueFd>();  // not kept: tried again next time
  fd_ = std::make_shared<const UniqueFd>(std::move(fd));
  return fd_;
}

bool Inode::detach() {
  std::lock_guard lock(mu_);
  if (directory || !fd_ || !seen_.dir || fd_.use_count() != 1) return false;
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
      // A directory keeps the descriptor it has: it has one name, which an
      // O_PATH fd follows through renames, and the objects seen in it share
      // that fd (Inode::SeenAt), so each fresh one would stay open as long
      // as they do (issue 24: three per entry directory, past the bound).
      if (found.fd && !S_ISDIR(found.st.st_mode)) slot.inode->replace_path_fd(std::move(found.fd));
    }
    return slot.inode;
  }
  const fuse_ino_t id = next_id_++;
  auto inode =
      std::make_shared<Inode>(id, std::move(found.fd), key.first, key.second, S_ISDIR(found.st.st_mode));
  inode->kind = found.kind;
  by_key_[key] = id;
  by_id_[id] = Slot{inode, 1};
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

std::vector<InodeTable::Cold> InodeTable::cold(std::size_t n) {
  std::vector<Cold> files;
  std::vector<Cold> dirs;
  if (n == 0) return files;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, slot] : by_id_) {
      if (id == FUSE_ROOT_ID || slot.inode->used_.exchange(false, std::memory_order_relaxed)) continue;
      Inode::SeenAt seen = slot.inode->last_seen();
      if (seen.parent != 0)
        (slot.inode->directory ? dirs : files).push_back(Cold{slot.inode, std::move(seen)});
    }
  }
  // Ids grow with each new inode: the lowest were looked up longest ago.
  const auto older = [](const Cold& a, const Cold& b) { return a.inode->id < b.inode->id; };
  const auto newer = [](const Cold& a, const Cold& b) { return a.inode->id > b.inode->id; };
  std::sort(files.begin(), files.end(), older);
  if (files.size() >= n) {
    files.resize(n);
    return files;
  }
  std::sort(dirs.begin(), dirs.end(), newer);
  for (auto& d : dirs) {
    if (files.size() >= n) break;
    files.push_back(std::move(d));
  }
  return files;
}

}  // namespace sealfs::fuse
