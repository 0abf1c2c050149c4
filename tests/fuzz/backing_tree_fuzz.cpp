// Fuzz target: whole backing trees (issue 12, "Also"). The input decodes to a
// small random tree (directories, files, manifests valid and broken, sidecars,
// symlink records, symlinks pointing anywhere, FIFOs), written into a fresh
// temporary B beside an "outside" directory. A sealfs::Store over B (no mount)
// then lists, looks up and opens every path and runs fsck without and with
// repair. It must never crash or hang, and must leave everything outside B
// exactly as it was (the files, their modes and times, and no new names).
//
// Input format (every byte optional; a short input is a small tree):
//   byte 0: profile (even: tilelang, odd: generic)
//   then records of [op, parent, name, arg, len, payload…]:
//     op % 8: 0 dir, 1 file, 2 symlink, 3 fifo, 4 valid manifest of the parent
//             dir's entries, 5 sidecar for a sibling, 6 raw manifest bytes,
//             7 chmod
//     parent: index (mod count) of a directory made so far (0 = B itself)
//     name:   index into kNames
//     arg:    a variant: the target, which record to spoil, the mode…
//     len, payload: file contents / raw manifest text (at most 255 bytes)
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/offline.hpp"
#include "core/store/store.hpp"

namespace {

using sealfs::FileRecord;
using sealfs::Manifest;

constexpr const char* kNames[] = {"a",
                                  "b",
                                  "kernel_lib.so",
                                  "device_kernel.cu",
                                  "params.pkl",
                                  "sub",
                                  "kernels",
                                  "tmp",
                                  ".staging",
                                  "launcher.cpp",
                                  "x.src",
                                  ".sealfs-manifest",
                                  ".sealfs-manifest.a",
                                  ".sealfs-manifest.kernel_lib.so",
                                  ".sealfs",
                                  "caf\xc3\xa9",
                                  "l"};
constexpr std::size_t kNameCount = sizeof kNames / sizeof kNames[0];

constexpr const char* kTargets[] = {
    "a",  "kernel_lib.so", "../a", "../../outside/secret",        "/etc/passwd",      "sub/../..", ".",
    "..", "sub",           "l",    "../../../../../../../../tmp", ".sealfs-manifest", "./a/../b",  "fifo"};
constexpr std::size_t kTargetCount = sizeof kTargets / sizeof kTargets[0];

struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  std::size_t i = 0;
  bool more() const { return i < n; }
  std::uint8_t byte() { return i < n ? p[i++] : 0; }
  std::string bytes(std::size_t len) {
    len = std::min(len, n - i);
    std::string s(reinterpret_cast<const char*>(p + i), len);
    i += len;
    return s;
  }
};

struct Snapshot {
  std::map<std::string, std::string> entries;  // rel → "mode size mtime content"
  bool operator==(const Snapshot&) const = default;
};

void snapshot_dir(const std::string& path, const std::string& rel, Snapshot& out, int depth) {
  if (depth > 8) return;
  DIR* d = ::opendir(path.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string p = path + "/" + name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    std::string desc = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                       std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " +
                       std::to_string(st.st_ino);
    if (S_ISREG(st.st_mode)) {
      int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        char buf[256];
        ssize_t got = ::read(fd, buf, sizeof buf);
        if (got > 0) desc.append(buf, static_cast<std::size_t>(got));
        ::close(fd);
      }
    }
    out.entries[rel + "/" + name] = desc;
    if (S_ISDIR(st.st_mode)) snapshot_dir(p, rel + "/" + name, out, depth + 1);
  }
  ::closedir(d);
}

