// The mount's life cycle: check everything that can be checked before
// mounting (one clear line on stderr and a non-zero exit otherwise), open B
// before mounting so that `sealfs B B` works, mount, daemonize unless -f,
// serve with a multi-threaded loop, and exit 0 after a clean unmount.
#pragma once

#include <ostream>

#include "fs/fuse/mount_config.hpp"

namespace sealfs::fuse {

// Returns the process exit status.
int run_mount(const MountConfig& options, std::ostream& err);

}  // namespace sealfs::fuse
