#include "fs/fuse/parked_handles.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/layout/paths.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/inode_table.hpp"

namespace sealfs::fuse {
namespace {

// Closes handle's descriptors when no request holds it: the count freed.
std::size_t try_park(Filesystem& fs, FileHandle& handle) {
  std::unique_lock lock(handle.park_mu, std::try_to_lock);
  if (!lock.owns_lock() || handle.parked || !handle.fd || handle.passthrough || !handle.inode) return 0;
  const int flags = ::fcntl(handle.fd.get(), F_GETFL);
  if (flags < 0) return 0;
  // A name to open it again by, and one that still leads to it.
  if (!handle.opened_at.dir && handle.inode->last_name().parent == 0) return 0;
  auto st = fs.store->attributes(handle.fd.get());
  if (!st || !S_ISREG(st->st_mode) || st->st_nlink == 0) return 0;
  handle.parked_flags = flags;
  handle.fd.reset();
  handle.opened_as.reset();
  handle.parked = true;
  fs.parked_handles.fetch_add(1, std::memory_order_relaxed);
  // Its inode's O_PATH fd too, unless a request or another handle holds it.
  return handle.inode->detach() ? 2 : 1;
}

// Opens a parked handle again; under its park_mu, unique.
Status unpark(Filesystem& fs, FileHandle& handle, bool may_wait) {
  // Two descriptors: near the limit, other idle handles give theirs first.
  if (may_wait && fs.descriptors_low()) (void)fs.make_room();
  auto [pfd, seen] = name_opened_as(handle);
  if (!pfd || !*pfd) return make_error(ESTALE, "a parked file's name no longer leads to it");
  // A read open is judged again (open_file: the stamp, or a rehash with
  // verify=always), and every READ still compares the stamp verified at
  // the caller's open (R2). ENOENT: hidden or quarantined since; a READ
  // answers EIO for that, a write ESTALE (the name no longer leads to it).
  auto fd = fs.store->open_file(pfd->get(), handle.parked_flags, seen.hint());
  const bool reads = (handle.parked_flags & O_ACCMODE) == O_RDONLY;
  if (!fd) return fd.code() == ENOENT ? make_error(reads ? EIO : ESTALE, fd.error().message) : fd.error();
  auto st = fs.store->attributes(fd->get());
  if (!st) return st.error();
  if (st->st_dev != handle.inode->dev || st->st_ino != handle.inode->ino)
    return make_error(ESTALE, "a parked file's name leads to another object now");
  handle.fd = std::move(*fd);
  if (handle.tracked) {
    handle.opened_as = std::move(pfd);
    handle.opened_at = std::move(seen);
  }
  handle.parked = false;
  fs.parked_handles.fetch_sub(1, std::memory_order_relaxed);
  return {};
}

std::vector<std::shared_ptr<FileHandle>> open_handles(const Filesystem& fs) {
  auto handles = fs.implicit.writer_handles();
  auto own = fs.files.all();
  handles.insert(handles.end(), own.begin(), own.end());
  return handles;
}

}  // namespace

std::size_t park_idle_writers(Filesystem& fs) {
  // Not while a name is being removed through the mount (unpark_object).
  std::unique_lock parking(fs.parking_mu, std::try_to_lock);
  if (!parking.owns_lock()) return 0;
  std::size_t freed = 0;
  for (const auto& handle : open_handles(fs))
    if (handle) freed += try_park(fs, *handle);
  return freed;
}

Status hold_descriptor(Filesystem& fs, FileHandle& handle, std::shared_lock<std::shared_mutex>& lock) {
  // Each attempt lost only to a park between the open and the hold.
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::shared_lock shared(handle.park_mu);
    if (!handle.parked) {
      if (!handle.fd) return make_error(EBADF, "handle closed");
      lock = std::move(shared);
      return {};
    }
    shared.unlock();
    std::unique_lock unique(handle.park_mu);
    if (handle.parked)
      if (Status s = unpark(fs, handle, true); !s) return s;
  }
  return make_error(ENFILE, "descriptors low: a parked handle was parked again before its use");
}

Result<std::shared_lock<std::shared_mutex>> unpark_object(Filesystem& fs, dev_t dev, ino_t ino) {
  std::shared_lock parking(fs.parking_mu);
  if (fs.parked_handles.load(std::memory_order_relaxed) == 0) return parking;
  for (const auto& handle : open_handles(fs)) {
    if (!handle || !handle->inode || handle->inode->dev != dev || handle->inode->ino != ino) continue;
    std::unique_lock lock(handle->park_mu);
    if (handle->parked)
      if (Status s = unpark(fs, *handle, false); !s) return s.error();
  }
  return parking;
}

std::pair<std::shared_ptr<const UniqueFd>, Inode::SeenAt> name_opened_as(const FileHandle& handle) {
  const Inode& inode = *handle.inode;
  if (handle.opened_as) return {handle.opened_as, handle.opened_at};
  if (handle.opened_at.dir) {
    auto opened = open_beneath(handle.opened_at.dir->get(), handle.opened_at.name, O_PATH | O_NOFOLLOW);
    if (opened) {
      auto st = stat_fd(opened->get());
      if (st && st->st_dev == inode.dev && st->st_ino == inode.ino)
        return {std::make_shared<const UniqueFd>(std::move(*opened)), handle.opened_at};
    }
  }
  return {inode.path_fd(), inode.last_seen()};
}

}  // namespace sealfs::fuse
