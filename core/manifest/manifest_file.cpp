#include "core/manifest/manifest_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"

namespace sealfs {

Result<Stamp> manifest_stamp_at(int dir_fd, std::string_view name) {
  struct stat st {};
  if (::fstatat(dir_fd, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno_error("fstatat " + std::string(name));
  if (!S_ISREG(st.st_mode)) return make_error(EBADMSG, std::string(name) + " is not a regular file");
  return Stamp::of(st);
}

Result<LoadedManifest> read_manifest_at(int dir_fd, std::string_view name) {
  // O_NONBLOCK: a FIFO planted under a manifest's name must not hang us; the
  // fstat below refuses it before any read.
  int raw = openat_noatime(dir_fd, std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) {
    if (errno == ENOENT) return errno_error("no manifest " + std::string(name));
    if (errno == ELOOP || errno == EISDIR || errno == ENXIO)
      return make_error(EBADMSG, std::string(name) + " is not a regular file");
    if (errno == EACCES || errno == EPERM) return make_error(EBADMSG, std::string(name) + " is unreadable");
    // EMFILE, ENOMEM, EIO…: says nothing about the manifest (R2).
    return errno_error("cannot open " + std::string(name));
  }
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("fstat manifest");
  if (!S_ISREG(st.st_mode)) return make_error(EBADMSG, std::string(name) + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxManifestBytes)
    return make_error(EBADMSG, std::string(name) + " is too big");
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pread(fd.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("cannot read " + std::string(name));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  auto parsed = parse_manifest(text);
  if (!parsed) return make_error(EBADMSG, std::string(name) + ": " + parsed.error().message);
  return LoadedManifest{std::move(*parsed), Stamp::of(st)};
}

ManifestAccess narrowest_access(const std::vector<struct stat>& covered) {
  mode_t granted = 0044;  // group and other read, as long as every file grants it
  std::optional<gid_t> group;
  bool one_group = true;
  for (const auto& st : covered) {
    if (!S_ISREG(st.st_mode)) continue;
    granted &= st.st_mode & 0044;
    if (group && *group != st.st_gid) one_group = false;
    group = st.st_gid;
  }
  ManifestAccess a;
  a.mode = 0600 | (granted & 0004);
  if ((granted & 0040) != 0) {
    if (!group) {
      a.mode |= 0040;  // covers no regular file: nothing to hide, the old 0644
    } else if (one_group) {
      a.mode |= 0040;
      a.gid = *group;
    }
  }
  return a;
}

std::vector<struct stat> covered_files(int dir_fd, const Manifest& manifest,
                                       const std::vector<struct stat>& also) {
  std::vector<struct stat> out = also;
  // Keys are sorted, so files of one directory come together: one open each.
  std::string open_rel;
  UniqueFd open_parent;
  for (const auto* records : {&manifest.files, &manifest.accept}) {
    for (const auto& [key, rec] : *records) {
      if (rec.symlink) continue;
      auto [parent_rel, leaf] = split_parent(key);
      int parent = dir_fd;
      if (!parent_rel.empty()) {
        if (!open_parent || parent_rel != open_rel) {
          auto p = open_beneath(dir_fd, parent_rel, O_PATH | O_DIRECTORY);
          open_parent = p ? std::move(*p) : UniqueFd();
          open_rel = parent_rel;
        }
        if (!open_parent) continue;
        parent = open_parent.get();
      }
      auto st = stat_at(parent, leaf);
      if (st && S_ISREG(st->st_mode)) out.push_back(*st);
    }
  }
  return out;
}

Status apply_access(int fd, const ManifestAccess& access) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("fstat manifest");
  mode_t mode = access.mode & 0777;
  if (access.gid && *access.gid != st.st_gid) {
    // Narrow first (no group read under the old group), then regroup.
    if (::fchmod(fd, (st.st_mode & 0777 & mode) & ~0040) != 0) return errno_error("chmod manifest");
    if (::fchown(fd, static_cast<uid_t>(-1), *access.gid) != 0) mode &= ~0040;  // cannot: no group may read
  }
  if (::fchmod(fd, mode) != 0) return errno_error("chmod manifest");
  return {};
}

Status write_manifest_atomic(int dir_fd, std::string_view name, const Manifest& manifest, bool sync,
                             const std::vector<struct stat>& also) {
  const std::string bytes = serialize_manifest(manifest);
  const ManifestAccess access = narrowest_access(covered_files(dir_fd, manifest, also));
  std::uint64_t rnd = 0;
  if (::getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
    rnd = static_cast<std::uint64_t>(::getpid()) ^ 0x5ea1f5ULL;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rnd));
  const std::string tmp = std::string(kDirManifest) + ".tmp." + suffix;
  // 0600 from the start: never readable by more than the files it covers.
  int raw = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) return errno_error("create " + tmp);
  UniqueFd fd(raw);
  if (Status a = apply_access(fd.get(), access); !a) {
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return a;
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e = errno_error("write " + tmp);
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      return e;
    }
    done += static_cast<std::size_t>(n);
  }
  // The manifest's bytes must be on disk before the name points at them, or
  // a power cut could leave an empty manifest under the real name.
  if (sync) {
    Status s = sync_fd(fd.get());
    if (!s) {
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      return s;
    }
  }
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, std::string(name).c_str()) != 0) {
    Error e = errno_error("rename " + tmp);
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return e;
  }
  return {};
}

}  // namespace sealfs
