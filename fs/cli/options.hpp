// The mount command's options: sealfs's own (-o profile=…, verify=…, …) and
// the FUSE/mount options passed through to libfuse. Parsing is pure (no I/O)
// so it can be tested without a mount.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"
#include "core/manifest/keys.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/mount_config.hpp"

namespace sealfs::cli {

// What every command that opens B needs: where it is and how the store
// treats it. The offline commands (fsck, adopt) take only this.
struct BackingOptions {
  std::string backing;
  std::string profile = "generic";  // built-in name or path to a JSON profile
  VerifyMode verify = VerifyMode::changed;
  Durability durability = Durability::fsync;
  double cache_timeout = 1.0;  // seconds; kernel entry/attr timeouts and verdict TTL
  std::string cuda_validate = "structural";
  // -o key_file=PATH: manifests are signed and must verify (core/manifest/keys.hpp).
  std::string key_file;
};

// The mount command's: B's, plus where and how to mount.
struct MountOptions : BackingOptions {
  std::string mountpoint;
  bool foreground = false;
  bool debug = false;
  bool allow_other = false;
  bool read_only = false;  // -o ro: the superblock is read-only (no writes, no R4)
  // OPEN answered ENOSYS (fs/README.md "Without OPEN"): -o no_open, and
  // implied by ro. A read-write mount keeps OPEN and RELEASE by default
  // (-o keep_open): RELEASE tells a writer's last close exactly, at no cost
  // per descriptor the writer holds (issue 23 point 7).
  bool no_open = false;
  // -o keep_open given: with ro, the read-only mount keeps OPEN too (for FUSE
  // passthrough, whose cold loads are faster; its warm loads are not).
  bool keep_open = false;
  // OPENDIR answered ENOSYS (fs/README.md "Without OPENDIR"): the default;
  // -o keep_opendir lists the directory in the store at every opendir.
  bool no_opendir = true;
  // FUSE passthrough (issue 25, fs/fuse/passthrough.hpp) only with
  // -o passthrough, where the libfuse, kernel and privileges allow it.
  // Without it (the default, and -o no_passthrough) every READ that misses
  // the page cache reaches the daemon, which checks the bytes' stamp (R2): a
  // descriptor held across an in-place rewrite behind the mount gets EIO
  // rather than B's new bytes. With it, the kernel reads B's file directly,
  // and such a descriptor reads the new bytes; the next open is still a miss.
  bool no_passthrough = true;
  // -o push_max=BYTES (-o ro mounts only): the largest sealed file whose verified bytes go into
  // the kernel's page cache at its first lookup (fs/fuse/page_push.hpp); 0: none.
  unsigned push_max = 64U << 20;
  // -o metrics_file=PATH: the counters in Prometheus' text format, rewritten
  // every metrics_interval seconds (fs/fuse/metrics_file.hpp); empty: none.
  std::string metrics_file;
  double metrics_interval = 5.0;
  // -o noatime: reads through M leave B's access times (StoreOptions::noatime).
  bool noatime = false;
  // What the options parser overrode (dev, suid), one line each for syslog
  // and -d's output; never standard error (mount.fuse3 asks for them every time).
  std::vector<std::string> notes;

  // Options handed to libfuse as one "-o" list (always with
  // default_permissions, see DESIGN.md "allow_other").
  std::vector<std::string> fuse_options;
  // Connection options (max_write=, async_read, …): applied in init.
  std::vector<std::string> conn_options;
  unsigned max_read = 0;  // also a mount option; init must repeat it
};

// Apply one comma-separated -o list (may be given several times). Unknown
// options and bad values: EINVAL with a message naming the option.
Status apply_option_list(std::string_view list, MountOptions& options);

// The "-o" string handed to libfuse: the pass-through options plus
// default_permissions and an fsname/subtype when none was given.
std::string fuse_option_string(const MountOptions& options);

// The one place options become StoreOptions (the mount and the offline
// commands); the caller adds what is its own (hooks, verify=always).
StoreOptions store_options(const BackingOptions& options);
// The keys of options.key_file (null when none is set): the one line to
// print on failure is the error's message.
Result<std::shared_ptr<const KeyRing>> load_keys(const BackingOptions& options);
// What the mount runs with (fs/fuse/mount_config.hpp): the store's options
// and keys loaded (the error is the key file's), the libfuse option string.
Result<fuse::MountConfig> mount_config(const MountOptions& options);

}  // namespace sealfs::cli
