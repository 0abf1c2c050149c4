// Issue 24: a writer may hold more files open than the daemon has
// descriptors (a framework holding thousands, a daemon limited to 1,024). A
// write handle costs two: its open file and the O_PATH fd of the name it was
// opened under (FileHandle::opened_as). When make_room finds the table full,
// every handle no request is using is parked: both are closed and its
// inode detaches (Inode::detach). Its next use opens it again by the name it
// was opened under, or else by the inode's latest, checked to be the same
// object. Near the limit a save is slower, as on a plain directory it is not
// refused.
//
// Read handles of their own (OPEN with verify=always, or near the limit,
// where opens are not served by the inode's kept reader) are parked too:
// opened again, they are judged again, and each READ compares the stamp
// verified at the caller's open as before (R2). Never parked: a handle whose
// file has no name left (unlinked while open: closing the last descriptor
// would delete it), and passthrough handles (the kernel holds their file). Before the mount removes or
// replaces a name, the handles parked on its object are opened again
// (unpark_object), so that the object keeps a descriptor and outlives the
// name as on a plain directory. A file moved or removed behind the mount
// while parked cannot be found again: its next WRITE gets ESTALE, as NFS
// answers for a file gone from the server.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <shared_mutex>
#include <utility>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "fs/fuse/inode_table.hpp"

namespace sealfs::fuse {

struct FileHandle;
struct Filesystem;

// Parks every handle that no request holds; the descriptors freed.
std::size_t park_idle_writers(Filesystem& fs);

// Holds handle's descriptor for one request: lock ends up shared on its
// park_mu, the handle opened again first if it was parked. EBADF for a
// handle already finished.
Status hold_descriptor(Filesystem& fs, FileHandle& handle, std::shared_lock<std::shared_mutex>& lock);

// Opens again every handle parked on the object (dev, ino): called before
// a name of it is removed or replaced through the mount. Costs one shared
// lock while no handle is parked. The lock returned keeps every handle from
// being parked until the caller's removal is done and lets it go.
Result<std::shared_lock<std::shared_mutex>> unpark_object(Filesystem& fs, dev_t dev, ino_t ino);

// The O_PATH fd of the name handle was opened under, and where it was
// seen: opened_as while held; for a parked handle that name opened again
// when it still leads to the same object, else the inode's latest name.
// Under the handle's park_mu (unique), or once no request can use it.
std::pair<std::shared_ptr<const UniqueFd>, Inode::SeenAt> name_opened_as(const FileHandle& handle);

}  // namespace sealfs::fuse
