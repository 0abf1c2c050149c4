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
//     dst an empty directory (an empty entry) → its manifest removed; crash
//     here: dst is an empty directory still, as visible as before.
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
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>  // renameat2
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/impl.hpp"
#include "core/store/in_flight.hpp"
#include "core/store/judge.hpp"
#include "core/store/place.hpp"
#include "core/store/records.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {
namespace {

namespace step = publish_steps;

Status rename_at(int sd, std::string_view sn, int dd, std::string_view dn, unsigned flags) {
  if (::renameat2(sd, std::string(sn).c_str(), dd, std::string(dn).c_str(), flags) != 0)
    return errno_error("rename " + std::string(sn) + " → " + std::string(dn));
  return {};
}

// The records listed under old_key's subtree of m whose path below base_fd
// leads nowhere now, taken out of m, keyed by what follows old_key. A seal
// of a file inside a directory being moved may write its record between the
// move's unlist of the old keys and the rename itself (its check that the
// key leads to the file passes then); after the rename that key names a
// missing file and the entry would be hidden whole (fsmix entry seed 12).
std::map<std::string, FileRecord> take_moved_records(Manifest& m, int base_fd, const std::string& old_key) {
  std::map<std::string, FileRecord> taken;
  for (auto it = m.files.begin(); it != m.files.end();) {
    const std::string& k = it->first;
    const bool below =
        k == old_key ||
        (k.size() > old_key.size() && k.compare(0, old_key.size(), old_key) == 0 && k[old_key.size()] == '/');
    if (!below || open_beneath(base_fd, k, O_PATH | O_NOFOLLOW)) {
      ++it;
      continue;
    }
    m.accept.erase(k);
    taken.emplace(k.substr(old_key.size()), std::move(it->second));
    it = m.files.erase(it);
  }
  return taken;
}

// One rename: the visible source (sd/sn in sctx, judged sj) and where it goes.
struct Move {
  const DirContext& sctx;
  int sd;
  std::string_view sn;
  const Judgement& sj;
  const DirContext& dctx;
  int dd;
  std::string_view dn;
  unsigned flags;

  std::string dst_rel() const { return dctx.child_rel(dn); }
  Status rename(unsigned with_flags) const { return rename_at(sd, sn, dd, dn, with_flags); }
};

// A directory made an entry, or moved into, out of or within one: where
// entries begin changes (entry_bounds.hpp). From its records to its rename no
// sidecar is written and no record is listed for a file placed before; the
// cached directory contexts go before the hold does.
class Reshaping {
 public:
  explicit Reshaping(Store::Impl& s) : hold_(s.bounds.reshape()), contexts_(s.places.contexts(), true) {}

 private:
  std::unique_lock<std::shared_mutex> hold_;
  DirMoveGuard contexts_;  // destroyed first, while the hold is still held
};

// The R1/R6/R10 transactions, with the store's state at hand.
class Publisher {
 public:
  explicit Publisher(Store::Impl& s) : s_(s) {}

  // in_dir_entry: the record goes into a directory entry's manifest (else a sidecar).
  Result<FileRecord> record_for_file(int dir_fd, std::string_view name, const std::string& dst_rel,
                                     const std::string& key, bool in_dir_entry, Manifest* extras) {
    RecordOptions how;
    how.sync_data = s_.policy.durable();
    how.validate = true;
    how.profile_rel = dst_rel;
    how.key = key;
    how.in_dir_entry = in_dir_entry;
    auto rec = s_.records.make_record(dir_fd, name, how, extras);
    if (!rec) return rec;
    if (auto crash = s_.policy.step(step::kFilesSynced)) return *crash;
    if (auto crash = s_.policy.step(step::kValidated)) return *crash;
    return rec;
  }

  // Before a visible object leaves an entry: drop its records there.
  Status unlist_source(const DirContext& sctx, std::string_view name, const Judgement& sj) {
    if (!sctx.entry) return {};
    if (sj.kind != ObjectKind::file_in_entry && sj.kind != ObjectKind::dir_in_entry &&
        sj.kind != ObjectKind::entry_root && sj.kind != ObjectKind::in_progress)
      return {};
    if (Status s = s_.records.unlist(*sctx.entry, sctx.entry_key(name)); !s) return s;
    if (auto crash = s_.policy.step(step::kSourceUnlisted)) return *crash;
    return {};
  }
  Status unlist_source(const Move& m) { return unlist_source(m.sctx, m.sn, m.sj); }

