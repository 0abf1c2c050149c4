// `sealfs BACKING MOUNTPOINT -o remount,ro|rw,…`: what mount(8) runs,
// through mount.fuse3, for `mount -o remount,ro M` on a fuse.sealfs mount
// (issue 27 point 3). The kernel flips a FUSE superblock between ro and rw
// itself (MS_REMOUNT) but sends the daemon no request for it, so this
// process tells the daemon through the mount root's reserved extended
// attribute (fuse::kRemountXattr) and makes the mount(2) call.
//
//   ro: the daemon is told first and runs every seal still waiting
//       (DeferredSeals), then the superblock goes read-only; the kernel
//       refuses that (EBUSY) while a file on M is open for writing, and the
//       daemon is then told rw again.
//   rw: refused for a mount made with -o ro: the kernel has already been
//       told that it never sends FLUSH there (it remembers an ENOSYS for
//       good), and R4 needs FLUSH for writers. Otherwise the superblock goes
//       read-write, then the daemon is told.
//
// Every other option of the list is what mount(8) carries over from the
// mount table and fstab (nosuid, user_id=, profile=…): checked, and left as
// it is. The mount's own flags (nosuid, nodev, noexec, atime) are kept.
#include "fs/fuse/remount.hpp"

#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"

namespace sealfs::cli {
namespace {

// Options that mount(8) copies from the mount table which mean nothing to
// a remount of sealfs (FUSE's kernel options, fixed at mount time).
constexpr std::array<std::string_view, 6> kCarriedPrefixes = {
    "user_id=", "group_id=", "blksize=", "remount", "ro", "rw"};

std::vector<std::string> tokens_of(const std::vector<std::string>& lists) {
  std::vector<std::string> tokens;
  for (const auto& list : lists) {
    std::istringstream in(list);
    for (std::string token; std::getline(in, token, ',');)
      if (!token.empty()) tokens.push_back(token);
  }
  return tokens;
}

bool carried(const std::string& token) {
  for (auto prefix : kCarriedPrefixes) {
    if (prefix.back() == '=' ? token.rfind(prefix, 0) == 0 : token == prefix) return true;
  }
  return token == "strictatime" || token == "nodiratime";  // as the mount table may show them
}

// mountinfo's escapes (\040 for a space, \011, \012, \134) undone.
std::string unescape(const std::string& field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out.push_back(static_cast<char>(std::strtol(field.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// The file system type of the mount at path in this namespace (the last one
// mounted there), "" when path is no mount point.
std::string mount_type(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string type;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point, field;
    fields >> id >> parent >> device >> root >> point;
    if (unescape(point) != path) continue;
    while (fields >> field && field != "-") {
    }
    fields >> type;
  }
  return type;
}

// The flags of a remount that keeps the mount's own flags, read or written.
unsigned long remount_flags(const struct statvfs& st, bool read_only) {
  unsigned long flags = MS_REMOUNT;
  if (read_only) flags |= MS_RDONLY;
  if ((st.f_flag & ST_NOSUID) != 0) flags |= MS_NOSUID;
  if ((st.f_flag & ST_NODEV) != 0) flags |= MS_NODEV;
  if ((st.f_flag & ST_NOEXEC) != 0) flags |= MS_NOEXEC;
  if ((st.f_flag & ST_NOATIME) != 0) flags |= MS_NOATIME;
  if ((st.f_flag & ST_NODIRATIME) != 0) flags |= MS_NODIRATIME;
  if ((st.f_flag & ST_RELATIME) != 0) flags |= MS_RELATIME;
  return flags;
}

bool tell_daemon(const std::string& mountpoint, std::string_view state) {
  return ::setxattr(mountpoint.c_str(), fuse::kRemountXattr, state.data(), state.size(), 0) == 0;
}

// The daemon's own view: "rw", "ro" (remounted) or "ro-mount" (mounted -o ro).
std::string daemon_state(const std::string& mountpoint) {
  std::array<char, 32> value{};
  const ssize_t n = ::getxattr(mountpoint.c_str(), fuse::kRemountXattr, value.data(), value.size());
  return n < 0 ? std::string() : std::string(value.data(), static_cast<std::size_t>(n));
}

// The one line for a mount(2) or setxattr(2) that failed with errno e.
std::string failure_line(const std::string& m, bool read_only, int e) {
  const std::string head = "sealfs: remount," + std::string(read_only ? "ro" : "rw") + " of " + m + ": ";
  if (e == EBUSY)
    return head + "a file on it is open for writing (fuser -vm " + m + " lists who); close it and retry";
  if (e == EPERM || e == EACCES)
    return head + "needs root (CAP_SYS_ADMIN); as a user, unmount it (fusermount3 -u " + m +
           ") and mount it again" + (read_only ? " with -o ro" : " without -o ro");
  return head + std::strerror(e);
}

// The mount point resolved and checked to be a sealfs mount; "" after saying why not.
std::string sealfs_mountpoint(const std::string& given, std::ostream& err) {
  char* real = ::realpath(given.c_str(), nullptr);
  if (real == nullptr) {
    err << "sealfs: remount: " << given << ": " << std::strerror(errno) << "\n";
    return {};
  }
  std::string path(real);
  std::free(real);
  const std::string type = mount_type(path);
  if (type != "fuse.sealfs") {
    err << "sealfs: remount: " << path << " is not a sealfs mount"
        << (type.empty() ? std::string() : " (it is " + type + ")") << "\n";
    return {};
  }
  return path;
}

}  // namespace

bool is_remount(const std::vector<std::string>& lists) {
  for (const auto& token : tokens_of(lists))
    if (token == "remount") return true;
  return false;
}

int run_remount(const std::string& mountpoint, const std::vector<std::string>& lists, std::ostream& err) {
  std::optional<bool> want_ro;  // the last of ro / rw; neither: as the mount is
  MountOptions scratch;
  for (const auto& token : tokens_of(lists)) {
    if (token == "ro" || token == "rw") want_ro = token == "ro";
    if (carried(token)) continue;
    if (auto s = apply_option_list(token, scratch); !s) {
      err << "sealfs: remount: " << s.error().message << "\n";
      return 1;
    }
  }
  const std::string m = sealfs_mountpoint(mountpoint, err);
  if (m.empty()) return 1;
  struct statvfs st {};
  if (::statvfs(m.c_str(), &st) != 0) {
    err << "sealfs: remount: " << m << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  const bool ro = want_ro.value_or((st.f_flag & ST_RDONLY) != 0);  // neither: as it is
  if (!ro && daemon_state(m) == "ro-mount") {
    err << "sealfs: remount,rw of " << m << ": it was mounted with -o ro, which the kernel keeps for good "
        << "(no FLUSH is sent); unmount it (umount " << m << ") and mount it again without ro\n";
    return 1;
  }
  // Already read-only: nothing for the daemon to hear (and the kernel would
  // refuse the attribute's write with EROFS).
  const bool was_ro = (st.f_flag & ST_RDONLY) != 0;
  if (ro && !was_ro && !tell_daemon(m, "ro")) {
    err << failure_line(m, ro, errno) << "\n";
    return 1;
  }
  if (::mount(nullptr, m.c_str(), nullptr, remount_flags(st, ro), nullptr) != 0) {
    const int e = errno;
    if (ro && !was_ro) tell_daemon(m, "rw");  // still read-write: the daemon goes on as before
    err << failure_line(m, ro, e) << "\n";
    return 1;
  }
  if (!ro && !tell_daemon(m, "rw")) {
    err << failure_line(m, ro, errno) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace sealfs::cli
