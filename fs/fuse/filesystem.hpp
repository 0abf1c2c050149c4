// The state one mount shares between its request handlers, and the table of
// FUSE low-level operations (fs/fuse/operations.cpp) that work on it.
#pragma once

#include <fuse_lowlevel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/store/store.hpp"
#include "core/verify/verifier.hpp"
#include "core/writers/seal_journal.hpp"
#include "core/writers/writer_tracking.hpp"
#include "fs/fuse/deferred_seals.hpp"
#include "fs/fuse/file_handle.hpp"
#include "fs/fuse/handle_table.hpp"
#include "fs/fuse/implicit_dirs.hpp"
#include "fs/fuse/implicit_handles.hpp"
#include "fs/fuse/inode_evictor.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/invalidator.hpp"
#include "fs/fuse/kernel_notices.hpp"
#include "fs/fuse/page_push.hpp"
#include "fs/fuse/passthrough.hpp"
#include "fs/fuse/reaper.hpp"

namespace sealfs::fuse {

struct DirHandle {
  InodeRef inode;
  std::mutex mu;
  std::vector<DirItem> items;  // snapshot taken at opendir / rewinddir
  // What the listing judged of each item (Listing::judged), for the first
  // readdirplus after it was taken only; then cleared.
  std::vector<ListedVerdict> judged;
  bool fresh = false;   // taken at opendir and not read yet: the first read needs no other
  bool listed = false;  // items hold a listing (not yet in an implicit handle made for a continued read)
};

// libfuse allocates fuse_conn_info_opts with malloc.
struct ConnOptsDeleter {
  void operator()(fuse_conn_info_opts* o) const { std::free(o); }
};

struct Filesystem {
  Filesystem() : invalidator(inodes) {}

  // Wires the store's hooks to this mount; call before Store::open_backing.
  void attach_hooks(StoreOptions& options);
  // Test builds: the fault hook's pause or crash at a step of the adapter's own.
  void test_step(std::string_view step) const {
    if (store && store->options().fault_hook) store->options().fault_hook(step);
  }
  // Test builds: the errno a step of the adapter's own fails with this time
  // (SEALFS_FAULT_ERRNO), 0 for none.
  int test_errno(std::string_view step) const { return fault_errno ? fault_errno(step) : 0; }
  std::function<int(std::string_view step)> fault_errno;

