// The backing store: the only code that touches B. Every access is relative to
// a directory fd with *at() calls and no-follow flags, so no name from outside
// can escape the root. This class holds every rule of DESIGN.md (R1–R10) that
// does not need FUSE; fs/ maps FUSE requests onto these calls one to one.
//
// Directory fds passed in are O_PATH (or O_RDONLY) fds of directories inside
// the root, as the daemon's inode table holds them. Names are single path
// components: "", ".", ".." and anything containing '/' are refused (EINVAL).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/known_names.hpp"
#include "core/layout/names.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/progress.hpp"
#include "core/store/validators.hpp"
#include "core/verify/validator.hpp"

namespace sealfs {

enum class Durability { fsync, none };
enum class VerifyMode { changed, always };

// What an object is, as the rules see it.
enum class ObjectKind {
  root,           // the backing root itself
  container,      // directory outside any entry, without a manifest (never sealed)
  entry_root,     // directory holding .sealfs-manifest, verified (a directory entry)
  dir_in_entry,   // directory inside a valid directory entry
  sealed_file,    // regular file or symlink with a sidecar manifest, verified (a file entry)
  file_in_entry,  // regular file or symlink listed in a valid directory entry's manifest
  in_progress,    // regular file open for writing through M (R4)
  volatile_obj,   // anything in a volatile area: plain passthrough
  special,        // FIFO, socket or device node: shown as it is, never sealed (R10)
  being_removed,  // hidden by damage, found only by the process removing its entry (R5), never cached
};
// A file whose content a manifest vouches for: on its own (a file entry) or
// listed in a directory entry's manifest. The one test of it.
constexpr bool is_sealed(ObjectKind kind) {
  return kind == ObjectKind::sealed_file || kind == ObjectKind::file_in_entry;
}

struct Found {
  UniqueFd fd;        // O_PATH|O_NOFOLLOW fd of the backing object
  struct stat st {};  // its backing attributes
  ObjectKind kind = ObjectKind::container;
};

struct DirItem {
  std::string name;
  ino_t ino = 0;
  unsigned char type = 0;  // DT_* value
  bool operator==(const DirItem&) const = default;
};

// What a listing judged of one name it shows (Listing::judged): what
// readdirplus answers with instead of judging the name again
// (Store::lookup_listed).
struct ListedVerdict {
  ObjectKind kind = ObjectKind::container;
  struct stat st {};
  // Shown on a verdict that hashed nothing (an entry seen at stat level, or
  // whose stamps are under a second old): lookup_verified decides.
  bool unhashed = false;
};

// What a directory shows (Store::list), and whether a copy of an earlier
// listing (the kernel's, FOPEN_CACHE_DIR) is still right.
struct Listing {
  std::vector<DirItem> items;
  // One per item when this listing judged its names now; empty when it
  // repeated an earlier one (nothing judged). Good for the reading that
  // took the listing only: a later one judges again.
  std::vector<ListedVerdict> judged;
  // Changes whenever the directory's listing differs from its previous one;
  // unique across directories and never reused, so a copy kept for one
  // epoch is known stale in any other.
  std::uint64_t epoch = 0;
  // The same as the previous listing, which has not changed for a second: a
  // copy filled while it changed may be older than the change that was
  // noticed, so none is trusted in that second.
  bool settled = false;
  // How long a listing must stay the same after a change to be settled: a
  // listing not settled yet is worth asking for again after this long.
  static constexpr std::chrono::seconds kSettle{1};
};

// Something the kernel may hold in its caches and must forget: sent when the
// store hides, quarantines or replaces an object.
struct Invalidation {
  dev_t parent_dev = 0;
  ino_t parent_ino = 0;
  std::string name;  // name in that parent; may be empty when unknown
  dev_t dev = 0;     // the object itself
  ino_t ino = 0;
};

struct StoreOptions {
  Durability durability = Durability::fsync;
  VerifyMode verify = VerifyMode::changed;
  // How long a verified entry's verdict is trusted before its stamps are
  // checked again (the mount's cache_timeout, R9).
  std::chrono::nanoseconds verdict_ttl = std::chrono::seconds(1);
  // -o noatime: files opened for reading through M are opened O_NOATIME
  // (where permitted), so reads through M leave B's access times as well.
  // The store's own reads (digests, manifests) always do.
  bool noatime = false;
  // Directory contexts kept (DirContextCache): each holds up to two
  // descriptors, which a daemon with few must count (issue 24).
  std::size_t dir_contexts_max = 1024;
  std::uint64_t quarantine_max_objects = 1000;  // oldest removed first beyond these
  std::uint64_t quarantine_max_bytes = 1ull << 30;
  ValidatorRegistry validators = default_validators();
  // -o key_file: the first key signs every manifest written, and an entry
  // whose manifest no listed key signed for its place is foreign (R3:
  // hidden, never quarantined). Null: manifests are neither signed nor checked.
  std::shared_ptr<const KeyRing> keys;
  // R4: true while (dev, ino) is open for writing through the mount.
  std::function<bool(dev_t, ino_t)> in_progress;
  // R4, a file is an inode: the names the daemon saw each hard-linked file
  // by (fed by the adapter), and the descriptor of a directory it holds,
  // by identity (null or empty: none). The store finds a file whose name it
  // held was unlinked by another of these names, each checked first.
  std::shared_ptr<const KnownNames> known_names;
  std::function<std::shared_ptr<const UniqueFd>(ObjectId)> directory_of;
  // Called (from any thread, never under a store lock) when cached kernel
  // state about an object must go. The daemon queues these; it must not
  // block or call back into the store.
  std::function<void(const Invalidation&)> on_invalidate;
  // The daemon's gauges for status() (open handles, files in progress);
  // empty: zeros. Called from any thread; must not call back into the store.
  std::function<Gauges()> gauges;
  // Tests only: called right after each named step of a transaction
  // ("files_synced", "manifest_written", "renamed", "dir_synced", …). Return
  // true to stop there as a crash would: no cleanup, error ECANCELED.
  std::function<bool(std::string_view step)> fault_hook;
};

// Where the caller last saw an object: the fd of the directory it was seen
// in and its name there. /proc cannot name an object deeper than PATH_MAX,
// and the O_PATH fd of a file (unlike a directory's) cannot climb ".." to
// the root, so the calls that locate a file by its fd take this hint. It is
// used only after dir_fd/name is checked to be the same object (dev, ino);
// a stale or missing hint leaves the /proc path, or an errno.
struct PlaceHint {
  int dir_fd = -1;
  std::string_view name;
};

struct FsckReport;    // offline.hpp
struct ResignReport;  // offline.hpp

// The store's state (core/store/impl.hpp): its parts, private to core/store.
struct StoreState;

// What each face below holds: the store's state, owned by the Store the face
// is part of.
class StoreFace {
 public:
  StoreFace(const StoreFace&) = delete;
  StoreFace& operator=(const StoreFace&) = delete;

