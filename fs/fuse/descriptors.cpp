#include "fs/fuse/descriptors.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>
#include <string>

namespace sealfs::fuse {

std::uint64_t descriptor_limit() {
  constexpr std::uint64_t kUnlimited = std::uint64_t{1} << 20;
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kUnlimited;
  return lim.rlim_cur;
}

std::string descriptor_limit_problem() {
  const std::uint64_t limit = descriptor_limit();
  const std::uint64_t minimum = minimum_descriptor_limit();
  if (limit >= minimum) return {};
  return "sealfs: the open file limit is " + std::to_string(limit) + ", below the " +
         std::to_string(minimum) +
         " descriptors a mount needs (128 and 1/16 of the limit kept free for verification, " +
         std::to_string(kWorkingDescriptors) +
         " for inodes, open files and the daemon's own): raise it (ulimit -n, prlimit --nofile, "
         "LimitNOFILE=)";
}

std::uint64_t open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  std::uint64_t n = 0;
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n > 0 ? n - 1 : 0;  // not counting the one reading the directory
}

}  // namespace sealfs::fuse
