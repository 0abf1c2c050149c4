#include "fs/fuse/metrics_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "fs/fuse/running_thread.hpp"

namespace sealfs::fuse {
namespace {

Result<std::string> real_path(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return errno_error(path + ": " + std::strerror(errno));
  std::string out(real);
  std::free(real);
  return out;
}

// Whether path is dir or lies below it (both real paths).
bool is_within(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir ||
         (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

}  // namespace

Result<std::string> metrics_file_path(const std::string& path, const std::string& mountpoint,
                                      const std::string& backing) {
  const auto slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (name.empty() || name == "." || name == "..")
    return make_error(EINVAL, "the path must end in a file, not a directory");
  auto real_dir = real_path(dir);
  if (!real_dir) return make_error(real_dir.code(), "directory " + real_dir.error().message);
  struct stat st {};
  if (::stat(real_dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(ENOTDIR, "directory " + dir + ": not a directory");
  const std::string full = (*real_dir == "/" ? "" : *real_dir) + "/" + name;
  if (::stat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return make_error(EISDIR, "is a directory");
  for (const auto* where : {&mountpoint, &backing}) {
    auto real = real_path(*where);
    if (real && is_within(full, *real))
      return make_error(EINVAL, std::string("must lie outside the ") +
                                    (where == &mountpoint ? "mountpoint " : "backing directory ") + *real);
  }
  return full;
}

Status write_file_replacing(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return errno_error("open " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e = errno_error("write " + tmp + ": " + std::strerror(errno));
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd.release()) != 0) {  // NFS and quotas report late
    Error e = errno_error("close " + tmp + ": " + std::strerror(errno));
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = errno_error("rename " + tmp + " to " + path + ": " + std::strerror(errno));
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

MetricsFile::MetricsFile(std::string path, std::chrono::milliseconds interval, Render render, Log log)
    : path_(std::move(path)), interval_(interval), render_(std::move(render)), log_(std::move(log)) {
  if (!log_) log_ = [](const std::string& line) { syslog(LOG_WARNING, "%s", line.c_str()); };
  thread_ = start_running_thread([this] { run(); });
}

MetricsFile::~MetricsFile() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MetricsFile::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    write_once();
    lock.lock();
    cv_.wait_for(lock, interval_, [this] { return stopping_; });
  }
  lock.unlock();
  write_once();  // the counters as the mount ends
}

void MetricsFile::write_once() {
  Status wrote;
  try {
    wrote = write_file_replacing(path_, render_());
  } catch (const std::bad_alloc&) {
    wrote = make_error(ENOMEM, "out of memory");
  }
  if (!wrote && !failing_) {
    failing_ = true;
    log_("sealfs: metrics_file " + path_ + ": " + wrote.error().message + " (trying again every interval)");
  } else if (wrote && failing_) {
    failing_ = false;
    log_("sealfs: metrics_file " + path_ + ": written again");
  }
}

}  // namespace sealfs::fuse