 protected:
  using Impl = StoreState;
  explicit StoreFace(StoreState* impl) : impl_(impl) {}
  ~StoreFace() = default;

  StoreState* impl_;
};

// Store's faces by job (as cvmfs groups its cache manager): what a load
// asks (StoreReading), what makes and removes names (StoreNamespace), what
// publishes and seals (StorePublishing), and the plain POSIX calls the
// adapter needs on B (StoreAttributes). A Store is all four; code that needs
// one job takes that face. The offline tools take a Store& (offline.hpp).

// What a load asks: names, listings, opens, each judged (R2, R3, R4, R7, R8).
class StoreReading : protected StoreFace {
 public:
  // ---- Visibility (R2, R3, R4, R7) -------------------------------------
  // ENOENT when the child is absent or hidden. May hash and may quarantine
  // an invalid entry (R2) before answering ENOENT. caller: the asking
  // process (0: unknown), which finds the names of an entry it is removing
  // even when damage hides them (ObjectKind::being_removed, removals.hpp).
  Result<Found> lookup(int dir_fd, std::string_view name, pid_t caller = 0);
  // lookup that never hashes (readdirplus, R8): EAGAIN when answering would
  // need a verification that is not cached and fresh.
  Result<Found> lookup_verified(int dir_fd, std::string_view name);
  // lookup_verified of a name a listing just judged (Listing::judged; null:
  // none), without judging it again while the name holds the object judged
  // (a file: with the same stamp). Each request judges a name once.
  Result<Found> lookup_listed(int dir_fd, std::string_view name, const ListedVerdict* judged);
  // The root, as lookup would describe it.
  Result<Found> root();
  // Children of a visible directory that lookup would show, without hashing
  // (R8): reserved names, foreign files, unlisted entry files and entries
  // known to be invalid are left out. Entries are judged at stat level now
  // or by a verdict whose stamps B still holds (VerifyDepth::stat_only).
  // caller: the listing process (0: unknown). A listing inside an entry is
  // how a removal begins (shutil.rmtree lists, then unlinks): it counts as a
  // step of one (removals.hpp).
  Result<Listing> list(int dir_fd, pid_t caller = 0);
  // Whether the object behind path_fd lies in a volatile area now (where it
  // is, not where it was looked up: the kernel keeps names across renames).
  // ESTALE when deleted, ENOENT when no longer below the root.
  Result<bool> in_volatile_area(int path_fd, PlaceHint hint = {});
  // Whether a child name of the directory dir_fd lies in a volatile area
  // (asked before a create: R4 tracks only what is outside them).
  Result<bool> child_in_volatile_area(int dir_fd, std::string_view name);
  // Open a visible object for I/O with open(2) flags (O_CREAT/O_EXCL not
  // allowed here). A read open of a sealed file checks its stamp (verify=changed)
  // or rehashes it (verify=always); damage found now → quarantine and ENOENT.
  // ESTALE: path_fd's object was replaced and unlinked since its lookup and
  // is not the verified content, or it is gone from B (a network filesystem
  // dropped it); look the name up again. ENOENT: hidden, or moved elsewhere
  // in B (quarantined) and not what was verified.
  Result<UniqueFd> open_file(int path_fd, int flags, PlaceHint hint = {});

