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

#include <cerrno>

#include "core/store/impl.hpp"
#include "core/store/publish.hpp"

namespace sealfs {

Status Store::Impl::seal_at(const DirContext& ctx, int dir_fd, std::string_view name, bool sync_data) {
  const std::string rel = ctx.child_rel(name);
  if (profile.is_volatile(rel)) return {};
  RecordOptions how;
  how.sync_data = sync_data;
  how.validate = true;  // content checks apply however the content arrived
  how.profile_rel = rel;
  how.key = ctx.entry ? ctx.entry_key(name) : std::string(name);
  how.in_dir_entry = ctx.entry.has_value();
  Manifest extras;
  auto rec = make_record(dir_fd, name, how, &extras);
  if (!rec) return rec.error();
  if (crash_at(seal_steps::kDigested)) return make_error(ECANCELED, "fault hook: digested");
  if (ctx.entry) {
    if (Status s = list_record(*ctx.entry, how.key, *rec, extras); !s) return s;
  } else {
    Status s = write_sidecar(dir_fd, name, *rec, std::nullopt, &extras);
    if (!s) return s;
    s = sync_directory(dir_fd);
    if (!s) return s;
  }
  if (crash_at(seal_steps::kManifestWritten)) return make_error(ECANCELED, "fault hook: manifest_written");
  return {};
}

// Where a file closed through M is now. Its directory may be renamed between
// reading the file's path and reaching it (the closer goes on while the seal
// runs): then the file is followed to its new place as long as it exists.
// Absent (unlinked, moved out of B) → ENOENT: nothing to seal.
Result<std::pair<Store::Impl::Placed, DirContext>> Store::Impl::place_closed_file(int path_fd,
                                                                                  PlaceHint hint) {
  constexpr int kMovesFollowed = 64;
  for (int attempt = 0;; ++attempt) {
    auto placed = place(path_fd, nullptr, nullptr, hint);
    if (placed) {
      auto ctx = context_of(placed->parent.get());
      if (ctx) return std::pair{std::move(*placed), std::move(*ctx)};
      if (ctx.code() != ESTALE) return ctx.error();
    } else if (placed.code() != ESTALE && placed.code() != ENOENT) {
      return placed.error();
    }
    auto st = stat_fd(path_fd);
    if (!st || st->st_nlink == 0) return make_error(ENOENT, "gone before its seal");
    if (attempt == kMovesFollowed) return make_error(EBUSY, "moved too often while being sealed");
  }
}

Status Store::seal(int path_fd, PlaceHint hint) {
  Impl& s = *impl_;
  Impl::DeferredInvalidations held(s);
  auto st = stat_fd(path_fd);
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode)) return {};  // only regular files are written in place
  auto where = s.place_closed_file(path_fd, hint);
  if (!where) return where.code() == ENOENT ? Status{} : Status(where.error());
  auto& [placed_v, ctx_v] = *where;
  Impl::Placed* placed = &placed_v;
  DirContext* ctx = &ctx_v;
  if (ctx->is_volatile || s.profile.is_volatile(placed->rel)) return {};
  Status sealed = s.seal_at(*ctx, placed->parent.get(), placed->name, false);
  if (!sealed) return sealed;
  s.metrics.seals.fetch_add(1, std::memory_order_relaxed);
  return {};
}

Status Store::abandon(int path_fd, PlaceHint hint) {
  Impl& s = *impl_;
  auto st = stat_fd(path_fd);
  if (!st) return st.error();
  if (!S_ISREG(st->st_mode)) return {};
  auto where = s.place_closed_file(path_fd, hint);
  if (!where) return where.code() == ENOENT ? Status{} : Status(where.error());
  auto& [placed_v, ctx_v] = *where;
  Impl::Placed* placed = &placed_v;
  DirContext* ctx = &ctx_v;
  if (ctx->is_volatile || s.profile.is_volatile(placed->rel)) return {};
  s.metrics.abandoned.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> companions;
  if (ctx->entry) {
    // Unlist it first: a listed file that then leaves makes the entry invalid.
    if (Status edited = s.unlist(*ctx->entry, ctx->entry_key(placed->name)); !edited) return edited;
  } else {
    companions.push_back(sidecar_name(placed->name));
  }
  s.quarantine_object(placed->parent.get(), placed->name, placed->st, placed->rel,
                      "R4: abandoned by a writer that was killed or exited non-zero", std::move(companions));
  return {};
}

Status Store::truncate(int path_fd, off_t size, PlaceHint hint) {
  if (size < 0) return make_error(EINVAL, "negative size");
  auto fd = reopen_fd(path_fd, O_WRONLY);
  if (!fd) return fd.error();
  while (::ftruncate(fd->get(), size) != 0) {
    if (errno != EINTR) return errno_error("ftruncate");
  }
  return seal(path_fd, hint);
}

}  // namespace sealfs
