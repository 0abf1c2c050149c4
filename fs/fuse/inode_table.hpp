// The kernel's view of inodes: one Inode per backing object (device, inode)
// that the kernel has looked up, holding the O_PATH fd Store handed out and
// the kernel's lookup count, as libfuse's passthrough_ll does.
//
// fuse_ino_t values are table ids, never pointers: an id the kernel sends
// after we dropped it is simply not found (ESTALE) instead of being a
// dangling pointer. Ids are never reused within one mount.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/layout/known_names.hpp"
#include "core/store/store.hpp"

namespace sealfs::fuse {

// Ids of directories that took a descriptor again outside the table's lock
// (Inode::path_fd): InodeTable::cold drains it, so that it looks only at
// the inodes that hold a descriptor or are files, not at every directory
// the kernel keeps (200,000 in a cache of a million files).
class AttachLog {
 public:
  void note(fuse_ino_t id) {
    std::lock_guard lock(mu_);
    ids_.push_back(id);
  }
  std::vector<fuse_ino_t> take() {
    std::lock_guard lock(mu_);
    return std::exchange(ids_, {});
  }

 private:
  std::mutex mu_;  // a leaf: nothing else is locked while it is held
  std::vector<fuse_ino_t> ids_;
};

class Inode : public std::enable_shared_from_this<Inode> {
 public:
  Inode(fuse_ino_t inode_id, UniqueFd fd, dev_t backing_dev, ino_t backing_ino, bool is_directory = false)
      : id(inode_id),
        dev(backing_dev),
        ino(backing_ino),
        directory(is_directory),
        fd_(std::make_shared<const UniqueFd>(std::move(fd))) {}

  const fuse_ino_t id;
  const dev_t dev;
  const ino_t ino;
  const bool directory;
  // What the last lookup said it is; decides kernel cache timeouts.
  std::atomic<ObjectKind> kind{ObjectKind::container};
  // A directory: the Listing::epoch of the copy the kernel may keep of its
  // listing (dir_ops.cpp); 0: none yet.
  std::atomic<std::uint64_t> listing_epoch{0};
  // A file: its verified bytes were put into the kernel's pages (page_push.hpp).
  std::atomic<bool> pages_pushed{false};

  // The O_PATH|O_NOFOLLOW fd, kept alive for as long as the caller holds
  // the pointer even if a newer lookup replaces it meanwhile. A detached
  // inode (detach()) is opened again here by the name it was last seen
  // under, below its directory (itself opened again first if detached),
  // checked to be the same object; when that fails (moved or removed
  // behind the mount) the fd is invalid (-1) and the request fails with
  // EBADF, which reply_error reports as ESTALE.
  std::shared_ptr<const UniqueFd> path_fd() const;
  // An O_PATH fd remembers the name it was opened by, and the store finds an
  // object's place (its entry, its sidecar) from it. With hard links, or
  // after a replace, the newest name is the one that still leads to the
  // object, so every lookup hands its fresh fd in here.
  void replace_path_fd(UniqueFd fd) {
    auto fresh = std::make_shared<const UniqueFd>(std::move(fd));
    std::lock_guard lock(mu_);
    fd_.swap(fresh);
  }
  // Issue 24: an inode the kernel remembers need not hold a descriptor
  // while no request uses it. Closes the fd of an object seen under a name
  // when nothing else holds it; true if a descriptor was freed. A directory
  // too: the objects seen in it hold the directory's inode, not its fd
  // (Place), so a directory the kernel must keep (a process's working
  // directory) costs no descriptor either.
  bool detach();
  bool attached() const {
    std::lock_guard lock(mu_);
    return fd_ != nullptr;
  }

  // Where the adapter last saw this object (lookup, create, link, readdirplus,
  // a rename through the mount): its directory and its name there. The
  // store locates a file deeper than PATH_MAX by it (PlaceHint), after
  // checking that it still holds. last_seen() resolves it: dir is the
  // directory's fd, kept open while the copy lasts (null: never seen under
  // a name, or the directory is gone). parent: the directory's id, by which
  // the kernel can be asked to forget the name (InodeEvictor).
  struct SeenAt {
    std::shared_ptr<const UniqueFd> dir;
    std::string name;
    fuse_ino_t parent = 0;
    PlaceHint hint() const { return dir ? PlaceHint{dir->get(), name} : PlaceHint{}; }
  };
  // The name before the last one is kept too: with hard links, the name
  // seen last may be the one removed next (git links tmp_obj_X to its
  // object's name, looks tmp_obj_X up again, and unlinks it).
  void seen_at(const Inode& dir, std::string_view name) {
    Place fresh{dir.weak_from_this(), std::string(name), dir.id};
    std::lock_guard lock(mu_);
    if (fresh.parent == place_.parent && fresh.name == place_.name) return;
    if (place_.parent != 0) other_place_ = std::make_unique<Place>(std::move(place_));
    place_ = std::move(fresh);
  }
  // The name (dir, name) was removed through the mount: the inode is known
  // by its other name, if it was seen under one, from now on.
  void unseen_at(const Inode& dir, std::string_view name);
  // The names kept above whose directory the table still holds, oldest
  // first: the directory's identity and the name.
  std::vector<KnownNames::Name> places() const;
  // A copy: the caller's hint stays valid however the inode is seen meanwhile.
  SeenAt last_seen() const;
  // The name only (no descriptor opened): parent 0 when never seen.
  struct Name {
    fuse_ino_t parent = 0;
    std::string name;
  };
  Name last_name() const {
    std::lock_guard lock(mu_);
    return Name{place_.parent, place_.name};
  }

