// R1 publish by rename, R6 replace, R10 publish by link.
//
// Fsync order and why a crash at any step is safe
// ------------------------------------------------
// Safety never rests on an fsync: visibility is decided by verification, so
// whatever a crash leaves on disk is either a complete entry that verifies or
// something that does not and is hidden. The fsyncs only make a published
// entry still be there after a power cut (R1). With durability=none every
// fsync is skipped and the argument below still holds for visibility.
//
// Directory publish rename(src, dst):
//   1 fsync every regular file under src          [files_synced]
//     (data on disk before a manifest vouches for it)
//   2 run validators, digest                       [validated]
//   3 src/.sealfs-manifest: tmp, fsync, rename, fsync(src)  [manifest_written]
//     crash here: src (a volatile or unsealed dir) now holds a manifest; dst
//     is untouched → old state. src itself becomes a valid entry in place,
//     which is harmless (it was the writer's own staging dir).
//   4 dst hidden → quarantine it                   [dst_cleared]
//     crash here: dst was invisible before and is absent now → old state.
//   5 renameat2(src, dst): the manifest moves with the directory atomically
//                                                  [renamed]
//     crash after: dst is the complete entry; before: old state.
//   6 fsync(dst parent), fsync(src parent)         [dir_synced]
//     makes the rename durable; without it a power cut may undo step 5,
//     which is the old state again.
//
// File publish rename(src, dst) with dst in a container:
//   1 fsync src, 2 validate, digest                [files_synced, validated]
//   3 dst sidecar (tmp, fsync, rename)             [manifest_written]
//     crash here: a sidecar without its file (dst absent) shows nothing; a
//     dst that was visible but unsealed (in progress) stays what it was.
//   4 renameat2(src, dst), fsync parent(s)         [renamed, dir_synced]
//   5 unlink src's old sidecar when it had one     [source_cleaned]
//     a stale sidecar beside no file is invisible and removed by rmdir (R5).
//
// File replace (R6), dst a visible sealed file entry:
//   3 dst sidecar listing the new record with "accept" = the old record
//     crash here: the old file still verifies (accept) → old state.
//   4 renameat2(src, dst)                           [renamed]
//     readers see the old or the new file, and both verify.
//   5 fsync(dst parent)                             [dir_synced]
//   6 rewrite the sidecar with the new record only  [sidecar_final]
//     crash before: the new file verifies under the accept-both sidecar.
//
// Amend (dst inside an entry E):
//   1–2 fsync, validate, digest the moved files
//   3 src in an entry: unlist it there first        [source_unlisted]
//     (a listed file that has left would make its entry invalid; an unlisted
//     one is only hidden)
//   4 renameat2(src, dst): the file is in E, unlisted, hidden   [renamed]
//   5 E's manifest replaced (tmp, fsync, rename, fsync E) listing it
//                                                   [amended]
//     crash before: E is valid without the new file (old content of E);
//     after: E lists it. E is never invalid at any step.
//
// Out of an entry: a directory leaving E first gets its own manifest (it is
// then a nested entry, visible either way), then E drops its records, then
// it moves: no step hides it. A file leaving E (or moving within E) is
// unlisted first, so a crash before the rename hides that one file while E
// stays valid: the one case where a crash loses visibility of moved content
// (never correctness; `sealfs adopt` or the writer's next save restores it).
#include "core/store/publish.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <future>
#include <optional>
#include <system_error>
#include <vector>

#include "core/store/impl.hpp"

