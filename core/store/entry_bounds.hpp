// Where directory entries begin. A directory becomes an entry (a publish
// writes its manifest, then renames it) or part of one (a move into an
// entry) while, in another request, a file of that directory is given a
// sidecar as a file entry of a container: a seal after its close, or a
// rename into it. Nothing in the kernel orders the two (a directory's
// rename does not lock the directory itself), and the sidecar then lands
// in an entry whose manifest does not list the file, which is hidden from
// then on (fsmix multi seed 3 under ASan: `.sealfs-manifest.f1` written
// 15 ms after the directory's own manifest).
//
// So a change of where entries begin holds this lock exclusively, from the
// records it takes of the tree until the directory is in place and the
// cached directory contexts are gone (a directory leaving an entry is
// unlisted first, then renamed, in that hold); a sidecar is written under
// its shared hold, after the directory is found still outside every entry,
// and so is a seal's record in an entry (its key checked under the
// manifest's lock). The shared hold covers the check and the write, never
// a hash.
#pragma once

#include <functional>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "core/base/result.hpp"

namespace sealfs {

// How often a caller told EAGAIN places its file again: each retry needs
// another directory made an entry meanwhile.
inline constexpr int kPlaceTries = 8;

class EntryBounds {
 public:
  // Whether the directory dir_fd is (inside) a directory entry now.
  using InEntry = std::function<Result<bool>(int dir_fd)>;

  void set_probe(InEntry probe) { probe_ = std::move(probe); }

  // Held while a directory becomes an entry or moves into one.
  [[nodiscard]] std::unique_lock<std::shared_mutex> reshape() const {
    return std::unique_lock<std::shared_mutex>(mu_);
  }

  // Held while a record is written into an entry's manifest for a file
  // placed before: no directory is between leaving an entry and being gone.
  [[nodiscard]] std::shared_lock<std::shared_mutex> keep() const {
    return std::shared_lock<std::shared_mutex>(mu_);
  }

  // Held while a sidecar is written in dir_fd, a container's directory when
  // its caller placed the file: EAGAIN when it is in an entry now (place the
  // file again).
  [[nodiscard]] Result<std::shared_lock<std::shared_mutex>> keep_container(int dir_fd) const {
    std::shared_lock<std::shared_mutex> held(mu_);
    if (probe_) {
      auto in_entry = probe_(dir_fd);
      if (!in_entry) return in_entry.error();
      if (*in_entry) return make_error(EAGAIN, "its directory became (part of) an entry meanwhile");
    }
    return held;
  }

 private:
  mutable std::shared_mutex mu_;
  InEntry probe_;
};

}  // namespace sealfs