 protected:
  using StoreFace::StoreFace;
};

// What makes and removes names (R5, R7, R10).
class StoreNamespace : protected StoreFace {
 public:
  // ---- Creation (R5, R7, R10) ------------------------------------------
  struct Created {
    Found found;
    UniqueFd open_fd;   // the file opened with the given flags
    bool made = false;  // a new file (not an existing visible one opened)
  };
  // Reserved name → EPERM; hidden object under the name → quarantined first.
  Result<Created> create(int dir_fd, std::string_view name, mode_t mode, int flags);
  Result<Found> mkdir(int dir_fd, std::string_view name, mode_t mode);
  Result<Found> symlink(int dir_fd, std::string_view name, std::string_view target);
  // FIFOs, sockets and device nodes are special (R10); a regular file is sealed empty.
  Result<Found> mknod(int dir_fd, std::string_view name, mode_t mode, dev_t rdev);

  // ---- Removal ----------------------------------------------------------
  // Inside an entry: manifest first. caller: the removing process (0:
  // unknown). A name that damage hides is gone from M already: unlink
  // succeeds and leaves it to its entry's quarantine (R5, removals.hpp).
  Status unlink(int dir_fd, std::string_view name, pid_t caller = 0);
  // Hidden/reserved leftovers removed (R5); an entry root that damage hides
  // is moved into the quarantine, and the rmdir succeeds.
  Status rmdir(int dir_fd, std::string_view name, pid_t caller = 0);