  // The kernel keeps a file's pages across opens and attribute changes (no
  // auto_inval_data): they go only when sealfs sees a change it did not make
  // itself. report() records the attributes the kernel is told and says
  // whether the content changed behind the mount since the last report
  // (mtime or size differ, and no change came through the mount meanwhile).
  bool report(const struct stat& st);
  // A request through the mount changed the file (its pages are current).
  void changed_here() { changed_here_ = true; }

  // A request through the mount changed the object's metadata only (a link,
  // an unlink, a rename, a chmod or chown, an xattr): st is the object as it
  // left it. A READ whose file differs from the stamp verified at open in
  // that ctime alone reads on: the bytes are the ones verified, as a native
  // filesystem serves an open file whose name was removed (R2 holds: size and
  // mtime are the verified ones, and the new ctime is one this mount made).
  void metadata_changed_here(const struct stat& st);
  bool ctime_made_here(const struct timespec& ctime) const;

  // Used since the evictor last looked (a clock's reference bit): set by
  // every request that finds the inode, cleared by InodeTable::cold.
  void touch() {
    if (!used_.load(std::memory_order_relaxed)) used_.store(true, std::memory_order_relaxed);
  }

 private:
  // The directory's inode, not its fd: a weak reference, as the kernel
  // keeps a directory while it remembers a name in it.
  struct Place {
    std::weak_ptr<const Inode> dir;
    std::string name;
    fuse_ino_t parent = 0;
  };
  // The fd, opened again by name if detached; null when that fails.
  UniqueFd reopen() const;
  // Sets fd_ if still unset (under mu_ held by the caller); a directory
  // says so to the table's AttachLog.
  void attach_locked(UniqueFd fd) const;

  std::shared_ptr<AttachLog> attach_log_;  // set by the table before the inode is shared

  mutable std::mutex mu_;
  mutable std::shared_ptr<const UniqueFd> fd_;  // null while detached
  Place place_;
  std::unique_ptr<Place> other_place_;  // the name seen before place_, if another (hard links)
  bool reported_ = false;               // under mu_, with the two below
  struct timespec reported_mtime_ {};
  off_t reported_size_ = 0;
  std::atomic<bool> changed_here_{false};
  struct timespec own_ctime_ {};  // under mu_: the ctime of the last metadata change made here
  std::atomic<bool> used_{true};
  friend class InodeTable;
};

using InodeRef = std::shared_ptr<Inode>;

class InodeTable {
 public:
  // The root must be registered first; it gets FUSE_ROOT_ID and is never forgotten.
  void set_root(Found root);

  // The inode for a Found (new or existing), with its lookup count raised
  // by one. An existing file takes found's fd (see Inode::replace_path_fd);
  // a directory keeps its own.
  InodeRef remember(Found&& found);
  // Lower the lookup count; at zero the inode leaves the table (its fd is
  // closed once the last request using it lets go of the reference) and
  // forget says true.
  bool forget(fuse_ino_t id, std::uint64_t nlookup);

  // R4, a file is an inode: obj was found as name in dir (lookup, create,
  // link, readdirplus); a file with nlink links. Inode::seen_at, and the
  // store's registry of names (names()) learns it.
  void named(Inode& obj, const Inode& dir, std::string_view name, nlink_t nlink);
  // The names of hard-linked files seen through the mount (known_names.hpp),
  // shared with the store (StoreOptions::known_names). A file's names go when
  // the kernel forgets it.
  const std::shared_ptr<KnownNames>& names() const { return names_; }

  InodeRef get(fuse_ino_t id) const;           // nullptr when unknown
  std::uint64_t lookups(fuse_ino_t id) const;  // the kernel's lookup count (0: unknown)
  InodeRef find(dev_t dev, ino_t ino) const;   // nullptr when not looked up
  std::size_t size() const;
  std::size_t files() const;  // of size(), those not directories

  // Up to n inodes no request has used since the last call, with where they
  // were last seen; clears the mark of the others. Files first, the oldest
  // first; then directories, the newest first: the kernel drops a
  // directory's unused descendants with it, and the oldest directories are
  // the ancestors of everything (kernels/ of a whole cache). The root and
  // inodes never seen under a name are never among them.
  struct Cold {
    InodeRef inode;
    Inode::Name seen;
  };
  std::vector<Cold> cold(std::size_t n);

 private:
  struct Slot {
    InodeRef inode;
    std::uint64_t nlookup = 0;
  };
  mutable std::mutex mu_;
  std::unordered_map<fuse_ino_t, Slot> by_id_;
  std::map<std::pair<dev_t, ino_t>, fuse_ino_t> by_key_;
  fuse_ino_t next_id_ = FUSE_ROOT_ID + 1;
  std::size_t files_ = 0;
  // What cold() looks at, by id (so oldest first): every file, and the
  // directories holding a descriptor. A detached directory leaves it at
  // the next cold() and comes back through attach_log_.
  std::map<fuse_ino_t, InodeRef> sweepable_;
  std::shared_ptr<AttachLog> attach_log_ = std::make_shared<AttachLog>();
  std::shared_ptr<KnownNames> names_ = std::make_shared<KnownNames>();
};

}  // namespace sealfs::fuse
