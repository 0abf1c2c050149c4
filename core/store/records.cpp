// Records and manifest edits shared by publish, seal and the creation calls:
// what a file's record is (fsync, validators, digest), and read-modify-write
// of a manifest under its stripe lock.
#include "core/store/records.hpp"

#include <fcntl.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/impl.hpp"  // IWYU pragma: keep (StoreState, reached through the alias Store::Impl)
#include "core/store/links.hpp"
#include "core/store/publish.hpp"
#include "core/store/store.hpp"
#include "core/verify/validator.hpp"

namespace sealfs {
namespace {

std::string write_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return {sb.GetString(), sb.GetSize()};
}

// extra[section] is a JSON object keyed by manifest path; set one member.
void put_extra(Manifest& m, const std::string& section, std::string_view key, std::string_view record_json) {
  rapidjson::Document doc;
  auto it = m.extra.find(section);
  if (it != m.extra.end()) doc.Parse(it->second.data(), it->second.size());
  if (doc.HasParseError() || !doc.IsObject()) doc.SetObject();
  rapidjson::Document rec(&doc.GetAllocator());
  rec.Parse(record_json.data(), record_json.size());
  if (rec.HasParseError()) return;  // a validator's malformed note is not worth failing a publish
  rapidjson::Value name(key.data(), static_cast<rapidjson::SizeType>(key.size()), doc.GetAllocator());
  doc.RemoveMember(name);
  doc.AddMember(name, rapidjson::Value(rec, doc.GetAllocator()), doc.GetAllocator());
  auto canonical = canonical_json(write_json(doc));
  if (canonical) m.extra[section] = std::move(*canonical);
}

bool is_at_or_below(std::string_view path, std::string_view key) {
  return path == key ||
         (path.size() > key.size() && path.substr(0, key.size()) == key && path[key.size()] == '/');
}

// Every regular file and symlink below dir_fd, as paths relative to it,
// leaving out reserved names (manifests, sidecars), special files and what
// lies in a directory below that holds a manifest of its own: an entry
// inside an entry is its own unit (R4: a change inside it never invalidates
// the outer one), which the outer manifest does not list, and which the
// outer entry's checks never look into.
Status collect_files(int dir_fd, const std::string& prefix, int depth, std::vector<std::string>& out) {
  if (depth > kMaxTreeDepth) return make_error(ELOOP, "tree too deep to publish");
  auto children = read_dir(dir_fd);
  if (!children) return children.error();
  for (const auto& c : *children) {
    if (is_reserved_name(c.name)) continue;
    auto st = stat_at(dir_fd, c.name);
    if (!st) return st.error();
    const std::string key = join_rel(prefix, c.name);
    if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) {
      out.push_back(key);
    } else if (S_ISDIR(st->st_mode)) {
      auto sub = open_beneath(dir_fd, c.name, O_PATH | O_DIRECTORY);
      if (!sub) return sub.error();
      if (auto inner = stat_at(sub->get(), kDirManifest); inner && S_ISREG(inner->st_mode)) continue;
      Status s = collect_files(sub->get(), key, depth + 1, out);
      if (!s) return s;
    }
  }
  return {};
}

// fsync of every regular file in paths (below dir_fd). Every file's
// writeback is started before the first fsync waits, so the writes go out
// together and the fsyncs that follow mostly find their data (and, on a
// journaling filesystem, their commit) done. In batches, to bound the fds held.
Status sync_files(int dir_fd, const std::vector<std::string>& paths) {
  constexpr std::size_t kBatch = 64;
  for (std::size_t first = 0; first < paths.size(); first += kBatch) {
    std::vector<UniqueFd> batch;
    for (std::size_t i = first; i < std::min(paths.size(), first + kBatch); ++i) {
      auto fd = open_beneath(dir_fd, paths[i], O_RDONLY | O_NONBLOCK);
      if (!fd) {
        if (fd.code() == ELOOP) continue;  // a symlink: nothing to sync
        return fd.error();
      }
      ::sync_file_range(fd->get(), 0, 0, SYNC_FILE_RANGE_WRITE);  // a hint: fsync below is what counts
      batch.push_back(std::move(*fd));
    }
    for (const auto& fd : batch) {
      Status synced = sync_fd(fd.get());
      if (!synced) return synced;
    }
  }
  return {};
}

}  // namespace

