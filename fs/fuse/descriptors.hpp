// The daemon's own descriptors: its limit, the share kept free of inodes and
// handles, and how many are open (stated by `sealfs status`, issue 24).
#pragma once

#include <cstdint>
#include <string>

namespace sealfs::fuse {

// The descriptors a limit keeps free of inodes and handles, for hashing,
// publishing and quarantine (R2: running out is never damage).
constexpr std::uint64_t descriptor_headroom(std::uint64_t limit) { return 128 + limit / 16; }

// What a mount needs beyond the headroom to do any work: the inode bound's
// floor (InodeEvictor: 32 inodes), as many kept readers and as many other
// open handles (the bound is a third of what the headroom leaves), and 32
// for the daemon's own (the standard streams, /dev/fuse, syslog, B's root
// and .sealfs, libfuse's workers' pipes).
constexpr std::uint64_t kWorkingDescriptors = 3 * 32 + 32;

// The lowest limit that leaves kWorkingDescriptors past its headroom (273):
// below it every open would wait for descriptors that cannot come back, so
// the mount is refused.
constexpr std::uint64_t minimum_descriptor_limit() {
  std::uint64_t limit = kWorkingDescriptors;
  while (limit < descriptor_headroom(limit) + kWorkingDescriptors) ++limit;
  return limit;
}

// The soft RLIMIT_NOFILE now (2^20 when unlimited or unreadable).
std::uint64_t descriptor_limit();

// Empty when the limit now is at least minimum_descriptor_limit(), else
// the one line that says so and what the minimum is.
std::string descriptor_limit_problem();

// The descriptors open in this process now (0 when /proc cannot tell).
std::uint64_t open_descriptors();

}  // namespace sealfs::fuse
