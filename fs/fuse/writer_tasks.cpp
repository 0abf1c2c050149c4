#include "fs/fuse/writer_tasks.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/base/unique_fd.hpp"

namespace sealfs::fuse {
namespace {

constexpr std::uint64_t kPfExiting = 0x4;  // include/linux/sched.h
constexpr int kFlagsField = 9;             // proc_pid_stat(5), 1-based
constexpr int kExitCodeField = 52;
constexpr std::uint64_t kSignalBits = 0x7f;  // the wait status's signal number (WTERMSIG)

bool parse_u64(std::string_view text, std::uint64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size();
}

}  // namespace

CloserState closer_state_from_stat(std::string_view text) {
  // Field 2 is "(comm)", which may itself hold spaces and parentheses: the
  // fields after it start after the LAST ')'.
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return CloserState::normal;
  std::string_view rest = text.substr(close + 1);
  int field = 2;
  std::uint64_t flags = 0;
  std::uint64_t exit_code = 0;
  bool have_flags = false;
  bool have_exit = false;
  while (!rest.empty()) {
    const auto start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const auto end = std::min(rest.find(' '), rest.size());
    std::string_view value = rest.substr(0, end);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    ++field;
    if (field == kFlagsField) have_flags = parse_u64(value, flags);
    if (field == kExitCodeField) {
      have_exit = parse_u64(value, exit_code);
      break;
    }
    rest.remove_prefix(end);
  }
  if (!have_flags || !have_exit) return CloserState::normal;
  // R4: only a death abandons. `cmd > f; exit 1` keeps f: a failing
  // build's log is output like any other.
  const bool killed = (exit_code & kSignalBits) != 0;
  return (flags & kPfExiting) != 0 && killed ? CloserState::abandoned : CloserState::normal;
}

namespace {

// The text of a /proc file; empty when it cannot be read.
std::string read_text(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return {};
  std::string text(4096, '\0');
  std::size_t used = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += static_cast<std::size_t>(n);
    if (used == text.size()) text.resize(text.size() * 2);
  }
  text.resize(used);
  return text;
}

std::string proc_text(pid_t tid, const std::string& file) {
  return read_text("/proc/" + std::to_string(tid) + "/" + file);
}

// The value of a "Key:" line of a /proc status or fdinfo text (key given with
// its leading newline, e.g. "\nTgid:"), blanks after the colon skipped;
// nullopt when there is no such line.
std::optional<std::string_view> line_value(std::string_view text, std::string_view key) {
  const auto at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + key.size());
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  return rest.substr(0, rest.find('\n'));
}

// A numeric line_value; 0 when absent or not a number.
std::uint64_t line_number(std::string_view text, std::string_view key) {
  const auto value = line_value(text, key);
  std::uint64_t n = 0;
  return value && parse_u64(*value, n) ? n : 0;
}

}  // namespace

bool status_shows_memory(std::string_view status_text) {
  return line_value(status_text, "\nVmSize:").has_value();
}

CloserState closer_state_of(pid_t tid) {
  if (tid <= 0) return CloserState::normal;  // the kernel could not name the task (other pid namespace)
  const std::string status = proc_text(tid, "status");
  if (status.empty() || status_shows_memory(status)) return CloserState::normal;  // alive, or in exec
  return closer_state_from_stat(proc_text(tid, "stat"));
}

pid_t thread_group_from_status(std::string_view text, pid_t tid) {
  const std::uint64_t group = line_number(text, "\nTgid:");
  return group == 0 ? tid : static_cast<pid_t>(group);
}

pid_t thread_group_of(pid_t tid) {
  if (tid <= 0) return tid;
  return thread_group_from_status(proc_text(tid, "status"), tid);
}

namespace {

// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string mountinfo_escaped(std::string_view path) {
  std::string out;
  for (const char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\%03o", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

namespace {

// One line of mountinfo: id parent major:minor root mountpoint options
// [optional…] - fstype source super. nullopt for a line that does not parse
// or is not FUSE.
struct FuseMountLine {
  std::uint64_t id = 0;
  std::string_view device;
  std::string_view point;
};

std::optional<FuseMountLine> fuse_line(std::string_view line) {
  std::string_view fields[5];
  std::string_view rest = line;
  for (auto& field : fields) {
    const auto sp = rest.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    field = rest.substr(0, sp);
    rest.remove_prefix(sp + 1);
  }
  const auto dash = line.find(" - ");
  FuseMountLine out;
  if (dash == std::string_view::npos || !parse_u64(fields[0], out.id)) return std::nullopt;
  const std::string_view fstype = line.substr(dash + 3, line.find(' ', dash + 3) - (dash + 3));
  if (fstype != "fuse" && !fstype.starts_with("fuse.")) return std::nullopt;
  out.device = fields[2];
  out.point = fields[4];
  return out;
}

template <typename Fn>
void each_fuse_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const auto eol = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(std::min(eol + 1, text.size()));
    if (auto parsed = fuse_line(line)) fn(*parsed);
  }
}

}  // namespace

