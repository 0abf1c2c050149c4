#include "fs/fuse/filesystem.hpp"

namespace sealfs::fuse {

void Filesystem::attach_hooks(StoreOptions& options) {
  options.in_progress = [this](dev_t dev, ino_t ino) { return writers.in_progress(dev, ino); };
  options.on_invalidate = [this](const Invalidation& event) { invalidator.post(event); };
}

}  // namespace sealfs::fuse
