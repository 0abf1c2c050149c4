#include "fs/cli/options.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/cuda/cuda.hpp"
#include "core/manifest/keys.hpp"
#include "core/store/store.hpp"
#include "core/store/validators.hpp"
#include "core/verify/validator.hpp"
#include "fs/fuse/mount_config.hpp"

namespace sealfs::cli {
namespace {

// Options libfuse (fuse_session_new / fuse_session_mount) understands, with
// or without a value. They are passed through unchanged, except dev and suid
// (kForcedOff) and noatime, which the store honours too.
constexpr std::array<std::string_view, 19> kFuseFlags = {"allow_other",  "allow_root", "default_permissions",
                                                         "auto_unmount", "blkdev",     "rw",
                                                         "ro",           "suid",       "nosuid",
                                                         "dev",          "nodev",      "exec",
                                                         "noexec",       "async",      "sync",
                                                         "atime",        "noatime",    "dirsync",
                                                         "debug"};
constexpr std::array<std::string_view, 3> kFuseValued = {"fsname", "subtype", "max_read"};
// Options of the connection rather than of the mount: libfuse's session
// refuses them, so they are applied in init (fuse_apply_conn_info_opts).
constexpr std::array<std::string_view, 11> kConnFlags = {
    "no_remote_lock", "no_remote_flock", "no_remote_posix_lock", "async_read",
    "sync_read",      "splice_write",    "no_splice_write",      "splice_move",
    "no_splice_move", "splice_read",     "no_splice_read"};
constexpr std::array<std::string_view, 3> kConnValued = {"max_write", "max_readahead", "max_background"};
// R10: the mount is always nodev,nosuid. mount.fuse3 adds "dev,suid" to
// every root mount that does not say nodev/nosuid (mount(8) semantics), so
// refusing them would fail every fstab line: they are overridden, with a note.
constexpr std::array<std::string_view, 2> kForcedOff = {"dev", "suid"};
// Access times. The kernel never updates a FUSE inode's atime itself (it
// marks every one S_NOATIME), so the mount's own atime flags change nothing
// on M: M's access times are B's, as the daemon reports them. A read through
// M is the daemon's read of B's file and a listing its read of B's
// directory, moved by B's own mount rule (relatime on most systems); the
// store's own reads (digests, manifests) never move them (O_NOATIME).
// noatime (kFuseFlags) is honoured by the store: reads through M are opened
// O_NOATIME. Every other rule libfuse and mount(8) know is accepted, as every
// FUSE mount accepts it, for fstab lines and scripts that name one
// (xfstests' cycle mounts): what it asks of B is B's mount rule to give.
// They are not passed on: libfuse 3.14 refuses all but atime and noatime,
// and the kernel would ignore them. sealfs(8) says each. atime itself is
// not passed on either: it is the kernel's default (no MS_NOATIME), libfuse
// 3.17 refuses it ("unknown option"), and it only undoes an earlier noatime.
constexpr std::array<std::string_view, 8> kAtimeAsBacking = {"relatime",      "norelatime", "strictatime",
                                                             "nostrictatime", "diratime",   "nodiratime",
                                                             "lazytime",      "nolazytime"};
// What mount(8) / mount.fuse3 may hand us from an fstab line that means
// nothing to a FUSE mount: accepted and ignored.
constexpr std::array<std::string_view, 8> kIgnored = {"defaults", "auto",  "noauto", "user",
                                                      "nouser",   "users", "nofail", "_netdev"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& set, std::string_view v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

Result<double> parse_seconds(std::string_view key, std::string_view value) {
  double seconds = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc{} || ptr != value.data() + value.size() || !std::isfinite(seconds) || seconds < 0 ||
      seconds > 86400.0 * 365)
    return make_error(EINVAL, std::string(key) + ": not a number of seconds: '" + std::string(value) + "'");
  return seconds;
}

// A count for a FUSE option (bytes, requests): digits only, fits in 32 bits.
Result<unsigned> parse_count(std::string_view key, std::string_view value) {
  std::uint32_t n = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc{} || ptr != value.data() + value.size())
    return make_error(EINVAL,
                      "option " + std::string(key) + " needs a number, not '" + std::string(value) + "'");
  return n;
}

// One option as key, and value when has_value.
struct Option {
  std::string_view text;  // as given
  std::string_view key;
  std::string_view value;
  bool has_value = false;
  Status need_value() const {
    if (!has_value || value.empty())
      return make_error(EINVAL, "option " + std::string(key) + " needs a value");
    return {};
  }
};

// sealfs's own options (BackingOptions); nothing when opt is not one of them.
std::optional<Status> apply_backing_option(const Option& opt, BackingOptions& o) {
  const std::string value(opt.value);
  if (opt.key == "profile") {
    if (auto s = opt.need_value(); !s) return s;
    o.profile = value;
  } else if (opt.key == "verify") {
    if (value != "changed" && value != "always")
      return make_error(EINVAL, "verify must be 'changed' or 'always', not '" + value + "'");
    o.verify = value == "always" ? VerifyMode::always : VerifyMode::changed;
  } else if (opt.key == "durability") {
    if (value != "fsync" && value != "none")
      return make_error(EINVAL, "durability must be 'fsync' or 'none', not '" + value + "'");
    o.durability = value == "none" ? Durability::none : Durability::fsync;
  } else if (opt.key == "cache_timeout") {
    if (auto s = opt.need_value(); !s) return s;
    auto seconds = parse_seconds(opt.key, opt.value);
    if (!seconds) return seconds.error();
    o.cache_timeout = *seconds;
  } else if (opt.key == "cuda_validate") {
    if (auto mode = cuda::parse_mode(opt.value); !mode)
      return make_error(EINVAL, "cuda_validate must be off, structural or driver, not '" + value + "'");
    o.cuda_validate = value;
  } else if (opt.key == "key_file") {
    if (auto s = opt.need_value(); !s) return s;
    o.key_file = value;
  } else {
    return std::nullopt;
  }
  return Status{};
}

// Accepted and ignored: fstab noise (kIgnored), access-time rules that are
// B's (kAtimeAsBacking) and util-linux userspace-only options (x-systemd.*,
// comment=…), never meant for us.
bool ignored(const Option& opt) {
  return (!opt.has_value && (contains(kIgnored, opt.key) || contains(kAtimeAsBacking, opt.key))) ||
         opt.key.starts_with("x-") || opt.key.starts_with("comment=");
}

// The on/off pairs of the adapter's requests; false for any other key.
bool apply_switch(std::string_view key, MountOptions& o) {
  if (key == "no_open" || key == "keep_open") {
    o.no_open = key == "no_open";
    o.keep_open = key == "keep_open";
  } else if (key == "no_opendir" || key == "keep_opendir") {
    o.no_opendir = key == "no_opendir";
  } else if (key == "no_passthrough" || key == "passthrough") {
    o.no_passthrough = key == "no_passthrough";
  } else {
    return false;
  }
  return true;
}

// FUSE's options and the connection's.
Status apply_mount_option(const Option& opt, MountOptions& o) {
  const std::string_view key = opt.key;
  if (ignored(opt)) return {};
  if (!opt.has_value && contains(kForcedOff, key)) {
    o.notes.push_back("option " + std::string(key) + " ignored: the mount is always nodev,nosuid");
    return {};
  }
  if (!opt.has_value && apply_switch(key, o)) return {};
  if (key == "push_max") {
    auto n = parse_count(key, opt.value);
    if (!n) return n.error();
    o.push_max = *n;
  } else if (key == "metrics_file") {
    if (auto s = opt.need_value(); !s) return s;
    o.metrics_file = std::string(opt.value);
  } else if (key == "metrics_interval") {
    if (auto s = opt.need_value(); !s) return s;
    auto seconds = parse_seconds(key, opt.value);
    if (!seconds) return seconds.error();
    if (*seconds < 0.1)
      return make_error(EINVAL,
                        "metrics_interval: at least 0.1 seconds, not '" + std::string(opt.value) + "'");
    o.metrics_interval = *seconds;
  } else if (!opt.has_value && contains(kConnFlags, key)) {
    o.conn_options.emplace_back(key);
  } else if (key == "readdirplus") {
    if (opt.value != "yes" && opt.value != "no" && opt.value != "auto")
      return make_error(EINVAL, "readdirplus must be yes, no or auto, not '" + std::string(opt.value) + "'");
    o.conn_options.emplace_back(opt.text);
  } else if (opt.has_value && contains(kConnValued, key)) {
    if (auto n = parse_count(key, opt.value); !n) return n.error();
    o.conn_options.emplace_back(opt.text);
  } else if (!opt.has_value && (key == "atime" || key == "noatime")) {
    o.noatime = key == "noatime";  // the last one wins, as in mount(8)
    std::erase(o.fuse_options, std::string("noatime"));
    if (o.noatime) o.fuse_options.emplace_back("noatime");
  } else if (!opt.has_value && contains(kFuseFlags, key)) {
    if (key == "allow_other") o.allow_other = true;
    if (key == "ro" || key == "rw") o.read_only = key == "ro";
    if (key == "debug")
      o.debug = true;
    else
      o.fuse_options.emplace_back(key);
  } else if (opt.has_value && contains(kFuseValued, key)) {
    if (auto s = opt.need_value(); !s) return s;
    if (key == "max_read") {
      auto n = parse_count(key, opt.value);
      if (!n) return n.error();
      o.max_read = *n;
    }
    o.fuse_options.emplace_back(opt.text);
  } else {
    return make_error(EINVAL, "unknown option '" + std::string(opt.text) + "'");
  }
  return {};
}

Status apply_one(std::string_view text, MountOptions& o) {
  const auto eq = text.find('=');
  const bool has_value = eq != std::string_view::npos;
  const Option opt{text, text.substr(0, eq), has_value ? text.substr(eq + 1) : std::string_view{}, has_value};
  if (auto applied = apply_backing_option(opt, o)) return *applied;
  return apply_mount_option(opt, o);
}

// libfuse splits -o lists at ',' and honours '\' as an escape.
std::string escape_option_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

Status apply_option_list(std::string_view list, MountOptions& options) {
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view opt = list.substr(start, end - start);
    if (!opt.empty()) {
      if (auto s = apply_one(opt, options); !s) return s;
    }
    start = end + 1;
  }
  return {};
}