std::uint64_t fuse_mount_id(std::string_view text, std::string_view mountpoint) {
  const std::string wanted = mountinfo_escaped(mountpoint);
  std::uint64_t found = 0;
  each_fuse_line(text, [&](const FuseMountLine& m) {
    if (m.point == wanted) found = m.id;  // later lines are mounted on top
  });
  return found;
}

std::string fuse_mount_device(std::string_view text, std::string_view mountpoint) {
  const std::string wanted = mountinfo_escaped(mountpoint);
  std::string found;
  each_fuse_line(text, [&](const FuseMountLine& m) {
    if (m.point == wanted) found = std::string(m.device);
  });
  return found;
}

std::vector<std::uint64_t> fuse_mount_ids_of_device(std::string_view text, std::string_view device) {
  std::vector<std::uint64_t> ids;
  if (device.empty()) return ids;
  each_fuse_line(text, [&](const FuseMountLine& m) {
    if (m.device == device) ids.push_back(m.id);
  });
  return ids;
}

std::vector<std::uint64_t> fuse_mount_ids_seen_by(pid_t tgid, std::string_view device) {
  if (tgid <= 0 || device.empty()) return {};
  return fuse_mount_ids_of_device(proc_text(tgid, "mountinfo"), device);
}

std::uint64_t fuse_mount_id_of(std::string_view mountpoint) {
  return fuse_mount_id(read_text("/proc/self/mountinfo"), mountpoint);
}

std::string fuse_mount_device_of(std::string_view mountpoint) {
  return fuse_mount_device(read_text("/proc/self/mountinfo"), mountpoint);
}

bool process_holds(pid_t tgid, ino_t ino, std::uint64_t mount_id) {
  return process_holds(tgid, ino, mount_id == 0 ? std::vector<std::uint64_t>{} : std::vector{mount_id});
}

bool process_holds(pid_t tgid, ino_t ino, const std::vector<std::uint64_t>& mount_ids) {
  if (tgid <= 0 || ino == 0) return false;
  const std::string base = "/proc/" + std::to_string(tgid);
  UniqueFd dir_fd(::open((base + "/fdinfo").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return false;
  DIR* dir = ::fdopendir(dir_fd.get());
  if (dir == nullptr) return false;
  (void)dir_fd.release();
  bool holds = false;
  char text[4096];
  while (const dirent* d = ::readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    UniqueFd info(::openat(::dirfd(dir), d->d_name, O_RDONLY | O_CLOEXEC));
    if (!info) continue;  // closed meanwhile
    const ssize_t n = ::read(info.get(), text, sizeof text - 1);
    if (n <= 0) continue;
    const std::string_view fields(text, static_cast<std::size_t>(n));
    if (line_number(fields, "\nino:") != ino) continue;
    if (mount_ids.empty() ||
        std::find(mount_ids.begin(), mount_ids.end(), line_number(fields, "\nmnt_id:")) != mount_ids.end()) {
      holds = true;
      break;
    }
  }
  ::closedir(dir);
  return holds;
}

bool writer_visible(pid_t tid) {
  if (tid <= 0) return false;
  // A permission check, not an open: a daemon out of descriptors (EMFILE)
  // must not take a writer it can see for one it cannot (R4 would refuse its
  // writes with EPERM). fdinfo's permission is the ptrace check an open makes.
  const std::string fdinfo = "/proc/" + std::to_string(tid) + "/fdinfo";
  return ::faccessat(AT_FDCWD, fdinfo.c_str(), R_OK | X_OK, AT_EACCESS) == 0;
}

bool proc_is_own_namespace() {
  char target[32] = {};
  const ssize_t n = ::readlink("/proc/self", target, sizeof target - 1);
  if (n <= 0) return false;
  std::uint64_t pid = 0;
  return parse_u64(std::string_view(target, static_cast<std::size_t>(n)), pid) &&
         pid == static_cast<std::uint64_t>(::getpid());
}

bool process_gone(pid_t tgid) {
  if (tgid <= 0) return false;
  const std::string text = proc_text(tgid, "status");
  if (text.empty()) return true;
  const auto state_line = line_value(text, "\nState:");  // "Z (zombie)", "X (dead)"
  if (!state_line || state_line->empty()) return false;
  const char state = state_line->front();
  return state == 'Z' || state == 'X' || state == 'x';
}

}  // namespace sealfs::fuse
