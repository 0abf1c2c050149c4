#include "core/verify/verifier.hpp"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "core/base/cancel.hpp"
#include "core/base/digest.hpp"
#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/base/stamp.hpp"

namespace sealfs {

namespace {

using Key = std::pair<dev_t, ino_t>;

}  // namespace

struct Verifier::Impl {
  struct Cached {
    Stamp stamp;
    Sha256 digest{};
    std::list<Key>::iterator age;  // position in `order`
  };

  Metrics& metrics;
  std::size_t max_cached;
  // mu protects cache, order and in_flight. It is never held while hashing:
  // a thread hashing a file marks its key in_flight, and other threads asking
  // for that key wait on cv instead of hashing it again.
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<Key, Cached> cache;
  std::list<Key> order;  // oldest insertion first, for eviction
  std::set<Key> in_flight;
  std::function<void()> mid_hash;

  Impl(Metrics& m, std::size_t max) : metrics(m), max_cached(max == 0 ? 1 : max) {}

  void store(const Key& key, const Stamp& stamp, const Sha256& digest) {
    auto it = cache.find(key);
    if (it != cache.end()) {
      order.erase(it->second.age);
      cache.erase(it);
    }
    while (cache.size() >= max_cached && !order.empty()) {
      cache.erase(order.front());
      order.pop_front();
    }
    order.push_back(key);
    cache.emplace(key, Cached{stamp, digest, std::prev(order.end())});
  }
};

Verifier::Verifier(Metrics& metrics, std::size_t max_cached)
    : impl_(std::make_unique<Impl>(metrics, max_cached)) {}
Verifier::~Verifier() = default;

Result<Sha256> Verifier::digest(int fd, bool force) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("fstat before hashing");
  if (!S_ISREG(st.st_mode)) return make_error(EINVAL, "not a regular file");
  const Stamp before = Stamp::of(st);
  const Key key{st.st_dev, st.st_ino};
  {
    std::unique_lock lock(impl_->mu);
    // Another thread is hashing this file: its result answers us too (it read
    // the file after we were asked, so even force=true is served by it).
    bool waited = false;
    while (impl_->in_flight.count(key) != 0) {
      waited = true;
      // A waiter whose own caller gives up stops waiting too.
      if (cancel_requested()) return make_error(EINTR, "hash abandoned: its caller gave up");
      impl_->cv.wait_for(lock, std::chrono::milliseconds(100));
    }
    auto it = impl_->cache.find(key);
    if (it != impl_->cache.end() && it->second.stamp == before &&
        (waited || (!force && !before.too_recent())))
      return it->second.digest;
    impl_->in_flight.insert(key);
  }
  std::uint64_t bytes = 0;
  Result<FileDigest> hashed = sha256_fd(fd, &bytes);
  if (impl_->mid_hash) impl_->mid_hash();
  struct stat after {};
  const bool stable = hashed.ok() && ::fstat(fd, &after) == 0 && Stamp::of(after) == before &&
                      hashed->size == static_cast<std::uint64_t>(before.size);
  {
    std::lock_guard lock(impl_->mu);
    impl_->in_flight.erase(key);
    // Only a hash of content that did not change while it was read is worth
    // remembering; otherwise the next caller hashes again.
    if (stable) impl_->store(key, before, hashed->sha256);
  }
  impl_->cv.notify_all();
  impl_->metrics.bytes_hashed.fetch_add(bytes, std::memory_order_relaxed);
  if (!hashed) return hashed.error();
  impl_->metrics.files_hashed.fetch_add(1, std::memory_order_relaxed);
  if (!stable) return make_error(EAGAIN, "file changed while it was hashed");
  return hashed->sha256;
}

void Verifier::set_mid_hash_hook(std::function<void()> hook) { impl_->mid_hash = std::move(hook); }

void Verifier::forget(dev_t dev, ino_t ino) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->cache.find(Key{dev, ino});
  if (it == impl_->cache.end()) return;
  impl_->order.erase(it->second.age);
  impl_->cache.erase(it);
}

std::size_t Verifier::cached() const {
  std::lock_guard lock(impl_->mu);
  return impl_->cache.size();
}

}  // namespace sealfs
