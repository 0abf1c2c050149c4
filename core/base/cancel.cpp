#include "core/base/cancel.hpp"

#include <atomic>

namespace sealfs {
namespace {

std::atomic<bool> g_shutdown{false};
static_assert(std::atomic<bool>::is_always_lock_free, "request_shutdown runs in a signal handler");

thread_local CancelScope::Check t_check = nullptr;
thread_local void* t_ctx = nullptr;

}  // namespace

CancelScope::CancelScope(Check check, void* ctx) noexcept : prev_check_(t_check), prev_ctx_(t_ctx) {
  t_check = check;
  t_ctx = ctx;
}

CancelScope::~CancelScope() {
  t_check = prev_check_;
  t_ctx = prev_ctx_;
}

bool cancel_requested() noexcept {
  if (g_shutdown.load(std::memory_order_relaxed)) return true;
  return t_check != nullptr && t_check(t_ctx);
}

void request_shutdown() noexcept { g_shutdown.store(true, std::memory_order_relaxed); }

bool shutdown_requested() noexcept { return g_shutdown.load(std::memory_order_relaxed); }

}  // namespace sealfs
