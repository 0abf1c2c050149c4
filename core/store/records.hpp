// Records and manifest edits shared by publish, seal and the creation calls:
// what a file's record is (fsync, validators, digest), and read-modify-write
// of a manifest under its stripe lock.
//
// Manifest locks: one of 64 stripes per directory holding a manifest (entry
// dir for a dir manifest, parent for sidecars), held for each
// read-modify-write of that manifest, so concurrent amends, seals and unlinks
// never lose each other's updates. Digests are computed before taking it.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/policy.hpp"
#include "core/store/store.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

class LinkRecords;

// How make_record records a file.
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

class Records {
 public:
  // All of them must outlive this object (they live in Store::Impl).
  // keys: null, or the key ring that signs every manifest written (-o key_file).
  // bounds: null, or the lock under which a container's sidecars are written
  // (entry_bounds.hpp).
  Records(const Profile& profile, const ValidatorRegistry& validators, const Policy& policy, Metrics& metrics,
          Verifier& verifier, const KeyRing* keys = nullptr, const EntryBounds* bounds = nullptr)
      : profile_(profile),
        validators_(validators),
        policy_(policy),
        metrics_(metrics),
        verifier_(verifier),
        keys_(keys),
        bounds_(bounds) {}

  // The stripe lock of the manifest(s) held by the directory `holder`.
  static std::mutex& manifest_lock(const struct stat& holder);

  // The record of dir_fd/name as it is now: optionally fsync'ed and run
  // through the profile's validators for profile_rel (EBADMSG on rejection;
  // validator records are added to *extras as extra[validator][key]).
  Result<FileRecord> make_record(int dir_fd, std::string_view name, const RecordOptions& how,
                                 Manifest* extras) const;
  // Records for every regular file and symlink under the directory src_fd,
  // keyed key_prefix/<path>, with profile decisions made for dst_rel/<path>:
  // data fsync'ed first (durability), validators run, digests taken.
  // Crash points: files_synced, validated. hashed: where set, each path's
  // stamp (below src_fd) as it was right before its record was made.
  Result<Manifest> records_for_tree(int src_fd, const std::string& key_prefix, const std::string& dst_rel,
                                    std::map<std::string, Stamp>* hashed = nullptr) const;
  // After records_for_tree: each file whose stamp moved since it was hashed
  // is recorded again as it is now (a directory's move holds the directory,
  // not what it holds: a file in it may be written, closed and sealed at its
  // old place meanwhile, and the moved tree's manifest must not list the
  // bytes it held before; fsmix multi seed 7). A file gone, or changing still
  // (its writer's seal will list it), loses its record.
  void refresh_records(int src_fd, const std::string& key_prefix, const std::string& dst_rel,
                       const std::map<std::string, Stamp>& hashed, Manifest& records) const;

  // Every manifest the store writes goes through here: signed for place
  // (manifest_mac.hpp) when there are keys, its MAC dropped when not, then
  // write_manifest_atomic.
  Status write_manifest(int dir_fd, std::string_view name, Manifest manifest, std::string_view place,
                        const std::vector<struct stat>& also = {}) const;
  // With keys: EACCES unless the manifest is signed for place by a listed
  // key. What the store edits it re-signs, so it must never edit (and so
  // vouch for) a manifest someone without a key wrote.
  Status check_authentic(const Manifest& manifest, std::string_view place) const;
  // Read-modify-write of base_fd/manifest_name (the manifest of the entry at
  // place) under its stripe lock, written atomically (fsync per durability).
  // A missing manifest starts empty when create is set, else ENOENT; one not
  // signed for place, with keys, is EACCES (check_authentic). holder: stat of base_fd.
  Status edit_manifest(int base_fd, const struct stat& holder, std::string_view manifest_name,
                       std::string_view place, const std::function<Status(Manifest&)>& edit,
                       bool create) const;
  // With keys, after a directory moved from old_rel to new_rel (an entry
  // root, or a container holding entries): every manifest in it that was
  // signed for its old place is signed again for its new one. A manifest
  // not signed for its old place stays as it is (foreign it was, foreign it
  // stays). Without keys nothing to do.
  Status move_signatures(int dir_fd, const std::string& old_rel, const std::string& new_rel) const;
  bool signs() const { return keys_ != nullptr; }
  // Signs dir_fd/name for place with the first key, as it is, if it still
  // has the stamp `verified` (EAGAIN when it changed since): adopt --resign.
  Status resign_verified(int dir_fd, std::string_view name, const Stamp& verified,
                         std::string_view place) const;
  // The entry's manifest without key (and without anything below it).
  Status unlist(const EntryRoot& entry, std::string_view key) const;
  // The entry's manifest with key recorded as rec (replacing what was there)
  // and extras' validator sections merged in. With still_at, only while key
  // (below the entry's root) still leads to that object, checked under the
  // manifest's lock: ENOENT, and nothing written, once it moved away.
  Status list_record(const EntryRoot& entry, std::string_view key, const FileRecord& rec,
                     const Manifest& extras, const struct stat* still_at = nullptr) const;
  // Writes the sidecar of dir_fd/name recording `record` (and `accept`);
  // dir_rel: dir_fd's path below the root (what the MAC binds).
  // source: the file about to take that name (a publish writes the sidecar
  // first), counted with whatever the name holds now for the sidecar's access.
  Status write_sidecar(int dir_fd, std::string_view dir_rel, std::string_view name, const FileRecord& record,
                       const std::optional<FileRecord>& accept, const Manifest* extras,
                       const struct stat* source = nullptr) const;

  // Shared by seal(), mknod() and symlink(): records dir_fd/name (regular file
  // or symlink) where it now lies (amend the entry or write the sidecar).
  // links: where set, the inode's record is noted first (links.hpp), so
  // that the other names of a hard-linked file follow this one.
  // Crash points: digested, manifest_written (seal_steps).
  // sealed: where set, the record written. same_as: where set, another
  // name's record just sealed; this name is recorded only if it holds that
  // very content (size, and digest where both have one), else EAGAIN and
  // nothing is written: it changed since, which is not ours to vouch for.
  // EAGAIN too when ctx is a container's and its directory became (part
  // of) an entry meanwhile: place the file again (entry_bounds.hpp).
  Status seal_at(const DirContext& ctx, int dir_fd, std::string_view name, bool sync_data,
                 const LinkRecords* links = nullptr, std::optional<FileRecord>* sealed = nullptr,
                 const FileRecord* same_as = nullptr) const;

 private:
  Result<FileRecord> symlink_record(int dir_fd, std::string_view name, const RecordOptions& how) const;
  // The profile's validators for how.profile_rel, run on the open file fd.
  Status validate(int fd, const RecordOptions& how, Manifest* extras) const;

  const Profile& profile_;
  const ValidatorRegistry& validators_;
  const Policy& policy_;
  Metrics& metrics_;
  Verifier& verifier_;
  const KeyRing* keys_;
  const EntryBounds* bounds_;
};

// Adds every section of `from.extra` into `into.extra`, entry by entry.
void merge_extras(Manifest& into, const Manifest& from);
// Drops the records of `key` (and of everything below it) from a manifest.
void drop_records(Manifest& m, std::string_view key);

}  // namespace sealfs
