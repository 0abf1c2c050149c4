#include "fs/fuse/session.hpp"

#include <fuse_lowlevel.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/cancel.hpp"
#include "core/base/metrics_text.hpp"
#include "core/base/result.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/close_journal.hpp"
#include "fs/fuse/descriptors.hpp"
#include "fs/fuse/file_handles.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/inode_evictor.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/kernel_notices.hpp"
#include "fs/fuse/metrics_file.hpp"
#include "fs/fuse/mount_config.hpp"

namespace sealfs::fuse {
namespace {

// How long after its last close a large file waits for its seal, so that a
// writer that opens it again at once takes the seal over (deferred_seals.hpp).
constexpr std::chrono::milliseconds kSealDelay{500};
// Threads serving requests: enough for parallel hashing and blocking
// publishes without letting a burst create hundreds.
constexpr unsigned kMaxThreads = 32;
constexpr unsigned kMaxIdleThreads = 8;

struct SessionDeleter {
  void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};
using SessionPtr = std::unique_ptr<fuse_session, SessionDeleter>;

struct LoopConfigDeleter {
  void operator()(fuse_loop_config* c) const { fuse_loop_cfg_destroy(c); }
};

struct FuseArgs {
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  FuseArgs() = default;
  FuseArgs(const FuseArgs&) = delete;
  FuseArgs& operator=(const FuseArgs&) = delete;
  ~FuseArgs() { fuse_opt_free_args(&args); }
  bool add(const std::string& arg) { return fuse_opt_add_arg(&args, arg.c_str()) == 0; }
};

// SIGTERM, SIGINT, SIGHUP: libfuse's handlers end the session loop, which
// then waits for the requests in flight. A hash of a huge or slow file would
// hold that up for minutes, so the hashes are cancelled first (R2: no entry,
// however large, may hold up the daemon; `sealfs-mountctl clear-stale`
// remains for a daemon killed with SIGKILL).
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};
struct sigaction g_libfuse_handlers[std::size(kStopSignals)];

// While libfuse mounts or unmounts, a stop signal is held back: as root it
// forks `/bin/mount -f` right after the kernel mount appears (the mtab
// update) and treats an EINTR from its waitpid as a failed mount, which it
// undoes, so a SIGTERM sent as soon as the mount showed made the daemon exit 1
// ("cannot mount"); the unmount forks `/bin/umount` the same way. The
// handlers then run with SA_RESTART and only note the signal; after a mount
// it ends the session loop.
volatile std::sig_atomic_t g_holding_stop_signals = 0;
volatile std::sig_atomic_t g_held_stop_signal = 0;

void chain_to_libfuse(int sig) {
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    const auto& chained = g_libfuse_handlers[i];
    if (kStopSignals[i] == sig && chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN)
      chained.sa_handler(sig);
  }
}

void on_stop_signal(int sig) {
  request_shutdown();
  if (g_holding_stop_signals != 0) {
    g_held_stop_signal = sig;
    return;
  }
  chain_to_libfuse(sig);
}

// Wraps each of libfuse's handlers (the first call, after
// fuse_set_signal_handlers, saves them); flags SA_RESTART while mounting.
bool install_stop_handlers(int flags, bool save_libfuse_handlers) {
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(kStopSignals[i], &sa, save_libfuse_handlers ? &g_libfuse_handlers[i] : nullptr) != 0)
      return false;
  }
  return true;
}

// fuse_session_mount with stop signals held back (see g_holding_stop_signals); a signal
// that came meanwhile ends the session loop before it serves anything.
bool mount_holding_stop_signals(fuse_session* se, const std::string& mountpoint) {
  g_holding_stop_signals = 1;
  const bool mounted =
      install_stop_handlers(SA_RESTART, true) && fuse_session_mount(se, mountpoint.c_str()) == 0;
  g_holding_stop_signals = 0;
  if (mounted && !install_stop_handlers(0, false)) {
    fuse_session_unmount(se);
    return false;
  }
  if (const int held = g_held_stop_signal; held != 0) chain_to_libfuse(held);
  return mounted;
}

// How long the unmount waits for notifications sent already (KernelNotices::close).
constexpr std::chrono::seconds kNoticesDrain{1};

