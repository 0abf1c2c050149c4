// Requests on directories: opendir, readdir(plus), releasedir, fsyncdir. A
// directory handle holds a snapshot of what the store lists (taken at
// opendir and at every rewind), so offsets stay stable while it is read.
//
// The kernel may keep a copy of a listing and serve the next opendirs from
// it (FOPEN_CACHE_DIR): a directory that did not change then costs an
// OPENDIR and a RELEASEDIR instead of two READDIRs and a GETATTR (the kernel
// marks atime stale after each READDIR it sends). Every opendir still lists
// the directory in the store, which tells whether the listing changed
// (Listing::epoch): the kernel drops its copy before it is used again when
// it did, whatever changed it (a name in B, a verdict whose stamps moved, a
// quarantine). The kernel drops it by itself for changes made through the
// mount in that directory.
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/base/result.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/handlers.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/request.hpp"

namespace sealfs::fuse {
namespace {

// caller: the listing process (a removal lists first: Store::list).
Status load_listing(Filesystem& fs, DirHandle& dir, pid_t caller) {
  auto listing = fs.store->list(dir.inode->path_fd()->get(), caller);
  if (!listing) return listing.error();
  dir.items = std::move(listing->items);
  dir.judged = std::move(listing->judged);
  dir.listed = true;
  return {};
}

// Whether the kernel may serve dir's listing from its copy, for the listing
// the store just gave for it. Only a settled listing may be kept; a copy the
// kernel holds of another epoch (or of an unsettled one: it may have been
// filled from a listing older than the change) is dropped first.
bool kernel_may_keep(Filesystem& fs, Inode& dir, const Listing& listing) {
  if (listing.settled && dir.listing_epoch.load() == listing.epoch) return true;
  if (!fs.invalidator.invalidate_now(dir.id)) return false;
  if (!listing.settled) return false;
  dir.listing_epoch.store(listing.epoch);
  return true;
}

// Where one directory entry goes into a readdir reply.
struct ReplyBuffer {
  fuse_req_t req;
  std::string& buf;
  size_t used = 0;
  size_t left() const { return buf.size() - used; }
  char* at() { return buf.data() + used; }
};

// One readdirplus entry for listed item i (next: the offset after it);
// fuse_add_direntry_plus's size, or 0 when the item is to be skipped.
// readdir never hashes (R8): attributes go along only for objects whose
// verdict is already known; the rest go with node id 0, which tells the
// kernel to LOOKUP them when (and if) they are used. A listing taken for
// this reading judged its names already: that verdict stands
// (Store::lookup_listed), so each name is judged once.
size_t add_item_plus(Filesystem& fs, ReplyBuffer& out, const DirHandle& dir, size_t i, off_t next) {
  const DirItem& item = dir.items[i];
  const ListedVerdict* judged = dir.judged.size() == dir.items.size() ? &dir.judged[i] : nullptr;
  // Past the evictor's bound no attributes go along either: each would keep
  // one more descriptor, and the kernel looks up the names it uses.
  Result<Found> found = make_error(EAGAIN, "over the inode bound");
  if (!fs.evictor.over()) found = fs.store->lookup_listed(dir.inode->path_fd()->get(), item.name, judged);
  if (!found && found.code() != EAGAIN) return 0;  // hidden or gone since the listing
  if (!found) {
    fuse_entry_param e{};
    e.attr.st_ino = item.ino;
    e.attr.st_mode = static_cast<mode_t>(item.type) << 12;
    return fuse_add_direntry_plus(out.req, out.at(), out.left(), item.name.c_str(), &e, next);
  }
  fuse_entry_param e = remember(fs, std::move(*found), *dir.inode, item.name);
  const size_t entsize = fuse_add_direntry_plus(out.req, out.at(), out.left(), item.name.c_str(), &e, next);
  // Only entries whose attributes reached the kernel count as looked up.
  if (entsize > out.left()) fs.inodes.forget(e.ino, 1);
  return entsize;
}

// One entry at index (0 ".", 1 "..", 2 + i items[i]); see add_item_plus.
size_t add_entry(Filesystem& fs, ReplyBuffer& out, const DirHandle& dir, size_t index, bool plus) {
  const auto next = static_cast<off_t>(index + 1);
  const bool dots = index < 2;
  const std::string& name = dots ? std::string(index == 0 ? "." : "..") : dir.items[index - 2].name;
  if (!plus) {
    struct stat st {};
    st.st_ino = dots ? dir.inode->ino : dir.items[index - 2].ino;
    st.st_mode = dots ? S_IFDIR : static_cast<mode_t>(dir.items[index - 2].type) << 12;
    return fuse_add_direntry(out.req, out.at(), out.left(), name.c_str(), &st, next);
  }
  if (dots) {
    // No attributes for "." and "..": the kernel creates no dentry for them.
    fuse_entry_param e{};
    e.attr.st_ino = dir.inode->ino;
    e.attr.st_mode = S_IFDIR;
    return fuse_add_direntry_plus(out.req, out.at(), out.left(), name.c_str(), &e, next);
  }
  return add_item_plus(fs, out, dir, index - 2, next);
}

// Without OPENDIR (fh 0) the directory inode's own handle, listed afresh
// at every offset 0: the kernel asks for offset 0 only when it holds no copy
// of the listing. A listing that may still change within the directory's
// timestamp tick (not settled) is dropped from the kernel again once that
// tick has surely passed, since the kernel revalidates its copy by mtime.
// The handle leaves once its listing was read to the end (see do_readdir);
// a read that continues after that lists afresh, as a rewind would.
std::shared_ptr<DirHandle> implicit_dir(fuse_req_t req, Filesystem& fs, fuse_ino_t ino, off_t off) {
  InodeRef inode = inode_or_reply(req, ino);
  if (!inode) return nullptr;
  auto dir = fs.implicit_dirs.get(ino, [&] {
    auto made = std::make_shared<DirHandle>();
    made->inode = inode;
    return made;
  });
  std::lock_guard lock(dir->mu);
  if (off != 0) {
    if (dir->listed) return dir;
    if (Status s = load_listing(fs, *dir, fuse_req_ctx(req)->pid); !s) {
      reply_error(req, s.error());
      return nullptr;
    }
    return dir;
  }
  auto listing = fs.store->list(inode->path_fd()->get(), fuse_req_ctx(req)->pid);
  if (!listing) {
    reply_error(req, listing.error());
    return nullptr;
  }
  dir->items = std::move(listing->items);
  dir->judged = std::move(listing->judged);
  dir->listed = true;
  dir->fresh = true;
  if (!listing->settled) {
    Invalidation again;
    again.dev = inode->dev;
    again.ino = inode->ino;
    fs.invalidator.post_later(again, Listing::kSettle);
  }
  return dir;
}

// Offsets: 1 is ".", 2 is "..", 3 + i is items[i]; the offset stored with an
// entry is where the next readdir continues.
void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    std::shared_ptr<DirHandle> dir;
    if (fi->fh != 0) {
      dir = fs.dirs.get(fi->fh);
      if (!dir) return (void)fuse_reply_err(req, EBADF);
    } else {
      dir = implicit_dir(req, fs, ino, off);
      if (!dir) return;  // answered
    }
    std::lock_guard lock(dir->mu);
    if (off == 0 && !dir->fresh) {  // a rewind: rewinddir sees what is visible now
      if (Status s = load_listing(fs, *dir, fuse_req_ctx(req)->pid); !s) return reply_error(req, s.error());
    }
    dir->fresh = false;
    std::string buf(size, '\0');
    ReplyBuffer out{req, buf};
    const size_t total = dir->items.size() + 2;
    for (auto index = static_cast<size_t>(off < 0 ? 0 : off); index < total; ++index) {
      const size_t entsize = add_entry(fs, out, *dir, index, plus);
      if (entsize > out.left()) break;
      out.used += entsize;
    }
    dir->judged.clear();  // a later reading judges again: its verdicts may be old by then
    // The kernel's last read of a listing (past its end, answered empty):
    // an implicit handle lets its items go rather than keep them for as long
    // as the kernel keeps the directory (200,000 in a million-file cache).
    if (fi->fh == 0 && off > 0 && static_cast<size_t>(off) >= total) fs.implicit_dirs.forget(ino);
    fuse_reply_buf(req, buf.data(), out.used);
  });
}

}  // namespace

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, [&] {
    Filesystem& fs = fs_of(req);
    // The kernel then stops sending OPENDIR and RELEASEDIR at all.
    if (fs.no_opendir) return (void)fuse_reply_err(req, ENOSYS);
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    auto dir = std::make_shared<DirHandle>();
    dir->inode = inode;
    auto listing = fs.store->list(inode->path_fd()->get(), fuse_req_ctx(req)->pid);
    if (!listing) return reply_error(req, listing.error());
    dir->items = std::move(listing->items);
    dir->judged = std::move(listing->judged);
    dir->fresh = true;
    fi->cache_readdir = kernel_may_keep(fs, *inode, *listing) ? 1 : 0;
    fi->keep_cache = fi->cache_readdir;
    fi->fh = fs.dirs.add(dir);
    if (fuse_reply_open(req, fi) != 0) fs.dirs.take(fi->fh);
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  do_readdir(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  do_readdir(req, ino, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  guarded(req, [&] {
    if (fi->fh != 0) fs_of(req).dirs.take(fi->fh);
    fuse_reply_err(req, 0);
  });
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* /*fi*/) {
  guarded(req, [&] {
    InodeRef inode = inode_or_reply(req, ino);
    if (!inode) return;
    reply_status(req, fs_of(req).store->sync_directory(inode->path_fd()->get(), datasync != 0));
  });
}

}  // namespace sealfs::fuse
