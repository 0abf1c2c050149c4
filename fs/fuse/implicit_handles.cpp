#include "fs/fuse/implicit_handles.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "fs/fuse/writer_tasks.hpp"

namespace sealfs::fuse {

Result<std::shared_ptr<ImplicitHandles::Writer>> ImplicitHandles::writer_for_change(fuse_ino_t ino, pid_t tid,
                                                                                    const MakeHandle& make,
                                                                                    const UndoHandle& undo) {
  bool exists = false;
  {
    std::lock_guard lock(mu_);
    auto it = writers_.find(ino);
    exists = it != writers_.end();
    if (exists && (tid == 0 || it->second.groups_of.count(tid) != 0)) return it->second.writer;
  }
  // A task not seen yet: its thread group is read outside the lock, and so
  // is the open of a first change (it may wait for a seal's gate).
  const pid_t group = tid == 0 ? 0 : thread_group_of(tid);
  std::shared_ptr<Writer> fresh;
  if (!exists) {
    auto handle = make();
    if (!handle) return handle.error();
    fresh = std::make_shared<Writer>(std::move(*handle));
  }
  std::shared_ptr<Writer> loser;
  std::shared_ptr<Writer> winner;
  {
    std::lock_guard lock(mu_);
    auto it = writers_.find(ino);
    if (it == writers_.end() && !fresh) return make_error(EAGAIN, "the file's writer ended meanwhile");
    if (it == writers_.end()) it = writers_.emplace(ino, WriterSlot{fresh, {}, {}}).first;
    if (fresh && it->second.writer != fresh) loser = std::move(fresh);
    if (tid != 0) {
      it->second.groups_of[tid] = group;
      it->second.groups.insert(group);
    }
    winner = it->second.writer;
  }
  if (loser) undo(*loser->handle);  // another first change won the race
  return winner;
}

std::shared_ptr<ImplicitHandles::Writer> ImplicitHandles::take_if_unheld(fuse_ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = writers_.find(ino);
  if (it == writers_.end() || !it->second.groups.empty()) return nullptr;
  auto writer = std::move(it->second.writer);
  writers_.erase(it);
  return writer;
}

bool ImplicitHandles::writer_orphaned(fuse_ino_t ino, const std::function<bool(pid_t)>& gone) const {
  std::set<pid_t> groups;
  {
    std::lock_guard lock(mu_);
    if (orphans_.count(ino) != 0) return true;
    auto it = writers_.find(ino);
    if (it == writers_.end() || it->second.groups.empty()) return false;
    groups = it->second.groups;
  }
  return std::all_of(groups.begin(), groups.end(), gone);  // /proc is read outside the lock
}

std::shared_ptr<ImplicitHandles::Writer> ImplicitHandles::take_orphaned(
    fuse_ino_t ino, const std::function<bool(pid_t)>& gone) {
  if (!writer_orphaned(ino, gone)) return nullptr;
  std::lock_guard lock(mu_);
  auto it = writers_.find(ino);
  if (it == writers_.end() || !std::all_of(it->second.groups.begin(), it->second.groups.end(), gone))
    return nullptr;
  auto writer = std::move(it->second.writer);
  writers_.erase(it);
  orphans_.emplace(ino, writer->handle);
  return writer;
}

void ImplicitHandles::orphan_ended(fuse_ino_t ino) {
  std::lock_guard lock(mu_);
  orphans_.erase(ino);
}

std::optional<fuse_ino_t> ImplicitHandles::writer_id_where(
    const std::function<bool(const FileHandle&)>& matches) const {
  // A scan: asked only on the rare path where no inode names the file, and
  // there are as many writers as files being written.
  std::lock_guard lock(mu_);
  for (const auto& [ino, slot] : writers_)
    if (slot.writer && slot.writer->handle && matches(*slot.writer->handle)) return ino;
  for (const auto& [ino, handle] : orphans_)
    if (handle && matches(*handle)) return ino;
  return std::nullopt;
}

std::shared_ptr<ImplicitHandles::Writer> ImplicitHandles::writer(fuse_ino_t ino) const {
  std::lock_guard lock(mu_);
  auto it = writers_.find(ino);
  return it == writers_.end() ? nullptr : it->second.writer;
}

ImplicitHandles::Flushed ImplicitHandles::flushed_by(fuse_ino_t ino, pid_t tid,
                                                     const std::function<bool(pid_t)>& still_open) {
  pid_t group = -1;
  {
    std::lock_guard lock(mu_);
    auto it = writers_.find(ino);
    if (it == writers_.end()) return {};  // a close that changed nothing: the common case
    auto known = it->second.groups_of.find(tid);
    if (known != it->second.groups_of.end()) group = known->second;
  }
  if (group == -1) group = thread_group_of(tid);  // a task that did not write: read outside the lock
  std::shared_ptr<Writer> writer;
  {
    std::lock_guard lock(mu_);
    auto it = writers_.find(ino);
    if (it == writers_.end() || it->second.groups.count(group) == 0) return {};
    writer = it->second.writer;
  }
  if (still_open(group)) return {writer, false};  // one of several descriptors closed
  std::lock_guard lock(mu_);
  auto it = writers_.find(ino);
  if (it == writers_.end() || it->second.writer != writer || it->second.groups.erase(group) == 0) return {};
  std::erase_if(it->second.groups_of, [group](const auto& kv) { return kv.second == group; });
  Flushed out{writer, it->second.groups.empty()};
  if (out.last) writers_.erase(it);
  return out;
}

Result<std::shared_ptr<FileHandle>> ImplicitHandles::reader(fuse_ino_t ino, const MakeHandle& make) {
  {
    std::lock_guard lock(mu_);
    auto it = readers_.find(ino);
    if (it != readers_.end()) {
      reader_age_.splice(reader_age_.begin(), reader_age_, it->second.age);
      return it->second.handle;
    }
  }
  auto handle = make();
  if (!handle) return handle.error();
  std::lock_guard lock(mu_);
  auto it = readers_.find(ino);
  if (it != readers_.end()) return it->second.handle;  // a racing READ made one first
  reader_age_.push_front(ino);
  readers_.emplace(ino, ReaderSlot{*handle, reader_age_.begin()});
  shed_locked(max_readers_.load(std::memory_order_relaxed));
  return *handle;
}

void ImplicitHandles::shed_readers(std::size_t keep) {
  std::lock_guard lock(mu_);
  shed_locked(keep);
}

void ImplicitHandles::shed_locked(std::size_t keep) {
  while (readers_.size() > keep) {
    readers_.erase(reader_age_.back());
    reader_age_.pop_back();
  }
}

void ImplicitHandles::forget(fuse_ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = readers_.find(ino);
  if (it == readers_.end()) return;
  reader_age_.erase(it->second.age);
  readers_.erase(it);
}

std::size_t ImplicitHandles::size() const {
  std::lock_guard lock(mu_);
  return writers_.size() + readers_.size();
}

std::vector<std::shared_ptr<FileHandle>> ImplicitHandles::writer_handles() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<FileHandle>> out;
  out.reserve(writers_.size());
  for (const auto& [ino, slot] : writers_)
    if (slot.writer && slot.writer->handle) out.push_back(slot.writer->handle);
  return out;
}

}  // namespace sealfs::fuse