void merge_extras(Manifest& into, const Manifest& from) {
  for (const auto& [section, text] : from.extra) {
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject()) continue;
    const rapidjson::Value& object = doc;
    for (auto member = object.MemberBegin(); member != object.MemberEnd(); ++member)
      put_extra(into, section, std::string_view(member->name.GetString(), member->name.GetStringLength()),
                write_json(member->value));
  }
}

void drop_records(Manifest& m, std::string_view key) {
  std::erase_if(m.files, [&](const auto& kv) { return is_at_or_below(kv.first, key); });
  std::erase_if(m.accept, [&](const auto& kv) { return is_at_or_below(kv.first, key); });
  for (auto& [section, text] : m.extra) {
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject()) continue;
    std::vector<std::string> doomed;
    const rapidjson::Value& object = doc;
    for (auto member = object.MemberBegin(); member != object.MemberEnd(); ++member) {
      std::string_view name(member->name.GetString(), member->name.GetStringLength());
      if (is_at_or_below(name, key)) doomed.emplace_back(name);
    }
    if (doomed.empty()) continue;
    for (const auto& d : doomed) doc.RemoveMember(rapidjson::StringRef(d.data(), d.size()));
    auto canonical = canonical_json(write_json(doc));
    if (canonical) text = std::move(*canonical);
  }
}

std::mutex& Records::manifest_lock(const struct stat& holder) {
  static std::array<std::mutex, 64> stripes;
  const std::size_t h = std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(holder.st_ino) * 1000003u ^
                                                   static_cast<std::uint64_t>(holder.st_dev));
  return stripes[h % stripes.size()];
}

// A validator checks the bytes under its name, so a name it guards must be
// a regular file. In a directory entry the target stays in the entry and out
// of its volatile areas: read through M it then leads to a name the entry's
// manifest verifies. The same rules as the entry verifier's
// (core/verify/entry.cpp).
Result<FileRecord> Records::symlink_record(int dir_fd, std::string_view name,
                                           const RecordOptions& how) const {
  auto refuse = [&](const std::string& why) -> Error {
    metrics_.rejected.fetch_add(1, std::memory_order_relaxed);
    return make_error(EBADMSG, how.profile_rel + ": " + why);
  };
  if (!profile_.is_size_only(how.profile_rel) && !profile_.validators_for(how.profile_rel).empty())
    return refuse(std::string(kSymlinkUnderValidatedName));
  auto target = read_link_at(dir_fd, name);
  if (!target) return target.error();
  if (how.in_dir_entry && !symlink_stays_inside(how.key, *target))
    return refuse("symlink target leaves the entry");
  if (how.in_dir_entry && profile_.is_volatile(symlink_destination(how.profile_rel, *target)))
    return refuse("symlink target lies in a volatile area");
  FileRecord rec;
  rec.size = target->size();
  rec.symlink = std::move(*target);
  return rec;
}

Status Records::validate(int fd, const RecordOptions& how, Manifest* extras) const {
  for (const auto& vname : profile_.validators_for(how.profile_rel)) {
    const ValidatorFn* fn = validators_.find(vname);
    if (fn == nullptr) return make_error(EBADMSG, how.profile_rel + ": unknown validator " + vname);
    ValidationOutcome outcome;
    try {
      outcome = (*fn)(fd, how.key);
    } catch (const std::bad_alloc&) {
      return make_error(ENOMEM, how.profile_rel + ": validator " + vname + " ran out of memory");
    } catch (...) {
      // A validator that cannot decide has not accepted the file.
      outcome.accepted = false;
      outcome.reason = "validator " + vname + " failed";
    }
    if (!outcome.accepted) {
      metrics_.rejected.fetch_add(1, std::memory_order_relaxed);
      return make_error(EBADMSG, how.profile_rel + ": rejected by " + vname + ": " + outcome.reason);
    }
    if (extras && !outcome.record_json.empty()) put_extra(*extras, vname, how.key, outcome.record_json);
  }
  return {};
}