// Mounted while alive; unmounts (and stops taking signals) on every way out.
// No notification is sent once it unmounts: the unmount closes the device.
class MountGuard {
 public:
  MountGuard(fuse_session* se, KernelNotices& notices) : se_(se), notices_(notices) {}
  ~MountGuard() {
    g_holding_stop_signals = 1;  // see g_holding_stop_signals; the session loop has ended already
    install_stop_handlers(SA_RESTART, false);
    if (!notices_.close(kNoticesDrain))
      syslog(LOG_INFO, "sealfs: a notification still waits in the kernel; the unmount ends it");
    fuse_session_unmount(se_);
    fuse_remove_signal_handlers(se_);
  }
  MountGuard(const MountGuard&) = delete;
  MountGuard& operator=(const MountGuard&) = delete;

 private:
  fuse_session* se_;
  KernelNotices& notices_;
};

std::string errno_text(int code) { return std::strerror(code); }

// Every inode the kernel holds (each cached dentry below M) keeps an O_PATH
// fd to its backing object, up to the evictor's bound (issue 24), which
// grows with the limit: take the hard limit, as a service manager's
// LimitNOFILE= would. The hard limit itself is left to the administrator.
// The bound is stated once here and in `sealfs status`.
void raise_fd_limit() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
      syslog(LOG_WARNING, "sealfs: cannot raise the open file limit: %s", std::strerror(errno));
  }
  const std::uint64_t limit = descriptor_limit();
  syslog(LOG_INFO,
         "sealfs: descriptor limit %llu: at most %llu inodes keep a descriptor (the kernel is asked to "
         "forget the least used past that)",
         static_cast<unsigned long long>(limit),
         static_cast<unsigned long long>(InodeEvictor::bound_for(limit)));
}

#ifdef SEALFS_FAULT_INJECTION
// Test builds: SEALFS_FAULT_STEP=<step> ends the daemon right after that step
// of a store transaction, as a kill -9 or a power cut would (no cleanup, the
// mount is left dead until unmounted). SEALFS_FAULT_DELAY=<step>:<ms>[,…]
// pauses there instead, which opens a race window wide enough for a test to
// hit it every time ("release": before a RELEASE is handled; "hashing": in
// the middle of a hash). See fs/README.md.
std::map<std::string, int, std::less<>> parse_delays(std::string_view text) {
  std::map<std::string, int, std::less<>> delays;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) continue;
    int ms = 0;
    const std::string_view digits = item.substr(colon + 1);
    if (std::from_chars(digits.data(), digits.data() + digits.size(), ms).ec == std::errc{} && ms > 0)
      delays.emplace(std::string(item.substr(0, colon)), ms);
  }
  return delays;
}

// SEALFS_FAULT_ERRNO=<step>:<errno>:<count>: the first count times the
// adapter reaches step, it fails there with errno ("last_close": the seal or
// abandon after a last close), as a daemon out of descriptors would.
void install_fault_errno(Filesystem& fs) {
  const char* spec = std::getenv("SEALFS_FAULT_ERRNO");
  if (spec == nullptr) return;
  const std::string_view text(spec);
  const auto first = text.find(':');
  const auto second = first == std::string_view::npos ? first : text.find(':', first + 1);
  if (second == std::string_view::npos) return;
  int code = 0;
  int count = 0;
  const std::string_view code_text = text.substr(first + 1, second - first - 1);
  const std::string_view count_text = text.substr(second + 1);
  if (std::from_chars(code_text.data(), code_text.data() + code_text.size(), code).ec != std::errc{} ||
      std::from_chars(count_text.data(), count_text.data() + count_text.size(), count).ec != std::errc{})
    return;
  auto left = std::make_shared<std::atomic<int>>(count);
  fs.fault_errno = [step = std::string(text.substr(0, first)), code, left](std::string_view at) {
    return at == step && left->fetch_sub(1) > 0 ? code : 0;
  };
}

void install_fault_hook(Filesystem& fs, StoreOptions& options) {
  install_fault_errno(fs);
  const char* step = std::getenv("SEALFS_FAULT_STEP");
  const char* delay = std::getenv("SEALFS_FAULT_DELAY");
  const std::string wanted = step != nullptr ? step : "";
  auto delays = parse_delays(delay != nullptr ? delay : "");
  if (wanted.empty() && delays.empty()) return;
  options.fault_hook = [wanted, delays = std::move(delays)](std::string_view at) {
    if (!wanted.empty() && at == wanted) {
      syslog(LOG_ERR, "sealfs: fault injection: exiting at step %s", wanted.c_str());
      ::_exit(75);
    }
    if (auto it = delays.find(at); it != delays.end())
      std::this_thread::sleep_for(std::chrono::milliseconds(it->second));
    return false;
  };
}
#endif