namespace sealfs {
namespace {

namespace step = publish_steps;

Error crashed(std::string_view at) {
  return make_error(ECANCELED, "fault hook: stopped after " + std::string(at));
}

Status rename_at(int sd, std::string_view sn, int dd, std::string_view dn, unsigned flags) {
  if (::renameat2(sd, std::string(sn).c_str(), dd, std::string(dn).c_str(), flags) != 0)
    return errno_error("rename " + std::string(sn) + " → " + std::string(dn));
  return {};
}

// Every regular file and symlink below dir_fd, as paths relative to it,
// leaving out reserved names (manifests, sidecars) and special files.
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

// Records for every file under the directory src_fd, keyed by key_prefix +
// path inside src; profile decisions use dst_rel + path. Data fsync'ed first.
Result<Manifest> Store::Impl::records_for_tree(int src_fd, const std::string& key_prefix,
                                               const std::string& dst_rel) {
  std::vector<std::string> paths;
  Status collected = collect_files(src_fd, "", 0, paths);
  if (!collected) return collected.error();
  // The fsyncs wait on the disk while the validators and digests keep a CPU
  // busy; R1 needs both done before the manifest is written, in no order, so
  // the fsyncs run on a helper thread meanwhile (inline when none starts).
  std::future<Status> synced;
  if (durable()) {
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
    auto rec = make_record(parent->get(), leaf, how, &m);
    if (!rec) return rec.error();
    m.files[how.key] = *rec;
  }
  if (synced.valid()) {
    if (Status s = synced.get(); !s) return s.error();
  }
  if (crash_at(step::kFilesSynced)) return crashed(step::kFilesSynced);
  if (crash_at(step::kValidated)) return crashed(step::kValidated);
  return m;
}

// Shared steps of one rename or link, with the store's state at hand.
class Store::Impl::Publisher {
 public:
  explicit Publisher(Store::Impl& s) : s_(s) {}

  // in_dir_entry: the record goes into a directory entry's manifest (else a sidecar).
  Result<FileRecord> record_for_file(int dir_fd, std::string_view name, const std::string& dst_rel,
                                     const std::string& key, bool in_dir_entry, Manifest* extras) {
    Store::Impl::RecordOptions how;
    how.sync_data = s_.durable();
    how.validate = true;
    how.profile_rel = dst_rel;
    how.key = key;
    how.in_dir_entry = in_dir_entry;
    auto rec = s_.make_record(dir_fd, name, how, extras);
    if (!rec) return rec;
    if (s_.crash_at(step::kFilesSynced)) return crashed(step::kFilesSynced);
    if (s_.crash_at(step::kValidated)) return crashed(step::kValidated);
    return rec;
  }

  // Before a visible object leaves an entry: drop its records there.
  Status unlist_source(const DirContext& sctx, std::string_view name, const Judgement& sj) {
    if (!sctx.entry) return {};
    if (sj.kind != ObjectKind::file_in_entry && sj.kind != ObjectKind::dir_in_entry &&
        sj.kind != ObjectKind::entry_root && sj.kind != ObjectKind::in_progress)
      return {};
    if (Status s = s_.unlist(*sctx.entry, sctx.entry_key(name)); !s) return s;
    if (s_.crash_at(step::kSourceUnlisted)) return crashed(step::kSourceUnlisted);
    return {};
  }

  // True when dir_fd holds anything lookup would show.
  Result<bool> has_visible_children(int dir_fd) {
    auto ctx = s_.context_of(dir_fd);
    if (!ctx) return ctx.error();
    auto children = read_dir(dir_fd);
    if (!children) return children.error();
    for (const auto& c : *children) {
      if (is_reserved_name(c.name)) continue;
      auto j = s_.judge(*ctx, dir_fd, c.name, VerifyDepth::stat_only);
      if (!j) return j.error();
      if (j->verdict == Verdict::visible) return true;
    }
    return false;
  }

