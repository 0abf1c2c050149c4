// Verified bytes put into the kernel's page cache (notify_store), so that a
// load sends no READ, or one (fs/README.md "Pages pushed"): right after the
// LOOKUP that gave the kernel a sealed file it did not hold, and at the first
// READ that reaches the daemon when that push lost the race to the loader.
// A file is pushed once per kernel inode: one the kernel forgot took its
// pages with it, and one it holds keeps them across opens.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <atomic>
#include <cstddef>

#include "core/store/store.hpp"
#include "fs/fuse/kernel_notices.hpp"

namespace sealfs::fuse {

struct Filesystem;
struct FileHandle;

class PagePusher {
 public:
  // notices must outlive every push: stop() before destroying them.
  void start(KernelNotices* notices) { notices_.store(notices); }
  void stop() { notices_.store(nullptr); }
  KernelNotices* notices() const { return notices_.load(); }

  // Files above this size are left to READs (-o push_max): a push costs a
  // copy of the whole file into memory the caller may never read.
  off_t max_file = 64 << 20;

  // A store waits for pages the kernel holds locked for READs in flight,
  // which other request threads answer: pushes may take only a few of the
  // threads, or a burst of cold loads could take them all and wait for ever.
  bool try_begin() {
    if (active_.fetch_add(1) < kMaxActive) return true;
    active_.fetch_sub(1);
    return false;
  }
  void end() { active_.fetch_sub(1); }
  static constexpr int kMaxActive = 4;

 private:
  std::atomic<KernelNotices*> notices_{nullptr};
  std::atomic<int> active_{0};
};

// After the LOOKUP of ino was answered: its verified bytes go into the
// kernel's pages when it is a sealed regular file of at most max_file bytes,
// not in progress, and not pushed before. Each chunk is read, then the
// backing stamp is checked against the verified one (R2), then stored; a
// change stops the push and the READ path takes over. Never replies.
void push_after_lookup(Filesystem& fs, fuse_ino_t ino, ObjectKind kind, const struct stat& st);

// At a READ of [off, off + size) that reached the daemon on handle (its
// stamp just checked), before it is answered: the rest of the file goes into
// the kernel's pages unless a push already did, so the load that faulted
// sends no other READ. The READ's own range is left alone: the kernel holds
// those pages locked until the answer.
void push_rest_at_read(Filesystem& fs, fuse_ino_t ino, FileHandle& handle, off_t off, std::size_t size);

}  // namespace sealfs::fuse