// Whatever can be checked before anything is opened: the profile loads and
// the mountpoint is a directory.
// Whether fusermount3 can be run as libfuse runs it without root: from
// /usr/bin (the FUSERMOUNT_DIR Debian's libfuse3 is built with, also the
// copy a wheel vendors), else from PATH.
bool fusermount3_found() {
  if (::access("/usr/bin/fusermount3", X_OK) == 0) return true;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    if (!dir.empty() && ::access((dir + "/fusermount3").c_str(), X_OK) == 0) return true;
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
  }
  return false;
}

Result<Profile> check_before_mount(const MountConfig& options, std::ostream& err) {
  // Without root the mount goes through the setuid fusermount3 (pip
  // installs, issue 27): say which package has it rather than libfuse's
  // "failed to exec fusermount3".
  if (::geteuid() != 0 && !fusermount3_found()) {
    err << "sealfs: fusermount3 not found (in /usr/bin or PATH); a mount without root needs it: install the "
           "fuse3 package (apt install fuse3, dnf install fuse3, zypper install fuse3)\n";
    return make_error(ENOENT, "fusermount3");
  }
  auto profile = resolve_profile(options.profile);
  if (!profile) {
    err << "sealfs: profile " << options.profile << ": " << profile.error().message << "\n";
    return profile.error();
  }
  struct stat mst {};
  const int stat_errno = ::stat(options.mountpoint.c_str(), &mst) != 0 ? errno : 0;
  const int problem = stat_errno != 0 ? stat_errno : !S_ISDIR(mst.st_mode) ? ENOTDIR : 0;
  if (problem != 0) {
    err << "sealfs: mountpoint " << options.mountpoint << ": " << errno_text(problem) << "\n";
    return make_error(problem, "mountpoint");
  }
  return profile;
}

// The mount's state with its store open on B (before mounting: after the
// mount, B's path may lead to M) and the root in the inode table.
bool open_backing(Filesystem& fs, const MountConfig& options, Profile profile, std::ostream& err) {
  fs.cache_timeout = options.cache_timeout;
  fs.max_read = options.max_read;
  // verify=always hashes at every open: it keeps OPEN.
  // A read-only mount keeps no OPEN unless -o keep_open says so (issue 25).
  fs.no_open = (options.no_open || (options.read_only && !options.keep_open)) &&
               options.store.verify != VerifyMode::always;
  fs.shared_read_opens = options.store.verify != VerifyMode::always;
  if (options.no_passthrough)
    fs.passthrough_off = "not asked for (-o passthrough)";
  else if (options.store.verify == VerifyMode::always)
    fs.passthrough_off = "-o verify=always (every READ is checked by the daemon)";
  else if (options.store.noatime)
    fs.passthrough_off =
        "-o noatime (the kernel would read B's file under the caller's open flags, moving B's access times)";
  if (char* real = ::realpath(options.mountpoint.c_str(), nullptr)) {
    fs.mountpoint = real;
    std::free(real);
  }
  fs.read_only = options.read_only;
  fs.no_opendir = options.no_opendir;
  // Pages are pushed on read-only mounts only: a push racing a write through
  // the mount can send the old bytes to B (fs/README.md "Pages pushed").
  fs.pusher.max_file = options.read_only ? options.push_max : 0;
  fs.chown_to_caller = ::geteuid() == 0;
  StoreOptions store_options = options.store;
  // The store's directory contexts count against the descriptor limit too.
  store_options.dir_contexts_max = std::clamp<std::size_t>(InodeEvictor::bound_for(descriptor_limit()) / 8,
                                                           16, store_options.dir_contexts_max);
  fs.attach_hooks(store_options);
#ifdef SEALFS_FAULT_INJECTION
  install_fault_hook(fs, store_options);
#endif
  auto store = Store::open_backing(options.backing, std::move(profile), std::move(store_options));
  if (!store) {
    err << "sealfs: backing directory " << options.backing << ": " << errno_text(store.code()) << "\n";
    return false;
  }
  fs.store = std::move(*store);
  auto root = fs.store->root();
  if (!root) {
    err << "sealfs: backing directory " << options.backing << ": " << root.error().message << "\n";
    return false;
  }
  fs.inodes.set_root(std::move(*root));
  return true;
}