  // R5/R6 checks on the destination, right before the rename. Hidden objects
  // are quarantined; a visible directory holding only hidden things too.
  Result<Judgement> clear_destination(const DirContext& dctx, int dd, std::string_view dn,
                                      const struct stat& src_st, unsigned flags, bool* exchange = nullptr) {
    auto dj = s_.clear_hidden(dctx, dd, dn);
    if (!dj) return dj;
    if (dj->verdict != Verdict::visible) return dj;
    if ((flags & RENAME_NOREPLACE) != 0) return make_error(EEXIST, std::string(dn) + " exists");
    if (same_object(dj->st, src_st)) return dj;  // rename onto itself (or a hard link of itself)
    const bool src_dir = S_ISDIR(src_st.st_mode);
    const bool dst_dir = S_ISDIR(dj->st.st_mode);
    if (src_dir && !dst_dir) return make_error(ENOTDIR, std::string(dn) + " is not a directory");
    if (!src_dir && dst_dir) return make_error(EISDIR, std::string(dn) + " is a directory");
    if (dst_dir) {
      auto sub = s_.found_at(dd, dn, dj->kind, &dj->st);
      if (!sub) return sub.error();
      auto visible = has_visible_children(sub->fd.get());
      if (!visible) return visible.error();
      if (*visible) return make_error(ENOTEMPTY, std::string(dn) + " is not empty");
      auto backing = read_dir(sub->fd.get());
      if (backing && !backing->empty() && exchange != nullptr) {
        // Only hidden leftovers: they must not block the publish (R5). The
        // caller swaps src in atomically (RENAME_EXCHANGE) and quarantines
        // the old directory from src's place, so no crash shows neither.
        *exchange = true;
      } else if (backing && !backing->empty()) {
        s_.quarantine_object(dd, dn, dj->st, dctx.child_rel(dn), "R5: directory holding only hidden objects");
        return Judgement{};
      }
    }
    return dj;
  }

  Status sync_parents(int sd, int dd) {
    Status s = s_.sync_directory(dd);
    if (!s) return s;
    auto a = stat_fd(sd);
    auto b = stat_fd(dd);
    if (a && b && !same_object(*a, *b)) s = s_.sync_directory(sd);
    return s;
  }

  Status publish_dir(const DirContext& sctx, int sd, std::string_view sn, const Judgement& sj,
                     const DirContext& dctx, int dd, std::string_view dn, unsigned flags);
  Status publish_file(const DirContext& sctx, int sd, std::string_view sn, const Judgement& sj,
                      const DirContext& dctx, int dd, std::string_view dn, unsigned flags);

