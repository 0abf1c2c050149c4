// What one mount runs with, as the command line (fs/cli) decided it: every
// option parsed and checked, the store's options built and its keys loaded.
// The FUSE adapter takes it as given and knows nothing of option syntax.
#pragma once

#include <string>
#include <vector>

#include "core/store/store.hpp"

namespace sealfs::fuse {

struct MountConfig {
  std::string backing;
  std::string mountpoint;
  std::string profile;  // built-in name or path to a JSON profile
  // The store's options (keys included); the mount adds its hooks and bounds.
  StoreOptions store;
  double cache_timeout = 1.0;  // seconds; kernel entry/attr timeouts and verdict TTL
  bool foreground = false;
  bool debug = false;
  bool read_only = false;
  bool no_open = false;        // OPEN answered ENOSYS (fs/README.md "Without OPEN")
  bool keep_open = false;      // with read_only: OPEN kept anyway (for passthrough)
  bool no_passthrough = true;  // no FUSE passthrough (fs/fuse/passthrough.hpp); -o passthrough asks for it
  bool no_opendir = true;      // OPENDIR answered ENOSYS (fs/README.md "Without OPENDIR")
  unsigned push_max = 0;       // largest file whose pages are pushed at lookup (-o ro only)
  std::string metrics_file;    // empty: none
  double metrics_interval = 5.0;
  // The one "-o" list handed to libfuse, and the connection options that
  // init applies (max_write=, async_read, …).
  std::string fuse_options;
  std::vector<std::string> conn_options;
  unsigned max_read = 0;
};

}  // namespace sealfs::fuse