// -o max_write=, async_read, …: parsed by libfuse now, applied in init.
bool parse_conn_options(Filesystem& fs, const MountConfig& options, std::ostream& err) {
  if (options.conn_options.empty()) return true;
  std::string list;
  for (const auto& o : options.conn_options) list += (list.empty() ? "" : ",") + o;
  FuseArgs conn_args;
  if (!conn_args.add("sealfs") || !conn_args.add("-o") || !conn_args.add(list)) {
    err << "sealfs: out of memory\n";
    return false;
  }
  fs.conn_opts.reset(fuse_parse_conn_info_opts(&conn_args.args));
  if (!fs.conn_opts) {
    err << "sealfs: connection options " << list << " not accepted by libfuse\n";
    return false;
  }
  return true;
}

// A FUSE session for fs, with its signal handlers, mounted; null (and a line
// on err) when any of that fails.
SessionPtr mount_session(Filesystem& fs, const MountConfig& options, std::ostream& err) {
  FuseArgs args;
  bool args_ok = args.add("sealfs") && args.add("-o") && args.add(options.fuse_options);
  if (options.debug) args_ok = args_ok && args.add("-d");
  if (!args_ok) {
    err << "sealfs: out of memory\n";
    return nullptr;
  }
  SessionPtr se(fuse_session_new(&args.args, &operations(), sizeof(fuse_lowlevel_ops), &fs));
  if (!se) {
    err << "sealfs: cannot start a FUSE session with options " << options.fuse_options << "\n";
    return nullptr;
  }
  if (fuse_set_signal_handlers(se.get()) != 0) {
    err << "sealfs: cannot install signal handlers\n";
    return nullptr;
  }
  if (!mount_holding_stop_signals(se.get(), options.mountpoint)) {
    fuse_remove_signal_handlers(se.get());
    err << "sealfs: cannot mount on " << options.mountpoint << "\n";
    return nullptr;
  }
  return se;
}

// -o metrics_file: checked and made absolute before mounting (empty: none).
struct MetricsFileSetting {
  std::string path;
  std::chrono::milliseconds interval{0};
};

std::optional<MetricsFileSetting> check_metrics_file(const MountConfig& options, std::ostream& err) {
  MetricsFileSetting setting;
  if (options.metrics_file.empty()) return setting;
  auto path = metrics_file_path(options.metrics_file, options.mountpoint, options.backing);
  if (!path) {
    err << "sealfs: metrics_file " << options.metrics_file << ": " << path.error().message << "\n";
    return std::nullopt;
  }
  setting.path = std::move(*path);
  setting.interval = std::chrono::milliseconds(static_cast<long long>(options.metrics_interval * 1000));
  return setting;
}

