// Records and manifest edits shared by publish, seal and the creation calls:
// what a file's record is (fsync, validators, digest), and read-modify-write
// of a manifest under its stripe lock.
#include <fcntl.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>

#include <cerrno>
#include <functional>
#include <new>

#include "core/store/impl.hpp"

namespace sealfs {
namespace {

std::string write_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
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

}  // namespace

void merge_extras(Manifest& into, const Manifest& from) {
  for (const auto& [section, text] : from.extra) {
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject()) continue;
    for (auto& member : doc.GetObject())
      put_extra(into, section, std::string_view(member.name.GetString(), member.name.GetStringLength()),
                write_json(member.value));
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
    for (auto& member : doc.GetObject()) {
      std::string_view name(member.name.GetString(), member.name.GetStringLength());
      if (is_at_or_below(name, key)) doomed.emplace_back(name);
    }
    if (doomed.empty()) continue;
    for (const auto& d : doomed) doc.RemoveMember(rapidjson::StringRef(d.data(), d.size()));
    auto canonical = canonical_json(write_json(doc));
    if (canonical) text = std::move(*canonical);
  }
}

std::mutex& Store::Impl::manifest_lock(const struct stat& holder) {
  static std::array<std::mutex, 64> stripes;
  const std::size_t h = std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(holder.st_ino) * 1000003u ^
                                                   static_cast<std::uint64_t>(holder.st_dev));
  return stripes[h % stripes.size()];
}

Result<FileRecord> Store::Impl::make_record(int dir_fd, std::string_view name, const RecordOptions& how,
                                            Manifest* extras) {
  auto st = stat_at(dir_fd, name);
  if (!st) return st.error();
  FileRecord rec;
  if (S_ISLNK(st->st_mode)) {
    // What a symlink leads to is never verified, so a name the profile
    // hashes must be a regular file, and a target must stay in the entry.
    auto refuse = [&](const std::string& why) -> Error {
      metrics.rejected.fetch_add(1, std::memory_order_relaxed);
      return make_error(EBADMSG, how.profile_rel + ": " + why);
    };
    // The same rules as the entry verifier's (core/verify/entry.cpp).
    const bool hashed = !profile.is_size_only(how.profile_rel);
    if (hashed && (how.in_dir_entry || !profile.validators_for(how.profile_rel).empty()))
      return refuse("a symlink where the profile hashes (must be a regular file)");
    auto target = read_link_at(dir_fd, name);
    if (!target) return target.error();
    if (how.in_dir_entry && !symlink_stays_inside(how.key, *target))
      return refuse("symlink target leaves the entry");
    rec.size = target->size();
    rec.symlink = std::move(*target);
    return rec;
  }
  if (!S_ISREG(st->st_mode)) return make_error(EINVAL, std::string(name) + ": not a regular file");
  // O_NONBLOCK and the fstat check: never block on, or hash, anything but the
  // regular file we just saw.
  int raw = ::openat(dir_fd, std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return errno_error("open " + how.profile_rel);
  UniqueFd fd(raw);
  auto now = stat_fd(fd.get());
  if (!now) return now.error();
  if (!S_ISREG(now->st_mode) || !same_object(*now, *st))
    return make_error(EAGAIN, how.profile_rel + ": replaced");
  // What verification would refuse to hash is not published (EFBIG).
  if (!profile.is_size_only(how.profile_rel) &&
      static_cast<std::uint64_t>(now->st_size) > profile.max_file_size)
    return make_error(EFBIG, how.profile_rel + ": " + std::to_string(now->st_size) +
                                 " bytes, above the profile's max_file_size");
  if (how.sync_data) {
    // R1: the data must be on disk before a manifest that vouches for it.
    Status s = sync_file(fd.get());
    if (!s) return s.error();
  }
  if (how.validate) {
    for (const auto& vname : profile.validators_for(how.profile_rel)) {
      const ValidatorFn* fn = options.validators.find(vname);
      if (fn == nullptr) return make_error(EBADMSG, how.profile_rel + ": unknown validator " + vname);
      ValidationOutcome outcome;
      try {
        outcome = (*fn)(fd.get(), how.key);
      } catch (const std::bad_alloc&) {
        return make_error(ENOMEM, how.profile_rel + ": validator " + vname + " ran out of memory");
      } catch (...) {
        // A validator that cannot decide has not accepted the file.
        outcome.accepted = false;
        outcome.reason = "validator " + vname + " failed";
      }
      if (!outcome.accepted) {
        metrics.rejected.fetch_add(1, std::memory_order_relaxed);
        return make_error(EBADMSG, how.profile_rel + ": rejected by " + vname + ": " + outcome.reason);
      }
      if (extras && !outcome.record_json.empty()) put_extra(*extras, vname, how.key, outcome.record_json);
    }
  }
  rec.size = static_cast<std::uint64_t>(now->st_size);
  if (!profile.is_size_only(how.profile_rel)) {
    auto digest = verifier.digest(fd.get());
    if (!digest && digest.code() == EAGAIN) digest = verifier.digest(fd.get());
    if (!digest) return digest.error();
    rec.sha256 = *digest;
    auto after = stat_fd(fd.get());
    if (after) rec.size = static_cast<std::uint64_t>(after->st_size);
  }
  return rec;
}

Status Store::Impl::edit_manifest(int base_fd, const struct stat& holder, std::string_view manifest_name,
                                  const std::function<Status(Manifest&)>& edit, bool create) {
  {
    std::lock_guard lock(manifest_lock(holder));
    Manifest m;
    auto loaded = read_manifest_at(base_fd, manifest_name);
    if (loaded) {
      m = std::move(loaded->manifest);
    } else if (!(create && loaded.code() == ENOENT)) {
      return loaded.error();
    }
    Status s = edit(m);
    if (!s) return s;
    s = write_manifest_atomic(base_fd, manifest_name, m, durable());
    if (!s) return s;
  }
  // The manifest's new name must survive a power cut too.
  return sync_directory(base_fd);
}

Status Store::Impl::write_sidecar(int dir_fd, std::string_view name, const FileRecord& record,
                                  const std::optional<FileRecord>& accept, const Manifest* extras,
                                  const struct stat* source) {
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
  return write_manifest_atomic(dir_fd, sidecar_name(name), m, durable(), also);
}

// A chmod or chown through M never unseals (R10), but it changes who may read
// the file, so the manifest that covers it follows: its access is computed
// again from every file it lists (narrower or wider) and set in place, under
// the manifest's lock so no concurrent rewrite is undone.
Status Store::refresh_manifest_access(int path_fd, PlaceHint hint) {
  Impl& s = *impl_;
  auto st = stat_fd(path_fd);
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode)) return {};
  DirContext ctx;
  auto placed = s.place(path_fd, &ctx, &*st, hint);
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
  std::lock_guard lock(s.manifest_lock(holder));
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

Status Store::Impl::unlist(const EntryRoot& entry, std::string_view key) {
  return edit_manifest(
      entry.fd.get(), entry.st, kDirManifest,
      [&](Manifest& m) {
        drop_records(m, key);
        return Status{};
      },
      false);
}

Status Store::Impl::list_record(const EntryRoot& entry, std::string_view key, const FileRecord& rec,
                                const Manifest& extras) {
  return edit_manifest(
      entry.fd.get(), entry.st, kDirManifest,
      [&](Manifest& m) {
        drop_records(m, key);
        m.files[std::string(key)] = rec;
        merge_extras(m, extras);
        return Status{};
      },
      false);
}

}  // namespace sealfs