  Status publish_dir(const Move& m);
  Status publish_file(const Move& m);

 private:
  struct Holds {
    bool visible = false;          // lookup would show something: not empty (R6)
    bool hidden = false;           // foreign, unlisted or damaged things (R5)
    std::vector<std::string> own;  // sealfs's own files only: its manifest, sidecars
  };
  Result<Holds> holds(int dir_fd);
  Status refuse_existing(const Move& m);
  Result<Judgement> clear_destination(const Move& m, bool* exchange = nullptr);
  Status rename_into_place(const Move& m, bool& exchange, const struct stat& dst_st);
  Status sync_parents(int sd, int dd);
  Status amend_dir(const Move& m, int src_fd);
  Status publish_special(const Move& m);
  Status amend_file(const Move& m, const FileRecord& rec, const Manifest& extras, const Judgement& dj);
  Status publish_file_entry(const Move& m, const FileRecord& rec, const Manifest& extras,
                            const Judgement& dj);
  std::optional<FileRecord> old_sidecar_record(const Move& m, const Judgement& dj);
  Status clean_source(const Move& m);

  Store::Impl& s_;
};

// What dir_fd holds, as lookup and R5 see it; stops at the first visible
// child. A manifest or sidecar is sealfs's own bookkeeping, no hidden object:
// a directory holding nothing else is empty, as an rmdir would find it.
Result<Publisher::Holds> Publisher::holds(int dir_fd) {
  auto ctx = s_.places.context_of(dir_fd);
  if (!ctx) return ctx.error();
  Holds h;
  Status failed;
  Status listed =
      s_.judge.each_child(*ctx, dir_fd, nullptr, [&](const DirChild& c, const Result<Judgement>* j) {
        if (j != nullptr && !*j) {
          failed = (*j).error();
        } else if (j != nullptr && ((*j)->verdict == Verdict::visible || (*j)->transient)) {
          // Visible, or invalid only because its entry changed while it was
          // judged (a seal amending it): something a lookup shows, no leftover.
          h.visible = true;
        } else if (j == nullptr) {
          const bool bookkeeping = c.name == kDirManifest || c.name.starts_with(kSidecarPrefix);
          auto st = stat_at(dir_fd, c.name);
          if (bookkeeping && st && S_ISREG(st->st_mode))
            h.own.push_back(c.name);
          else if (st || st.code() != ENOENT)
            h.hidden = true;  // another reserved name, or one that cannot be told apart
        } else if ((*j)->verdict != Verdict::absent) {
          h.hidden = true;
        }
        return failed.ok() && !h.visible;
      });
  if (!listed) return listed.error();
  if (!failed) return failed.error();
  return h;
}

// RENAME_NOREPLACE refused before the source is hashed: a stat-only look at
// the destination. clear_destination judges it again right before the
// rename, so other renames skip this one (one judgement per side).
Status Publisher::refuse_existing(const Move& m) {
  if ((m.flags & RENAME_NOREPLACE) == 0) return {};
  auto dj = s_.judge.judge(m.dctx, m.dd, m.dn, VerifyDepth::stat_only);
  if (!dj) return dj.error();
  if (dj->verdict == Verdict::visible && !same_object(dj->st, m.sj.st))
    return make_error(EEXIST, std::string(m.dn) + " exists");
  return {};
}

// R5/R6 checks on the destination, right before the rename. Hidden objects
// are quarantined; a visible directory holding only hidden things too.
Result<Judgement> Publisher::clear_destination(const Move& m, bool* exchange) {
  const std::string_view dn = m.dn;
  auto dj = s_.consequences.clear_hidden(m.dctx, m.dd, dn);
  if (!dj) return dj;
  if (dj->verdict != Verdict::visible) return dj;
  if ((m.flags & RENAME_NOREPLACE) != 0) return make_error(EEXIST, std::string(dn) + " exists");
  if (same_object(dj->st, m.sj.st)) return dj;  // rename onto itself (or a hard link of itself)
  const bool src_dir = S_ISDIR(m.sj.st.st_mode);
  const bool dst_dir = S_ISDIR(dj->st.st_mode);
  if (src_dir && !dst_dir) return make_error(ENOTDIR, std::string(dn) + " is not a directory");
  if (!src_dir && dst_dir) return make_error(EISDIR, std::string(dn) + " is a directory");
  if (!dst_dir) return dj;
  auto sub = found_at(m.dd, dn, dj->kind, &dj->st);
  if (!sub) return sub.error();
  auto h = holds(sub->fd.get());
  if (!h) return h.error();
  if (h->visible) return make_error(ENOTEMPTY, std::string(dn) + " is not empty");
  if (!h->hidden) {
    // Empty (an empty entry holds only its manifest): replaced as on a plain
    // directory, no damage and no quarantine. Its bookkeeping goes first, the
    // manifest last, so that the rename finds an empty directory; a crash in
    // between leaves an empty directory, visible as before.
    std::stable_partition(h->own.begin(), h->own.end(),
                          [](const std::string& n) { return n != kDirManifest; });
    for (const auto& own : h->own)
      if (::unlinkat(sub->fd.get(), own.c_str(), 0) != 0 && errno != ENOENT)
        return errno_error("unlink " + m.dst_rel() + "/" + own);
    if (!h->own.empty()) s_.entries.forget(dj->st.st_dev, dj->st.st_ino);
    return dj;
  }
  if (exchange != nullptr) {
    // Only hidden leftovers: they must not block the publish (R5). The
    // caller swaps src in atomically (RENAME_EXCHANGE) and quarantines
    // the old directory from src's place, so no crash shows neither.
    *exchange = true;
  } else {
    s_.consequences.quarantine_object(m.dd, dn, dj->st, m.dst_rel(), HideReason::only_hidden,
                                      "R5: directory holding only hidden objects");
    return Judgement{};
  }
  return dj;
}

Status Publisher::sync_parents(int sd, int dd) {
  Status s = s_.policy.sync_directory(dd);
  if (!s) return s;
  auto a = stat_fd(sd);
  auto b = stat_fd(dd);
  if (a && b && !same_object(*a, *b)) s = s_.policy.sync_directory(sd);
  return s;
}

// Amend: the directory becomes part of the entry that holds dst.
Status Publisher::amend_dir(const Move& m, int src_fd) {
  const EntryRoot& entry = *m.dctx.entry;
  const std::string key = m.dctx.entry_key(m.dn);
  const Reshaping reshaping(s_);  // it joins an entry, maybe from another
  std::map<std::string, Stamp> hashed;
  auto records = s_.records.records_for_tree(src_fd, key, m.dst_rel(), &hashed);
  if (!records) return records.error();
  auto dj = clear_destination(m);
  if (!dj) return dj.error();
  if (Status u = unlist_source(m); !u) return u;
  if (Status r = m.rename(m.flags); !r) return r;
  if (auto crash = s_.policy.step(step::kRenamed)) return *crash;
  // Records sealed meanwhile under the old keys (take_moved_records) follow
  // the directory; from another entry's manifest they move across.
  const bool same_manifest = m.sctx.entry && same_object(m.sctx.entry->st, entry.st);
  const std::string old_key = m.sctx.entry ? m.sctx.entry_key(m.sn) : std::string();
  std::map<std::string, FileRecord> late;
  if (m.sctx.entry && !same_manifest) {
    const EntryRoot& from = *m.sctx.entry;
    Status taken = s_.records.edit_manifest(
        from.fd.get(), from.st, kDirManifest, from.rel,
        [&](Manifest& source) {
          late = take_moved_records(source, from.fd.get(), old_key);
          return late.empty() ? Status(make_error(EAGAIN, "nothing sealed meanwhile")) : Status{};
        },
        false);
    if (!taken && taken.code() != EAGAIN) return taken;
  }
  Status amended = s_.records.edit_manifest(
      entry.fd.get(), entry.st, kDirManifest, entry.rel,
      [&](Manifest& into) {
        if (same_manifest) late = take_moved_records(into, entry.fd.get(), old_key);
        // Under the manifest's lock: a seal of a file below, placed here
        // from now on, writes after this (src_fd is the moved directory).
        s_.records.refresh_records(src_fd, key, m.dst_rel(), hashed, *records);
        drop_records(into, key);
        for (const auto& [k, r] : records->files) into.files[k] = r;
        merge_extras(into, *records);
        for (const auto& [below, r] : late) into.files[key + below] = r;  // newer than records_for_tree's
        return Status{};
      },
      false);
  if (!amended) return amended;
  if (auto crash = s_.policy.step(step::kAmended)) return *crash;
  // Its own manifest, if it had one, would now shadow the entry's records
  // for its files (nearest manifest wins); both agree, so order is free.
  ::unlinkat(src_fd, std::string(kDirManifest).c_str(), 0);
  // Entries below it stay their own units (records_for_tree left them out):
  // with keys, they are signed again for where they are now.
  (void)s_.records.move_signatures(src_fd, m.sctx.child_rel(m.sn), m.dst_rel());
  return sync_parents(m.sd, m.dd);
}

// The rename itself: over hidden leftovers an exchange (they are then
// quarantined from src's old name), else m.flags. Where the filesystem has
// no RENAME_EXCHANGE (GlusterFS's FUSE client answers EINVAL) the leftovers
// go to quarantine first, then src is renamed in: a crash in between shows
// neither, which for a directory of hidden things is the same miss as before.
Status Publisher::rename_into_place(const Move& m, bool& exchange, const struct stat& dst_st) {
  Status renamed = m.rename(exchange ? RENAME_EXCHANGE : m.flags);
  if (renamed || !exchange || renamed.code() != EINVAL) return renamed;
  s_.consequences.quarantine_object(m.dd, m.dn, dst_st, m.dst_rel(), HideReason::only_hidden,
                                    "R5: directory holding only hidden objects");
  exchange = false;
  return m.rename(m.flags);
}

Status Publisher::publish_dir(const Move& m) {
  auto src = found_at(m.sd, m.sn, m.sj.kind, &m.sj.st);
  if (!src) return src.error();
  if (Status refused = refuse_existing(m); !refused) return refused;
  if (m.dctx.entry) return amend_dir(m, src->fd.get());
  bool seal = true;
  if (m.sj.kind == ObjectKind::entry_root) {
    seal = false;  // verified already (judge): just move it, no re-hash
  } else if (m.sj.kind == ObjectKind::container) {
    // A container holding entries moves as a container: its entries keep
    // their own manifests. One holding nothing sealed is published as an entry.
    auto h = holds(src->fd.get());
    if (!h) return h.error();
    seal = !h->visible;
  }
  std::optional<Reshaping> reshaping;  // made an entry, or leaving one
  if (seal) {
    reshaping.emplace(s_);
    std::map<std::string, Stamp> hashed;
    auto records = s_.records.records_for_tree(src->fd.get(), "", m.dst_rel(), &hashed);
    if (!records) return records.error();
    s_.records.refresh_records(src->fd.get(), "", m.dst_rel(), hashed, *records);
    // A fresh manifest for the whole tree, whatever src held before, signed
    // for where it goes.
    Status w = s_.records.write_manifest(src->fd.get(), kDirManifest, std::move(*records), m.dst_rel());
    if (!w) return w;
    if (Status d = s_.policy.sync_directory(src->fd.get()); !d) return d;
    if (auto crash = s_.policy.step(step::kManifestWritten)) return *crash;
  }
  bool exchange = false;
  auto dj = clear_destination(m, &exchange);
  if (!dj) return dj.error();
  if (auto crash = s_.policy.step(step::kDstCleared)) return *crash;
  // Leaving an entry: the directory now carries its own manifest, so
  // unlisting it from the old entry never shows a partial state.
  if (Status u = unlist_source(m); !u) return u;
  // With keys, a manifest's MAC names its place: an entry moved as it is
  // is signed for dst right before the rename (so dst is whole the moment
  // it appears; a crash in between hides src, never shows anything
  // unsigned), and signed back if the rename fails. A container's entries
  // are signed again after it moved (hidden at their new places meanwhile).
  const std::string src_rel = m.sctx.child_rel(m.sn);
  const bool moves_entry = !seal && m.sj.kind == ObjectKind::entry_root;
  if (moves_entry) (void)s_.records.move_signatures(src->fd.get(), src_rel, m.dst_rel());
  if (Status renamed = rename_into_place(m, exchange, dj->st); !renamed) {
    if (moves_entry) (void)s_.records.move_signatures(src->fd.get(), m.dst_rel(), src_rel);
    return renamed;
  }
  if (auto crash = s_.policy.step(step::kRenamed)) return *crash;
  if (!seal && !moves_entry) (void)s_.records.move_signatures(src->fd.get(), src_rel, m.dst_rel());
  if (exchange)
    s_.consequences.quarantine_object(m.sd, m.sn, dj->st, m.dst_rel(), HideReason::only_hidden,
                                      "R5: directory holding only hidden objects");
  if (Status d = sync_parents(m.sd, m.dd); !d) return d;
  if (auto crash = s_.policy.step(step::kDirSynced)) return *crash;
  if (dj->verdict == Verdict::visible) s_.consequences.invalidate(m.dd, m.dn, dj->st);
  return {};
}

// A FIFO, socket or device node moves as it is (R10), never sealed.
Status Publisher::publish_special(const Move& m) {
  auto dj = clear_destination(m);
  if (!dj) return dj.error();
  // A sealed object it replaces takes its record along: unlisted from its
  // entry first (a listed name that turned into a FIFO would make the entry
  // invalid), its sidecar removed after (a sidecar beside a FIFO shows nothing).
  const bool replaces = dj->verdict == Verdict::visible && !same_object(dj->st, m.sj.st);
  if (replaces && m.dctx.entry && dj->kind == ObjectKind::file_in_entry)
    if (Status u = s_.records.unlist(*m.dctx.entry, m.dctx.entry_key(m.dn)); !u) return u;
  if (Status u = unlist_source(m); !u) return u;
  if (Status r = m.rename(m.flags); !r) return r;
  if (replaces && !m.dctx.entry && dj->kind == ObjectKind::sealed_file)
    ::unlinkat(m.dd, sidecar_name(m.dn).c_str(), 0);
  return sync_parents(m.sd, m.dd);
}

// After a file publish: the source's old sidecar goes (a stale sidecar beside
// no file is invisible, and removed by rmdir, R5).
Status Publisher::clean_source(const Move& m) {
  if (!m.sctx.entry && m.sj.kind == ObjectKind::sealed_file) {
    auto again = stat_at(m.sd, m.sn);  // same dir and name (rename onto itself): keep the sidecar
    if (!again) ::unlinkat(m.sd, sidecar_name(m.sn).c_str(), 0);
  }
  if (auto crash = s_.policy.step(step::kSourceCleaned)) return *crash;
  return {};
}

// Into a directory entry: the file is renamed in unlisted, then listed.
Status Publisher::amend_file(const Move& m, const FileRecord& rec, const Manifest& extras,
                             const Judgement& dj) {
  const EntryRoot& entry = *m.dctx.entry;
  const std::string key = m.dctx.entry_key(m.dn);
  // Replacing a listed file inside an entry (sealed, or being written): the
  // manifest accepts both while they swap. The old record is read from the
  // manifest under its lock, not from a cached verdict (stale once another
  // file's seal amended the manifest), and a file in progress may be listed
  // too: else a lookup between the rename and the listing below found the
  // new file against the old record and condemned the whole entry (fsmix
  // multi-entry seed 3, 2 runs in 10).
  if (dj.verdict == Verdict::visible &&
      (dj.kind == ObjectKind::file_in_entry || dj.kind == ObjectKind::in_progress) &&
      !same_object(dj.st, m.sj.st)) {
    Status w = s_.records.edit_manifest(
        entry.fd.get(), entry.st, kDirManifest, entry.rel,
        [&](Manifest& into) {
          auto it = into.files.find(key);
          if (it == into.files.end()) return Status(make_error(EAGAIN, "not listed: nothing to accept"));
          into.accept[key] = it->second;
          it->second = rec;
          merge_extras(into, extras);
          return Status{};
        },
        false);
    if (!w && w.code() != EAGAIN) return w;
    if (auto crash = s_.policy.step(step::kManifestWritten)) return *crash;
  }
  // Unlisted from its source until listed here: in progress meanwhile.
  const FilesInFlight::Guard in_flight(s_.in_flight, m.sj.st);
  if (Status u = unlist_source(m); !u) return u;
  if (Status r = m.rename(m.flags); !r) return r;
  if (auto crash = s_.policy.step(step::kRenamed)) return *crash;
  if (Status amended = s_.records.list_record(entry, key, rec, extras); !amended) return amended;
  if (auto crash = s_.policy.step(step::kAmended)) return *crash;
  if (Status d = sync_parents(m.sd, m.dd); !d) return d;
  if (dj.verdict == Verdict::visible) s_.consequences.invalidate(m.dd, m.dn, dj.st);
  return clean_source(m);
}

// The record of the visible sealed file a publish replaces (R6): from its
// cached verdict, else from its sidecar.
std::optional<FileRecord> Publisher::old_sidecar_record(const Move& m, const Judgement& dj) {
  if (dj.verdict != Verdict::visible || dj.kind != ObjectKind::sealed_file) return std::nullopt;
  const std::string dn(m.dn);
  auto v = s_.entries.cached(file_entry_location(m.dd, dn, dj.st, m.dctx.rel));
  if (v && v->manifest) {
    auto it = v->manifest->files.find(dn);
    if (it != v->manifest->files.end()) return it->second;
  }
  auto loaded = read_manifest_at(m.dd, sidecar_name(dn));
  if (loaded && s_.records.check_authentic(loaded->manifest, m.dctx.child_rel(dn))) {
    auto it = loaded->manifest.files.find(dn);
    if (it != loaded->manifest.files.end()) return it->second;
  }
  return std::nullopt;
}

// dst in a container (or the root): a file entry with its own sidecar.
Status Publisher::publish_file_entry(const Move& m, const FileRecord& rec, const Manifest& extras,
                                     const Judgement& dj) {
  // In a container until the file is in: EAGAIN when dd became an entry
  // since m was made (StorePublishing::rename makes it again).
  auto outside = s_.bounds.keep_container(m.dd);
  if (!outside) return outside.error();
  const std::optional<FileRecord> old = old_sidecar_record(m, dj);
  Status w = s_.records.write_sidecar(m.dd, m.dctx.rel, m.dn, rec, old, &extras, &m.sj.st);
  if (!w) return w;
  if (auto crash = s_.policy.step(step::kManifestWritten)) return *crash;
  if (Status u = unlist_source(m); !u) return u;
  if (Status r = m.rename(m.flags); !r) return r;
  if (auto crash = s_.policy.step(step::kRenamed)) return *crash;
  if (Status d = sync_parents(m.sd, m.dd); !d) return d;
  if (auto crash = s_.policy.step(step::kDirSynced)) return *crash;
  if (old) {
    Status f = s_.records.write_sidecar(m.dd, m.dctx.rel, m.dn, rec, std::nullopt, &extras, &m.sj.st);
    if (!f) return f;
    if (Status d = s_.policy.sync_directory(m.dd); !d) return d;
    if (auto crash = s_.policy.step(step::kSidecarFinal)) return *crash;
  }
  if (dj.verdict == Verdict::visible) s_.consequences.invalidate(m.dd, m.dn, dj.st);
  return clean_source(m);
}

Status Publisher::publish_file(const Move& m) {
  if (Status refused = refuse_existing(m); !refused) return refused;
  if (is_special_file(m.sj.st.st_mode)) return publish_special(m);
  const std::string key = m.dctx.entry ? m.dctx.entry_key(m.dn) : std::string(m.dn);
  Manifest extras;
  auto rec = record_for_file(m.sd, m.sn, m.dst_rel(), key, m.dctx.entry.has_value(), &extras);
  if (!rec) return rec.error();
  auto dj = clear_destination(m);
  if (!dj) return dj.error();
  if (same_object(dj->st, m.sj.st) && dj->verdict == Verdict::visible) return {};  // POSIX: nothing to do
  if (auto crash = s_.policy.step(step::kDstCleared)) return *crash;
  if (m.dctx.entry) return amend_file(m, *rec, extras, *dj);
  return publish_file_entry(m, *rec, extras, *dj);
}

// One try of StorePublishing::rename: EAGAIN when the destination's
// directory became (part of) an entry after its context was taken.
Status rename_once(Store::Impl& s, int src_dir_fd, std::string_view src_name, int dst_dir_fd,
                   std::string_view dst_name, unsigned flags) {
  DeferredInvalidations held(s.consequences);
  DirMoveGuard dir_moves(s.places.contexts());
  auto sctx = s.places.context_of(src_dir_fd);
  if (!sctx) return sctx.error();
  auto dctx = s.places.context_of(dst_dir_fd);
  if (!dctx) return dctx.error();
  auto sj = s.consequences.judge_visible(*sctx, src_dir_fd, src_name);
  if (!sj) return sj.error();
  if (S_ISDIR(sj->st.st_mode) || (flags & RENAME_EXCHANGE) != 0) dir_moves.arm();
  const bool src_vol = s.profile.is_volatile(sctx->child_rel(src_name));
  const bool dst_vol = s.profile.is_volatile(dctx->child_rel(dst_name));
  if ((flags & RENAME_EXCHANGE) != 0) {
    if (!src_vol || !dst_vol) return make_error(EINVAL, "RENAME_EXCHANGE only inside volatile areas (R6)");
    return rename_at(src_dir_fd, src_name, dst_dir_fd, dst_name, flags);
  }
  Publisher p(s);
  if (dst_vol) {
    // Into a volatile area: a plain move; the source stops being sealed.
    if (Status u = p.unlist_source(*sctx, src_name, *sj); !u) return u;
    auto before = stat_at(dst_dir_fd, dst_name);
    if (Status r = rename_at(src_dir_fd, src_name, dst_dir_fd, dst_name, flags); !r) return r;
    if (!sctx->entry && sj->kind == ObjectKind::sealed_file)
      ::unlinkat(src_dir_fd, sidecar_name(src_name).c_str(), 0);
    if (before && !same_object(*before, sj->st)) s.consequences.invalidate(dst_dir_fd, dst_name, *before);
    return {};
  }
  const Move m{*sctx, src_dir_fd, src_name, *sj, *dctx, dst_dir_fd, dst_name, flags};
  const auto started = std::chrono::steady_clock::now();
  Status done = S_ISDIR(sj->st.st_mode) ? p.publish_dir(m) : p.publish_file(m);
  if (!done) return done;
  s.metrics.publishes.fetch_add(1, std::memory_order_relaxed);
  s.metrics.publish_seconds.observe(std::chrono::steady_clock::now() - started);
  return done;
}

}  // namespace

Status StorePublishing::rename(int src_dir_fd, std::string_view src_name, int dst_dir_fd,
                               std::string_view dst_name, unsigned flags) {
  if (Status ok = check_name(src_name); !ok) return ok.error();
  if (Status ok = check_name(dst_name); !ok) return ok.error();
  if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0 ||
      (flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)) == (RENAME_NOREPLACE | RENAME_EXCHANGE))
    return make_error(EINVAL, "unsupported rename flags");
  if (is_reserved_name(src_name)) return make_error(ENOENT, "reserved names are not visible");
  if (is_reserved_name(dst_name)) return make_error(EPERM, "reserved name");
  Status done = rename_once(*impl_, src_dir_fd, src_name, dst_dir_fd, dst_name, flags);
  for (int tries = 1; !done && done.code() == EAGAIN && tries < kPlaceTries; ++tries)
    done = rename_once(*impl_, src_dir_fd, src_name, dst_dir_fd, dst_name, flags);
  return done;
}

}  // namespace sealfs
