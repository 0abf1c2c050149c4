// Records of hard-linked inodes (links.hpp).
#include "core/store/links.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/digest.hpp"
#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/store/records.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kLinksDir = ".sealfs/links";

// An error that says nothing about content (EMFILE, EIO…): no verdict.
bool transient(int code) { return !is_damage_evidence(code) && code != EBADMSG; }

// The directory holding the listed path below base_fd, and the path's leaf.
struct ListedParent {
  UniqueFd holder;
  int fd = -1;
  std::string leaf;
};

Result<ListedParent> listed_parent(int base_fd, const std::string& path) {
  auto [parent_rel, leaf] = split_parent(path);
  ListedParent out;
  out.leaf = std::string(leaf);
  out.fd = base_fd;
  if (!parent_rel.empty()) {
    auto p = open_beneath(base_fd, parent_rel, O_PATH | O_DIRECTORY);
    if (!p) return p.error();
    out.holder = std::move(*p);
    out.fd = out.holder.get();
  }
  return out;
}

// The SHA-256 of parent/leaf if it is still the object st; EAGAIN when not.
Result<Sha256> digest_of(Verifier& verifier, int parent, const std::string& leaf, const struct stat& st) {
  int raw = ::openat(parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return errno_error("open " + leaf);
  UniqueFd fd(raw);
  auto now = stat_fd(fd.get());
  if (!now) return now.error();
  if (!S_ISREG(now->st_mode) || !same_object(*now, st)) return make_error(EAGAIN, leaf + ": replaced");
  auto digest = verifier.digest(fd.get());
  if (!digest && digest.code() == EAGAIN) digest = verifier.digest(fd.get());  // changed mid-hash: once more
  if (!digest) return make_error(digest.code() == EBADMSG ? EIO : digest.code(), digest.error().message);
  return digest;
}

}  // namespace

std::string LinkRecords::record_rel(ino_t ino) {
  return std::string(kLinksDir) + "/" + std::to_string(static_cast<unsigned long long>(ino));
}

std::mutex& LinkRecords::lock_of(ino_t ino) {
  static std::array<std::mutex, 64> stripes;
  return stripes[std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(ino)) % stripes.size()];
}

Status LinkRecords::note_sealed(int dir_fd, std::string_view name, const FileRecord& rec) const {
  auto st = stat_at(dir_fd, name);
  if (!st || !S_ISREG(st->st_mode) || st->st_dev != root_dev_) return {};
  if (st->st_nlink < 2) {
    forget(*st);
    return {};
  }
  // Changed since it was recorded: its writer's next seal tells the truth.
  if (static_cast<std::uint64_t>(st->st_size) != rec.size) return {};
  FileRecord inode;
  inode.size = rec.size;
  if (rec.sha256) {
    inode.sha256 = rec.sha256;
  } else {
    // The name is size-only, the other names may not be: the record is by content.
    auto digest = digest_of(verifier_, dir_fd, std::string(name), *st);
    if (!digest) return digest.error();
    inode.sha256 = *digest;
  }
  const std::string leaf = std::to_string(static_cast<unsigned long long>(st->st_ino));
  Manifest m;
  m.files[leaf] = inode;
  if (Status s = sign_manifest(m, keys_, record_rel(st->st_ino)); !s) return s;
  if (::mkdirat(root_fd_, std::string(kLinksDir).c_str(), 0700) != 0 && errno != EEXIST)
    return errno_error("mkdir " + std::string(kLinksDir));
  auto dir = open_beneath(root_fd_, kLinksDir, O_PATH | O_DIRECTORY);
  if (!dir) return dir.error();
  {
    std::lock_guard lock(lock_of(st->st_ino));
    if (Status w = write_manifest_atomic(dir->get(), leaf, m, policy_.durable(), {*st}); !w) return w;
  }
  return policy_.sync_directory(dir->get());
}

