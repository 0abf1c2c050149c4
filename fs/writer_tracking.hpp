// R4: which backing files are open for writing through the mount, and how
// their last write handle ended. A file is "in progress" from the open of
// its first write handle until the seal (or abandon) after its last release
// has finished, so it never blinks out of sight in between.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

namespace sealfs::fs {

// How the task that closed a write handle was doing, read from
// /proc/<tid>/stat at FLUSH.
enum class CloserState {
  normal,     // alive, or exiting with status 0, or not visible to us
  abandoned,  // exiting because of a signal or with a non-zero status
};

// Parse the text of /proc/<tid>/stat: abandoned when the flags field (9th)
// has PF_EXITING and the exit_code field (52nd) is non-zero. Anything that
// does not parse counts as normal (DESIGN.md R4: unseen writers close normally).
CloserState closer_state_from_stat(std::string_view stat_text);
// Read and judge /proc/<tid>/stat; unreadable → normal.
CloserState closer_state_of(pid_t tid);

class WriterTracking {
 public:
  void opened(dev_t dev, ino_t ino);
  // One write handle is gone. When it was the last, returns whether the file
  // must be abandoned (any of its handles was) rather than sealed; the file
  // stays in progress until finished() is called.
  std::optional<bool> released(dev_t dev, ino_t ino, bool abandoned);
  void finished(dev_t dev, ino_t ino);
  // An opened() whose open then failed: forget it without sealing anything.
  void cancelled(dev_t dev, ino_t ino);

  bool in_progress(dev_t dev, ino_t ino) const;

 private:
  struct State {
    unsigned writers = 0;
    unsigned sealing = 0;  // seals/abandons under way after a last release
    bool abandoned = false;
  };
  mutable std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, State> files_;
};

}  // namespace sealfs::fs
