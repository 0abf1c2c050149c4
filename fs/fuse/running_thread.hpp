#pragma once

#include <future>
#include <thread>
#include <utility>

namespace sealfs::fuse {

// Starts body on a new thread and returns it once that thread is running.
// Why wait: the daemon's helper threads (invalidator, evictor, reaper…) must
// be up before it serves, not first scheduled later, when it may be out of
// descriptors. UBSan's vptr check of a thread's entry point (made once per
// type) reads memory through a pipe; at EMFILE it failed and aborted the
// sanitized daemon (CI, HostileQuarantine.DescriptorExhaustionLeavesNoEmptySlot).
template <typename Body>
std::thread start_running_thread(Body body) {
  std::promise<void> up;
  std::future<void> running = up.get_future();
  std::thread thread([body = std::move(body), up = std::move(up)]() mutable {
    up.set_value();
    body();
  });
  running.wait();
  return thread;
}

}  // namespace sealfs::fuse
