// The quarantine read back (quarantine_report.hpp): slots, their reasons and
// bytes, and the marker of the last fsck.
#include "core/store/quarantine_report.hpp"

#include <fcntl.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kReasonFile = "reason.json";
// reason.json is a few hundred bytes (a long path, a list of companions left
// behind); anything past this is no reason the quarantine wrote.
constexpr std::size_t kMaxReasonBytes = std::size_t{256} * 1024;
// The marker holds one slot name and a newline.
constexpr std::size_t kMaxMarkerBytes = 512;

std::string describe(const Error& e) { return e.message + ": " + std::strerror(e.code); }

// A bounded read of dir_fd/name, which must be a regular file: never follows
// a symlink, never blocks on a FIFO put there.
Result<std::string> read_small_file(int dir_fd, std::string_view name, std::size_t limit) {
  auto fd = open_beneath(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (!fd) return fd.error();
  auto st = stat_fd(fd->get());
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode)) return make_error(EINVAL, std::string(name) + " is not a regular file");
  if (static_cast<std::uint64_t>(st->st_size) > limit)
    return make_error(EFBIG, std::string(name) + " is " + std::to_string(st->st_size) + " bytes, more than " +
                                 std::to_string(limit));
  std::string text(limit + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::pread(fd->get(), text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read " + std::string(name));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > limit)
    return make_error(EFBIG, std::string(name) + " grew past " + std::to_string(limit) + " bytes");
  text.resize(got);
  return text;
}

std::string string_member(const rapidjson::Value& obj, const char* key) {
  if (!obj.HasMember(key) || !obj[key].IsString()) return {};
  return {obj[key].GetString(), obj[key].GetStringLength()};
}

// The record of one slot (slot_fd: the slot directory); an error says why
// its reason.json is unreadable.
Result<QuarantinedSlot> read_reason(int slot_fd, const std::string& slot) {
  auto text = read_small_file(slot_fd, kReasonFile, kMaxReasonBytes);
  if (!text) {
    if (text.code() == ENOENT) return make_error(ENOENT, "no " + std::string(kReasonFile));
    return make_error(text.code(), std::string(kReasonFile) + " unreadable: " + describe(text.error()));
  }
  rapidjson::Document doc;
  doc.Parse(text->data(), text->size());
  if (doc.HasParseError() || !doc.IsObject())
    return make_error(EBADMSG, std::string(kReasonFile) + " is not a JSON object");
  QuarantinedSlot r;
  r.slot = slot;
  r.path = string_member(doc, "path");
  r.reason = string_member(doc, "reason");
  r.time = string_member(doc, "time");
  if (r.path.empty() || r.reason.empty() || r.time.empty())
    return make_error(EBADMSG, std::string(kReasonFile) + " lacks its path, reason or time");
  if (doc.HasMember("dropped")) {
    r.dropped = doc["dropped"].IsObject() ? string_member(doc["dropped"], "why") : std::string();
    if (r.dropped.empty()) r.dropped = "dropped";
  }
  return r;
}

// The marker: a slot name, or "" when there is none.
Result<std::string> read_marker(int root_fd) {
  auto text = read_small_file(root_fd, kFsckSeenFile, kMaxMarkerBytes);
  if (!text) {
    if (text.code() == ENOENT) return std::string();
    return make_error(text.code(), describe(text.error()));
  }
  std::string name = *text;
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (!is_slot_name(name)) return make_error(EBADMSG, "does not name a quarantine slot");
  return name;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

// The names in the quarantine, newest slot first; ENOENT: none.
Result<std::vector<DirChild>> quarantine_children(int root_fd, UniqueFd& qdir) {
  auto dir = open_beneath(root_fd, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!dir) return dir.error();
  qdir = std::move(*dir);
  auto children = read_dir(qdir.get());
  if (!children) return children.error();
  std::ranges::sort(*children, std::greater<>(), &DirChild::name);
  return children;
}

}  // namespace

bool is_slot_name(std::string_view name) {
  // <YYYYMMDD>T<HHMMSS>.<9 digits>Z-<pid>-<seq>, as Quarantine names them.
  constexpr std::size_t kStamp = 8 + 1 + 6 + 1 + 9 + 1;
  if (name.size() < kStamp + 4) return false;
  const std::string_view stamp = name.substr(0, kStamp);
  if (!all_digits(stamp.substr(0, 8)) || stamp[8] != 'T' || !all_digits(stamp.substr(9, 6)) ||
      stamp[15] != '.' || !all_digits(stamp.substr(16, 9)) || stamp[25] != 'Z')
    return false;
  std::string_view rest = name.substr(kStamp);
  if (rest.front() != '-') return false;
  rest.remove_prefix(1);
  const std::size_t dash = rest.find('-');
  return dash != std::string_view::npos && all_digits(rest.substr(0, dash)) &&
         all_digits(rest.substr(dash + 1));
}

Result<std::uint64_t> allocated_bytes(int dir_fd, const std::string& name, int depth) {
  auto st = stat_at(dir_fd, name);
  if (!st) return st.code() == ENOENT ? Result<std::uint64_t>(0) : Result<std::uint64_t>(st.error());
  std::uint64_t total = static_cast<std::uint64_t>(st->st_blocks) * 512;
  if (!S_ISDIR(st->st_mode) || depth >= kMaxTreeDepth) return total;
  auto sub = open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
  if (!sub) return sub.code() == ENOENT ? Result<std::uint64_t>(total) : Result<std::uint64_t>(sub.error());
  auto children = read_dir(sub->get());
  if (!children) return children.error();
  for (const auto& c : *children) {
    auto b = allocated_bytes(sub->get(), c.name, depth + 1);
    if (!b) return b.error();
    total += *b;
  }
  return total;
}

Result<QuarantineSummary> summarize_quarantine(int root_fd, std::size_t newest_max) {
  QuarantineSummary sum;
  if (auto marker = read_marker(root_fd))
    sum.marker = std::move(*marker);
  else
    sum.marker_problem = std::string(kFsckSeenFile) + ": " + marker.error().message;
  UniqueFd qdir;
  auto children = quarantine_children(root_fd, qdir);
  if (!children) {
    if (children.code() == ENOENT) return sum;
    return make_error(children.code(), std::string(kQuarantineDir) + ": " + describe(children.error()));
  }
  // Newest first: the reasons kept are those of the newest fresh slots.
  for (const DirChild& child : *children) {
    const std::string& name = child.name;
    auto st = stat_at(qdir.get(), name);
    if (!st && st.code() == ENOENT) continue;  // gone since it was listed
    ++sum.held;
    if (!st) {
      sum.unreadable.push_back(name + ": " + describe(st.error()));
      continue;
    }
    std::uint64_t bytes = 0;
    if (auto b = allocated_bytes(qdir.get(), name)) {
      bytes = *b;
    } else {
      sum.measured = false;
    }
    sum.held_bytes += bytes;
    if (!S_ISDIR(st->st_mode) || !is_slot_name(name)) {
      // Not the quarantine's: it cannot be dated, so it is never new.
      sum.unreadable.push_back(name + ": not a quarantine slot");
      continue;
    }
    const bool fresh = name > sum.marker;
    if (fresh) {
      ++sum.fresh;
      sum.fresh_bytes += bytes;
    }
    auto slot = open_beneath(qdir.get(), name, O_PATH | O_DIRECTORY);
    Result<QuarantinedSlot> record =
        slot ? read_reason(slot->get(), name) : Result<QuarantinedSlot>(slot.error());
    if (!record) {
      sum.unreadable.push_back(name + ": " + record.error().message);
      continue;
    }
    record->bytes = bytes;
    if (fresh && sum.newest.size() < newest_max) sum.newest.push_back(std::move(*record));
  }
  std::ranges::reverse(sum.unreadable);  // name order, as the quarantine lists them
  return sum;
}

Result<std::string> newest_quarantine_slot(int root_fd) {
  UniqueFd qdir;
  auto children = quarantine_children(root_fd, qdir);
  if (!children) return children.code() == ENOENT ? Result<std::string>(std::string()) : children.error();
  for (const DirChild& child : *children)
    if (is_slot_name(child.name)) return child.name;
  return std::string();
}

namespace {

// kFsckSeenFile's name inside B/.sealfs.
std::string marker_name() { return std::string(kFsckSeenFile.substr(kStateDir.size() + 1)); }

}  // namespace

Status forget_quarantine_marker(int root_fd) {
  auto state = open_beneath(root_fd, kStateDir, O_PATH | O_DIRECTORY);
  if (!state) return state.error();
  if (::unlinkat(state->get(), marker_name().c_str(), 0) != 0 && errno != ENOENT)
    return errno_error("remove " + std::string(kFsckSeenFile));
  return sync_dir(state->get());
}

Status mark_quarantine_seen(int root_fd, std::string_view slot) {
  auto state = open_beneath(root_fd, kStateDir, O_PATH | O_DIRECTORY);
  if (!state) return state.error();
  const std::string final_name = marker_name();
  const std::string tmp = final_name + ".tmp." + std::to_string(::getpid());
  // One fsck per pid at a time: a leftover of a crashed one under this name is stale.
  ::unlinkat(state->get(), tmp.c_str(), 0);
  int raw = ::openat(state->get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) return errno_error("create " + std::string(kStateDir) + "/" + tmp);
  UniqueFd fd(raw);
  const std::string text = std::string(slot) + "\n";
  std::size_t done = 0;
  Status wrote;
  while (done < text.size() && wrote) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      wrote = errno_error("write " + tmp);
    else
      done += static_cast<std::size_t>(n);
  }
  // On disk before the name points at it: a power cut leaves the old marker or the new one.
  if (wrote) wrote = sync_fd(fd.get());
  if (wrote && ::renameat(state->get(), tmp.c_str(), state->get(), final_name.c_str()) != 0)
    wrote = errno_error("rename " + tmp);
  if (!wrote) {
    ::unlinkat(state->get(), tmp.c_str(), 0);
    return wrote;
  }
  return sync_dir(state->get());
}

}  // namespace sealfs
