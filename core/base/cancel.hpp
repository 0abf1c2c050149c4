// Abandoning long work (a hash) when nobody waits for it any more: the
// request's caller gave up (a signal, FUSE INTERRUPT: R2 "a caller that gives
// up abandons its hash"), or the daemon is shutting down (SIGTERM must
// unmount in bounded time). core/ knows nothing of FUSE: the adapter installs
// a CancelScope per request with a plain function that says whether its
// request was interrupted.
#pragma once

namespace sealfs {

// For the current thread, while it lives: work asks check(ctx) whether to stop.
class CancelScope {
 public:
  using Check = bool (*)(void* ctx);
  CancelScope(Check check, void* ctx) noexcept;
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  Check prev_check_;
  void* prev_ctx_;
};

// Whether long work on this thread should stop now (its scope says so, or
// the process is shutting down). Cheap: call it once per block of work.
bool cancel_requested() noexcept;

// Process-wide and for good: every cancel_requested() answers true from now
// on. Async-signal-safe (a SIGTERM handler calls it).
void request_shutdown() noexcept;
// Whether request_shutdown() was called (a stop signal came).
bool shutdown_requested() noexcept;

}  // namespace sealfs
