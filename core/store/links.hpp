// Hard links (R4: every name of a hard-linked file stays visible and verified
// whichever name it is written through).
//
// Each name has its own record (a sidecar, or a line in its directory entry's
// manifest), and a seal through one name rewrites that name's record only. So
// a seal of a regular file with more than one link first writes the inode's
// record, B/.sealfs/links/<ino>: the size and SHA-256 just sealed, in the
// manifest format, written atomically and, with -o key_file, signed for the
// place ".sealfs/links/<ino>" (no entry can have that place: reserved name).
// A name whose record no longer matches its file is brought up to date from
// the inode's record when the file holds exactly what that record says
// (hashed now) and passes this name's own validators: those bytes were sealed
// through M. Its link count may be one by then (written through g, then
// `rm g`: f follows all the same). Keyed by content, a record of an inode
// number reused later can only match identical bytes; an unsigned or
// malformed one counts as absent (with keys, a planted record shows nothing).
//
// Clean-up: a seal of a file with one link removes its inode's record (no
// other name is left to bring up to date), and so do the unlink of a file's
// last name through M and bringing up to date a file's only name; a record
// found not to match its file (changed behind the mount) is removed then. Records of inodes freed otherwise
// (a rename over the last name, changes behind the mount) stay until their number is sealed again: harmless,
// being keyed by content, and one small file each.
//
// Only files on B's root filesystem have inode records (an inode number names
// a file only within one filesystem); elsewhere a write through one name
// leaves the other names stale, as before.
#pragma once

#include <sys/stat.h>

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/policy.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

class Records;

// What LinkRecords::refresh found.
enum class LinkRefresh {
  none,       // nothing to bring up to date: the verdict stands
  refreshed,  // records rewritten: check the entry again
  plausible,  // at stat level (no hashing): it would verify with its inodes' records
  // Hashed, nothing written (fsck without --repair): with its records brought
  // up to date the entry verifies; a lookup or fsck --repair writes them.
  would_refresh,
};

class LinkRecords {
 public:
  // All of them must outlive this object (they live in Store::Impl).
  // keys: null, or the key ring that signs and checks records (-o key_file).
  LinkRecords(int root_fd, dev_t root_dev, const Policy& policy, Verifier& verifier, const Records& records,
              const KeyRing* keys)
      : root_fd_(root_fd),
        root_dev_(root_dev),
        policy_(policy),
        verifier_(verifier),
        records_(records),
        keys_(keys) {}

  // The inode record's path below the root, which is also its MAC's place.
  static std::string record_rel(ino_t ino);

  // At a seal of dir_fd/name recorded as rec, before the name's own record is
  // written: with more than one link the inode's record says rec (hashed
  // here when the profile records the name's size only); with one, it goes.
  Status note_sealed(int dir_fd, std::string_view name, const FileRecord& rec) const;
  // st's last name was unlinked through M: its inode's record goes.
  void forget(const struct stat& st) const;

  // For a manifest (at where) that failed on content: the records of listed
  // hard-linked files whose content their inode's record vouches for are
  // brought up to date (hash) or, at stat level (!hash), only checked by
  // size with no write. !write (with hash): every file is hashed against the
  // records as they would be brought up to date, and nothing is written,
  // not even a record that vouches for nothing any more. Errors are no
  // verdict (EMFILE, EIO…: R2).
  Result<LinkRefresh> refresh(const EntryLocation& where, const Manifest& manifest, bool hash,
                              bool write = true) const;

 private:
  struct InodeRecord {
    FileRecord record;  // size and sha256, always both
    Stamp stamp;        // of the record file as read
  };
  // st's inode record: nullopt when there is none that counts (missing,
  // malformed, another inode's, not signed for its place with keys).
  Result<std::optional<InodeRecord>> record_of(const struct stat& st) const;
  // Removes the record of ino if it is still the one read with stamp seen.
  void drop_if_unchanged(ino_t ino, const Stamp& seen) const;

  // refresh's steps. A listed name whose inode's record differs from its own.
  struct Update {
    std::string path;
    FileRecord was;
    FileRecord now;
    Manifest extras;
    bool last_name = false;  // its record is then the only one left to vouch for it
    ino_t ino = 0;
    Stamp record_stamp;
  };
  // One listed file: true when its inode's record could bring its name up
  // to date; then, hashing, an Update is added when the file holds exactly
  // that content and passes the name's validators, and at stat level
  // as_inodes takes the inode's record instead.
  Result<bool> consider(const EntryLocation& where, const std::string& path, const FileRecord& rec, bool hash,
                        bool write, Manifest& as_inodes, std::vector<Update>& updates) const;
  // Would every listed file fit these records? hash: their digests too.
  // yes: what to answer when they do.
  Result<LinkRefresh> fits(const EntryLocation& where, const Manifest& as_inodes, bool hash,
                           LinkRefresh yes) const;
  // The name's manifest as apply() would leave it.
  static void apply_update(Manifest& m, const Update& u);
  // The updates written into the name's manifest.
  Result<LinkRefresh> apply(const EntryLocation& where, const std::vector<Update>& updates) const;
  static std::mutex& lock_of(ino_t ino);

  int root_fd_;
  dev_t root_dev_;
  const Policy& policy_;
  Verifier& verifier_;
  const Records& records_;
  const KeyRing* keys_;
};

}  // namespace sealfs
