#include "fs/fuse/session.hpp"

#include <fuse_lowlevel.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/base/cancel.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/store.hpp"
#include "core/verify/validator.hpp"
#include "fs/fuse/filesystem.hpp"

namespace sealfs::fs {
namespace {

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

// Mounted while alive; unmounts (and stops taking signals) on every way out.
class MountGuard {
 public:
  explicit MountGuard(fuse_session* se) : se_(se) {}
  ~MountGuard() {
    fuse_session_unmount(se_);
    fuse_remove_signal_handlers(se_);
  }
  MountGuard(const MountGuard&) = delete;
  MountGuard& operator=(const MountGuard&) = delete;

 private:
  fuse_session* se_;
};

std::string errno_text(int code) { return std::strerror(code); }

// Every inode the kernel holds (each cached dentry below M) keeps an O_PATH
// fd to its backing object, so a large cache needs far more than the usual
// soft limit of 1024: take the hard limit, as a service manager's
// LimitNOFILE= would. The hard limit itself is left to the administrator.
void raise_fd_limit() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
    syslog(LOG_WARNING, "sealfs: cannot raise the open file limit: %s", std::strerror(errno));
}

// SIGTERM, SIGINT, SIGHUP: libfuse's handlers end the session loop, which
// then waits for the requests in flight. A hash of a huge or slow file would
// hold that up for minutes, so the hashes are cancelled first (R2: no entry,
// however large, may hold up the daemon; `sealfs-mountctl clear-stale`
// remains for a daemon killed with SIGKILL).
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};
struct sigaction g_libfuse_handlers[std::size(kStopSignals)];

void on_stop_signal(int sig) {
  request_shutdown();
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    const auto& chained = g_libfuse_handlers[i];
    if (kStopSignals[i] == sig && chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN)
      chained.sa_handler(sig);
  }
}

// After fuse_set_signal_handlers: wraps each of its handlers.
bool cancel_hashes_on_stop_signals() {
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(kStopSignals[i], &sa, &g_libfuse_handlers[i]) != 0) return false;
  }
  return true;
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

void install_fault_hook(StoreOptions& options) {
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

}  // namespace

int run_mount(const MountOptions& options, std::ostream& err) {
  auto profile = resolve_profile(options.profile);
  if (!profile) {
    err << "sealfs: profile " << options.profile << ": " << profile.error().message << "\n";
    return 1;
  }
  struct stat mst {};
  if (::stat(options.mountpoint.c_str(), &mst) != 0) {
    err << "sealfs: mountpoint " << options.mountpoint << ": " << errno_text(errno) << "\n";
    return 1;
  }
  if (!S_ISDIR(mst.st_mode)) {
    err << "sealfs: mountpoint " << options.mountpoint << ": " << errno_text(ENOTDIR) << "\n";
    return 1;
  }

  raise_fd_limit();
  // The kernel applied the caller's umask to every mode it sends (no
  // FUSE_CAP_DONT_MASK); the daemon's own must not mask it again. sealfs's
  // own files (manifests, quarantine) are created with explicit modes.
  ::umask(0);
  Filesystem fs;
  fs.cache_timeout = options.cache_timeout;
  fs.max_read = options.max_read;
  fs.chown_to_caller = ::geteuid() == 0;

  StoreOptions store_options;
  store_options.durability = options.durability;
  store_options.verify = options.verify;
  store_options.verdict_ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(options.cache_timeout));
  store_options.validators = default_validators(options.cuda_validate);
  fs.attach_hooks(store_options);
#ifdef SEALFS_FAULT_INJECTION
  install_fault_hook(store_options);
#endif

  // B is opened before mounting: after the mount, B's path may lead to M.
  auto store = Store::open_backing(options.backing, std::move(*profile), std::move(store_options));
  if (!store) {
    err << "sealfs: backing directory " << options.backing << ": " << errno_text(store.code()) << "\n";
    return 1;
  }
  fs.store = std::move(*store);
  auto root = fs.store->root();
  if (!root) {
    err << "sealfs: backing directory " << options.backing << ": " << root.error().message << "\n";
    return 1;
  }
  fs.inodes.set_root(std::move(*root));

  if (!options.conn_options.empty()) {
    std::string list;
    for (const auto& o : options.conn_options) list += (list.empty() ? "" : ",") + o;
    FuseArgs conn_args;
    if (!conn_args.add("sealfs") || !conn_args.add("-o") || !conn_args.add(list)) {
      err << "sealfs: out of memory\n";
      return 1;
    }
    fs.conn_opts.reset(fuse_parse_conn_info_opts(&conn_args.args));
    if (!fs.conn_opts) {
      err << "sealfs: connection options " << list << " not accepted by libfuse\n";
      return 1;
    }
  }

  FuseArgs args;
  bool args_ok = args.add("sealfs") && args.add("-o") && args.add(fuse_option_string(options));
  if (options.debug) args_ok = args_ok && args.add("-d");
  if (!args_ok) {
    err << "sealfs: out of memory\n";
    return 1;
  }
  SessionPtr se(fuse_session_new(&args.args, &operations(), sizeof(fuse_lowlevel_ops), &fs));
  if (!se) {
    err << "sealfs: cannot start a FUSE session with options " << fuse_option_string(options) << "\n";
    return 1;
  }
  if (fuse_set_signal_handlers(se.get()) != 0 || !cancel_hashes_on_stop_signals()) {
    err << "sealfs: cannot install signal handlers\n";
    return 1;
  }
  if (fuse_session_mount(se.get(), options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se.get());
    err << "sealfs: cannot mount on " << options.mountpoint << "\n";
    return 1;
  }
  int rc = 0;
  {
    MountGuard mounted(se.get());
    // After this, stderr is /dev/null unless -f: problems go to syslog.
    if (fuse_daemonize(options.foreground ? 1 : 0) != 0) {
      err << "sealfs: cannot daemonize\n";
      return 1;
    }
    // Threads start only now: fuse_daemonize forks, and threads do not survive a fork.
    fs.invalidator.start(se.get());
    std::unique_ptr<fuse_loop_config, LoopConfigDeleter> config(fuse_loop_cfg_create());
    if (!config) {
      fs.invalidator.stop();
      syslog(LOG_ERR, "sealfs: out of memory");
      return 1;
    }
    fuse_loop_cfg_set_clone_fd(config.get(), 0);
    fuse_loop_cfg_set_max_threads(config.get(), kMaxThreads);
    fuse_loop_cfg_set_idle_threads(config.get(), kMaxIdleThreads);
    rc = fuse_session_loop_mt(se.get(), config.get());
  }
  // Unmounted first: a notification waiting on a directory lock in the kernel
  // then ends at once instead of holding up the exit. The session must
  // outlive the notifications in flight.
  fs.invalidator.stop();
  // 0: unmounted; > 0: the signal that ended the loop (SIGTERM, SIGINT…),
  // after which we unmounted cleanly; < 0: the loop failed.
  if (rc < 0) {
    err << "sealfs: session loop failed: " << errno_text(-rc) << "\n";
    syslog(LOG_ERR, "sealfs: session loop failed: %s", errno_text(-rc).c_str());
    return 1;
  }
  return 0;
}

}  // namespace sealfs::fs