Result<FileRecord> Records::make_record(int dir_fd, std::string_view name, const RecordOptions& how,
                                        Manifest* extras) const {
  auto st = stat_at(dir_fd, name);
  if (!st) return st.error();
  if (S_ISLNK(st->st_mode)) return symlink_record(dir_fd, name, how);
  if (!S_ISREG(st->st_mode)) return make_error(EINVAL, std::string(name) + ": not a regular file");
  // O_NONBLOCK and the fstat check: never block on, or hash, anything but the
  // regular file we just saw.
  int raw = openat_noatime(dir_fd, std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return errno_error("open " + how.profile_rel);
  UniqueFd fd(raw);
  auto now = stat_fd(fd.get());
  if (!now) return now.error();
  if (!S_ISREG(now->st_mode) || !same_object(*now, *st))
    return make_error(EAGAIN, how.profile_rel + ": replaced");
  // What verification would refuse to hash is not published (EFBIG).
  if (!profile_.is_size_only(how.profile_rel) &&
      static_cast<std::uint64_t>(now->st_size) > profile_.max_file_size)
    return make_error(EFBIG, how.profile_rel + ": " + std::to_string(now->st_size) +
                                 " bytes, above the profile's max_file_size");
  if (how.sync_data) {
    // R1: the data must be on disk before a manifest that vouches for it.
    if (Status s = policy_.sync_file(fd.get()); !s) return s.error();
  }
  if (how.validate) {
    if (Status s = validate(fd.get(), how, extras); !s) return s.error();
  }
  FileRecord rec;
  rec.size = static_cast<std::uint64_t>(now->st_size);
  if (!profile_.is_size_only(how.profile_rel)) {
    auto digest = verifier_.digest(fd.get());
    if (!digest && digest.code() == EAGAIN) digest = verifier_.digest(fd.get());
    if (!digest) return digest.error();
    rec.sha256 = *digest;
    auto after = stat_fd(fd.get());
    if (after) rec.size = static_cast<std::uint64_t>(after->st_size);
  }
  return rec;
}

// Records for every file under the directory src_fd, keyed by key_prefix +
// path inside src; profile decisions use dst_rel + path. Data fsync'ed first.
Result<Manifest> Records::records_for_tree(int src_fd, const std::string& key_prefix,
                                           const std::string& dst_rel,
                                           std::map<std::string, Stamp>* hashed) const {
  std::vector<std::string> paths;
  Status collected = collect_files(src_fd, "", 0, paths);
  if (!collected) return collected.error();
  // The fsyncs wait on the disk while the validators and digests keep a CPU
  // busy; R1 needs both done before the manifest is written, in no order, so
  // the fsyncs run on a helper thread meanwhile (inline when none starts).
  std::future<Status> synced;
  if (policy_.durable()) {
    auto sync_all = [src_fd, &paths] { return sync_files(src_fd, paths); };
    try {
      synced = std::async(std::launch::async, sync_all);
    } catch (const std::system_error&) {
      synced = std::async(std::launch::deferred, sync_all);
    }
  }
  Manifest m;
  for (const auto& p : paths) {
    auto [parent_rel, leaf] = split_parent(p);
    auto parent = open_beneath(src_fd, parent_rel, O_PATH | O_DIRECTORY);
    if (!parent) return parent.error();
    RecordOptions how;
    how.validate = true;
    how.profile_rel = join_rel(dst_rel, p);
    how.key = join_rel(key_prefix, p);
    if (hashed != nullptr)
      if (auto before = stat_at(parent->get(), leaf)) (*hashed)[p] = Stamp::of(*before);
    auto rec = make_record(parent->get(), leaf, how, &m);
    if (!rec) return rec.error();
    m.files[how.key] = *rec;
  }
  if (synced.valid()) {
    if (Status s = synced.get(); !s) return s.error();
  }
  if (auto crash = policy_.step(publish_steps::kFilesSynced)) return *crash;
  if (auto crash = policy_.step(publish_steps::kValidated)) return *crash;
  return m;
}

void Records::refresh_records(int src_fd, const std::string& key_prefix, const std::string& dst_rel,
                              const std::map<std::string, Stamp>& hashed, Manifest& records) const {
  for (const auto& [p, was] : hashed) {
    auto [parent_rel, leaf] = split_parent(p);
    const std::string key = join_rel(key_prefix, p);
    auto parent = open_beneath(src_fd, parent_rel, O_PATH | O_DIRECTORY);
    auto now = parent ? stat_at(parent->get(), leaf) : Result<struct stat>(parent.error());
    if (now && Stamp::of(*now) == was) continue;
    records.files.erase(key);
    if (!now) continue;
    RecordOptions how;
    how.validate = true;
    how.profile_rel = join_rel(dst_rel, p);
    how.key = key;
    if (auto rec = make_record(parent->get(), leaf, how, &records)) records.files[key] = *rec;
  }
}

Status Records::write_manifest(int dir_fd, std::string_view name, Manifest manifest, std::string_view place,
                               const std::vector<struct stat>& also) const {
  if (Status s = sign_manifest(manifest, keys_, place); !s) return s;
  return write_manifest_atomic(dir_fd, name, manifest, policy_.durable(), also);
}

Status Records::check_authentic(const Manifest& manifest, std::string_view place) const {
  if (keys_ == nullptr) return {};
  auto check = check_manifest_mac(manifest, *keys_, place);
  if (!check) return check.error();
  if (*check != MacCheck::authentic)
    return make_error(EACCES, std::string(place) + ": manifest " + describe_mac(*check, manifest) +
                                  ": foreign, not changed");
  return {};
}

Status Records::edit_manifest(int base_fd, const struct stat& holder, std::string_view manifest_name,
                              std::string_view place, const std::function<Status(Manifest&)>& edit,
                              bool create) const {
  {
    std::lock_guard lock(manifest_lock(holder));
    Manifest m;
    auto loaded = read_manifest_at(base_fd, manifest_name);
    if (loaded) {
      if (Status a = check_authentic(loaded->manifest, place); !a) return a;
      m = std::move(loaded->manifest);
    } else if (!(create && loaded.code() == ENOENT)) {
      return loaded.error();
    }
    Status s = edit(m);
    if (!s) return s;
    s = write_manifest(base_fd, manifest_name, std::move(m), place);
    if (!s) return s;
  }
  // The manifest's new name must survive a power cut too.
  return policy_.sync_directory(base_fd);
}

namespace {

// One manifest of a moved tree, signed again for its new place when it was
// signed for its old one (Records::move_signatures).
struct Resigner {
  const Records& records;
  const KeyRing& keys;

  void resign(int dir_fd, std::string_view name, const std::string& old_place, const std::string& new_place) {
    auto holder = stat_fd(dir_fd);
    if (!holder) return;
    std::lock_guard lock(Records::manifest_lock(*holder));
    auto loaded = read_manifest_at(dir_fd, name);
    if (!loaded) return;
    auto check = check_manifest_mac(loaded->manifest, keys, old_place);
    if (!check || *check != MacCheck::authentic) return;  // foreign before the move: foreign after it
    (void)records.write_manifest(dir_fd, name, std::move(loaded->manifest), new_place);
  }

  // dir_fd was at old_rel and is at new_rel now.
  void walk(int dir_fd, const std::string& old_rel, const std::string& new_rel, int depth) {
    if (depth > kMaxTreeDepth) return;
    auto children = read_dir(dir_fd);
    if (!children) return;
    for (const auto& c : *children) {
      if (c.name == kDirManifest) {
        resign(dir_fd, c.name, old_rel, new_rel);
      } else if (c.name.size() > kSidecarPrefix.size() && c.name.starts_with(kSidecarPrefix)) {
        // A sidecar's place is its file's: the one name it lists.
        auto loaded = read_manifest_at(dir_fd, c.name);
        if (!loaded || loaded->manifest.files.size() != 1) continue;
        const std::string& file = loaded->manifest.files.begin()->first;
        if (sidecar_name(file) != c.name) continue;
        resign(dir_fd, c.name, join_rel(old_rel, file), join_rel(new_rel, file));
      } else if (!is_reserved_name(c.name)) {
        auto st = stat_at(dir_fd, c.name);
        if (!st || !S_ISDIR(st->st_mode)) continue;
        auto sub = open_beneath(dir_fd, c.name, O_PATH | O_DIRECTORY);
        if (sub) walk(sub->get(), join_rel(old_rel, c.name), join_rel(new_rel, c.name), depth + 1);
      }
    }
  }
};

}  // namespace

Status Records::resign_verified(int dir_fd, std::string_view name, const Stamp& verified,
                                std::string_view place) const {
  auto holder = stat_fd(dir_fd);
  if (!holder) return holder.error();
  {
    std::lock_guard lock(manifest_lock(*holder));
    auto loaded = read_manifest_at(dir_fd, name);
    if (!loaded) return loaded.error();
    if (!(loaded->stamp == verified)) return make_error(EAGAIN, "manifest changed while it was verified");
    if (Status w = write_manifest(dir_fd, name, std::move(loaded->manifest), place); !w) return w;
  }
  return policy_.sync_directory(dir_fd);
}

Status Records::move_signatures(int dir_fd, const std::string& old_rel, const std::string& new_rel) const {
  if (keys_ == nullptr || old_rel == new_rel) return {};
  Resigner{*this, *keys_}.walk(dir_fd, old_rel, new_rel, 0);
  return {};
}

Status Records::write_sidecar(int dir_fd, std::string_view dir_rel, std::string_view name,
                              const FileRecord& record, const std::optional<FileRecord>& accept,
                              const Manifest* extras, const struct stat* source) const {
  Manifest m;
  m.files[std::string(name)] = record;
  if (accept) m.accept[std::string(name)] = *accept;
  if (sidecar_is_hashed(name)) m.name = std::string(name);
  if (extras) m.extra = extras->extra;
  auto holder = stat_fd(dir_fd);
  if (!holder) return holder.error();
  std::lock_guard lock(manifest_lock(*holder));
  std::vector<struct stat> also;
  if (source) also.push_back(*source);
  return write_manifest(dir_fd, sidecar_name(name), std::move(m), join_rel(dir_rel, name), also);
}

Status Records::unlist(const EntryRoot& entry, std::string_view key) const {
  return edit_manifest(
      entry.fd.get(), entry.st, kDirManifest, entry.rel,
      [&](Manifest& m) {
        drop_records(m, key);
        return Status{};
      },
      false);
}

Status Records::list_record(const EntryRoot& entry, std::string_view key, const FileRecord& rec,
                            const Manifest& extras, const struct stat* still_at) const {
  return edit_manifest(
      entry.fd.get(), entry.st, kDirManifest, entry.rel,
      [&](Manifest& m) {
        if (still_at != nullptr) {
          auto [parent_rel, name] = split_parent(key);
          auto parent = open_beneath(entry.fd.get(), parent_rel, O_PATH | O_DIRECTORY);
          auto now = parent ? stat_at(parent->get(), name) : Result<struct stat>(parent.error());
          if (!now || !same_object(*now, *still_at))
            return Status(make_error(ENOENT, std::string(key) + ": moved before its record was written"));
        }
        drop_records(m, key);
        m.files[std::string(key)] = rec;
        merge_extras(m, extras);
        return Status{};
      },
      false);
}

Status Records::seal_at(const DirContext& ctx, int dir_fd, std::string_view name, bool sync_data,
                        const LinkRecords* links, std::optional<FileRecord>* sealed,
                        const FileRecord* same_as) const {
  const std::string rel = ctx.child_rel(name);
  if (profile_.is_volatile(rel)) return {};
  RecordOptions how;
  how.sync_data = sync_data;
  how.validate = true;  // content checks apply however the content arrived
  how.profile_rel = rel;
  how.key = ctx.entry ? ctx.entry_key(name) : std::string(name);
  how.in_dir_entry = ctx.entry.has_value();
  Manifest extras;
  auto rec = make_record(dir_fd, name, how, &extras);
  if (!rec) return rec.error();
  if (same_as != nullptr &&
      (rec->symlink || rec->size != same_as->size || (rec->sha256 && rec->sha256 != same_as->sha256)))
    return make_error(EAGAIN, rel + ": changed since its other name was sealed");
  // Nothing holds the directories above the file while it is hashed, so a
  // rename may move one of them (rewriting the manifest's keys below it, or
  // taking it out of the entry): the record is written only while its key
  // still leads to the file, checked under the manifest's lock, or the entry
  // would list a name that is missing (fsmix entry seed 12). ENOENT then:
  // the caller places the file again (StorePublishing::seal).
  std::optional<struct stat> sealed_object;
  if (ctx.entry) {
    auto st = stat_at(dir_fd, name);
    if (!st) return st.error();
    sealed_object = *st;
  }
  if (auto crash = policy_.step(seal_steps::kDigested)) return *crash;
  if (links != nullptr && !rec->symlink) {
    // Before this name's record: a crash in between leaves this name stale
    // but its inode's record saying what it holds, so it is brought up to
    // date like any other name. A failure here costs the other names only.
    if (Status noted = links->note_sealed(dir_fd, name, *rec); !noted)
      std::fprintf(stderr, "sealfs: cannot record the inode of %s for its other names: %s\n", rel.c_str(),
                   noted.error().message.c_str());
  }
  if (ctx.entry) {
    // No directory is half-way out of the entry meanwhile (a move unlists
    // it, then renames it): the key's check below would still find the file,
    // and the entry would list a name that then goes (fsmix single seed 39).
    std::shared_lock<std::shared_mutex> settled;
    if (bounds_ != nullptr) settled = bounds_->keep();
    if (Status s = list_record(*ctx.entry, how.key, *rec, extras, &*sealed_object); !s) return s;
  } else {
    std::shared_lock<std::shared_mutex> outside;
    if (bounds_ != nullptr) {
      auto kept = bounds_->keep_container(dir_fd);
      if (!kept) return make_error(kept.code(), rel + ": " + kept.error().message);
      outside = std::move(*kept);
    }
    if (Status s = write_sidecar(dir_fd, ctx.rel, name, *rec, std::nullopt, &extras); !s) return s;
    if (Status s = policy_.sync_directory(dir_fd); !s) return s;
  }
  if (sealed != nullptr) *sealed = *rec;
  if (auto crash = policy_.step(seal_steps::kManifestWritten)) return *crash;
  return {};
}

// A chmod or chown through M never unseals (R10), but it changes who may read
// the file, so the manifest that covers it follows: its access is computed
// again from every file it lists (narrower or wider) and set in place, under
// the manifest's lock so no concurrent rewrite is undone.
Status StorePublishing::refresh_manifest_access(int path_fd, PlaceHint hint) {
  Impl& s = *impl_;
  auto st = stat_fd(path_fd);
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode)) return {};
  DirContext ctx;
  auto placed = s.places.place(path_fd, &ctx, &*st, hint);
  if (!placed) return {};  // no longer below the root: no manifest of ours covers it
  if (ctx.is_volatile || s.profile.is_volatile(placed->rel)) return {};
  int base = placed->parent.get();
  std::string manifest_name = sidecar_name(placed->name);
  std::string key = placed->name;
  struct stat holder = ctx.st;
  if (ctx.entry) {
    base = ctx.entry->fd.get();
    manifest_name = std::string(kDirManifest);
    key = ctx.entry_key(placed->name);
    holder = ctx.entry->st;
  } else if (auto pst = stat_fd(base)) {
    holder = *pst;
  }
  std::lock_guard lock(Records::manifest_lock(holder));
  auto loaded = read_manifest_at(base, manifest_name);
  if (!loaded || loaded->manifest.files.count(key) == 0) return {};  // not sealed: nothing tells about it
  int raw = ::openat(base, manifest_name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return errno_error("open " + manifest_name);
  UniqueFd fd(raw);
  auto now = stat_fd(fd.get());
  if (!now || !S_ISREG(now->st_mode) || Stamp::of(*now).ino != loaded->stamp.ino)
    return {};  // replaced meanwhile
  return apply_access(fd.get(), narrowest_access(covered_files(base, loaded->manifest)));
}

}  // namespace sealfs