 private:
  Store::Impl& s_;
};

Status Store::Impl::Publisher::publish_dir(const DirContext& sctx, int sd, std::string_view sn,
                                           const Judgement& sj, const DirContext& dctx, int dd,
                                           std::string_view dn, unsigned flags) {
  const std::string dst_rel = dctx.child_rel(dn);
  auto src = s_.found_at(sd, sn, sj.kind, &sj.st);
  if (!src) return src.error();
  // Cheap refusals before any hashing; the same checks run again (with
  // quarantine of hidden objects) right before the rename.
  {
    auto dj = s_.judge(dctx, dd, dn, VerifyDepth::stat_only);
    if (!dj) return dj.error();
    if (dj->verdict == Verdict::visible && (flags & RENAME_NOREPLACE) != 0 && !same_object(dj->st, sj.st))
      return make_error(EEXIST, std::string(dn) + " exists");
  }

  if (dctx.entry) {
    // Amend: the directory becomes part of the entry that holds dst.
    auto records = s_.records_for_tree(src->fd.get(), dctx.entry_key(dn), dst_rel);
    if (!records) return records.error();
    auto dj = clear_destination(dctx, dd, dn, sj.st, flags);
    if (!dj) return dj.error();
    if (Status u = unlist_source(sctx, sn, sj); !u) return u;
    if (Status r = rename_at(sd, sn, dd, dn, flags); !r) return r;
    if (s_.crash_at(step::kRenamed)) return crashed(step::kRenamed);
    Status amended = s_.edit_manifest(
        dctx.entry->fd.get(), dctx.entry->st, kDirManifest,
        [&](Manifest& m) {
          drop_records(m, dctx.entry_key(dn));
          for (const auto& [k, r] : records->files) m.files[k] = r;
          merge_extras(m, *records);
          return Status{};
        },
        false);
    if (!amended) return amended;
    if (s_.crash_at(step::kAmended)) return crashed(step::kAmended);
    // Its own manifest, if it had one, would now shadow the entry's records
    // for its files (nearest manifest wins); both agree, so order is free.
    ::unlinkat(src->fd.get(), std::string(kDirManifest).c_str(), 0);
    return sync_parents(sd, dd);
  }

  bool seal = true;
  if (sj.kind == ObjectKind::entry_root) {
    seal = false;  // verified already (judge): just move it, no re-hash
  } else if (sj.kind == ObjectKind::container) {
    // A container holding entries moves as a container: its entries keep
    // their own manifests. One holding nothing sealed is published as an entry.
    auto visible = has_visible_children(src->fd.get());
    if (!visible) return visible.error();
    seal = !*visible;
  }
  if (seal) {
    auto records = s_.records_for_tree(src->fd.get(), "", dst_rel);
    if (!records) return records.error();
    // A fresh manifest for the whole tree, whatever src held before.
    Status w = write_manifest_atomic(src->fd.get(), kDirManifest, *records, s_.durable());
    if (!w) return w;
    if (Status d = s_.sync_directory(src->fd.get()); !d) return d;
    if (s_.crash_at(step::kManifestWritten)) return crashed(step::kManifestWritten);
  }
  bool exchange = false;
  auto dj = clear_destination(dctx, dd, dn, sj.st, flags, &exchange);
  if (!dj) return dj.error();
  if (s_.crash_at(step::kDstCleared)) return crashed(step::kDstCleared);
  // Leaving an entry: the directory now carries its own manifest, so
  // unlisting it from the old entry never shows a partial state.
  if (Status u = unlist_source(sctx, sn, sj); !u) return u;
  if (Status r = rename_at(sd, sn, dd, dn, exchange ? RENAME_EXCHANGE : flags); !r) return r;
  if (s_.crash_at(step::kRenamed)) return crashed(step::kRenamed);
  if (exchange) {
    s_.quarantine_object(sd, sn, dj->st, dctx.child_rel(dn), "R5: directory holding only hidden objects");
  }
  if (Status d = sync_parents(sd, dd); !d) return d;
  if (s_.crash_at(step::kDirSynced)) return crashed(step::kDirSynced);
  if (dj->verdict == Verdict::visible) s_.invalidate(dd, dn, dj->st);
  return {};
}

Status Store::Impl::Publisher::publish_file(const DirContext& sctx, int sd, std::string_view sn,
                                            const Judgement& sj, const DirContext& dctx, int dd,
                                            std::string_view dn, unsigned flags) {
  const std::string dst_rel = dctx.child_rel(dn);
  const bool special = is_special_file(sj.st.st_mode);
  {
    auto dj = s_.judge(dctx, dd, dn, VerifyDepth::stat_only);
    if (!dj) return dj.error();
    if (dj->verdict == Verdict::visible && (flags & RENAME_NOREPLACE) != 0 && !same_object(dj->st, sj.st))
      return make_error(EEXIST, std::string(dn) + " exists");
  }
  const bool src_had_sidecar = !sctx.entry && sj.kind == ObjectKind::sealed_file;
  auto clean_source = [&]() -> Status {
    if (src_had_sidecar) {
      auto again = stat_at(sd, sn);  // same dir and name (rename onto itself): keep the sidecar
      if (!again) ::unlinkat(sd, sidecar_name(sn).c_str(), 0);
    }
    if (s_.crash_at(step::kSourceCleaned)) return crashed(step::kSourceCleaned);
    return {};
  };

  if (special) {
    auto dj = clear_destination(dctx, dd, dn, sj.st, flags);
    if (!dj) return dj.error();
    // A sealed object it replaces takes its record along: unlisted from its
    // entry first (a listed name that turned into a FIFO would make the entry
    // invalid), its sidecar removed after (a sidecar beside a FIFO shows nothing).
    const bool replaces = dj->verdict == Verdict::visible && !same_object(dj->st, sj.st);
    if (replaces && dctx.entry && dj->kind == ObjectKind::file_in_entry)
      if (Status u = s_.unlist(*dctx.entry, dctx.entry_key(dn)); !u) return u;
    if (Status u = unlist_source(sctx, sn, sj); !u) return u;
    if (Status r = rename_at(sd, sn, dd, dn, flags); !r) return r;
    if (replaces && !dctx.entry && dj->kind == ObjectKind::sealed_file)
      ::unlinkat(dd, sidecar_name(dn).c_str(), 0);
    return sync_parents(sd, dd);
  }

  const std::string key = dctx.entry ? dctx.entry_key(dn) : std::string(dn);
  Manifest extras;
  auto rec = record_for_file(sd, sn, dst_rel, key, dctx.entry.has_value(), &extras);
  if (!rec) return rec.error();
  auto dj = clear_destination(dctx, dd, dn, sj.st, flags);
  if (!dj) return dj.error();
  if (same_object(dj->st, sj.st) && dj->verdict == Verdict::visible) return {};  // POSIX: nothing to do
  if (s_.crash_at(step::kDstCleared)) return crashed(step::kDstCleared);

  if (dctx.entry) {
    // Replacing a listed file inside an entry: accept both while swapping.
    std::optional<FileRecord> old;
    if (dj->verdict == Verdict::visible && dj->kind == ObjectKind::file_in_entry) {
      auto v =
          s_.entries.cached(s_.dir_entry_location(dctx.entry->fd.get(), dctx.entry->st, dctx.entry->rel));
      if (v && v->manifest) {
        auto it = v->manifest->files.find(key);
        if (it != v->manifest->files.end()) old = it->second;
      }
    }
    if (old) {
      Status w = s_.edit_manifest(
          dctx.entry->fd.get(), dctx.entry->st, kDirManifest,
          [&](Manifest& m) {
            m.files[key] = *rec;
            m.accept[key] = *old;
            merge_extras(m, extras);
            return Status{};
          },
          false);
      if (!w) return w;
      if (s_.crash_at(step::kManifestWritten)) return crashed(step::kManifestWritten);
    }
    if (Status u = unlist_source(sctx, sn, sj); !u) return u;
    if (Status r = rename_at(sd, sn, dd, dn, flags); !r) return r;
    if (s_.crash_at(step::kRenamed)) return crashed(step::kRenamed);
    if (Status amended = s_.list_record(*dctx.entry, key, *rec, extras); !amended) return amended;
    if (s_.crash_at(step::kAmended)) return crashed(step::kAmended);
    if (Status d = sync_parents(sd, dd); !d) return d;
    if (dj->verdict == Verdict::visible) s_.invalidate(dd, dn, dj->st);
    return clean_source();
  }

  // dst in a container (or the root): a file entry with its own sidecar.
  std::optional<FileRecord> old;
  if (dj->verdict == Verdict::visible && dj->kind == ObjectKind::sealed_file) {
    auto v = s_.entries.cached(s_.file_entry_location(dd, dn, dj->st, dctx.rel));
    if (v && v->manifest) {
      auto it = v->manifest->files.find(std::string(dn));
      if (it != v->manifest->files.end()) old = it->second;
    }
    if (!old) {
      auto loaded = read_manifest_at(dd, sidecar_name(dn));
      if (loaded) {
        auto it = loaded->manifest.files.find(std::string(dn));
        if (it != loaded->manifest.files.end()) old = it->second;
      }
    }
  }
  Status w = s_.write_sidecar(dd, dn, *rec, old, &extras, &sj.st);
  if (!w) return w;
  if (s_.crash_at(step::kManifestWritten)) return crashed(step::kManifestWritten);
  if (Status u = unlist_source(sctx, sn, sj); !u) return u;
  if (Status r = rename_at(sd, sn, dd, dn, flags); !r) return r;
  if (s_.crash_at(step::kRenamed)) return crashed(step::kRenamed);
  if (Status d = sync_parents(sd, dd); !d) return d;
  if (s_.crash_at(step::kDirSynced)) return crashed(step::kDirSynced);
  if (old) {
    Status f = s_.write_sidecar(dd, dn, *rec, std::nullopt, &extras, &sj.st);
    if (!f) return f;
    if (Status d = s_.sync_directory(dd); !d) return d;
    if (s_.crash_at(step::kSidecarFinal)) return crashed(step::kSidecarFinal);
  }
  if (dj->verdict == Verdict::visible) s_.invalidate(dd, dn, dj->st);
  return clean_source();
}

Status Store::rename(int src_dir_fd, std::string_view src_name, int dst_dir_fd, std::string_view dst_name,
                     unsigned flags) {
  Impl& s = *impl_;
  Impl::DeferredInvalidations held(s);
  DirMoveGuard dir_moves(s.dir_contexts);
  if (Status ok = check_name(src_name); !ok) return ok.error();
  if (Status ok = check_name(dst_name); !ok) return ok.error();
  if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0 ||
      (flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)) == (RENAME_NOREPLACE | RENAME_EXCHANGE))
    return make_error(EINVAL, "unsupported rename flags");
  if (is_reserved_name(src_name)) return make_error(ENOENT, "reserved names are not visible");
  if (is_reserved_name(dst_name)) return make_error(EPERM, "reserved name");
  auto sctx = s.context_of(src_dir_fd);
  if (!sctx) return sctx.error();
  auto dctx = s.context_of(dst_dir_fd);
  if (!dctx) return dctx.error();
  auto sj = s.judge_visible(*sctx, src_dir_fd, src_name);
  if (!sj) return sj.error();
  if (S_ISDIR(sj->st.st_mode) || (flags & RENAME_EXCHANGE) != 0) dir_moves.arm();
  const bool src_vol = s.profile.is_volatile(sctx->child_rel(src_name));
  const bool dst_vol = s.profile.is_volatile(dctx->child_rel(dst_name));
  if ((flags & RENAME_EXCHANGE) != 0) {
    if (!src_vol || !dst_vol) return make_error(EINVAL, "RENAME_EXCHANGE only inside volatile areas (R6)");
    return rename_at(src_dir_fd, src_name, dst_dir_fd, dst_name, flags);
  }
  Impl::Publisher p(s);
  if (dst_vol) {
    // Into a volatile area: a plain move; the source stops being sealed.
    if (Status u = p.unlist_source(*sctx, src_name, *sj); !u) return u;
    auto before = stat_at(dst_dir_fd, dst_name);
    if (Status r = rename_at(src_dir_fd, src_name, dst_dir_fd, dst_name, flags); !r) return r;
    if (!sctx->entry && sj->kind == ObjectKind::sealed_file)
      ::unlinkat(src_dir_fd, sidecar_name(src_name).c_str(), 0);
    if (before && !same_object(*before, sj->st)) s.invalidate(dst_dir_fd, dst_name, *before);
    return {};
  }
  Status done = S_ISDIR(sj->st.st_mode)
                    ? p.publish_dir(*sctx, src_dir_fd, src_name, *sj, *dctx, dst_dir_fd, dst_name, flags)
                    : p.publish_file(*sctx, src_dir_fd, src_name, *sj, *dctx, dst_dir_fd, dst_name, flags);
  if (done) s.metrics.publishes.fetch_add(1, std::memory_order_relaxed);
  return done;
}

