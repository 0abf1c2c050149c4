// R4 in-place writes: a file written through M is sealed at its last close
// (amended into its entry, or given a sidecar), abandoned writes are
// quarantined, and a truncate by path re-seals at once.
//
// No data fsync here (R4): a seal records what the file holds now; if that
// never reaches the disk, the record fails verification after a crash and the
// file is hidden, which is safe. The manifest itself is replaced atomically
// (temporary name, fsync per durability, rename), so a crash leaves the old
// record or the new one, never a torn manifest.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/impl.hpp"
#include "core/store/place.hpp"
#include "core/store/store.hpp"

namespace sealfs {

namespace {

using ClosedFile = std::optional<std::pair<Placed, DirContext>>;

// Where a file closed through M is, for its seal or abandon; nullopt when
// there is nothing to do: not a regular file (only those are written in
// place), gone before its seal, or in a volatile area.
Result<ClosedFile> closed_file(const Store::Impl& s, int path_fd, PlaceHint hint) {
  auto st = stat_fd(path_fd);
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode)) return ClosedFile{};
  auto where = s.places.place_closed_file(path_fd, hint);
  if (!where)
    return where.code() == ENOENT ? Result<ClosedFile>(ClosedFile{}) : Result<ClosedFile>(where.error());
  if (where->second.is_volatile || s.profile.is_volatile(where->first.rel)) return ClosedFile{};
  return ClosedFile(std::move(*where));
}

// After the seal of placed (record: what it holds; none when the seal waits
// for space).
void seal_other_names(Store::Impl& s, const Placed& placed, const std::optional<FileRecord>& record) {
  // R4, a file is an inode: every manifest that lists another of its names
  // (in another directory, another entry) is amended as well, by that
  // name's own rules and only with the content just sealed (checked again:
  // a file written a moment ago is too recent for the digest cache, so a
  // hard-linked file costs a hash per name). A name left out here is brought
  // up to date from the inode's record when judged.
  if (!record) return;
  for (auto& [other, other_ctx] : s.places.other_places(placed.st, placed.rel)) {
    if (other_ctx.is_volatile || s.profile.is_volatile(other.rel)) continue;
    Status also = seal_with_room(s, other_ctx, other, nullptr, &*record);
    if (!also)
      std::fprintf(stderr,
                   "sealfs: %s, another name of %s, not amended now (%s): judged again at its lookup\n",
                   other.rel.c_str(), placed.rel.c_str(), also.error().message.c_str());
  }
}

}  // namespace

Status StorePublishing::seal(int path_fd, PlaceHint hint) {
  Impl& s = *impl_;
  DeferredInvalidations held(s.consequences);
  // A directory above the file renamed while it was hashed (Records::seal_at,
  // ENOENT), or made an entry (EAGAIN): its record was not written, and the
  // file is placed again from its descriptor. Each try needs another rename
  // to fail.
  for (int tries = 1;; ++tries) {
    auto closed = closed_file(s, path_fd, hint);
    if (!closed) return closed.error();
    if (!*closed) return {};
    auto& [placed, ctx] = **closed;
    std::optional<FileRecord> record;  // none when it waits for space
    Status sealed = seal_with_room(s, ctx, placed, &record);
    if (!sealed && (sealed.code() == ENOENT || sealed.code() == EAGAIN) && tries < kPlaceTries) continue;
    if (!sealed) return sealed;
    s.metrics.seals.fetch_add(1, std::memory_order_relaxed);
    seal_other_names(s, placed, record);
    return {};
  }
}

Status StorePublishing::abandon(int path_fd, PlaceHint hint) {
  Impl& s = *impl_;
  auto closed = closed_file(s, path_fd, hint);
  if (!closed) return closed.error();
  if (!*closed) return {};
  auto& [placed_v, ctx_v] = **closed;
  Placed* placed = &placed_v;
  DirContext* ctx = &ctx_v;
  s.metrics.abandoned.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> companions;
  if (ctx->entry) {
    // Unlist it first: a listed file that then leaves makes the entry invalid.
    if (Status edited = s.records.unlist(*ctx->entry, ctx->entry_key(placed->name)); !edited) return edited;
  } else {
    companions.push_back(sidecar_name(placed->name));
  }
  s.consequences.quarantine_object(
      placed->parent.get(), placed->name, placed->st, placed->rel, HideReason::abandoned,
      "R4: abandoned by a writer that died (killed by a signal) with it open", std::move(companions));
  return {};
}

Result<std::string> StorePublishing::path_below_root(int path_fd, PlaceHint hint) const {
  return impl_->places.rel_of(path_fd, hint);
}

Status StorePublishing::truncate(int path_fd, off_t size, PlaceHint hint) {
  if (size < 0) return make_error(EINVAL, "negative size");
  auto fd = reopen_fd(path_fd, O_WRONLY);
  if (!fd) return fd.error();
  while (::ftruncate(fd->get(), size) != 0) {
    if (errno != EINTR) return errno_error("ftruncate");
  }
  return seal(path_fd, hint);
}

}  // namespace sealfs
