// `sealfs status MOUNTPOINT`: asks the daemon through its root's reserved
// extended attribute, so it works for any user who can see the mount.
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "fs/cli/commands.hpp"

namespace sealfs::cli {

int run_status(const std::string& mountpoint, std::ostream& out, std::ostream& err) {
  std::string value(4096, '\0');
  for (int attempt = 0; attempt < 4; ++attempt) {  // the counters may grow between calls
    const ssize_t n = ::getxattr(mountpoint.c_str(), Store::kStatusXattr, value.data(), value.size());
    if (n >= 0) {
      value.resize(static_cast<size_t>(n));
      out << value << "\n";
      return 0;
    }
    if (errno == ERANGE) {
      const ssize_t want = ::getxattr(mountpoint.c_str(), Store::kStatusXattr, nullptr, 0);
      if (want < 0) break;
      value.assign(static_cast<size_t>(want) + 64, '\0');
      continue;
    }
    break;
  }
  const int e = errno;
  if (e == ENODATA || e == ENOTSUP)
    err << "sealfs: " << mountpoint << ": not a sealfs mount\n";
  else
    err << "sealfs: " << mountpoint << ": " << std::strerror(e) << "\n";
  return 1;
}

}  // namespace sealfs::cli
