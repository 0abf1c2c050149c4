// One open file as a request handler holds it: the descriptor on B, the
// inode, what R4 judges its last close on (HandleLife), R2's stamp for a
// read handle, and the descriptor-parking state of issue 24. Every handle,
// with OPEN or without (the implicit handles), is made by make_file_handle.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "core/base/stamp.hpp"
#include "core/base/unique_fd.hpp"
#include "fs/fuse/handle_life.hpp"
#include "fs/fuse/inode_table.hpp"

namespace sealfs::fuse {

struct FileHandle {
  UniqueFd fd;
  InodeRef inode;  // keeps the O_PATH fd for seal/abandon after the kernel forgets it
  // The name the file was opened under (the inode's O_PATH fd and where it
  // was seen then; an O_PATH fd follows renames). The seal after the last
  // close seals that name: a link through the mount that comes before the
  // kernel's RELEASE gives the inode a newer fd under the new name, which the
  // link sealed itself, and the writer's own name must not be left unsealed.
  // Write handles only: each may keep one O_PATH fd alive that a later
  // lookup replaced (within descriptors_low's headroom); read handles, which
  // a caller can hold by the thousand, keep none.
  std::shared_ptr<const UniqueFd> opened_as;
  Inode::SeenAt opened_at;
  bool tracked = false;  // counted in WriterTracking (a write handle outside volatile areas)
  HandleLife life;       // what R4 and R10 judge at its release
  // A read handle of a sealed file: the stamp of the content that was
  // verified. Every READ compares the backing file with it (R2: every byte
  // served equals the bytes verified); guarded by stamp_mu.
  bool sealed_read = false;
  std::mutex stamp_mu;
  Stamp verified{};
  // The handle an inode's passthrough opens share (passthrough.hpp): their
  // RELEASE ends a passthrough open, and never closes it.
  bool passthrough = false;
  // fd was opened with its caller's O_DIRECT (direct_io.hpp): READ and
  // WRITE move its bytes through aligned memory. Cleared, with the flag on
  // fd, by the first WRITE that is not direct.
  std::atomic<bool> direct{false};
  // Issue 24 (parked_handles.hpp): a handle no request uses closes fd and
  // opened_as while the daemon's descriptors run out, and opens them again
  // at its next use. Requests hold park_mu shared while they use fd;
  // parking and the handle's end hold it unique.
  std::shared_mutex park_mu;
  bool parked = false;   // under park_mu
  int parked_flags = 0;  // fd's open flags, to open it again with; under park_mu

  // A read handle: every READ checks B's stamp against st's (R2) when it
  // is a regular file.
  void check_reads_against(const struct stat& st) {
    sealed_read = S_ISREG(st.st_mode);
    verified = Stamp::of(st);
  }
};

// The one way a FileHandle is made. A tracked handle keeps the name it was
// opened under (opened_as, opened_at); origin says what its open did.
inline std::shared_ptr<FileHandle> make_file_handle(UniqueFd fd, InodeRef inode, bool tracked,
                                                    HandleLife::Origin origin = {}) {
  auto handle = std::make_shared<FileHandle>();
  handle->fd = std::move(fd);
  handle->inode = std::move(inode);
  handle->tracked = tracked;
  handle->life.opened(origin);
  if (tracked && handle->inode) {
    handle->opened_as = handle->inode->path_fd();
    handle->opened_at = handle->inode->last_seen();
  }
  return handle;
}

}  // namespace sealfs::fuse
