// Extended attributes and free space. The store keeps "user.sealfs*" to
// itself (Store::get_xattr and the rest): the adapter only fits the answer
// into the caller's buffer.
#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/result.hpp"
#include "fs/fuse/file_handles.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/handlers.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/remount.hpp"
#include "fs/fuse/request.hpp"

namespace sealfs::fuse {
namespace {

// size 0 asks for the length only; a value that does not fit is ERANGE.
void reply_xattr_value(fuse_req_t req, const Result<std::string>& value, size_t size) {
  if (!value) return reply_error(req, value.error());
  if (size == 0) return (void)fuse_reply_xattr(req, value->size());
  if (value->size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value->data(), value->size());
}

bool remount_xattr(fuse_ino_t ino, const char* name) {
  return ino == FUSE_ROOT_ID && std::string_view(name) == kRemountXattr;
}

// getxattr of kRemountXattr: the daemon's ro/rw state (remount.hpp).
void reply_remount_state(fuse_req_t req, size_t size) {
  const Filesystem& fs = fs_of(req);
  const std::string state = fs.read_only ? "ro-mount" : fs.remounted_ro ? "ro" : "rw";
  reply_xattr_value(req, state, size);
}

// setxattr of kRemountXattr by `sealfs -o remount` (root only).
void set_remount_state(fuse_req_t req, std::string_view value) {
  Filesystem& fs = fs_of(req);
  if (fuse_req_ctx(req)->uid != 0) return (void)fuse_reply_err(req, EPERM);
  if (value == "ro") {
    fs.remounted_ro = true;
    fs.deferred.run_all();  // the seals still waiting, before the superblock goes read-only
    return (void)fuse_reply_err(req, 0);
  }
  if (value != "rw") return (void)fuse_reply_err(req, EINVAL);
  if (fs.read_only) return (void)fuse_reply_err(req, EROFS);
  fs.remounted_ro = false;
  fuse_reply_err(req, 0);
}

}  // namespace

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  guarded(req, [&] {
    if (remount_xattr(ino, name)) return reply_remount_state(req, size);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    auto got = fs_of(req).store->get_xattr(inode->path_fd()->get(), name, size);
    if (!got) return reply_error(req, got.error());
    if (size == 0) return (void)fuse_reply_xattr(req, got->length);
    fuse_reply_buf(req, got->value.data(), got->value.size());
  });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    reply_xattr_value(req, fs_of(req).store->list_xattrs(inode->path_fd()->get()), size);
  });
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                 int flags) {
  guarded(req, [&] {
    if (remount_xattr(ino, name)) return set_remount_state(req, std::string_view(value, size));
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    const std::string_view bytes(value, size);
    const Status set = fs_of(req).store->set_xattr(inode->path_fd()->get(), name, bytes, flags);
    if (set) note_metadata_change(fs_of(req), inode->dev, inode->ino);
    reply_status(req, set);
  });
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    const Status removed = fs_of(req).store->remove_xattr(inode->path_fd()->get(), name);
    if (removed) note_metadata_change(fs_of(req), inode->dev, inode->ino);
    reply_status(req, removed);
  });
}

void op_statfs(fuse_req_t req, fuse_ino_t /*ino*/) {
  guarded(req, [&] {
    auto space = fs_of(req).store->space();
    if (!space) return reply_error(req, space.error());
    fuse_reply_statfs(req, &*space);
  });
}

}  // namespace sealfs::fuse
