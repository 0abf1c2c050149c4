// Private to the store's .cpp files (store, publish, seal, fsck): the state
// behind sealfs::Store and the judgements every operation shares.
//
// Locks (none is ever held while on_invalidate runs, and none while hashing
// files that the locked data does not cover):
//   - Verifier::Impl::mu        the stamp→digest cache (core/verify/verifier.cpp)
//   - EntryVerifier::mu_        the verdict cache (core/verify/entry.cpp)
//   - Quarantine::mu_           quarantine slots and bounds
//   - Impl::manifest_locks_     one of 64 stripes per directory holding a
//                               manifest (entry dir for a dir manifest, parent
//                               for sidecars): held for each read-modify-write
//                               of that manifest, so concurrent amends, seals
//                               and unlinks never lose each other's updates.
//                               Digests are computed before taking it.
#pragma once

#include <sys/stat.h>

#include <array>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/layout/paths.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/quarantine.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

enum class Verdict {
  absent,         // no such name
  visible,        // lookup shows it, as `kind`
  hidden,         // foreign, unlisted, reserved, abandoned…
  invalid_self,   // an entry that fails verification: quarantine it (and companions)
  invalid_entry,  // the enclosing entry fails verification: quarantine that
};

struct Judgement {
  Verdict verdict = Verdict::absent;
  ObjectKind kind = ObjectKind::container;
  struct stat st {};
  std::string reason;                   // for hidden/invalid
  std::vector<std::string> companions;  // a file entry's sidecar, moved with it
  bool transient = false;               // invalid only because it changed while judged: judge again
  bool sealed_file() const {
    return verdict == Verdict::visible &&
           (kind == ObjectKind::sealed_file || kind == ObjectKind::file_in_entry);
  }
};

struct Store::Impl {
  Impl(UniqueFd root, std::string root_path_, struct stat root_st_, Profile profile_, StoreOptions options_);

  UniqueFd root_fd;
  std::string root_path;
  struct stat root_st {};
  Profile profile;
  StoreOptions options;
  Metrics metrics;
  Verifier verifier;
  EntryVerifier entries;
  Quarantine quarantine;
  // Contexts of recently used directories; moved() by every change through
  // the mount that moves, removes or quarantines a directory.
  mutable DirContextCache dir_contexts;

  // ---- small policy helpers ---------------------------------------------
  bool durable() const { return options.durability == Durability::fsync; }
  // fsync when durability=fsync; a no-op otherwise.
  Status sync_file(int fd) const { return durable() ? sync_fd(fd) : Status{}; }
  Status sync_directory(int dir_fd) const { return durable() ? sync_dir(dir_fd) : Status{}; }
  // The test fault hook: true means "crash here" (return ECANCELED, no cleanup).
  bool crash_at(std::string_view step) const { return options.fault_hook && options.fault_hook(step); }
  bool in_progress(const struct stat& st) const {
    return S_ISREG(st.st_mode) && options.in_progress && options.in_progress(st.st_dev, st.st_ino);
  }
  std::mutex& manifest_lock(const struct stat& holder);

  // ---- where things are ---------------------------------------------------
  // fd's path below the root, from /proc; beyond PATH_MAX by climbing (a
  // directory) or from hint (a file), see rel_beyond_path_max.
  Result<std::string> rel_of(int fd, PlaceHint hint = {}) const;
  Result<std::string> rel_beyond_path_max(int fd, PlaceHint hint) const;
  Result<DirContext> context_of(int dir_fd) const;
  // The walk context_of does from the root along ctx.rel; the directory reached.
  Result<UniqueFd> walk_context(DirContext& ctx) const;
  // Opens the parent directory of the object behind path_fd and gives its
  // name there; ESTALE when deleted, ENOENT when no longer below the root or
  // when the name no longer holds that object.
  struct Placed {
    UniqueFd parent;
    std::string name;
    std::string rel;
    struct stat st {};
  };
  // With parent_ctx, also that parent's context (as context_of), from one walk.
  // known: a stat of path_fd the caller already has.
  // hint: where the caller last saw the object (Store's PlaceHint).
  Result<Placed> place(int path_fd, DirContext* parent_ctx = nullptr, const struct stat* known = nullptr,
                       PlaceHint hint = {}) const;
  // place() and the parent's context for a file closed through M, followed
  // across directory renames (seal.cpp); ENOENT when it no longer exists.
  Result<std::pair<Placed, DirContext>> place_closed_file(int path_fd, PlaceHint hint);
  // rel: the entry directory's path below the root; parent_rel: the file
  // entry's directory's (the profile decides on rel/<manifest key>).
  EntryLocation dir_entry_location(int dir_fd, const struct stat& st, std::string_view rel) const;
  EntryLocation file_entry_location(int parent_fd, std::string_view name, const struct stat& st,
                                    std::string_view parent_rel) const;