// Daemonize unless -f, serve until unmounted, unmount. The session loop's
// result: 0 unmounted; > 0 the signal that ended the loop (SIGTERM, SIGINT…),
// after which it unmounted cleanly; < 0 the loop failed. Nothing when it
// could not start serving (said on err or in syslog).
std::optional<int> serve(Filesystem& fs, fuse_session* se, bool foreground, const MetricsFileSetting& metrics,
                         std::ostream& err) {
  MountGuard mounted(se, fs.notices);
  // After this, stderr is /dev/null unless -f: problems go to syslog.
  if (fuse_daemonize(foreground ? 1 : 0) != 0) {
    err << "sealfs: cannot daemonize\n";
    return std::nullopt;
  }
  // Threads start only now: fuse_daemonize forks, and threads do not survive a fork.
  fs.notices.open(se);
  fs.invalidator.start(&fs.notices);
  // Files being written keep their names: their writers come back by them.
  fs.implicit.set_max_readers(fs.evictor.bound());
  fs.recount_untracked_descriptors();
  fs.evictor.start(
      &fs.notices, [&fs](const Inode& inode) { return fs.writers.in_progress(inode.dev, inode.ino); },
      [&fs] {
        fs.recount_untracked_descriptors();
        return fs.descriptors_low();
      });
  fs.pusher.start(&fs.notices);
  fs.reaper.start([&fs](fuse_ino_t ino) { end_orphaned_writer(fs, ino); });
  start_seal_journal(fs);  // after the fork: its lock and pid are the daemon's
  fs.deferred.start(kSealDelay);
  // Declared after `mounted`: its last write (the final counters) comes
  // after the loop has ended and before the unmount.
  std::optional<MetricsFile> metrics_file;
  if (!metrics.path.empty())
    metrics_file.emplace(metrics.path, metrics.interval,
                         [&fs] { return prometheus_text(fs.store->status(), fs.mountpoint); });
  std::unique_ptr<fuse_loop_config, LoopConfigDeleter> config(fuse_loop_cfg_create());
  if (!config) {
    fs.deferred.stop();
    fs.reaper.stop();
    fs.pusher.stop();
    fs.evictor.stop();
    fs.invalidator.stop();
    syslog(LOG_ERR, "sealfs: out of memory");
    return std::nullopt;
  }
  fuse_loop_cfg_set_clone_fd(config.get(), 0);
  fuse_loop_cfg_set_max_threads(config.get(), kMaxThreads);
  fuse_loop_cfg_set_idle_threads(config.get(), kMaxIdleThreads);
  return fuse_session_loop_mt(se, config.get());
}

}  // namespace

int run_mount(const MountConfig& options, std::ostream& err) {
  auto profile = check_before_mount(options, err);
  if (!profile) return 1;
  const auto metrics = check_metrics_file(options, err);
  if (!metrics) return 1;
  raise_fd_limit();
  if (const std::string problem = descriptor_limit_problem(); !problem.empty()) {
    err << problem << "\n";
    return 1;
  }
  // The kernel applied the caller's umask to every mode it sends (no
  // FUSE_CAP_DONT_MASK); the daemon's own must not mask it again. sealfs's
  // own files (manifests, quarantine) are created with explicit modes.
  ::umask(0);
  Filesystem fs;
  if (!open_backing(fs, options, std::move(*profile), err) || !parse_conn_options(fs, options, err)) return 1;
  // R4: seals journalled by a daemon that did not live to run them, before
  // anything is served (each file then shows at its first lookup).
  replay_seal_journals(fs);
  SessionPtr se = mount_session(fs, options, err);
  if (!se) return 1;
  const std::optional<int> rc = serve(fs, se.get(), options.foreground, *metrics, err);
  if (!rc) return 1;
  // Unmounted first (serve's MountGuard): a notification waiting on a
  // directory lock in the kernel then ends at once instead of holding up the
  // exit. The session must outlive the notifications in flight. No
  // notification is sent from here on (KernelNotices closed before the
  // unmount closed the device). The seals still waiting run before exit.
  fs.invalidator.stop();
  fs.pusher.stop();
  fs.evictor.stop();  // make_room still detaches cold inodes (InodeEvictor::detach_cold)
  // When the kernel ended the connection, every file had been closed (an
  // unmount, even a lazy one, ends it only once no file is open; fusectl's
  // abort is the exception) but the RELEASEs still queued were dropped: the
  // files closed are sealed here. After a stop signal a file may still be
  // open in some process (a shell's redirection closes its own copy first),
  // and sealing it would seal a file still being written: it stays in
  // progress, so foreign at the next mount.
  if (!shutdown_requested())
    if (const std::size_t released = release_closed_handles(fs); released > 0)
      syslog(LOG_INFO,
             "sealfs: %zu files closed before the unmount, whose RELEASE the kernel dropped, sealed at exit",
             released);
  fs.deferred.stop();
  fs.reaper.stop();
  stop_seal_journal(fs);
  // ECONNABORTED: the kernel ended the connection with requests still
  // queued (an unmount right after a burst of closes, or fusectl's abort):
  // the mount is gone as after any unmount, and what was closed is sealed.
  if (*rc < 0 && *rc != -ECONNABORTED) {
    err << "sealfs: session loop failed: " << errno_text(-*rc) << "\n";
    syslog(LOG_ERR, "sealfs: session loop failed: %s", errno_text(-*rc).c_str());
    return 1;
  }
  return 0;
}

}  // namespace sealfs::fuse