int remove_one(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}
int make_writable(const char* path, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_D || type == FTW_DP) ::chmod(path, (st->st_mode & 07777) | 0700);
  return 0;
}
void remove_tree(const std::string& root) {
  ::nftw(root.c_str(), make_writable, 16, FTW_PHYS);
  ::nftw(root.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void write_bytes(int dir_fd, const char* name, const std::string& data, mode_t mode = 0644) {
  int fd = ::openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) return;
  if (!data.empty() && ::write(fd, data.data(), data.size()) < 0) {
  }
  ::close(fd);
}

// Record of dir_fd/name as it is, spoiled when `spoil` says so.
std::optional<FileRecord> record_of(int dir_fd, const std::string& name, std::uint8_t spoil) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  FileRecord r;
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf, sizeof buf);
    if (n < 0) return std::nullopt;
    r.symlink = std::string(buf, static_cast<std::size_t>(n));
    r.size = static_cast<std::uint64_t>(n);
  } else if (S_ISREG(st.st_mode)) {
    int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string content;
    char buf[512];
    for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;)
      content.append(buf, static_cast<std::size_t>(got));
    ::close(fd);
    r.size = content.size();
    if ((spoil & 1) == 0) r.sha256 = sealfs::sha256_of(content);
  } else {
    r.size = static_cast<std::uint64_t>(st.st_size);  // a directory or FIFO under a listed name
  }
  if ((spoil & 6) == 2) r.size += 1;
  if ((spoil & 6) == 4) r.symlink = kTargets[spoil % kTargetCount];
  return r;
}

// Ops 4 and 5 of build_tree: a manifest built from what the directory at pfd
// holds now: the whole directory (op 4, its .sealfs-manifest) or one sibling
// (op 5, its sidecar), spoilt as payload and arg say.
void write_manifest_from_dir(int pfd, std::uint8_t op, std::uint8_t arg, const std::string& payload) {
  Manifest m;
  DIR* d = ::fdopendir(::openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != ".." && n.rfind(".sealfs", 0) != 0) names.push_back(n);
  }
  ::closedir(d);
  std::uint8_t spoil = static_cast<std::uint8_t>(payload.empty() ? 0 : payload[0]);
  if (op == 4) {
    for (const auto& n : names) {
      auto r = record_of(pfd, n, spoil & 0x0f);
      if (r) m.files[n] = *r;
      spoil = static_cast<std::uint8_t>(spoil >> 1 | spoil << 7);
    }
    if (arg & 1) m.accept = m.files;
  } else if (!names.empty()) {
    const std::string& n = names[arg % names.size()];
    auto r = record_of(pfd, n, spoil);
    if (!r) return;
    m.files[n] = *r;
  }
  const std::string text = sealfs::serialize_manifest(m);
  const std::string file = op == 4 ? std::string(".sealfs-manifest")
                                   : sealfs::sidecar_name(m.files.empty() ? "a" : m.files.begin()->first);
  // arg bit 1: a BOM in front; bit 2: a byte flipped somewhere.
  std::string out = (arg & 2) ? "\xEF\xBB\xBF" + text : text;
  if ((arg & 4) && !out.empty()) out[arg % out.size()] = static_cast<char>(out[arg % out.size()] ^ 0x80);
  write_bytes(pfd, file.c_str(), out);
}