 protected:
  using StoreFace::StoreFace;
};

// What publishes (R1, R5, R6, R10) and seals in-place writes (R4).
class StorePublishing : protected StoreFace {
 public:
  // ---- Publish (R1, R6, R10) ---------------------------------------------
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE.
  Status rename(int src_dir_fd, std::string_view src_name, int dst_dir_fd, std::string_view dst_name,
                unsigned flags);
  // src_hint: where the source was last seen (PlaceHint).
  Result<Found> link(int src_path_fd, int dst_dir_fd, std::string_view dst_name, PlaceHint src_hint = {});

  // ---- In-place writes (R4) ----------------------------------------------
  // path_fd: the file's O_PATH fd. seal: last close of a normal writer;
  // abandon: last close of a writer that died of a signal with it open.
  // hint: where the file was last seen (PlaceHint).
  Status seal(int path_fd, PlaceHint hint = {});
  Status abandon(int path_fd, PlaceHint hint = {});
  // Truncate by path with no handle open: truncate, then re-seal at once.
  Status truncate(int path_fd, off_t size, PlaceHint hint = {});
  // Where the file behind path_fd sits below the root now: what R4's seal
  // journal records at a normal last close (core/writers/seal_journal.hpp).
  // ENOENT inside B/.sealfs or outside the root.
  Result<std::string> path_below_root(int path_fd, PlaceHint hint = {}) const;
  // After a chmod or chown of a sealed file (which never unseals, R10): the
  // manifest that covers it gets the narrowest access of the files it lists
  // again (manifest_file.hpp, ManifestAccess). Nothing to do for anything else.
  Status refresh_manifest_access(int path_fd, PlaceHint hint = {});

 protected:
  using StoreFace::StoreFace;
};

// The plain calls on B the adapter needs besides the rules (fs/README.md:
// fs/ makes no system call on B).
class StoreAttributes : protected StoreFace {
 public:
  // ---- Attributes, links, extended attributes, space (attributes.cpp) ------
  // What the adapter needs besides the rules above, so that fs/ makes no
  // system call on B itself (fs/README.md). Mode, owner and times are not
  // sealed (R10): they go to the backing object as they are. path_fd: the
  // object's O_PATH fd; handle_fd: a descriptor opened by open_file or
  // create, or -1 (a handle reaches what an O_PATH fd cannot).

  // fstat of path_fd (or of a handle).
  Result<struct stat> attributes(int path_fd) const;
  // The object under name in dir_fd as it is now (no-follow), judged by no rule.
  Result<struct stat> attributes_at(int dir_fd, std::string_view name) const;
  // EOPNOTSUPP on a symlink, as lchmod(2) on Linux.
  Status change_mode(int path_fd, mode_t mode, int handle_fd = -1);
  // uid or gid -1: left as it is.
  Status change_owner(int path_fd, uid_t uid, gid_t gid);
  // times as utimensat(2) takes them (UTIME_NOW, UTIME_OMIT).
  Status change_times(int path_fd, const struct timespec (&times)[2], int handle_fd = -1);
  // ftruncate of a write handle: the file is in progress, its last close seals it.
  Status truncate_handle(int handle_fd, off_t size);
  // ENOSPC/EDQUOT: tried again while the quarantine gives space back.
  Status allocate(int handle_fd, int mode, off_t offset, off_t length);
  // B is out of space (a write through M failed with ENOSPC or EDQUOT): the
  // quarantine gives back its oldest slot. True when it did (try again),
  // false when it holds nothing more to give (core/store/space.hpp).
  bool make_room();
  Result<off_t> seek(int handle_fd, off_t offset, int whence);
  // Drops O_DIRECT from a handle opened with it: its I/O goes through B's
  // page cache from now on, at any offset and length.
  Status buffered_io(int handle_fd);
  // Asked for by the caller, so done whatever the durability option says.
  Status sync_handle(int handle_fd, bool data_only);
  Status sync_directory(int path_fd, bool data_only);
  // ENAMETOOLONG for a target of PATH_MAX bytes or more.
  Result<std::string> read_link(int path_fd) const;
  Result<struct statvfs> space() const;
  // An object just made in parent_fd through the mount, owned by the
  // daemon, handed to its caller (R10): chown to uid and gid (a setgid parent
  // keeps the group the backing filesystem chose, as a native filesystem
  // would), then the setuid/setgid bits of `wanted` that chown cleared are
  // set again. found.st is refreshed. Every step is tried; the first failure
  // is returned.
  Status give_to(Found& found, int parent_fd, uid_t uid, gid_t gid, mode_t wanted);