Result<Found> Store::link(int src_path_fd, int dst_dir_fd, std::string_view dst_name, PlaceHint src_hint) {
  Impl& s = *impl_;
  Impl::DeferredInvalidations held(s);
  if (Status ok = check_name(dst_name); !ok) return ok.error();
  if (is_reserved_name(dst_name)) return make_error(EPERM, "reserved name");
  auto st = stat_fd(src_path_fd);
  if (!st) return st.error();
  if (S_ISDIR(st->st_mode)) return make_error(EPERM, "hard links to directories are not allowed");
  auto placed = s.place(src_path_fd, nullptr, nullptr, src_hint);
  if (!placed) return make_error(ENOENT, placed.error().message);
  auto sctx = s.context_of(placed->parent.get());
  if (!sctx) return sctx.error();
  auto sj = s.judge_settled(*sctx, placed->parent.get(), placed->name, VerifyDepth::cached);
  if (!sj) return sj.error();
  if (sj->verdict != Verdict::visible) {
    s.act_on_invalid(*sctx, placed->parent.get(), placed->name, *sj);
    return make_error(ENOENT, placed->rel + ": hidden");
  }
  auto dctx = s.context_of(dst_dir_fd);
  if (!dctx) return dctx.error();
  const std::string dst_rel = dctx->child_rel(dst_name);
  const std::string dn(dst_name);
  auto do_link = [&]() -> Status {
    if (::linkat(placed->parent.get(), placed->name.c_str(), dst_dir_fd, dn.c_str(), 0) != 0)
      return errno_error("link " + placed->rel + " → " + dst_rel);
    return {};
  };
  if (s.profile.is_volatile(dst_rel)) {
    if (Status l = do_link(); !l) return l.error();
    return s.found_at(dst_dir_fd, dst_name, ObjectKind::volatile_obj, &placed->st);
  }
  auto dj = s.clear_hidden(*dctx, dst_dir_fd, dst_name);
  if (!dj) return dj.error();
  if (dj->verdict == Verdict::visible) return make_error(EEXIST, dn + " exists");
  if (is_special_file(st->st_mode)) {
    if (Status l = do_link(); !l) return l.error();
    return s.found_at(dst_dir_fd, dst_name, ObjectKind::special, &placed->st);
  }
  // R10: a publish like R1 that leaves the source in place. Hard links are
  // one inode under two names, each covered by its own manifest; a later
  // in-place rewrite through one name re-seals that name only, and the other
  // name's manifest then fails to verify and is quarantined (as R8 says for
  // rewrites of published files).
  Impl::Publisher p(s);
  const std::string key = dctx->entry ? dctx->entry_key(dst_name) : dn;
  Manifest extras;
  auto rec =
      p.record_for_file(placed->parent.get(), placed->name, dst_rel, key, dctx->entry.has_value(), &extras);
  if (!rec) return rec.error();
  if (dctx->entry) {
    if (Status l = do_link(); !l) return l.error();
    if (s.crash_at(publish_steps::kRenamed)) return crashed(publish_steps::kRenamed);
    if (Status amended = s.list_record(*dctx->entry, key, *rec, extras); !amended) return amended.error();
    if (s.crash_at(publish_steps::kAmended)) return crashed(publish_steps::kAmended);
  } else {
    Status w = s.write_sidecar(dst_dir_fd, dst_name, *rec, std::nullopt, &extras, &placed->st);
    if (!w) return w.error();
    if (s.crash_at(publish_steps::kManifestWritten)) return crashed(publish_steps::kManifestWritten);
    if (Status l = do_link(); !l) return l.error();
    if (s.crash_at(publish_steps::kRenamed)) return crashed(publish_steps::kRenamed);
    if (Status d = s.sync_directory(dst_dir_fd); !d) return d.error();
  }
  s.metrics.publishes.fetch_add(1, std::memory_order_relaxed);
  return s.found_at(dst_dir_fd, dst_name, dctx->entry ? ObjectKind::file_in_entry : ObjectKind::sealed_file,
                    &placed->st);
}

}  // namespace sealfs
