// R4's writer state, keyed by the file's inode (device, inode number), not
// by a name: which files are open for writing through the mount, how their
// last write handle ended, and the seal gate. A file is "in progress" from
// the open of its first write handle until the seal (or abandon) after its
// last release has finished, so it never blinks out of sight in between: the
// kernel sends RELEASE after close() has returned, and the closer's next
// requests may arrive before it. fs/ hands it the facts only FUSE knows (an
// open, a FLUSH's closer, a RELEASE); it knows nothing of FUSE.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace sealfs {

// What the last release of a file's write handles asks for.
enum class LastClose {
  untouched,  // no handle made or changed the file: it stays as it was (sealed or not)
  seal,       // made or changed, and every changing handle closed normally
  abandon,    // a handle that changed it was abandoned (R4)
};

// How one write handle ended.
struct HandleEnd {
  bool changed = false;          // it wrote, truncated or allocated the file
  bool abandoned = false;        // a closer was dying abnormally, or no FLUSH came
  bool made = false;             // it created the file (sealed even when empty)
  bool closed_normally = false;  // at least one of its closes came from a task closing normally
};

class WriterTracking {
 public:
  using Key = std::pair<dev_t, ino_t>;

  void opened(dev_t dev, ino_t ino);
  // One write handle is gone. When it was the last, says what the file needs;
  // the file stays in progress until finished() is called.
  std::optional<LastClose> released(dev_t dev, ino_t ino, HandleEnd end);
  void finished(dev_t dev, ino_t ino);
  // A seal that waited (DeferredSeals) was taken over by a new writer
  // (already counted by opened()): finished() without it, and the file still
  // counts as changed, so that the new writer's last close seals it even if
  // that writer changes nothing.
  void resumed(dev_t dev, ino_t ino);
  // An opened() whose open then failed: forget it without sealing anything.
  void cancelled(dev_t dev, ino_t ino);

  // At a FLUSH of a write handle (handle_changes: it made or changed the
  // file): whether it is the file's only write handle and the file will
  // need a seal when it goes (nothing abandoned so far). R4's seal journal
  // records such a close before FLUSH returns.
  bool last_writer_seals(dev_t dev, ino_t ino, bool handle_changes) const;
  bool in_progress(dev_t dev, ino_t ino) const;

  // A change of the file's content that no write handle makes (a truncate
  // by path, which seals at once): the file is in progress for the life of
  // the returned object, so that a lookup through another of its names
  // between the truncate and its seal (the manifests of its other names
  // amended last) finds it being written, not damaged (fsmix multi seed 8).
  class Change {
   public:
    Change() = default;
    Change(Change&& other) noexcept;
    Change& operator=(Change&& other) noexcept;
    Change(const Change&) = delete;
    Change& operator=(const Change&) = delete;
    ~Change();

   private:
    friend class WriterTracking;
    void end();
    WriterTracking* owner_ = nullptr;
    Key key_{0, 0};
  };
  [[nodiscard]] Change changing(dev_t dev, ino_t ino);
  // How many files are in progress now (the status gauge).
  std::size_t in_progress_count() const;

  // R4's seal gate. The seal after a last release runs while the kernel may
  // already send the closer's next requests (close() returned at FLUSH). A
  // seal, and every request that would race with one or needs its result
  // (setattr, rename, link, unlink, a write open), holds its files for its
  // duration: one holder per file at a time, so a seal never hashes a file
  // whose times or mode are being changed, and a rename never moves a file
  // half sealed.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();

   private:
    friend class WriterTracking;
    void release();
    WriterTracking* owner_ = nullptr;
    std::vector<Key> keys_;
  };
  // Waits until no one else holds any of keys (taken in one order, so two
  // holders of the same pair cannot deadlock). Keys of {0, 0} are skipped.
  [[nodiscard]] Hold hold(std::vector<Key> keys);
  [[nodiscard]] Hold hold(dev_t dev, ino_t ino) { return hold(std::vector<Key>{{dev, ino}}); }

 private:
  struct State {
    unsigned writers = 0;
    unsigned sealing = 0;    // seals/abandons under way after a last release
    unsigned changing = 0;   // changes without a handle under way (Change)
    bool changed = false;    // made or changed by a handle: needs a seal
    bool abandoned = false;  // a changing handle was abandoned
  };
  // Under mu_: forgets a file no one writes, seals or changes.
  void erase_if_idle(std::map<Key, State>::iterator it);

  mutable std::mutex mu_;
  std::map<Key, State> files_;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  std::set<Key> held_;
};

}  // namespace sealfs
