// `sealfs status [--format=json|prometheus] MOUNTPOINT`: asks the daemon
// through its root's reserved extended attribute, so it works for any user
// who can see the mount. The daemon answers in one form, JSON
// (MetricsSnapshot::to_json); Prometheus' text is rendered here from it by
// the renderer the daemon's metrics_file uses.
#include <sys/xattr.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>

#include "core/base/metrics.hpp"
#include "core/base/metrics_text.hpp"
#include "core/store/store.hpp"
#include "fs/cli/commands.hpp"

namespace sealfs::cli {
namespace {

// The status xattr's value; errno set when there is none.
bool read_status(const std::string& mountpoint, std::string& value) {
  value.assign(4096, '\0');
  for (int attempt = 0; attempt < 4; ++attempt) {  // the counters may grow between calls
    const ssize_t n = ::getxattr(mountpoint.c_str(), Store::kStatusXattr, value.data(), value.size());
    if (n >= 0) {
      value.resize(static_cast<size_t>(n));
      return true;
    }
    if (errno != ERANGE) return false;
    const ssize_t want = ::getxattr(mountpoint.c_str(), Store::kStatusXattr, nullptr, 0);
    if (want < 0) return false;
    value.assign(static_cast<size_t>(want) + 64, '\0');
  }
  return false;
}

// The mountpoint label: the path the daemon itself resolved at mount time.
std::string label_path(const std::string& mountpoint) {
  char* real = ::realpath(mountpoint.c_str(), nullptr);
  if (real == nullptr) return mountpoint;
  std::string out(real);
  std::free(real);
  return out;
}

}  // namespace

int run_status(const std::string& mountpoint, std::string_view format, std::ostream& out, std::ostream& err) {
  if (format != "json" && format != "prometheus") {
    err << "sealfs: status: --format must be json or prometheus, not '" << format << "'\n";
    return 2;
  }
  std::string value;
  if (!read_status(mountpoint, value)) {
    const int e = errno;
    if (e == ENODATA || e == ENOTSUP)
      err << "sealfs: " << mountpoint << ": not a sealfs mount\n";
    else
      err << "sealfs: " << mountpoint << ": " << std::strerror(e) << "\n";
    return 1;
  }
  if (format == "json") {
    out << value << "\n";
    return 0;
  }
  auto snapshot = MetricsSnapshot::from_json(value);
  if (!snapshot) {
    err << "sealfs: " << mountpoint << ": " << snapshot.error().message << "\n";
    return 1;
  }
  out << prometheus_text(*snapshot, label_path(mountpoint));
  return 0;
}

}  // namespace sealfs::cli