void build_tree(Reader& in, const std::string& b) {
  std::vector<std::string> dirs = {""};
  for (int step = 0; step < 32 && in.more(); ++step) {
    const std::uint8_t op = in.byte() % 8;
    const std::string parent = dirs[in.byte() % dirs.size()];
    const std::string name = kNames[in.byte() % kNameCount];
    const std::uint8_t arg = in.byte();
    const std::string payload = in.bytes(in.byte());
    const std::string parent_path = parent.empty() ? b : b + "/" + parent;
    int pfd = ::open(parent_path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) continue;
    const std::string rel = parent.empty() ? name : parent + "/" + name;
    switch (op) {
      case 0:
        if (::mkdirat(pfd, name.c_str(), 0755) == 0 && dirs.size() < 12) dirs.push_back(rel);
        break;
      case 1:
        write_bytes(pfd, name.c_str(), payload);
        break;
      case 2:
        ::symlinkat(arg < 200 ? kTargets[arg % kTargetCount] : (payload.empty() ? "x" : payload.c_str()), pfd,
                    name.c_str());
        break;
      case 3:
        ::mkfifoat(pfd, name.c_str(), 0644);
        break;
      case 4:
      case 5:
        write_manifest_from_dir(pfd, op, arg, payload);
        break;
      case 6:
        write_bytes(pfd, (arg & 1) ? ".sealfs-manifest" : (std::string(".sealfs-manifest.") + name).c_str(),
                    payload);
        break;
      case 7: {
        // Never through a symlink: the harness itself must not touch outside.
        struct stat st {};
        if (::fstatat(pfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISLNK(st.st_mode))
          ::fchmodat(pfd, name.c_str(), static_cast<mode_t>(0400 | (arg & 0377)), 0);
        break;
      }
    }
    ::close(pfd);
  }
}

// lookup, list, open and read every path reachable through the store (its
// reading face: what a load can reach).
void walk(sealfs::StoreReading& store, int dir_fd, int depth) {
  if (depth > 10) return;
  auto items = store.list(dir_fd);
  std::vector<std::string> names;
  if (items)
    for (const auto& it : items->items) names.push_back(it.name);
  for (std::size_t i = 0; i < kNameCount; ++i) names.emplace_back(kNames[i]);  // hidden ones too
  for (const auto& name : names) {
    auto found = store.lookup(dir_fd, name);
    if (!found) continue;
    if (S_ISDIR(found->st.st_mode)) {
      walk(store, found->fd.get(), depth + 1);
    } else if (S_ISREG(found->st.st_mode)) {
      auto fd = store.open_file(found->fd.get(), O_RDONLY, sealfs::PlaceHint{dir_fd, name});
      if (fd) {
        char buf[64];
        if (::read(fd->get(), buf, sizeof buf) < 0) {
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  char tmpl[] = "/tmp/sealfs-tree-fuzz.XXXXXX";
  if (!::mkdtemp(tmpl)) return 0;
  const std::string work = tmpl;
  const std::string b = work + "/B";
  const std::string outside = work + "/outside";
  ::mkdir(b.c_str(), 0755);
  ::mkdir(outside.c_str(), 0755);
  {
    int ofd = ::open(outside.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    write_bytes(ofd, "secret", "outside B: never touched", 0600);
    ::symlinkat("../B", ofd, "back");
    ::close(ofd);
  }
  const bool tilelang = (in.byte() & 1) == 0;
  build_tree(in, b);

  Snapshot before;
  snapshot_dir(outside, "", before, 0);
  {
    auto profile = sealfs::builtin_profile(tilelang ? "tilelang" : "generic");
    if (!profile) std::abort();
    sealfs::StoreOptions options;
    options.durability = sealfs::Durability::none;
    options.verdict_ttl = std::chrono::nanoseconds(0);
    options.quarantine_max_objects = 8;
    options.quarantine_max_bytes = 1u << 20;
    auto store = sealfs::Store::open_backing(b, *profile, std::move(options));
    if (store) {
      auto root = (*store)->root();  // the walk starts where a lookup would
      if (root) walk(**store, root->fd.get(), 0);
      auto checked = sealfs::fsck(**store, false);
      auto repaired = sealfs::fsck(**store, true);
      if (checked && repaired && repaired->quarantined > checked->invalid + checked->foreign + 64)
        std::abort();
      if (root) walk(**store, root->fd.get(), 0);
    }
  }
  Snapshot after;
  snapshot_dir(outside, "", after, 0);
  if (!(after == before)) {
    std::fprintf(stderr, "backing_tree_fuzz: the store changed something outside B\n");
    std::abort();
  }
  // Nothing new beside B and outside either.
  DIR* d = ::opendir(work.c_str());
  if (d) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != ".." && n != "B" && n != "outside") {
        std::fprintf(stderr, "backing_tree_fuzz: %s appeared beside B\n", n.c_str());
        std::abort();
      }
    }
    ::closedir(d);
  }
  remove_tree(work);
  return 0;
}