  // ---- judgements -----------------------------------------------------------
  Result<Judgement> judge(const DirContext& ctx, int dir_fd, std::string_view name, VerifyDepth depth);
  // judge(), again while the answer is "invalid" only because the object
  // changed while it was judged (a concurrent publish); bounded retries.
  Result<Judgement> judge_settled(const DirContext& ctx, int dir_fd, std::string_view name,
                                  VerifyDepth depth);
  // Store::lookup and Store::lookup_verified, at the given verification depth.
  Result<Found> lookup(int dir_fd, std::string_view name, VerifyDepth depth);
  // judge_settled() for an operation on an existing, visible object: ENOENT
  // when it is absent or hidden (after acting on an invalid one, as lookup does).
  Result<Judgement> judge_visible(const DirContext& ctx, int dir_fd, std::string_view name);
  // For unlink/rmdir: the name checked, its directory's context, and the
  // judgement of the visible object under it (ENOENT when hidden or absent).
  struct Target {
    DirContext ctx;
    Judgement judgement;
  };
  Result<Target> visible_target(int dir_fd, std::string_view name);
  // Lookup-time consequences of a judgement: quarantine an invalid entry.
  void act_on_invalid(const DirContext& ctx, int dir_fd, std::string_view name, const Judgement& j);
  // R5: when name holds a hidden object, quarantine it. Returns the judgement
  // of what the name holds afterwards (absent or visible); ENOENT when the
  // directory itself sits in an invalid entry.
  Result<Judgement> clear_hidden(const DirContext& ctx, int dir_fd, std::string_view name);

  // ---- effects --------------------------------------------------------------
  // Quarantines dir_fd/name if it still is `st`, then tells on_invalidate.
  void quarantine_object(int parent_fd, std::string_view name, const struct stat& st, std::string rel,
                         std::string reason, std::vector<std::string> companions = {});
  void quarantine_entry_root(const EntryRoot& entry, std::string reason);
  void invalidate(int parent_fd, std::string_view name, const struct stat& st);
  // While one lives on this thread, invalidate() holds this store's events
  // and its destructor (the end of the transaction) passes them on. Used by
  // the transactions with crash steps (publish, link, unlink, seal): the
  // daemon's invalidator sends an event at once, and the kernel's reverse
  // invalidation of a name takes its directory's lock, which the kernel holds
  // for the very request being handled. Were the daemon to die at a later
  // step of that request, the invalidator thread would stay blocked on the
  // lock, so the daemon could never finish exiting, the connection would
  // never abort, and the request (unkillable once sent) would hang for ever.
  class DeferredInvalidations {
   public:
    explicit DeferredInvalidations(Impl& store) : store_(store), outer_(current == nullptr) {
      if (outer_) current = this;
    }
    ~DeferredInvalidations();
    DeferredInvalidations(const DeferredInvalidations&) = delete;
    DeferredInvalidations& operator=(const DeferredInvalidations&) = delete;

   private:
    friend struct Impl;
    static inline thread_local DeferredInvalidations* current = nullptr;
    Impl& store_;
    bool outer_;  // nested transactions (truncate → seal) leave it to the outermost
    std::vector<Invalidation> held_;
  };
  Result<Found> found_at(int dir_fd, std::string_view name, ObjectKind kind,
                         const struct stat* expect = nullptr);

  // The record of dir_fd/name as it is now: optionally fsync'ed and run
  // through the profile's validators for profile_rel (EBADMSG on rejection;
  // validator records are added to *extras as extra[validator][key]).
  struct RecordOptions {
    bool sync_data = false;
    bool validate = false;
    std::string profile_rel;  // decides size-only and validators
    std::string key;          // manifest key, for validator records
    // A record in a directory entry's manifest: a symlink must stay inside
    // the entry and may not stand under a name the profile hashes (what it
    // leads to is never verified). A file entry of its own (a sidecar in a
    // container) records any symlink as it is, like a FIFO (R10), unless a
    // validator guards its name (an artefact such as tilelang's *.so).
    bool in_dir_entry = true;
  };
  Result<FileRecord> make_record(int dir_fd, std::string_view name, const RecordOptions& how,
                                 Manifest* extras);
  // Read-modify-write of base_fd/manifest_name under its stripe lock, written
  // atomically (fsync per durability). A missing manifest starts empty when
  // create is set, else ENOENT. holder: stat of base_fd.
  Status edit_manifest(int base_fd, const struct stat& holder, std::string_view manifest_name,
                       const std::function<Status(Manifest&)>& edit, bool create);
  // The entry's manifest without key (and without anything below it).
  Status unlist(const EntryRoot& entry, std::string_view key);
  // The entry's manifest with key recorded as rec (replacing what was there)
  // and extras' validator sections merged in.
  Status list_record(const EntryRoot& entry, std::string_view key, const FileRecord& rec,
                     const Manifest& extras);
  // Writes the sidecar of dir_fd/name recording `record` (and `accept`).
  // source: the file about to take that name (a publish writes the sidecar
  // first), counted with whatever the name holds now for the sidecar's access.
  Status write_sidecar(int dir_fd, std::string_view name, const FileRecord& record,
                       const std::optional<FileRecord>& accept, const Manifest* extras,
                       const struct stat* source = nullptr);

  // Shared by seal(), mknod() and symlink(): records dir_fd/name (regular file
  // or symlink) where it now lies (amend the entry or write the sidecar).
  Status seal_at(const DirContext& ctx, int dir_fd, std::string_view name, bool sync_data);

  // Records for every regular file and symlink under the directory src_fd,
  // keyed key_prefix/<path>, with profile decisions made for dst_rel/<path>:
  // data fsync'ed first (durability), validators run, digests taken.
  Result<Manifest> records_for_tree(int src_fd, const std::string& key_prefix, const std::string& dst_rel);

  class Publisher;   // the R1/R6/R10 transactions (publish.cpp)
  struct FsckWalk;   // fsck.cpp
  struct AdoptWalk;  // fsck.cpp
};

// Adds every section of `from.extra` into `into.extra`, entry by entry.
void merge_extras(Manifest& into, const Manifest& from);
// Drops the records of `key` (and of everything below it) from a manifest.
void drop_records(Manifest& m, std::string_view key);

}  // namespace sealfs
