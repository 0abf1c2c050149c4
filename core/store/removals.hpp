// Removals through the mount in flight (R5: hidden things never block). A
// process that takes an entry apart name by name (shutil.rmtree, rm -r)
// lists it, then unlinks each name and removes the directory, milliseconds
// apart. Damage found in that entry between two of those steps used to fail
// every later step with ENOENT, where a plain directory lets the removal
// finish: the entry was moved into the quarantine, or only hidden, and a
// lookup answering ENOENT makes the kernel drop the names the remover still
// holds (each later step then looks its name up again). So each step notes
// the entry it works in and the process (thread) taking it: for a moment
// after, the entry's quarantine waits (it stays hidden where it is), and
// that process alone still finds the names that the damage hides, never
// cached, so its removal ends as on a plain directory. Its rmdir of the
// entry root moves what is left into the quarantine.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

namespace sealfs {

class RemovalsInFlight {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a removal's last step holds its entry back: far longer than a
  // removal's steps are apart on a loaded host, and short enough that one
  // that stops half-way keeps a damaged entry out of the quarantine (hidden
  // all the while, never served) only that long.
  static constexpr std::chrono::milliseconds kWindow{2000};

  // A removal step by `remover` (a caller's pid; 0: unknown) in the entry
  // whose root is `root` (its device and inode).
  void note(const struct stat& root, pid_t remover, Clock::time_point now = Clock::now());
  // Whether any removal step in that entry came within kWindow before now.
  bool recent(const struct stat& root, Clock::time_point now = Clock::now()) const;
  // Whether one by `remover` (never 0) did.
  bool recent_by(const struct stat& root, pid_t remover, Clock::time_point now = Clock::now()) const;
  // The entry root is gone (its inode number may be reused).
  void forget(const struct stat& root);

 private:
  using Key = std::tuple<dev_t, ino_t, pid_t>;
  // Past this many notes, expired ones are dropped at the next note.
  static constexpr std::size_t kPruneAbove = 64;

  mutable std::mutex mu_;
  std::map<Key, Clock::time_point> noted_;  // guarded by mu_
};

}  // namespace sealfs
