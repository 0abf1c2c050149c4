// A full B (space.hpp).
#include "core/store/space.hpp"

#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/impl.hpp"
#include "core/store/place.hpp"
#include "core/store/store.hpp"

namespace sealfs {

void PendingSeals::add(const struct stat& st, std::string rel) {
  std::lock_guard lock(mu_);
  items_[{st.st_dev, st.st_ino}] = Item{st.st_dev, st.st_ino, st.st_size, st.st_mtim, std::move(rel)};
  count_.store(items_.size(), std::memory_order_relaxed);
}

void PendingSeals::erase(dev_t dev, ino_t ino) {
  if (empty()) return;
  std::lock_guard lock(mu_);
  items_.erase({dev, ino});
  count_.store(items_.size(), std::memory_order_relaxed);
}

bool PendingSeals::holds(const struct stat& st) const {
  if (empty() || !S_ISREG(st.st_mode)) return false;
  std::lock_guard lock(mu_);
  auto it = items_.find({st.st_dev, st.st_ino});
  return it != items_.end() && it->second.size == st.st_size &&
         it->second.mtime.tv_sec == st.st_mtim.tv_sec && it->second.mtime.tv_nsec == st.st_mtim.tv_nsec;
}

std::vector<PendingSeals::Item> PendingSeals::items() const {
  std::lock_guard lock(mu_);
  std::vector<Item> out;
  out.reserve(items_.size());
  for (const auto& [key, item] : items_) out.push_back(item);
  return out;
}

Status seal_with_room(Store::Impl& s, const DirContext& ctx, const Placed& placed,
                      std::optional<FileRecord>* record, const FileRecord* same_as) {
  Status sealed = with_room(s, [&] {
    return s.records.seal_at(ctx, placed.parent.get(), placed.name, false, &s.links, record, same_as);
  });
  if (sealed) {
    s.pending.erase(placed.st.st_dev, placed.st.st_ino);
    retry_pending_seals(s);
    return sealed;
  }
  if (!out_of_space(sealed.code())) return sealed;
  // Closed normally: kept, visible and removable, sealed when space returns.
  auto now = stat_at(placed.parent.get(), placed.name);
  if (!now || !same_object(*now, placed.st)) return sealed;
  s.pending.add(*now, placed.rel);
  std::fprintf(stderr, "sealfs: seal of %s waits for space (%s): shown as written until it is sealed\n",
               placed.rel.c_str(), sealed.error().message.c_str());
  return {};
}

void retry_pending_seals(Store::Impl& s) {
  if (s.pending.empty() || !s.pending.begin_retry()) return;
  for (const auto& item : s.pending.items()) {
    auto fd = open_beneath(s.root_fd.get(), item.rel, O_PATH | O_NOFOLLOW);
    auto st = fd ? stat_fd(fd->get()) : Result<struct stat>(fd.error());
    if (!st || st->st_dev != item.dev || st->st_ino != item.ino || !s.pending.holds(*st)) {
      // Gone, moved or changed since: nothing of ours waits there any more.
      s.pending.erase(item.dev, item.ino);
      continue;
    }
    auto where = s.places.place_closed_file(fd->get(), {});
    if (!where) continue;
    Status sealed =
        s.records.seal_at(where->second, where->first.parent.get(), where->first.name, false, &s.links);
    if (sealed) {
      s.pending.erase(item.dev, item.ino);
      s.metrics.seals.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr, "sealfs: %s sealed now that there is space\n", item.rel.c_str());
    } else if (sealed.code() == EBADMSG || sealed.code() == EFBIG) {
      // Refused for its content, as a seal at its close would have been.
      s.pending.erase(item.dev, item.ino);
      std::fprintf(stderr, "sealfs: seal of %s, waiting for space, refused: %s\n", item.rel.c_str(),
                   sealed.error().message.c_str());
    }
  }
  s.pending.end_retry();
}

}  // namespace sealfs
