// The `sealfs` subcommands other than mount. Each returns the process exit
// status and writes results to out, problems (one line each) to err.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "fs/cli/options.hpp"

namespace sealfs::fs {

// The name of the extended attribute on a mount's root that holds the
// daemon's live counters (Metrics::to_json()).
inline constexpr const char* kStatusXattrName = "user.sealfs.status";

// `sealfs status MOUNTPOINT`: the live counters of a running mount.
int run_status(const std::string& mountpoint, std::ostream& out, std::ostream& err);

// `sealfs fsck [--repair] BACKING`: 0 all entries valid, 1 invalid entries
// were found and quarantined (--repair), 4 invalid entries left in place,
// 8 the check itself failed.
int run_fsck(const MountOptions& options, bool repair, std::ostream& out, std::ostream& err);

// `sealfs adopt BACKING [PATH…]`: seal foreign content deliberately.
int run_adopt(const MountOptions& options, const std::vector<std::string>& paths, std::ostream& out,
              std::ostream& err);

}  // namespace sealfs::fs
