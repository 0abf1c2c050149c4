// What happened to one write handle between its open and its end: the facts
// R4 and R10 judge its last close on. WRITE, FLUSH, RELEASE and the reaper
// record them from different threads, so each is a bit of one atomic word,
// set and never cleared (except awaiting_release, which RELEASE takes back).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/writers/writer_tracking.hpp"

namespace sealfs::fuse {

class HandleLife {
 public:
  // What the open itself did.
  struct Origin {
    bool made = false;       // it created the file (sealed even when empty, R10)
    bool truncated = false;  // O_TRUNC of an existing file: a change
  };

  // Its open, once, before any request sees the handle.
  void opened(Origin origin) {
    set(static_cast<std::uint8_t>((origin.made ? kMade : 0) | (origin.truncated ? kChanged : 0)));
  }
  // It wrote, truncated or allocated the file.
  void change() { set(kChanged); }
  // A task closed one of its descriptors, normally or dying (a signal or
  // a failure: CloserState::abandoned). Both may happen to one handle.
  void closer(bool normally) { set(normally ? kClosedNormally : kAbandoned); }
  // Its writer's process left without closing (the reaper): abandoned.
  void abandon() { set(kAbandoned); }
  // A FLUSH came (or, for an implicit writer, its end stands for one).
  void flush() { set(kFlushed); }
  // Flushed and now waiting for RELEASE: true only the first time, so the
  // caller counts each handle once in Filesystem::closed_unreleased.
  bool await_release() { return (bits_.fetch_or(kAwaitingRelease) & kAwaitingRelease) == 0; }
  // RELEASE came: true when it had been awaited (the caller uncounts it).
  bool take_awaited_release() {
    return (bits_.fetch_and(static_cast<std::uint8_t>(~kAwaitingRelease)) & kAwaitingRelease) != 0;
  }

  bool changed() const { return has(kChanged); }
  bool flushed() const { return has(kFlushed); }

  // What WriterTracking judges at the release. A handle released without
  // any FLUSH was never held by its opener (a create cut short by SIGKILL,
  // a reply that failed) or lost its closer's FLUSH: R4 cannot call that a
  // normal close, so it counts as abandoned.
  HandleEnd end() const {
    const std::uint8_t b = bits_.load();
    return HandleEnd{(b & kChanged) != 0, (b & kAbandoned) != 0 || (b & kFlushed) == 0, (b & kMade) != 0,
                     (b & kClosedNormally) != 0};
  }

 private:
  static constexpr std::uint8_t kMade = 1;
  static constexpr std::uint8_t kChanged = 2;
  static constexpr std::uint8_t kFlushed = 4;
  static constexpr std::uint8_t kClosedNormally = 8;
  static constexpr std::uint8_t kAbandoned = 16;
  static constexpr std::uint8_t kAwaitingRelease = 32;

  void set(std::uint8_t bit) { bits_.fetch_or(bit); }
  bool has(std::uint8_t bit) const { return (bits_.load() & bit) != 0; }

  std::atomic<std::uint8_t> bits_{0};
};

}  // namespace sealfs::fuse
