#include "core/manifest_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>

#include "core/digest.hpp"
#include "core/store.hpp"
#include "core/store_paths.hpp"
#include "core/unique_fd.hpp"

namespace sealfs {

bool sidecar_is_hashed(std::string_view file_name) { return kSidecarPrefix.size() + file_name.size() > NAME_MAX; }

std::string sidecar_name(std::string_view file_name) {
  std::string out(kSidecarPrefix);
  if (sidecar_is_hashed(file_name)) {
    out += '#';
    out += to_hex(sha256_of(file_name));
  } else {
    out += file_name;
  }
  return out;
}

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
  int raw = ::openat(dir_fd, std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
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

Status write_manifest_atomic(int dir_fd, std::string_view name, const Manifest& manifest, bool sync) {
  const std::string bytes = serialize_manifest(manifest);
  std::uint64_t rnd = 0;
  if (::getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = static_cast<std::uint64_t>(::getpid()) ^ 0x5ea1f5ULL;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rnd));
  const std::string tmp = std::string(kDirManifest) + ".tmp." + suffix;
  int raw = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (raw < 0) return errno_error("create " + tmp);
  UniqueFd fd(raw);
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
