// The daemon's own descriptors: its limit, the share kept free of inodes and
// handles, and how many are open (stated by `sealfs status`, issue 24).
#pragma once

#include <cstdint>

namespace sealfs::fuse {

// The descriptors a limit keeps free of inodes and handles, for hashing,
// publishing and quarantine (R2: running out is never damage).
constexpr std::uint64_t descriptor_headroom(std::uint64_t limit) { return 128 + limit / 16; }

// The soft RLIMIT_NOFILE now (2^20 when unlimited or unreadable).
std::uint64_t descriptor_limit();

// The descriptors open in this process now (0 when /proc cannot tell).
std::uint64_t open_descriptors();

}  // namespace sealfs::fuse
