// Without OPEN the kernel sends no RELEASE, so a process killed while its
// CREATE was being answered never closes the new file: no FLUSH comes, and
// its implicit writer would keep the file in progress (visible) for ever.
// The store's in-progress question finds such writers (every process that
// changed the file is gone) and posts them here; this thread ends them
// (R4: abandoned) outside the store's judgement that found them.
#pragma once

#include <fuse_lowlevel.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace sealfs::fuse {

class Reaper {
 public:
  Reaper() = default;
  ~Reaper() { stop(); }
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void post(fuse_ino_t ino);  // never blocks; dropped when not started
  void start(std::function<void(fuse_ino_t)> end);
  void stop();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<fuse_ino_t> queue_;
  bool running_ = false;
  std::function<void(fuse_ino_t)> end_;
  std::thread thread_;
};

}  // namespace sealfs::fuse
