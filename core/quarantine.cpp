#include "core/quarantine.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>

#include "core/store.hpp"
#include "core/store_paths.hpp"
#include "core/unique_fd.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kReasonFile = "reason.json";

std::string utc_stamp(const struct timespec& now, bool compact) {
  struct tm tm {};
  ::gmtime_r(&now.tv_sec, &tm);
  char buf[64];
  if (compact) {
    // Sorts chronologically by name: the slot name is its age.
    std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

std::string reason_json(std::string_view rel, std::string_view reason, std::string_view time) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("path");
  w.String(rel.data(), static_cast<rapidjson::SizeType>(rel.size()));
  w.Key("reason");
  w.String(reason.data(), static_cast<rapidjson::SizeType>(reason.size()));
  w.Key("time");
  w.String(time.data(), static_cast<rapidjson::SizeType>(time.size()));
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

Status write_small_file(int dir_fd, std::string_view name, std::string_view data) {
  int raw = ::openat(dir_fd, std::string(name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) return errno_error("create " + std::string(name));
  UniqueFd fd(raw);
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("write " + std::string(name));
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// Bytes held under dir_fd/name, not following symlinks; depth-bounded.
std::uint64_t tree_bytes(int dir_fd, const std::string& name, int depth) {
  auto st = stat_at(dir_fd, name);
  if (!st) return 0;
  if (!S_ISDIR(st->st_mode)) return static_cast<std::uint64_t>(st->st_size);
  if (depth > kMaxTreeDepth) return 0;
  auto sub = open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
  if (!sub) return 0;
  auto children = read_dir(sub->get());
  if (!children) return 0;
  std::uint64_t total = 0;
  for (const auto& c : *children) total += tree_bytes(sub->get(), c.name, depth + 1);
  return total;
}

}  // namespace

Quarantine::Quarantine(int root_fd, std::uint64_t max_objects, std::uint64_t max_bytes, Metrics& metrics)
    : root_fd_(root_fd), max_objects_(max_objects), max_bytes_(max_bytes), metrics_(metrics) {}

Result<bool> Quarantine::move(const Request& request) {
  std::lock_guard lock(mu_);
  // Re-check under the name: another thread or host may have replaced the
  // object since it was judged; then there is nothing of ours to move.
  auto now_st = stat_at(request.parent_fd, request.name);
  if (!now_st) return false;
  if (now_st->st_dev != request.dev || now_st->st_ino != request.ino) return false;

  auto qdir = open_beneath(root_fd_, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!qdir) return qdir.error();
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  char tail[64];
  std::snprintf(tail, sizeof tail, "-%ld-%06llu", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(++seq_));
  const std::string slot = utc_stamp(now, true) + tail;
  if (::mkdirat(qdir->get(), slot.c_str(), 0700) != 0) return errno_error("mkdir quarantine slot " + slot);
  auto slot_fd = open_beneath(qdir->get(), slot, O_PATH | O_DIRECTORY);
  if (!slot_fd) return slot_fd.error();
  // The reason goes in first, so a slot never holds an object without it.
  Status wrote = write_small_file(slot_fd->get(), kReasonFile,
                                  reason_json(request.rel, request.reason, utc_stamp(now, false)));
  if (!wrote) {
    static_cast<void>(remove_tree_at(qdir->get(), slot));  // best effort: the error reported is the write's
    return wrote.error();
  }
  const std::string target_name = request.name == kReasonFile ? "object." + request.name : request.name;
  if (::renameat(request.parent_fd, request.name.c_str(), slot_fd->get(), target_name.c_str()) != 0) {
    Error e = errno_error("rename into quarantine " + request.rel);
    static_cast<void>(remove_tree_at(qdir->get(), slot));  // best effort: the empty slot only
    if (e.code == ENOENT) return false;  // gone meanwhile: nothing to quarantine
    return e;
  }
  for (const auto& c : request.companions) {
    if (::renameat(request.parent_fd, c.c_str(), slot_fd->get(), c.c_str()) != 0 && errno != ENOENT)
      std::fprintf(stderr, "sealfs: quarantine %s: cannot move %s along (errno %d)\n", request.rel.c_str(), c.c_str(),
                   errno);
  }
  metrics_.quarantined.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "sealfs: quarantined %s: %s (in %s/%s)\n", request.rel.c_str(), request.reason.c_str(),
               std::string(kQuarantineDir).c_str(), slot.c_str());
  Status bounded = enforce_bounds(slot);
  if (!bounded)
    std::fprintf(stderr, "sealfs: quarantine bounds: %s\n", bounded.error().message.c_str());
  return true;
}

Result<std::vector<std::string>> Quarantine::slots() const {
  auto qdir = open_beneath(root_fd_, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!qdir) return qdir.error();
  auto children = read_dir(qdir->get());
  if (!children) return children.error();
  std::vector<std::string> names;
  for (auto& c : *children) names.push_back(std::move(c.name));
  std::sort(names.begin(), names.end());
  return names;
}

// Removes the oldest slots while there are more than max_objects or they hold
// more than max_bytes. The slot just made (`keep`) is never removed, so the
// newest evidence survives even when it alone exceeds the byte bound.
Status Quarantine::enforce_bounds(const std::string& keep) {
  auto names = slots();
  if (!names) return names.error();
  auto qdir = open_beneath(root_fd_, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!qdir) return qdir.error();
  std::vector<std::uint64_t> bytes;
  std::uint64_t total = 0;
  for (const auto& n : *names) {
    bytes.push_back(tree_bytes(qdir->get(), n, 0));
    total += bytes.back();
  }
  std::uint64_t count = names->size();
  for (std::size_t i = 0; i < names->size() && (count > max_objects_ || total > max_bytes_); ++i) {
    if ((*names)[i] == keep) continue;
    Status s = remove_tree_at(qdir->get(), (*names)[i]);
    if (!s) return s;
    --count;
    total -= bytes[i];
  }
  return {};
}

}  // namespace sealfs
