#include "fs/fuse/request.hpp"

#include <sys/stat.h>
#include <syslog.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/file_handle.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/inode_table.hpp"

namespace sealfs::fuse {

// Sealed and verified objects are immutable through the mount: the kernel may
// cache them for cache_timeout (and is told when that stops being true).
// Volatile directories and files too: sealfs never hides, seals or replaces
// them behind the kernel's back, changes made through the mount update the
// kernel's own copy, and changes behind it are seen after cache_timeout (R9)
// as anywhere else. (Uncached, every path through tmp/ or a staging directory
// cost a LOOKUP and GETATTRs: a TileLang save 1.83x -> 1.41x of plain+fsync.)
// In progress files (sealed at their last close), special objects and what
// only its remover finds (ObjectKind::being_removed): none.
double timeout_for(const Filesystem& fs, ObjectKind kind, mode_t mode) {
  switch (kind) {
    case ObjectKind::volatile_obj:
      return S_ISDIR(mode) || S_ISREG(mode) ? fs.cache_timeout : 0.0;
    case ObjectKind::in_progress:
    case ObjectKind::special:
    case ObjectKind::being_removed:  // found by its remover only: other callers must ask again
      return 0.0;
    default:
      return fs.cache_timeout;
  }
}

void drop_pages_if_changed(Filesystem& fs, Inode& inode, const struct stat& st) {
  if (S_ISREG(st.st_mode) && inode.report(st))
    fs.invalidator.post(Invalidation{0, 0, {}, inode.dev, inode.ino});
}

fuse_entry_param remember(Filesystem& fs, Found&& found, const Inode& dir, std::string_view name) {
  fuse_entry_param e{};
  e.attr = found.st;
  const double timeout = timeout_for(fs, found.kind, found.st.st_mode);
  InodeRef inode = fs.inodes.remember(std::move(found));
  drop_pages_if_changed(fs, *inode, e.attr);
  fs.inodes.named(*inode, dir, name, e.attr.st_nlink);
  if (fs.evictor.over()) fs.evictor.wake();
  e.ino = inode->id;
  e.generation = 0;  // ids are never reused within a mount
  e.attr_timeout = timeout;
  e.entry_timeout = timeout;
  return e;
}

fuse_ino_t reply_entry(fuse_req_t req, Filesystem& fs, Found&& found, const Inode& dir,
                       std::string_view name) {
  fuse_entry_param e = remember(fs, std::move(found), dir, name);
  // The request may have been interrupted: then the kernel never learns of
  // this lookup and must not be counted as holding it.
  if (fuse_reply_entry(req, &e) == 0) return e.ino;
  fs.inodes.forget(e.ino, 1);
  return 0;
}

void reply_attributes(fuse_req_t req, Filesystem& fs, Inode& inode) {
  auto st = fs.store->attributes(inode.path_fd()->get());
  if (!st) return reply_error(req, st.error());
  drop_pages_if_changed(fs, inode, *st);
  fuse_reply_attr(req, &*st, timeout_for(fs, inode.kind, st->st_mode));
}

void give_to_caller(const Filesystem& fs, fuse_req_t req, int parent_fd, Found& found, mode_t wanted) {
  if (!fs.chown_to_caller) return;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (Status s = fs.store->give_to(found, parent_fd, ctx->uid, ctx->gid, wanted); !s)
    syslog(LOG_WARNING, "sealfs: %s (uid %u): %s", s.error().message.c_str(), ctx->uid,
           std::strerror(s.code()));
}

InodeRef inode_or_reply(fuse_req_t req, fuse_ino_t ino) {
  InodeRef inode = fs_of(req).inodes.get(ino);
  if (!inode) fuse_reply_err(req, ESTALE);
  return inode;
}

std::shared_ptr<FileHandle> file_or_reply(fuse_req_t req, const fuse_file_info* fi) {
  // Its descriptor is checked where it is used (hold_descriptor): a parked
  // handle holds none until then.
  auto handle = fi ? fs_of(req).files.get(fi->fh) : nullptr;
  if (!handle) fuse_reply_err(req, EBADF);
  return handle;
}

}  // namespace sealfs::fuse
