#include "core/verify/entry.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/digest.hpp"
#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/manifest/profile.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {
namespace {

bool record_matches_stat(const FileRecord& r, const struct stat& st) {
  if (r.symlink) return S_ISLNK(st.st_mode) && static_cast<std::uint64_t>(st.st_size) == r.size;
  return S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) == r.size;
}

std::string describe(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return std::to_string(st.st_size) + " bytes";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISLNK(st.st_mode)) return "a symlink";
  return "a special file";
}

bool path_has_reserved_component(std::string_view path) {
  for (const auto& c : split_rel(path))
    if (is_reserved_name(c)) return true;
  return false;
}

// The error for a check of path stopped by code: damage when code is evidence
// (a directory or symlink where a file was opened is of the wrong type, the
// rest is as good as missing).
Error check_failure(const std::string& path, const std::string& what, int code, HideReason* defect) {
  if (is_damage_evidence(code)) {
    if (defect != nullptr) *defect = code == ELOOP || code == EISDIR ? HideReason::type : HideReason::missing;
    return make_error(EBADMSG, path + ": " + what);
  }
  return make_error(code, path + ": " + what + " (" + std::strerror(code) + ")");
}

// An EBADMSG for path of the given kind.
Error defect_of(HideReason kind, std::string message, HideReason* defect) {
  if (defect != nullptr) *defect = kind;
  return make_error(EBADMSG, std::move(message));
}

// The steps of EntryVerifier::verify before any listed file is looked at.
// Each returns false when it has decided the verdict (v says why).

// Reads the entry's manifest into v.
bool load_manifest(const EntryLocation& where, EntryVerdict& v) {
  auto loaded = read_manifest_at(where.base_fd, where.manifest_name);
  if (!loaded) {
    v.reason = "manifest: " + loaded.error().message;
    if (loaded.code() != EBADMSG) {
      // Gone since the caller saw it (a concurrent publish or unlink), or
      // unreadable for now (EMFILE…): not evidence about the entry.
      v.transient = true;
      if (loaded.code() != ENOENT) v.error = loaded.code();
    }
    return false;
  }
  v.manifest_stamp = loaded->stamp;
  v.manifest = std::make_shared<const Manifest>(std::move(loaded->manifest));
  return true;
}

// With keys: the manifest must be signed for its place by one of them; an
// entry whose manifest is not is foreign (v.foreign), not damaged.
bool manifest_authentic(const KeyRing* keys, const Manifest& manifest, EntryVerdict& v) {
  if (keys == nullptr) return true;
  auto check = check_manifest_mac(manifest, *keys, v.place);
  if (!check) {
    v.reason = "manifest: cannot check its MAC (" + check.error().message + ")";
    v.transient = true;
    v.error = check.code();
    return false;
  }
  if (*check == MacCheck::authentic) return true;
  v.reason = "foreign: manifest " + describe_mac(*check, manifest);
  v.foreign = true;
  return false;
}

// A file entry's sidecar lists exactly its file, under its name, and the
// name still holds the object this verdict is for.
bool file_entry_is_itself(const EntryLocation& where, const Manifest& manifest, EntryVerdict& v) {
  const bool hashed_name = sidecar_is_hashed(where.file_name);
  if (manifest.files.size() != 1 || manifest.files.begin()->first != where.file_name) {
    v.reason = "sidecar does not list exactly " + where.file_name;
    return false;
  }
  if ((hashed_name && manifest.name != where.file_name) ||
      (manifest.name && *manifest.name != where.file_name)) {
    v.reason = "sidecar records another name";
    return false;
  }
  // A file entry is one object: the name must still hold the file this
  // verdict is for (a publish may have replaced it since it was judged).
  auto now = stat_at(where.base_fd, where.file_name);
  if (!now || now->st_dev != where.dev || now->st_ino != where.ino) {
    v.reason = where.file_name + ": replaced during verification";
    v.transient = true;
    return false;
  }
  return true;
}

