#include "fs/fuse/descriptors.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>

namespace sealfs::fuse {

std::uint64_t descriptor_limit() {
  constexpr std::uint64_t kUnlimited = std::uint64_t{1} << 20;
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kUnlimited;
  return lim.rlim_cur;
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