  std::unique_ptr<Store> store;
  InodeTable inodes;
  KernelNotices notices;         // the one way to the kernel outside replies: closed before the unmount
  InodeEvictor evictor{inodes};  // keeps inodes (one descriptor each) under its bound
  WriterTracking writers;
  Invalidator invalidator;
  PagePusher pusher;
  HandleTable<FileHandle> files;
  HandleTable<DirHandle> dirs;
  ImplicitHandles implicit;    // fh 0: the handles OPEN would have made (no_open)
  ImplicitDirs implicit_dirs;  // fh 0: the handles OPENDIR would have made (no_opendir)
  Reaper reaper;               // ends implicit writers whose processes left without a FLUSH
  DeferredSeals deferred;      // seals of large files, a moment after their last close (R4)
  // R4: normal last closes whose seal has not run yet (close_journal.hpp);
  // null on a read-only mount or where B/.sealfs is not writable. Set before
  // the loop, reset after the last seal.
  std::unique_ptr<SealJournal> journal;
  PassthroughOpens passthrough;  // backing ids and each inode's opens by kind (issue 25)
  double cache_timeout = 1.0;    // seconds, for sealed and verified objects
  bool chown_to_caller = false;  // running as root: created objects belong to the caller
  // OPEN is answered ENOSYS (-o no_open or ro, unless verify=always, which
  // hashes at every open, or the kernel cannot run without OPEN): see
  // fs/README.md "Without OPEN".
  bool no_open = false;
  // With OPEN, a read-only open of a sealed file whose inode's shared reader
  // (implicit) still has its verified stamp is answered fh 0 and served by
  // that reader, as without OPEN: no descriptor, no check beyond one fstat
  // (file_handles.hpp shared_reader_fresh). Off for verify=always.
  bool shared_read_opens = true;
  // OPENDIR is answered ENOSYS (the default; -o keep_opendir): see
  // fs/README.md "Without OPENDIR".
  bool no_opendir = false;
  bool read_only = false;  // -o ro: FLUSH answered ENOSYS too
  // Why this mount asks for no FUSE passthrough whatever the kernel offers
  // (-o no_passthrough, verify=always, noatime), or null.
  const char* passthrough_off = nullptr;
  // Remounted read-only (`mount -o remount,ro`, remount.hpp); the kernel
  // itself refuses every write while the superblock is read-only.
  std::atomic<bool> remounted_ro{false};
  // /proc is the proc of the daemon's pid namespace (read at init): the
  // pids the kernel sends can be read there (writer_visible).
  bool proc_is_ours = true;
  // R4's unseen-writer policy has been logged (once per mount).
  std::atomic<bool> unseen_writer_logged{false};
  std::string mountpoint;  // absolute
  // The mount's ID (fdinfo's mnt_id:), read from /proc/self/mountinfo at
  // init (the mount exists by then); 0 when not found, and a process's
  // descriptors are then matched by inode alone.
  std::atomic<std::uint64_t> mount_id{0};
  // The mount's device ("major:minor"), read at init too: the same in every
  // mount namespace, where the mount ID is not (a sidecar's app sees the
  // mount under IDs of its own namespace).
  void set_mount_device(std::string device) {
    std::lock_guard lock(mount_device_mu_);
    mount_device_ = std::move(device);
  }
  std::string mount_device() const {
    std::lock_guard lock(mount_device_mu_);
    return mount_device_;
  }
  mutable std::mutex mount_device_mu_;
  std::string mount_device_;  // under mount_device_mu_
  // -o max_write=, async_read, …: applied to the connection in init.
  std::unique_ptr<fuse_conn_info_opts, ConnOptsDeleter> conn_opts;
  unsigned max_read = 0;  // -o max_read=, which init must repeat
  // R2: running out of descriptors is never damage, and callers' opens must
  // not starve verification and publishes of the descriptors they need. An
  // open that would leave less than descriptor_headroom is refused with
  // ENFILE (the daemon's table is full, not the caller's) once make_room
  // could not help. Each open handle and each inode the kernel holds that
  // is not detached (Inode::detach) costs one descriptor. The limit is read each time: an administrator may
  // change it with prlimit(1) while mounted.
  bool descriptors_low() const {
    const std::uint64_t limit = descriptor_limit();
    return descriptors_used() + descriptor_headroom(limit) >= limit;
  }
  // The descriptors held now: those owned through UniqueFd, counted as they
  // open and close, plus the ones libfuse and the C library hold (/dev/fuse,
  // each worker's splice pipe) as last recounted. Two atomic loads: it is
  // asked on every LOOKUP and open.
  std::uint64_t descriptors_used() const;
  // Recounts those others from /proc (a directory read of every descriptor),
  // at most every 250 ms. Called from the evictor's thread at each sweep and
  // once at start, never on a request's path.
  void recount_untracked_descriptors();
  // Issue 24: running low slows a request down, it does not fail it. While
  // descriptors are low, waits (up to 10 s, given up after 3 s in which
  // none came back) for the evictor to detach cold files and for RELEASEs and
  // seals to finish; false if still low then (open handles fill the table,
  // or the limit was lowered below what is held). When none is on its way
  // (files held open by callers, parked already where they can be) it is
  // given up within 200 ms, and at once below minimum_descriptor_limit().
  bool make_room();
  // Write handles closed and waiting for their RELEASE, each still holding
  // its descriptor: the kernel sends RELEASEs in the background, a few at a
  // time, and each ends in a seal, so a burst of creates (stress-ng's dentry
  // stressor: thousands a second) outruns them. A CREATE waits, at most
  // kBacklogWait, while more than half the inode bound of them wait.
  std::atomic<std::uint64_t> closed_unreleased{0};
  // Handles parked now (parked_handles.hpp): while there are any, a
  // name removed or replaced through the mount opens its object's first.
  std::atomic<std::uint64_t> parked_handles{0};
  // Held shared while a name is removed or replaced through the mount, and
  // unique while handles are parked: never one while the other.
  std::shared_mutex parking_mu;

 private:
  void log_descriptors_low() const;
  mutable std::atomic<std::int64_t> low_logged_at_ns_{0};
  std::atomic<std::int64_t> untracked_descriptors_{0};
  std::chrono::steady_clock::time_point untracked_counted_at_{};  // the evictor's thread only

 public:
  void wait_for_release_backlog();
};

// The operations table; userdata passed to fuse_session_new must be a Filesystem*.
const fuse_lowlevel_ops& operations();

}  // namespace sealfs::fuse