// Every listed path is a valid manifest path, and no hashed record is larger
// than the profile allows.
bool listed_paths_acceptable(const Manifest& manifest, std::uint64_t max_hashed_size, EntryVerdict& v) {
  for (const auto& [path, rec] : manifest.files) {
    if (!is_valid_manifest_path(path) || path_has_reserved_component(path)) {
      v.reason = "manifest lists an invalid path";
      return false;
    }
    // A cap on the work one entry can cause: its size is evidence enough.
    auto alt = manifest.accept.find(path);
    for (const FileRecord* r : {&rec, alt == manifest.accept.end() ? nullptr : &alt->second}) {
      if (r != nullptr && r->sha256 && r->size > max_hashed_size) {
        v.reason = path + ": " + std::to_string(r->size) + " bytes, above the profile's max_file_size of " +
                   std::to_string(max_hashed_size);
        v.cause = HideReason::size;
        return false;
      }
    }
  }
  return true;
}

// Symlink records. In a directory entry the target stays inside the entry
// and out of its volatile areas, so that, read through M, it leads to a name
// the manifest verifies. A file entry of its own in a container (a symlink
// made there, shown as it is like a FIFO, R10) may point anywhere. Either
// way a name a validator guards (tilelang's *.so, an artefact) must be a
// regular file: the validator judged bytes, not a name.
bool symlink_records_allowed(const EntryLocation& where, const Manifest& manifest, const Profile* profile,
                             EntryVerdict& v) {
  for (const auto* records : {&manifest.files, &manifest.accept}) {
    for (const auto& [path, rec] : *records) {
      if (!rec.symlink) continue;
      const std::string rel = join_rel(where.rel, path);
      if (!where.file_entry && !symlink_stays_inside(path, *rec.symlink)) {
        v.reason = path + ": symlink target leaves the entry";
        return false;
      }
      if (profile == nullptr) continue;
      if (!where.file_entry && profile->is_volatile(symlink_destination(rel, *rec.symlink))) {
        v.reason = path + ": symlink target lies in a volatile area";
        return false;
      }
      if (!profile->is_size_only(rel) && !profile->validators_for(rel).empty()) {
        v.reason = path + ": " + std::string(kSymlinkUnderValidatedName);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

// EACCES/EPERM: a listed file the daemon may not read stays that way until
// someone changes B, so it cannot be verified: as good as missing.
bool is_damage_evidence(int code) {
  return code == ENOENT || code == ENOTDIR || code == ELOOP || code == EISDIR || code == EACCES ||
         code == EPERM;
}

Result<Stamp> listed_stamp(int base_fd, const std::string& path) {
  auto [parent_rel, leaf] = split_parent(path);
  if (parent_rel.empty()) {
    auto st = stat_at(base_fd, leaf);
    if (!st) return st.error();
    return Stamp::of(*st);
  }
  auto parent = open_beneath(base_fd, parent_rel, O_PATH | O_DIRECTORY);
  if (!parent) return parent.error();
  auto st = stat_at(parent->get(), leaf);
  if (!st) return st.error();
  return Stamp::of(*st);
}

Status check_listed_file(Verifier& verifier, int base_fd, const std::string& path, const FileRecord& record,
                         const FileRecord* alternative, bool hash, bool force, Stamp* seen,
                         HideReason* defect) {
  auto [parent_rel, leaf] = split_parent(path);
  UniqueFd parent_holder;
  int parent = base_fd;
  if (!parent_rel.empty()) {
    auto p = open_beneath(base_fd, parent_rel, O_PATH | O_DIRECTORY);
    if (!p) return check_failure(path, "missing", p.code(), defect);
    parent_holder = std::move(*p);
    parent = parent_holder.get();
  }
  auto st = stat_at(parent, leaf);
  if (!st) return check_failure(path, "missing", st.code(), defect);
  if (seen) *seen = Stamp::of(*st);
  const FileRecord* candidates[2] = {&record, alternative};
  const FileRecord* fits[2] = {nullptr, nullptr};
  int nfits = 0;
  for (const FileRecord* c : candidates)
    if (c != nullptr && record_matches_stat(*c, *st)) fits[nfits++] = c;
  if (nfits == 0) {
    const bool type_fits = record.symlink ? S_ISLNK(st->st_mode) : S_ISREG(st->st_mode);
    return defect_of(type_fits ? HideReason::size : HideReason::type,
                     path + ": is " + describe(*st) + ", manifest says " + std::to_string(record.size) +
                         (record.symlink ? "-byte symlink" : " bytes"),
                     defect);
  }
  if (S_ISLNK(st->st_mode)) {
    auto target = read_link_at(parent, leaf);
    if (!target) return check_failure(path, "unreadable symlink", target.code(), defect);
    for (int i = 0; i < nfits; ++i)
      if (fits[i]->symlink && *fits[i]->symlink == *target) return {};
    return defect_of(HideReason::digest, path + ": symlink target differs", defect);
  }
  for (int i = 0; i < nfits; ++i)
    if (!fits[i]->sha256) return {};  // size-only and the size fits
  if (!hash) return {};
  // O_NONBLOCK: never hang on a FIFO swapped in after the stat; the fstat
  // below must show the very regular file that was judged.
  int raw = openat_noatime(parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return check_failure(path, "cannot open", errno, defect);
  UniqueFd fd(raw);
  auto now = stat_fd(fd.get());
  if (!now) return check_failure(path, "fstat", now.code(), defect);
  if (!S_ISREG(now->st_mode) || !same_object(*now, *st))
    return defect_of(HideReason::type, path + ": replaced", defect);
  Result<Sha256> digest = verifier.digest(fd.get(), force);
  if (!digest && digest.code() == EAGAIN)
    digest = verifier.digest(fd.get(), force);  // changed mid-hash: once more
  // A read error, a file that kept changing, a cancelled hash: no verdict.
  if (!digest)
    return make_error(digest.code() == EBADMSG ? EIO : digest.code(),
                      path + ": cannot hash (" + digest.error().message + ")");
  if (seen) *seen = Stamp::of(*now);
  for (int i = 0; i < nfits; ++i)
    if (*fits[i]->sha256 == *digest && static_cast<std::uint64_t>(now->st_size) == fits[i]->size) return {};
  return defect_of(HideReason::digest, path + ": sha256 differs from the manifest", defect);
}

EntryVerifier::EntryVerifier(Verifier& verifier, std::chrono::nanoseconds ttl, std::size_t max_cached,
                             const Profile* profile)
    : verifier_(verifier), profile_(profile), ttl_(ttl), max_cached_(max_cached == 0 ? 1 : max_cached) {}

std::string EntryLocation::place() const { return file_entry ? join_rel(rel, file_name) : rel; }

std::shared_ptr<const EntryVerdict> EntryVerifier::find(const Verdicts& in, const EntryLocation& where,
                                                        const Stamp& manifest_stamp) {
  std::lock_guard lock(mu_);
  auto it = in.find({where.dev, where.ino});
  if (it == in.end() || !(it->second->manifest_stamp == manifest_stamp)) return nullptr;
  // A MAC holds for one place: an entry moved behind the mount keeps its
  // inode and manifest, and must be checked again where it is now.
  if (keys_ && it->second->place != where.place()) return nullptr;
  return it->second;
}

void EntryVerifier::keep(Verdicts& in, const EntryLocation& where,
                         std::shared_ptr<const EntryVerdict> verdict) {
  std::lock_guard lock(mu_);
  if (in.size() >= max_cached_) in.erase(in.begin());  // bounded; any victim will do
  in[{where.dev, where.ino}] = std::move(verdict);
}

std::shared_ptr<const EntryVerdict> EntryVerifier::cached(const EntryLocation& where) {
  auto stamp = manifest_stamp_at(where.base_fd, where.manifest_name);
  return stamp ? find(verdicts_, where, *stamp) : nullptr;
}

std::shared_ptr<const EntryVerdict> EntryVerifier::check(const EntryLocation& where, VerifyDepth depth,
                                                         const ForceHash& force, const Stamp* manifest_now) {
  if (depth == VerifyDepth::audit)
    return check(where, VerifyDepth::fresh, ForceHash::every_file(), manifest_now);
  if (depth != VerifyDepth::fresh && !force.any()) {
    Result<Stamp> stamp = manifest_now != nullptr ? Result<Stamp>(*manifest_now)
                                                  : manifest_stamp_at(where.base_fd, where.manifest_name);
    if (stamp) {
      if (auto c = reusable(where, depth, *stamp)) return c;
    }
  }
  if (depth == VerifyDepth::cached_only) {
    static const auto unknown = [] {
      auto v = std::make_shared<EntryVerdict>();
      v->unknown = true;
      v->reason = "not verified yet";
      return std::shared_ptr<const EntryVerdict>(std::move(v));
    }();
    return unknown;
  }
  auto verdict = verify(where, depth != VerifyDepth::stat_only, force);
  if (verdict->manifest && !verdict->transient && !verdict->amending)
    keep(verdict->hashed ? verdicts_ : stat_verdicts_, where, verdict);
  return verdict;
}

std::shared_ptr<const EntryVerdict> EntryVerifier::reusable(const EntryLocation& where, VerifyDepth depth,
                                                            const Stamp& manifest_stamp) {
  const bool listing = depth == VerifyDepth::stat_only;
  if (auto c = find(verdicts_, where, manifest_stamp)) {
    // A lookup trusts a hashed verdict for the TTL without a look at the
    // files (R9); a listing, and a lookup after the TTL, compare stamps.
    if (!listing && std::chrono::steady_clock::now() - c->checked < ttl_) return c;
    if (still_holds(where, *c, listing)) return c;
  }
  if (!listing) return nullptr;
  auto c = find(stat_verdicts_, where, manifest_stamp);
  return c && still_holds(where, *c, listing) ? c : nullptr;
}

bool EntryVerifier::still_holds(const EntryLocation& where, const EntryVerdict& v, bool listing) const {
  // Every listed file must have been seen: a check that stopped early says
  // nothing about the files after the one that failed.
  if (!v.manifest || v.file_stamps.size() != v.manifest->files.size()) return false;
  const bool need_settled = v.valid || !listing;
  if (need_settled && v.manifest_stamp.too_recent()) return false;
  for (const auto& [path, seen] : v.file_stamps) {
    if (need_settled && seen.too_recent()) return false;
    auto now = listed_stamp(where.base_fd, path);
    if (!now || !(*now == seen)) return false;
  }
  return true;
}

namespace {

// A directory between the entry and the listed path holds a manifest of its
// own: an entry inside the entry, its own unit, which the outer entry does
// not judge (a manifest written before that rule may still list its files).
bool below_inner_entry(const EntryLocation& where, const std::string& path) {
  if (where.file_entry) return false;
  std::string dir;
  const auto parts = split_rel(path);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    dir = join_rel(dir, parts[i]);
    auto sub = open_beneath(where.base_fd, dir, O_PATH | O_DIRECTORY);
    if (!sub) return false;
    if (auto m = stat_at(sub->get(), kDirManifest); m && S_ISREG(m->st_mode)) return true;
  }
  return false;
}

}  // namespace

bool EntryVerifier::listed_file_in_progress(int base_fd, const std::string& path) const {
  if (!in_progress_) return false;
  auto [parent_rel, leaf] = split_parent(path);
  UniqueFd parent_holder;
  if (!parent_rel.empty()) {
    auto p = open_beneath(base_fd, parent_rel, O_PATH | O_DIRECTORY);
    if (!p) return false;
    parent_holder = std::move(*p);
  }
  auto st = stat_at(parent_holder ? parent_holder.get() : base_fd, leaf);
  return st && in_progress_(*st);
}

std::shared_ptr<const EntryVerdict> EntryVerifier::cached_by_key(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = verdicts_.find({dev, ino});
  return it == verdicts_.end() ? nullptr : it->second;
}

void EntryVerifier::forget(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  verdicts_.erase({dev, ino});
  stat_verdicts_.erase({dev, ino});
}

std::shared_ptr<const EntryVerdict> EntryVerifier::verify(const EntryLocation& where, bool hash,
                                                          const ForceHash& force) {
  auto v = std::make_shared<EntryVerdict>();
  v->checked = std::chrono::steady_clock::now();
  v->hashed = hash;
  v->place = where.place();
  if (!load_manifest(where, *v)) return v;
  const Manifest& manifest = *v->manifest;
  if (!manifest_authentic(keys_.get(), manifest, *v)) return v;
  if (where.file_entry && !file_entry_is_itself(where, manifest, *v)) return v;
  if (!listed_paths_acceptable(manifest, max_hashed_size_, *v)) return v;
  if (!symlink_records_allowed(where, manifest, profile_, *v)) return v;
  if (!check_listed_files(where, manifest, hash, force, *v)) return v;
  v->valid = true;
  return v;
}

namespace {

// The path no longer names the object its check found there (`seen`, unset
// when nothing was found): a publish replaced it while it was checked, so
// what the check saw is no evidence against the entry.
bool replaced_since(const EntryLocation& where, const std::string& path, const Stamp& seen) {
  if (seen.ino == 0) return false;
  auto now = listed_stamp(where.base_fd, path);
  return !now || now->dev != seen.dev || now->ino != seen.ino;
}

}  // namespace

bool EntryVerifier::check_listed_files(const EntryLocation& where, const Manifest& manifest, bool hash,
                                       const ForceHash& force, EntryVerdict& v) const {
  // Cheap rejections first: every type and size before any hashing.
  for (int pass = 0; pass < (hash ? 2 : 1); ++pass) {
    for (const auto& [path, rec] : manifest.files) {
      auto alt = manifest.accept.find(path);
      Stamp seen;
      HideReason defect = HideReason::missing;
      const bool forced = force.covers(path);
      Status s = check_listed_file(verifier_, where.base_fd, path, rec,
                                   alt == manifest.accept.end() ? nullptr : &alt->second, pass == 1, forced,
                                   &seen, &defect);
      // Written through M right now (R4): whatever its check met, a file
      // changing as it was hashed included, its seal decides, and the
      // entry's other names stay visible meanwhile.
      if (!s && listed_file_in_progress(where.base_fd, path)) {
        v.amending = true;
        continue;
      }
      if (!s && s.code() != EBADMSG) {
        v.reason = s.error().message;
        v.transient = true;
        v.error = s.code();
        return false;
      }
      if (!s && below_inner_entry(where, path)) continue;  // the inner entry's to judge
      if (!s) {
        v.reason = s.error().message;
        v.cause = defect;
        // A manifest replaced while we checked (an amend, seal or R6 swap
        // through the mount) describes other content: not damage, ask again.
        auto stamp_now = manifest_stamp_at(where.base_fd, where.manifest_name);
        v.transient = !stamp_now || !(*stamp_now == v.manifest_stamp) || replaced_since(where, path, seen);
        return false;
      }
      // A file entry is one object: the name must still hold the file this
      // verdict is for (it may have been replaced by a publish meanwhile).
      if (where.file_entry && (seen.dev != where.dev || seen.ino != where.ino)) {
        v.reason = path + ": replaced during verification";
        v.transient = true;
        return false;
      }
      v.file_stamps[path] = seen;
    }
  }
  return true;
}

}  // namespace sealfs