void LinkRecords::forget(const struct stat& st) const {
  if (!S_ISREG(st.st_mode) || st.st_dev != root_dev_) return;
  auto dir = open_beneath(root_fd_, kLinksDir, O_PATH | O_DIRECTORY);
  if (!dir) return;
  std::lock_guard lock(lock_of(st.st_ino));
  ::unlinkat(dir->get(), std::to_string(static_cast<unsigned long long>(st.st_ino)).c_str(), 0);
}

void LinkRecords::drop_if_unchanged(ino_t ino, const Stamp& seen) const {
  auto dir = open_beneath(root_fd_, kLinksDir, O_PATH | O_DIRECTORY);
  if (!dir) return;
  const std::string leaf = std::to_string(static_cast<unsigned long long>(ino));
  std::lock_guard lock(lock_of(ino));
  auto now = manifest_stamp_at(dir->get(), leaf);
  if (now && *now == seen) ::unlinkat(dir->get(), leaf.c_str(), 0);
}

Result<std::optional<LinkRecords::InodeRecord>> LinkRecords::record_of(const struct stat& st) const {
  using Maybe = std::optional<InodeRecord>;
  auto dir = open_beneath(root_fd_, kLinksDir, O_PATH | O_DIRECTORY);
  if (!dir) return transient(dir.code()) ? Result<Maybe>(dir.error()) : Result<Maybe>(Maybe{});
  const std::string leaf = std::to_string(static_cast<unsigned long long>(st.st_ino));
  auto loaded = read_manifest_at(dir->get(), leaf);
  if (!loaded) return transient(loaded.code()) ? Result<Maybe>(loaded.error()) : Result<Maybe>(Maybe{});
  const Manifest& m = loaded->manifest;
  // Exactly this inode's size and digest, nothing else.
  if (m.files.size() != 1 || m.files.begin()->first != leaf || !m.accept.empty()) return Maybe{};
  const FileRecord& rec = m.files.begin()->second;
  if (!rec.sha256 || rec.symlink) return Maybe{};
  if (keys_ != nullptr) {
    auto check = check_manifest_mac(m, *keys_, record_rel(st.st_ino));
    if (!check) return check.error();
    if (*check != MacCheck::authentic) return Maybe{};
  }
  return Maybe(InodeRecord{rec, loaded->stamp});
}

Result<bool> LinkRecords::consider(const EntryLocation& where, const std::string& path, const FileRecord& rec,
                                   bool hash, bool write, Manifest& as_inodes,
                                   std::vector<Update>& updates) const {
  auto parent = listed_parent(where.base_fd, path);
  if (!parent) return transient(parent.code()) ? Result<bool>(parent.error()) : Result<bool>(false);
  auto st = stat_at(parent->fd, parent->leaf);
  if (!st) return transient(st.code()) ? Result<bool>(st.error()) : Result<bool>(false);
  // Any link count: the name written through may be gone since (rm g).
  if (!S_ISREG(st->st_mode) || st->st_dev != root_dev_) return false;
  auto inode = record_of(*st);
  if (!inode) return inode.error();
  if (!*inode) return false;
  const FileRecord& vouched = (*inode)->record;
  FileRecord wanted;
  wanted.size = vouched.size;
  if (rec.sha256) wanted.sha256 = vouched.sha256;
  if (wanted == rec) return false;  // this name's record is up to date
  if (static_cast<std::uint64_t>(st->st_size) != vouched.size) return false;
  if (!hash) {
    as_inodes.files[path] = wanted;
    as_inodes.accept.erase(path);
    return true;
  }
  auto digest = digest_of(verifier_, parent->fd, parent->leaf, *st);
  if (!digest) {
    if (digest.code() == EAGAIN || is_damage_evidence(digest.code())) return true;  // replaced meanwhile
    return digest.error();
  }
  if (*digest != *vouched.sha256) {
    // Changed since its last seal through M (behind the mount): the record
    // vouches for nothing any more.
    if (write) drop_if_unchanged(st->st_ino, (*inode)->stamp);
    return true;
  }
  // This name's own rules: its validators, and what its profile records.
  RecordOptions how;
  how.validate = true;
  how.profile_rel = join_rel(where.rel, path);
  how.key = path;
  how.in_dir_entry = !where.file_entry;
  Manifest extras;
  auto now = records_.make_record(parent->fd, parent->leaf, how, &extras);
  if (!now) {
    if (now.code() == EBADMSG || now.code() == EFBIG || now.code() == EAGAIN ||
        is_damage_evidence(now.code()))
      return true;  // refused here (or replaced meanwhile): the verdict stands
    return now.error();
  }
  if (now->size != vouched.size || (now->sha256 && *now->sha256 != *vouched.sha256)) return true;
  updates.push_back(
      Update{path, rec, *now, std::move(extras), st->st_nlink == 1, st->st_ino, (*inode)->stamp});
  return true;
}