  // R4: which kinds an open for writing tracks (regular files outside
  // volatile areas; FIFOs and sockets are never sealed).
  static bool tracked_kind(ObjectKind kind);
  // tracked_kind for a write open of an object looked up earlier as
  // last_kind, decided by where the file is now: the kernel keeps a name
  // across a rename for its cache timeout, so a file moved from tmp/ into an
  // entry may still say volatile.
  bool writes_tracked(int path_fd, ObjectKind last_kind, PlaceHint hint = {});

  // Extended attributes. "user.sealfs*" is sealfs's own: never set or
  // removed through the mount (EPERM), never listed, absent (ENODATA) except
  // kStatusXattr on the root, which holds status().to_json(). POSIX ACL
  // names are unsupported (EOPNOTSUPP, never listed) and an absent
  // security.selinux is EOPNOTSUPP too (attributes.cpp says why).
  static constexpr const char* kStatusXattr = "user.sealfs.status";
  // As getxattr(2), one system call: capacity 0 asks for the length only
  // (value stays empty); a value longer than capacity is ERANGE.
  struct XattrValue {
    std::size_t length = 0;
    std::string value;
  };
  Result<XattrValue> get_xattr(int path_fd, std::string_view name, std::size_t capacity);
  // The names, each followed by '\0', reserved ones left out.
  Result<std::string> list_xattrs(int path_fd) const;
  Status set_xattr(int path_fd, std::string_view name, std::string_view value, int flags);
  Status remove_xattr(int path_fd, std::string_view name);

 protected:
  using StoreFace::StoreFace;
};

class Store : public StoreReading, public StoreNamespace, public StorePublishing, public StoreAttributes {
 public:
  // Opens the backing directory (O_PATH|O_DIRECTORY), creates B/.sealfs/ and
  // its quarantine if missing. ENOENT/ENOTDIR/EACCES with the path in the message.
  static Result<std::unique_ptr<Store>> open_backing(const std::string& backing_path, Profile profile,
                                                     StoreOptions options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const Profile& profile() const;
  const StoreOptions& options() const;
  Metrics& metrics();
  // The counters with the daemon's gauges: what kStatusXattr holds (as JSON).
  MetricsSnapshot status() const;

  // The store's state, named here so that the store's .cpp files can hand it
  // to their helpers; nothing outside core/store sees it.
  using Impl = StoreState;

 private:
  // Only Store::open_backing can make the tag, so only it constructs a Store (the
  // constructor is public for std::make_unique).
  struct OpenTag {
    explicit OpenTag() = default;
  };

 public:
  Store(OpenTag, std::unique_ptr<Impl> impl);

 private:
  // The offline tools (offline.hpp) walk the store's parts themselves: they
  // take a Store& rather than widening its face.
  friend Result<FsckReport> fsck(Store& store, bool repair, OfflineProgress* progress);
  friend Result<std::vector<std::string>> adopt(Store& store, const std::vector<std::string>& rel_paths,
                                                OfflineProgress* progress);
  friend Result<ResignReport> resign(Store& store, const std::vector<std::string>& rel_paths);

  std::unique_ptr<Impl> impl_;
};

}  // namespace sealfs