std::string fuse_option_string(const MountOptions& options) {
  std::string out = "default_permissions";
  bool has_fsname = false;
  bool has_subtype = false;
  for (const auto& opt : options.fuse_options) {
    if (opt == "default_permissions") continue;
    has_fsname = has_fsname || opt.starts_with("fsname=");
    has_subtype = has_subtype || opt.starts_with("subtype=");
    out += "," + opt;
  }
  if (!has_fsname) out += ",fsname=" + escape_option_value(options.backing);
  if (!has_subtype) out += ",subtype=sealfs";
  // Last, so that nothing before them can turn them off (R10).
  out += ",nodev,nosuid";
  return out;
}

StoreOptions store_options(const BackingOptions& options) {
  StoreOptions out;
  out.durability = options.durability;
  out.verify = options.verify;
  out.verdict_ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(options.cache_timeout));
  out.validators = default_validators(options.cuda_validate);
  return out;
}

Result<std::shared_ptr<const KeyRing>> load_keys(const BackingOptions& options) {
  if (options.key_file.empty()) return std::shared_ptr<const KeyRing>();
  auto keys = load_key_file(options.key_file);
  if (!keys) return keys.error();
  return std::shared_ptr<const KeyRing>(std::make_shared<KeyRing>(std::move(*keys)));
}

Result<fuse::MountConfig> mount_config(const MountOptions& options) {
  fuse::MountConfig out;
  out.backing = options.backing;
  out.mountpoint = options.mountpoint;
  out.profile = options.profile;
  out.store = store_options(options);
  out.store.noatime = options.noatime;
  auto keys = load_keys(options);
  if (!keys) return keys.error();
  out.store.keys = std::move(*keys);
  out.cache_timeout = options.cache_timeout;
  out.foreground = options.foreground || options.debug;
  out.debug = options.debug;
  out.read_only = options.read_only;
  out.no_open = options.no_open;
  out.keep_open = options.keep_open;
  out.no_passthrough = options.no_passthrough;
  out.no_opendir = options.no_opendir;
  out.push_max = options.push_max;
  out.metrics_file = options.metrics_file;
  out.metrics_interval = options.metrics_interval;
  out.fuse_options = fuse_option_string(options);
  out.conn_options = options.conn_options;
  out.max_read = options.max_read;
  return out;
}

}  // namespace sealfs::cli
