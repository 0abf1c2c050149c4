// What every request handler shares: the mount's state from a request, the
// exception boundary (`guarded`), and the replies built from store results.
#pragma once

#include <fuse_lowlevel.h>
#include <syslog.h>

#include <memory>
#include <new>
#include <string_view>

#include "core/base/cancel.hpp"
#include "core/base/result.hpp"
#include "fs/fuse/filesystem.hpp"

namespace sealfs::fuse {

inline Filesystem& fs_of(fuse_req_t req) { return *static_cast<Filesystem*>(fuse_req_userdata(req)); }

inline bool request_interrupted(void* req) { return fuse_req_interrupted(static_cast<fuse_req_t>(req)) != 0; }

// Run a handler; any exception that a library let through becomes an errno
// here instead of unwinding into libfuse's C loop. While it runs, a hash it
// starts or waits for is abandoned if the caller gives up (FUSE INTERRUPT).
template <class Fn>
void guarded(fuse_req_t req, Fn&& fn) {
  CancelScope scope(request_interrupted, req);
  try {
    fn();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (...) {
    syslog(LOG_ERR, "sealfs: unexpected exception in a request handler");
    fuse_reply_err(req, EIO);
  }
}

// Requests without a reply (forget): same boundary, nothing to answer.
template <class Fn>
void guarded_noreply(fuse_req_t req, Fn&& fn) {
  try {
    fn();
  } catch (...) {
    syslog(LOG_ERR, "sealfs: unexpected exception in forget");
  }
  fuse_reply_none(req);
}

// EBADF from the store means the daemon's own descriptor for the object is
// gone (a detached file moved or removed behind the mount: Inode::path_fd),
// never the caller's: ESTALE, on which the kernel looks the name up again.
inline void reply_error(fuse_req_t req, const Error& error) {
  if (error.code == EBADF) return (void)fuse_reply_err(req, ESTALE);
  fuse_reply_err(req, error.code > 0 ? error.code : EIO);
}
// 0 for success, else the error's errno.
inline void reply_status(fuse_req_t req, const Status& status) {
  if (!status) return reply_error(req, status.error());
  fuse_reply_err(req, 0);
}

// How long the kernel may cache an object of this kind (request.cpp says why).
double timeout_for(const Filesystem& fs, ObjectKind kind, mode_t mode);

// The pages of a regular file whose content changed behind the mount go
// (Inode::report); asynchronously, through the invalidator.
void drop_pages_if_changed(Filesystem& fs, Inode& inode, const struct stat& st);
// Put a found object (seen as `name` in `dir`) into the inode table and
// describe it for the kernel.
fuse_entry_param remember(Filesystem& fs, Found&& found, const Inode& dir, std::string_view name);
// remember() and the reply, undone when the reply does not reach the kernel.
// The inode id the kernel now holds; 0 when the reply did not reach it.
fuse_ino_t reply_entry(fuse_req_t req, Filesystem& fs, Found&& found, const Inode& dir,
                       std::string_view name);
// The inode's backing attributes now, with its kind's timeout.
void reply_attributes(fuse_req_t req, Filesystem& fs, Inode& inode);

// Objects made through the mount belong to the caller (R10) when the daemon
// runs as root (Store::give_to); a failure is logged, the object kept.
void give_to_caller(const Filesystem& fs, fuse_req_t req, int parent_fd, Found& found, mode_t wanted);

// nullptr after replying ESTALE / EBADF.
InodeRef inode_or_reply(fuse_req_t req, fuse_ino_t ino);
std::shared_ptr<FileHandle> file_or_reply(fuse_req_t req, const fuse_file_info* fi);

}  // namespace sealfs::fuse
