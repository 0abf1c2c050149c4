// The state one mount shares between its request handlers, and the table of
// FUSE low-level operations (fs/operations.cpp) that work on it.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "core/store.hpp"
#include "core/unique_fd.hpp"
#include "fs/handle_table.hpp"
#include "fs/inode_table.hpp"
#include "fs/invalidator.hpp"
#include "fs/writer_tracking.hpp"

namespace sealfs::fs {

struct FileHandle {
  UniqueFd fd;
  InodeRef inode;       // keeps the O_PATH fd for seal/abandon after the kernel forgets it
  bool tracked = false;  // counted in WriterTracking (a write handle outside volatile areas)
  std::atomic<bool> abandoned{false};
  // Every close(2) of a descriptor sends FLUSH before the last RELEASE. A
  // write handle released without one was never held by its opener (a
  // create cut short by SIGKILL, a reply that failed) or lost its closer's
  // FLUSH: R4 cannot call that a normal close, so it counts as abandoned.
  std::atomic<bool> flushed{false};
  // R10: an abandoned writer abandons only a file its handle changed (made,
  // wrote, truncated, allocated); a file it merely opened stays as it was.
  std::atomic<bool> changed{false};
};

struct DirHandle {
  InodeRef inode;
  std::mutex mu;
  std::vector<DirItem> items;  // snapshot taken at opendir / rewinddir
};

// libfuse allocates fuse_conn_info_opts with malloc.
struct ConnOptsDeleter {
  void operator()(fuse_conn_info_opts* o) const { std::free(o); }
};

struct Filesystem {
  Filesystem() : invalidator(inodes) {}

  // Wires the store's hooks to this mount; call before Store::open.
  void attach_hooks(StoreOptions& options);
  // Test builds: the fault hook's pause or crash at a step of the adapter's own.
  void test_step(std::string_view step) const {
    if (store && store->options().fault_hook) store->options().fault_hook(step);
  }

  std::unique_ptr<Store> store;
  InodeTable inodes;
  WriterTracking writers;
  Invalidator invalidator;
  HandleTable<FileHandle> files;
  HandleTable<DirHandle> dirs;
  double cache_timeout = 1.0;  // seconds, for sealed and verified objects
  bool chown_to_caller = false;  // running as root: created objects belong to the caller
  // -o max_write=, async_read, …: applied to the connection in init.
  std::unique_ptr<fuse_conn_info_opts, ConnOptsDeleter> conn_opts;
  unsigned max_read = 0;  // -o max_read=, which init must repeat
};

// The operations table; userdata passed to fuse_session_new must be a Filesystem*.
const fuse_lowlevel_ops& operations();

}  // namespace sealfs::fs
