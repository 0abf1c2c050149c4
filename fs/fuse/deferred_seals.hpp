// R4, issue 23 point 8: the seal of a large file comes a moment after its
// last close instead of at it, and a writer that opens the file again
// meanwhile takes that seal over. A file closed many times in a row
// (xfstests generic/247: 500 closes of a 500 MB file; a file rewritten chunk
// by chunk with a close after each) is then hashed once, not at every close.
//
// Until its seal runs the file stays in progress: visible, its bytes those
// written through M (R2 holds: nothing is served that was neither verified
// nor written through the mount). A request that needs the seal's result
// (rename, link, unlink, setattr) runs it first (run_now), and the unmount
// runs every one still waiting (stop). A daemon killed in between leaves the
// file unsealed: hidden after the restart but kept in B (R3), where
// `sealfs adopt` seals it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace sealfs::fuse {

class DeferredSeals {
 public:
  using Key = std::pair<dev_t, ino_t>;
  using Seal = std::function<void()>;
  // Files this large or larger are sealed late; a smaller one costs little
  // to hash and is sealed at its close, before close() returns.
  static constexpr off_t kMinBytes = off_t{8} << 20;

  DeferredSeals() = default;
  ~DeferredSeals() { stop(); }
  DeferredSeals(const DeferredSeals&) = delete;
  DeferredSeals& operator=(const DeferredSeals&) = delete;

  void start(std::chrono::milliseconds delay);
  // Queues key's seal, due after the delay. False when not started: the
  // caller seals now. seal must end the file's seal state (writers.finished).
  bool post(Key key, Seal seal);
  // A new writer of key: its waiting seal is dropped (true when there was
  // one; the caller then counts the file as changed and in progress again).
  bool cancel(Key key);
  // Runs key's waiting seal now, in this thread; nothing when none waits.
  void run_now(Key key);
  // Runs every waiting seal now, in this thread (a remount read-only).
  void run_all();
  // Runs every waiting seal and ends the thread (the unmount).
  void stop();
  std::size_t waiting() const;

 private:
  struct Item {
    Seal seal;
    std::chrono::steady_clock::time_point due;
  };
  void run();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Item> items_;
  bool running_ = false;
  std::chrono::milliseconds delay_{0};
  std::thread thread_;
};

}  // namespace sealfs::fuse
