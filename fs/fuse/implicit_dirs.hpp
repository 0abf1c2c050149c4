// The directory handles of a connection that runs without OPENDIR
// (no_opendir: OPENDIR is answered ENOSYS, so the kernel sends neither
// OPENDIR nor RELEASEDIR, READDIR comes with fh 0, and the kernel keeps each
// listing it read until the directory's mtime changes or sealfs drops it;
// fs/README.md "Without OPENDIR"). One handle per directory inode stands in
// for what OPENDIR made; it leaves with the kernel's FORGET.
#pragma once

#include <fuse_lowlevel.h>

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace sealfs::fuse {

struct DirHandle;

class ImplicitDirs {
 public:
  using MakeHandle = std::function<std::shared_ptr<DirHandle>()>;
  // ino's handle, made by make() when there is none.
  std::shared_ptr<DirHandle> get(fuse_ino_t ino, const MakeHandle& make) {
    std::lock_guard lock(mu_);
    auto& slot = dirs_[ino];
    if (!slot) slot = make();
    return slot;
  }
  void forget(fuse_ino_t ino) {
    std::lock_guard lock(mu_);
    dirs_.erase(ino);
  }

 private:
  std::mutex mu_;
  std::unordered_map<fuse_ino_t, std::shared_ptr<DirHandle>> dirs_;
};

}  // namespace sealfs::fuse