Result<LinkRefresh> LinkRecords::fits(const EntryLocation& where, const Manifest& as_inodes, bool hash,
                                      LinkRefresh yes) const {
  for (const auto& [path, rec] : as_inodes.files) {
    auto alt = as_inodes.accept.find(path);
    Status s = check_listed_file(verifier_, where.base_fd, path, rec,
                                 alt == as_inodes.accept.end() ? nullptr : &alt->second, hash, hash, nullptr);
    if (!s && s.code() != EBADMSG) return s.error();
    if (!s) return LinkRefresh::none;
  }
  return yes;
}

void LinkRecords::apply_update(Manifest& m, const Update& u) {
  drop_records(m, u.path);
  m.files[u.path] = u.now;
  merge_extras(m, u.extras);
}

Result<LinkRefresh> LinkRecords::apply(const EntryLocation& where, const std::vector<Update>& updates) const {
  auto holder = stat_fd(where.base_fd);
  if (!holder) return holder.error();
  Status edited = records_.edit_manifest(
      where.base_fd, *holder, where.manifest_name, where.place(),
      [&](Manifest& m) {
        bool changed = false;
        for (const auto& u : updates) {
          auto it = m.files.find(u.path);
          // Rewritten meanwhile (a seal, an unlink): that record stands.
          if (it == m.files.end() || !(it->second == u.was)) continue;
          apply_update(m, u);
          changed = true;
        }
        if (!changed) return Status(make_error(EAGAIN, "changed meanwhile"));
        return Status{};
      },
      false);
  if (!edited && edited.code() == EAGAIN) return LinkRefresh::refreshed;  // changed: check it again anyway
  if (!edited && (edited.code() == EACCES || is_damage_evidence(edited.code())))
    return LinkRefresh::none;  // foreign, or gone: not ours to vouch for
  if (!edited) return edited.error();
  for (const auto& u : updates)
    if (u.last_name) drop_if_unchanged(u.ino, u.record_stamp);
  return LinkRefresh::refreshed;
}

Result<LinkRefresh> LinkRecords::refresh(const EntryLocation& where, const Manifest& manifest, bool hash,
                                         bool write) const {
  std::vector<Update> updates;
  Manifest as_inodes = manifest;  // at stat level: the records the inodes vouch for
  bool candidates = false;
  for (const auto& [path, rec] : manifest.files) {
    if (rec.symlink) continue;
    auto candidate = consider(where, path, rec, hash, write, as_inodes, updates);
    if (!candidate) return candidate.error();
    candidates = candidates || *candidate;
  }
  if (!candidates) return LinkRefresh::none;
  if (!hash) return fits(where, as_inodes, false, LinkRefresh::plausible);
  if (updates.empty()) return LinkRefresh::none;
  if (write) return apply(where, updates);
  Manifest refreshed = manifest;
  for (const auto& u : updates) apply_update(refreshed, u);
  return fits(where, refreshed, true, LinkRefresh::would_refresh);
}

}  // namespace sealfs
