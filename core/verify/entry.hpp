// Entry verification (R2, R8): does an entry's manifest match what B holds?
// Verdicts are cached per entry object (dev, ino) with the manifest's stamp
// and the stamps of the files checked, and trusted for the verdict TTL.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/base/hide_reason.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/profile.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

// Only evidence about content is damage (R2): a listed object that is missing,
// of the wrong type, or unreadable to the daemon. Any other errno that stops a
// check (EMFILE, ENOMEM, EIO, EINTR…) is transient.
bool is_damage_evidence(int code);

struct EntryVerdict {
  bool valid = false;
  std::string reason;                        // why invalid: "<path>: <defect>"
  HideReason cause = HideReason::manifest;   // the defect's kind, when invalid
  std::shared_ptr<const Manifest> manifest;  // null when it could not be read
  Stamp manifest_stamp;
  std::map<std::string, Stamp> file_stamps;  // manifest path → stamp seen when verified
  std::chrono::steady_clock::time_point checked{};
  bool hashed = false;     // false: a stat-level verdict (cached for listings only)
  bool transient = false;  // the entry changed while checked: not cached, not damage
  // A failure that says nothing about the content stopped the check (EMFILE,
  // ENFILE, ENOMEM, EINTR, EAGAIN, EIO…): answered to the caller as this
  // errno, never cached, never a verdict (R2). Implies transient.
  int error = 0;
  bool unknown = false;  // cached_only found no fresh verdict: nothing was checked
  // Valid apart from listed files being written through M right now (R4):
  // their seal or abandon will rewrite the manifest. Never cached.
  bool amending = false;
  // With keys (-o key_file): the manifest is not signed for this place by a
  // listed key. Foreign content (R3): hidden, kept in place until its name
  // is needed (R5), never quarantined, never counted as damage.
  bool foreign = false;
  // The place the manifest was checked for (manifest_mac.hpp): a verdict
  // answers only for the same place (an entry renamed behind the mount is
  // verified again there).
  std::string place;
};

// Where an entry's manifest and files are.
struct EntryLocation {
  int base_fd = -1;           // dir entries: the entry directory; file entries: its parent directory
  std::string manifest_name;  // kDirManifest, or the file entry's sidecar name
  dev_t dev = 0;              // the entry object: the directory, or the file
  ino_t ino = 0;
  std::string file_name;  // file entries only: the file's name (must be the one key listed)
  bool file_entry = false;
  // The manifest's directory below the backing root (the entry directory, or
  // a file entry's parent): rel/<manifest key> is what the profile decides on.
  std::string rel;

  // What a MAC binds the manifest to: the entry directory's path, or the
  // file entry's own (rel/file_name).
  std::string place() const;
};

// Which listed files a check hashes even when their stamps are unchanged.
struct ForceHash {
  bool all = false;  // every file (fsck)
  std::string path;  // one manifest path (verify=always on open)
  static ForceHash every_file() { return {true, {}}; }
  static ForceHash only(std::string_view p) { return {false, std::string(p)}; }
  bool any() const { return all || !path.empty(); }
  bool covers(std::string_view p) const { return all || (!path.empty() && path == p); }
};

// How a check may use what was cached. A verdict records the stamps it saw
// (the manifest's and every listed file's); one whose stamps B still holds
// is what verifying again would find (R8), so it answers without a manifest
// parse or a hash. A valid verdict answers that way only once its stamps are
// settled (Stamp::too_recent); an invalid one keeps a listing hidden while
// its stamps stand, however recent. A changed stamp always means a new check.
enum class VerifyDepth {
  stat_only,    // readdir: never hash; a verdict whose stamps hold, or types and sizes checked now
  cached_only,  // readdirplus: a hashed verdict younger than the TTL or whose stamps hold, else unknown
  cached,       // lookup: a hashed verdict younger than the TTL (R9) or whose stamps hold
  fresh,        // re-verify now (stamps re-checked; only changed files are hashed again)
  audit,        // fsck: re-verify now with every listed file hashed, whatever its stamp
};

class EntryVerifier {
 public:
  // max_cached bounds each verdict map; a verdict holds its manifest and stamps
  // (about 3.5 KB for a TileLang entry: massif), and saves a parse and hashes while its stamps hold.
  // profile: where set, a symlink record under a name the profile hashes
  // makes the entry invalid (such a name must be a regular file). Verdicts
  // are cached per entry object, so an entry moved to a path the profile
  // judges differently keeps its verdict until its manifest changes.
  EntryVerifier(Verifier& verifier, std::chrono::nanoseconds ttl, std::size_t max_cached = 1u << 13,
                const Profile* profile = nullptr);

