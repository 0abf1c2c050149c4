// Whether this build's mounts open sealed files in FUSE passthrough mode
// (issue 25, fs/fuse/passthrough.hpp): the passthrough preset's build
// (libfuse 3.17, SEALFS_PASSTHROUGH_BUILD=1), a kernel that has it (Linux
// 6.9 or later) and a daemon with CAP_SYS_ADMIN (these tests run as root).
// Tests whose expectations differ with passthrough (READs that no longer
// reach the daemon) ask passthrough_expected().
#pragma once

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#ifndef SEALFS_PASSTHROUGH_BUILD
#define SEALFS_PASSTHROUGH_BUILD 0
#endif

namespace sealfs::test {

// Empty when passthrough should be on for a read-write mount made here,
// else why not (one line).
inline std::string passthrough_unavailable_reason() {
  if (SEALFS_PASSTHROUGH_BUILD == 0)
    return "built against libfuse 3.14, which has no FUSE passthrough (the passthrough preset, libfuse "
           "3.17, runs these)";
  utsname u{};
  int major = 0;
  int minor = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2)
    return "cannot read the kernel's version";
  if (major < 6 || (major == 6 && minor < 9))
    return std::string("the kernel (") + u.release + ") has no FUSE passthrough (Linux 6.9 or later)";
  if (::geteuid() != 0) return "not root: the daemon lacks CAP_SYS_ADMIN for the backing-file ioctl";
  return {};
}

// Whether the kernel itself lacks the feature (a reason that may skip even
// under CI, printed as such).
inline bool kernel_lacks_passthrough(const std::string& reason) {
  return reason.find("the kernel") != std::string::npos;
}

inline bool passthrough_expected() { return passthrough_unavailable_reason().empty(); }

// Skips a passthrough test with its reason where it does not apply: on the
// 3.14 build and on a kernel without the feature always (said as such), as
// a non-root user outside CI only.
#define SEALFS_REQUIRE_PASSTHROUGH()                                                     \
  do {                                                                                   \
    const std::string sealfs_pt_why_ = ::sealfs::test::passthrough_unavailable_reason(); \
    if (!sealfs_pt_why_.empty()) {                                                       \
      if (SEALFS_PASSTHROUGH_BUILD != 0 && ::sealfs::test::running_under_ci() &&         \
          !::sealfs::test::kernel_lacks_passthrough(sealfs_pt_why_))                     \
        FAIL() << "FUSE passthrough unusable under CI: " << sealfs_pt_why_;              \
      GTEST_SKIP() << "FUSE passthrough does not apply: " << sealfs_pt_why_;             \
    }                                                                                    \
  } while (0)

}  // namespace sealfs::test
