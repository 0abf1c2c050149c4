#include "fs/fuse/filesystem.hpp"

#include <syslog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "core/base/metrics.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/known_names.hpp"
#include "core/store/store.hpp"
#include "fs/fuse/descriptors.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/parked_handles.hpp"
#include "fs/fuse/writer_tasks.hpp"

namespace sealfs::fuse {

void Filesystem::attach_hooks(StoreOptions& options) {
  options.in_progress = [this](dev_t dev, ino_t ino) {
    if (!writers.in_progress(dev, ino)) return false;
    // Without OPEN a writer can outlive every process that held the file
    // (reaper.hpp): such a file is no longer in progress, and is ended.
    if (!no_open) return true;
    // By the inode the kernel holds, or else by the file itself: a creator
    // killed before its open returned sends no FLUSH, a lookup then finds
    // the file hidden (orphaned) and the kernel forgets its inode, and the
    // next lookup must not see it in progress while the reaper abandons it.
    std::optional<fuse_ino_t> id;
    if (const InodeRef inode = inodes.find(dev, ino))
      id = inode->id;
    else
      id = implicit.writer_id_where(
          [&](const FileHandle& h) { return h.inode && h.inode->dev == dev && h.inode->ino == ino; });
    if (!id || !implicit.writer_orphaned(*id, process_gone)) return true;
    reaper.post(*id);
    return false;
  };
  options.known_names = inodes.names();
  options.directory_of = [this](ObjectId id) -> std::shared_ptr<const UniqueFd> {
    const InodeRef dir = inodes.find(id.dev, id.ino);
    if (!dir || !dir->directory) return nullptr;
    return dir->path_fd();
  };
  options.on_invalidate = [this](const Invalidation& event) {
    // The parent's listing at once, before the reply to the request that
    // noticed the change: a caller that lists next must not be served the
    // kernel's copy that still names the object. Safe inside any request
    // (the kernel's inode invalidation takes no directory lock); the entry
    // and the object itself go through the queue (an entry's invalidation
    // would wait for the parent's lock that a lookup holds).
    if (!event.name.empty())
      if (const InodeRef parent = inodes.find(event.parent_dev, event.parent_ino))
        invalidator.invalidate_now(parent->id);
    invalidator.post(event);
  };
  options.gauges = [this] {
    Gauges g;
    g.in_progress = writers.in_progress_count();
    g.open_handles = files.size() + dirs.size() + implicit.size();
    g.parked_handles = parked_handles.load(std::memory_order_relaxed);
    g.inodes = inodes.size();
    g.inode_files = inodes.files();
    g.inode_bound = evictor.bound();
    g.descriptors = open_descriptors();
    g.descriptor_limit = descriptor_limit();
    return g;
  };
}

std::uint64_t Filesystem::descriptors_used() const {
  return static_cast<std::uint64_t>(
      std::max<std::int64_t>(UniqueFd::live() + untracked_descriptors_.load(std::memory_order_relaxed), 0));
}

void Filesystem::recount_untracked_descriptors() {
  constexpr auto kUntrackedRecount = std::chrono::milliseconds(250);
  const auto now = std::chrono::steady_clock::now();
  if (now - untracked_counted_at_ < kUntrackedRecount) return;
  untracked_counted_at_ = now;
  // Other threads open and close meanwhile: of the UniqueFd counts before
  // and after, the larger leaves the smaller remainder (a burst of closes
  // during the count must not read as descriptors held elsewhere). 0 when
  // /proc cannot be read (no descriptor left for it): keep the old figure.
  const std::int64_t before = UniqueFd::live();
  const std::uint64_t all = open_descriptors();
  if (all == 0) return;
  const std::int64_t tracked = std::max(before, UniqueFd::live());
  untracked_descriptors_.store(std::max<std::int64_t>(static_cast<std::int64_t>(all) - tracked, 0),
                               std::memory_order_relaxed);
}

void Filesystem::wait_for_release_backlog() {
  constexpr auto kBacklogWait = std::chrono::seconds(2);
  constexpr auto kPoll = std::chrono::milliseconds(2);
  const std::uint64_t most = std::max<std::uint64_t>(evictor.bound() / 2, 16);
  if (closed_unreleased.load(std::memory_order_relaxed) <= most) return;
  // Down to three quarters of it, so that creates do not wait one by one.
  const std::uint64_t resume = most * 3 / 4;
  const auto deadline = std::chrono::steady_clock::now() + kBacklogWait;
  while (closed_unreleased.load(std::memory_order_relaxed) > resume &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(kPoll);
}

bool Filesystem::make_room() {
  // Descriptors come back as the evictor detaches cold files, as idle
  // handles are parked, and as RELEASEs and seals finish. Those come through
  // the request threads, which waiting here must not all hold: hence a
  // bounded wait. It is given up after 3 s in which none came back, or
  // within 200 ms (requests in flight finishing, a seal at a close) when
  // none is on its way: no close awaiting its RELEASE, no seal waiting. Files
  // a caller keeps open are not on their way: their idle handles were parked
  // here already, and what is left (a handle in a request, a file unlinked
  // while open) comes back as a descriptor falling, which extends the wait.
  constexpr auto kWait = std::chrono::seconds(10);
  constexpr auto kPoll = std::chrono::milliseconds(5);
  constexpr int kPollsWithoutProgress = 600;
  constexpr int kPollsWhenNothingComes = 40;
  constexpr int kPollsPerDetach = 10;
  if (!descriptors_low()) return true;
  // Below the minimum (lowered while mounted: at mount it is refused),
  // nothing that could come back would be enough: say so at once.
  if (descriptor_limit() < minimum_descriptor_limit()) {
    log_descriptors_low();
    return false;
  }
  // Kept readers are a convenience (the next READ opens one again).
  implicit.set_max_readers(evictor.bound());
  implicit.shed_readers(evictor.bound() / 4);
  evictor.detach_cold();
  if (!descriptors_low()) return true;
  // A writer holding more files open than the table has room for: its
  // idle handles give their descriptors back (parked_handles.hpp).
  (void)park_idle_writers(*this);
  if (!descriptors_low()) return true;
  evictor.wake();
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  std::uint64_t fewest = descriptors_used();
  for (int idle = 0; idle < kPollsWithoutProgress && std::chrono::steady_clock::now() < deadline; ++idle) {
    std::this_thread::sleep_for(kPoll);
    if (!descriptors_low()) return true;
    if (idle % kPollsPerDetach == 0) {
      evictor.detach_cold();
      (void)park_idle_writers(*this);
    }
    evictor.wake();
    if (const std::uint64_t now = descriptors_used(); now < fewest) {
      fewest = now;
      idle = 0;
    }
    const bool coming = closed_unreleased.load(std::memory_order_relaxed) > 0 || deferred.waiting() > 0;
    if (!coming && idle >= kPollsWhenNothingComes) break;
  }
  if (!descriptors_low()) return true;
  log_descriptors_low();
  return false;
}

void Filesystem::log_descriptors_low() const {
  // Once a minute at most: what fills the table, for whoever raises the limit.
  constexpr std::int64_t kEveryNs = 60'000'000'000;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t last = low_logged_at_ns_.load(std::memory_order_relaxed);
  if (last != 0 && now - last < kEveryNs) return;
  if (!low_logged_at_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
  syslog(
      LOG_WARNING,
      "sealfs: descriptors low, a request gets ENFILE: %lld held by the daemon, %lld by libfuse, limit %llu; "
      "%zu inodes, %zu open handles, %zu kept handles, %llu closes awaiting RELEASE",
      static_cast<long long>(UniqueFd::live()), static_cast<long long>(untracked_descriptors_.load()),
      static_cast<unsigned long long>(descriptor_limit()), inodes.size(), files.size() + dirs.size(),
      implicit.size(), static_cast<unsigned long long>(closed_unreleased.load()));
}

}  // namespace sealfs::fuse