  // force: the files hashed regardless of the stamp cache (verify=always on
  // open: one path; fsck: every file). manifest_now: the manifest's stamp
  // when the caller has just taken it (saves a stat).
  std::shared_ptr<const EntryVerdict> check(const EntryLocation& where, VerifyDepth depth,
                                            const ForceHash& force = {}, const Stamp* manifest_now = nullptr);
  // The cached verdict, whatever its age, if the manifest is unchanged.
  std::shared_ptr<const EntryVerdict> cached(const EntryLocation& where);
  // Records of hashed files larger than this are damage, never hashed (the
  // profile's max_file_size).
  void set_max_hashed_size(std::uint64_t bytes) { max_hashed_size_ = bytes; }
  // Whether a regular file is being written through M (R4). A listed file
  // that is does not count against its entry while it does not match.
  void set_in_progress(std::function<bool(const struct stat&)> in_progress) {
    in_progress_ = std::move(in_progress);
  }
  // Manifests must be signed by one of these keys for their place (null:
  // no MAC is checked). Set before the first check.
  void set_keys(std::shared_ptr<const KeyRing> keys) { keys_ = std::move(keys); }
  // The cached verdict of the entry object (dev, ino), whatever its age and
  // whatever its manifest holds now (for objects replaced since verified).
  std::shared_ptr<const EntryVerdict> cached_by_key(dev_t dev, ino_t ino);
  void forget(dev_t dev, ino_t ino);

 private:
  std::shared_ptr<const EntryVerdict> verify(const EntryLocation& where, bool hash, const ForceHash& force);
  // A cached verdict that answers for `where` at `depth` without verifying, or null.
  std::shared_ptr<const EntryVerdict> reusable(const EntryLocation& where, VerifyDepth depth,
                                               const Stamp& manifest_stamp);
  // Whether B still holds every stamp v saw (see VerifyDepth). listing: a
  // readdir asks, for which an invalid verdict stands even while recent.
  bool still_holds(const EntryLocation& where, const EntryVerdict& v, bool listing) const;
  // verify()'s last step: each listed file against its record (types and
  // sizes of all, then hashes). False when it decided the verdict in v.
  bool check_listed_files(const EntryLocation& where, const Manifest& manifest, bool hash,
                          const ForceHash& force, EntryVerdict& v) const;

  Verifier& verifier_;
  const Profile* profile_;
  std::chrono::nanoseconds ttl_;
  std::size_t max_cached_;
  std::uint64_t max_hashed_size_ = UINT64_MAX;
  std::function<bool(const struct stat&)> in_progress_;
  std::shared_ptr<const KeyRing> keys_;
  bool listed_file_in_progress(int base_fd, const std::string& path) const;
  using Key = std::pair<dev_t, ino_t>;
  using Verdicts = std::map<Key, std::shared_ptr<const EntryVerdict>>;
  std::shared_ptr<const EntryVerdict> find(const Verdicts& in, const EntryLocation& where,
                                           const Stamp& manifest_stamp);
  void keep(Verdicts& in, const EntryLocation& where, std::shared_ptr<const EntryVerdict> verdict);

  // mu_ protects the maps only; verification itself (stat, hash) runs
  // unlocked, so checking one entry never blocks lookups of another.
  std::mutex mu_;
  Verdicts verdicts_;       // hashed verdicts: what lookups, opens and publishes trust
  Verdicts stat_verdicts_;  // stat-level verdicts: listings only, while their stamps hold
};

// The stamp of the listed path below base_fd (no symlink followed on the
// way): what a verdict's file_stamps are compared with.
Result<Stamp> listed_stamp(int base_fd, const std::string& path);

// Checks one listed path below base_fd against its record (and an alternative
// accepted during an R6 swap). Without hashing, types, sizes and symlink
// targets only. *seen holds the stamp of the file found at path (on a defect
// too, once one was found: a caller can tell damage from a replacement by
// whether the path still names it). EBADMSG is evidence
// of damage (its kind in *defect); any other error is a failure to check,
// with its own errno.
Status check_listed_file(Verifier& verifier, int base_fd, const std::string& path, const FileRecord& record,
                         const FileRecord* alternative, bool hash, bool force, Stamp* seen,
                         HideReason* defect = nullptr);

}  // namespace sealfs
