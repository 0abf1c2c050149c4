// sealfs::Store: opening B, and what a reader sees: lookup, list and open
// (R2, R3, R4, R7, R8). Creation and removal are in namespace.cpp,
// publishing in publish.cpp, in-place writes in seal.cpp, fsck in fsck.cpp,
// the other offline tools in offline.cpp.
#include "core/store/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "core/base/hide_reason.hpp"
#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/impl.hpp"
#include "core/store/judge.hpp"
#include "core/store/listing.hpp"
#include "core/store/place.hpp"
#include "core/store/publish.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {
namespace {

unsigned char dt_of(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return DT_REG;
    case S_IFDIR:
      return DT_DIR;
    case S_IFLNK:
      return DT_LNK;
    case S_IFIFO:
      return DT_FIFO;
    case S_IFSOCK:
      return DT_SOCK;
    case S_IFCHR:
      return DT_CHR;
    case S_IFBLK:
      return DT_BLK;
    default:
      return DT_UNKNOWN;
  }
}

Error hidden_error(std::string_view name) { return make_error(ENOENT, std::string(name) + ": hidden"); }

// A visible name found: a hit when it is an entry (or a sealed file).
void count_hit(Store::Impl& s, ObjectKind kind) {
  if (kind == ObjectKind::entry_root || is_sealed(kind))
    s.metrics.hits.fetch_add(1, std::memory_order_relaxed);
}

// Store::lookup and Store::lookup_verified, at the given verification depth.
Result<Found> lookup_at(Store::Impl& s, int dir_fd, std::string_view name, VerifyDepth depth,
                        pid_t caller = 0) {
  s.metrics.lookups.fetch_add(1, std::memory_order_relaxed);
  if (Status ok = check_name(name); !ok) return ok.error();
  if (is_reserved_name(name)) {
    s.metrics.count_hidden(HideReason::reserved);
    return hidden_error(name);
  }
  auto ctx = s.places.context_of(dir_fd);
  if (!ctx) return make_error(ctx.code() == ESTALE ? ENOENT : ctx.code(), ctx.error().message);
  // A publish may replace the name while we judge it (R6): when the name no
  // longer holds the object judged, judge again instead of answering ENOENT
  // for a name that was visible all along.
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto j = s.judge.judge_settled(*ctx, dir_fd, name, depth);
    if (!j) return j.error();
    if (j->verdict == Verdict::absent) {
      s.metrics.misses.fetch_add(1, std::memory_order_relaxed);
      return make_error(ENOENT, std::string(name) + ": absent");
    }
    if (j->verdict == Verdict::visible) {
      auto found = found_at(dir_fd, name, j->kind, &j->st);
      // Replaced since judged: judge again. EMFILE and the like: say so (R2).
      if (!found && found.code() != ENOENT && found.code() != ESTALE) return found.error();
      if (!found && attempt < kAttempts) continue;
      if (!found) {
        s.metrics.misses.fetch_add(1, std::memory_order_relaxed);  // gone while judged, again and again
        return make_error(ENOENT, found.error().message);
      }
      count_hit(s, j->kind);
      return found;
    }
    // The process removing this entry still finds what the damage hides,
    // so that its removal ends as on a plain directory (removals.hpp).
    if (s.consequences.shown_to_remover(*ctx, *j, caller)) {
      if (auto found = found_at(dir_fd, name, ObjectKind::being_removed, &j->st)) return found;
    }
    s.consequences.act_on_invalid(*ctx, dir_fd, name, *j);
    s.metrics.count_hidden(j->cause);
    return hidden_error(name);
  }
}

// Store::list of an entry's root listed before, repeated without the walk
// from the root that finding its context takes (a directory holding a
// valid manifest is its own entry, wherever it is, unless it lies in a
// volatile area): the directory is where it was, its stamp is unchanged
// and its verdict is the one the listing rested on (ListingMemory::repeat).
std::optional<Listing> repeat_entry_root(Store::Impl& s, int dir_fd, pid_t caller) {
  auto st = stat_fd(dir_fd);
  if (!st) return std::nullopt;
  auto was_at = s.listings.entry_root_at(st->st_dev, st->st_ino);
  if (!was_at) return std::nullopt;
  s.consequences.listed(*st, caller);
  auto rel = s.places.rel_of(dir_fd);
  if (!rel || *rel != *was_at || s.profile.is_volatile(*rel)) return std::nullopt;
  auto entry = s.entries.check(dir_entry_location(dir_fd, *st, *rel), VerifyDepth::stat_only);
  if (!entry->valid) return std::nullopt;
  Listing out;
  if (!s.listings.repeat(st->st_dev, st->st_ino, ListingBasis{Stamp::of(*st), *rel, entry, true}, out))
    return std::nullopt;
  return out;
}

// The children of ctx's directory dir_fd that lookup would show, judged at
// stat level (Store::list). basis is dropped when what they show rests on
// more than it holds: a subdirectory (it may hold an entry of its own), a
// file in progress, a name that could not be judged.
Status list_visible_children(Store::Impl& s, const DirContext& ctx, int dir_fd, const EntryVerdict* entry,
                             std::optional<ListingBasis>& basis, Listing& out) {
  return s.judge.each_child(ctx, dir_fd, entry, [&](const DirChild& c, const Result<Judgement>* j) {
    if (j == nullptr) return true;
    // A child entry judged while a seal amended its manifest (transient)
    // says nothing about it: judged again for a while, as a lookup of it
    // would be, rather than left out of a listing where a plain directory
    // shows it (fsmix multi seed 2 under ASan: a directory entry missing
    // from its container's listing right after the writers' last closes).
    std::optional<Result<Judgement>> settled;
    if (*j && (*j)->transient && (*j)->verdict != Verdict::visible && !ctx.entry) {
      settled.emplace(s.judge.judge_settled(ctx, dir_fd, c.name, VerifyDepth::stat_only));
      j = &*settled;
    }
    if (!*j || S_ISDIR((*j)->st.st_mode) || (*j)->kind == ObjectKind::in_progress) basis.reset();
    if (*j && (*j)->verdict == Verdict::visible) {
      out.items.push_back(DirItem{c.name, (*j)->st.st_ino, dt_of((*j)->st.st_mode)});
      out.judged.push_back(ListedVerdict{(*j)->kind, (*j)->st, (*j)->unhashed});
    }
    return true;
  });
}

// path_fd's object was replaced or unlinked since its lookup. A native
// filesystem would still open the old inode; serve it when it is exactly the
// file a verdict vouched for (a reader caught in an R6 swap). Otherwise:
// unlinked, ESTALE (the handle names an object that is no longer there, and
// a caller such as the kernel's VFS looks the name up again); still linked
// elsewhere in B (moved, typically into quarantine), ENOENT: it is not what
// was verified (Store::open_file).
Result<UniqueFd> open_replaced(EntryVerifier& entries, int path_fd, int flags, const struct stat& st,
                               const std::string& why) {
  // Content identity only: unlinking the old name changed its ctime.
  auto v = entries.cached_by_key(st.st_dev, st.st_ino);
  if (v && v->valid && v->file_stamps.size() == 1) {
    const Stamp& seen = v->file_stamps.begin()->second;
    const Stamp now = Stamp::of(st);
    if (seen.dev == now.dev && seen.ino == now.ino && seen.size == now.size &&
        seen.mtime.tv_sec == now.mtime.tv_sec && seen.mtime.tv_nsec == now.mtime.tv_nsec)
      return reopen_fd(path_fd, flags, &st);
  }
  // Linked or not now: st may predate the rename that replaced the name.
  auto now = stat_fd(path_fd);
  return make_error(!now || now->st_nlink == 0 ? ESTALE : ENOENT, why);
}

// A read open of a regular file: it must still be what a verdict vouches for.
Result<UniqueFd> open_for_reading(Store::Impl& s, int path_fd, int flags, const struct stat& st,
                                  PlaceHint hint) {
  // Written through M right now: opened without judging its content, which
  // its seal decides (R4). By the inode, before any name: one that another
  // process just unlinked or renamed over is still open to a caller that
  // looked it up, as on a native filesystem (it got ESTALE here).
  if (s.policy.in_progress(st)) return reopen_fd(path_fd, flags, &st);
  DirContext ctx;
  auto placed = s.places.place(path_fd, &ctx, &st, hint);
  if (!placed) return open_replaced(s.entries, path_fd, flags, st, placed.error().message);
  if (s.profile.is_volatile(placed->rel)) return reopen_fd(path_fd, flags, &st);
  const std::string replaced = placed->rel + ": replaced meanwhile";
  auto j = s.judge.judge(ctx, placed->parent.get(), placed->name, VerifyDepth::cached);
  if (!j) return j.error();
  if (!same_object(j->st, st)) return open_replaced(s.entries, path_fd, flags, st, replaced);
  if (j->unauthenticated) return make_error(ENOENT, placed->rel + ": " + j->reason);
  if (j->sealed_file()) {
    const bool rehash = s.options.verify == VerifyMode::always;
    auto checked = s.judge.recheck(std::move(*j), st, rehash);
    if (!checked) return make_error(checked.code(), placed->rel + ": " + checked.error().message);
    j = std::move(checked);
    // An entry found foreign is hidden and left in place (R3).
    if (j->verdict == Verdict::hidden) return make_error(ENOENT, placed->rel + ": " + j->reason);
  }
  if (j->verdict != Verdict::invalid_self && j->verdict != Verdict::invalid_entry)
    return reopen_fd(path_fd, flags, &st);  // visible, or nothing a manifest says about it
  auto now = stat_at(placed->parent.get(), placed->name);
  if (j->transient || !now || !same_object(*now, st))
    return open_replaced(s.entries, path_fd, flags, st, replaced);
  s.consequences.act_on_invalid(ctx, placed->parent.get(), placed->name, *j);
  return make_error(ENOENT, placed->rel + ": " + j->reason);
}

}  // namespace

StoreState::StoreState(UniqueFd root, std::string root_path, const struct stat& root_stat,
                       Profile store_profile, StoreOptions store_options)
    : root_fd(std::move(root)),
      root_st(root_stat),
      profile(std::move(store_profile)),
      options(std::move(store_options)),
      policy(options, pending, in_flight),
      verifier(metrics),
      entries(verifier, options.verdict_ttl, 1u << 13, &profile),
      quarantine(root_fd.get(), options.quarantine_max_objects, options.quarantine_max_bytes, metrics),
      places(root_fd.get(), std::move(root_path), root_st, profile, options.verdict_ttl,
             options.dir_contexts_max),
      records(profile, options.validators, policy, metrics, verifier, options.keys.get(), &bounds),
      links(root_fd.get(), root_st.st_dev, policy, verifier, records, options.keys.get()),
      judge(profile, entries, policy, links, metrics),
      consequences(root_fd.get(), judge, places, entries, quarantine, options.on_invalidate) {
  places.set_known_names(options.known_names, options.directory_of);
  bounds.set_probe([this](int dir_fd) -> Result<bool> {
    auto ctx = places.context_of(dir_fd);
    if (!ctx) return ctx.error();
    return ctx->entry.has_value();
  });
  entries.set_max_hashed_size(profile.max_file_size);
  entries.set_in_progress([this](const struct stat& st) { return policy.in_progress(st); });
  entries.set_keys(options.keys);
  if (options.fault_hook)
    verifier.set_mid_hash_hook([hook = options.fault_hook] { hook(seal_steps::kHashing); });
}

Store::Store(OpenTag, std::unique_ptr<Impl> impl)
    : StoreReading(impl.get()),
      StoreNamespace(impl.get()),
      StorePublishing(impl.get()),
      StoreAttributes(impl.get()),
      impl_(std::move(impl)) {}
Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::open_backing(const std::string& backing_path, Profile profile,
                                                   StoreOptions options) {
  try {
    for (const auto& rule : profile.validators)
      if (!options.validators.has(rule.validator))
        return make_error(EINVAL, "profile " + profile.name + " names unknown validator " + rule.validator);
    // O_NOFOLLOW: B itself must be a real directory, not a symlink to one.
    int raw = ::open(backing_path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) {
      int e = errno == ELOOP ? ENOTDIR : errno;
      return make_error(e, "open backing store " + backing_path);
    }
    UniqueFd root(raw);
    auto st = stat_fd(root.get());
    if (!st) return st.error();
    auto path = fd_path(root.get());
    if (!path) return path.error();
    // B/.sealfs (state) and its quarantine: private to the daemon.
    for (std::string_view dir : {kStateDir, kQuarantineDir}) {
      if (::mkdirat(root.get(), std::string(dir).c_str(), 0700) != 0 && errno != EEXIST)
        return errno_error("mkdir " + backing_path + "/" + std::string(dir));
      auto check = open_beneath(root.get(), dir, O_PATH | O_DIRECTORY);
      if (!check) return make_error(ENOTDIR, backing_path + "/" + std::string(dir) + " is not a directory");
    }
    auto impl = std::make_unique<Impl>(std::move(root), std::move(*path), *st, std::move(profile),
                                       std::move(options));
    // Made while there is space, for a quarantine on a full B (R4).
    impl->quarantine.replenish_spares();
    return std::make_unique<Store>(OpenTag{}, std::move(impl));
  } catch (const std::bad_alloc&) {
    return make_error(ENOMEM, "out of memory opening the store");
  }
}

const Profile& Store::profile() const { return impl_->profile; }
const StoreOptions& Store::options() const { return impl_->options; }
Metrics& Store::metrics() { return impl_->metrics; }

MetricsSnapshot status_of(const Store::Impl& s) {
  const auto& gauges = s.options.gauges;
  return s.metrics.snapshot(gauges ? gauges() : Gauges{});
}

MetricsSnapshot Store::status() const { return status_of(*impl_); }

Result<Found> StoreReading::root() {
  auto fd = open_beneath(impl_->root_fd.get(), "", O_PATH | O_DIRECTORY);
  if (!fd) return fd.error();
  Found f;
  f.fd = std::move(*fd);
  f.st = impl_->root_st;
  f.kind = ObjectKind::root;
  return f;
}

Result<Found> StoreReading::lookup(int dir_fd, std::string_view name, pid_t caller) {
  return lookup_at(*impl_, dir_fd, name, VerifyDepth::cached, caller);
}

Result<Found> StoreReading::lookup_verified(int dir_fd, std::string_view name) {
  return lookup_at(*impl_, dir_fd, name, VerifyDepth::cached_only);
}

Result<Found> StoreReading::lookup_listed(int dir_fd, std::string_view name, const ListedVerdict* judged) {
  Impl& s = *impl_;
  // Seen at stat level only (never hashed, or its stamps not a second old):
  // whether a hashed verdict answers is lookup_verified's question.
  if (judged == nullptr || judged->unhashed) return lookup_verified(dir_fd, name);
  auto found = found_at(dir_fd, name, judged->kind, &judged->st);
  if (!found && found.code() != ENOENT && found.code() != ESTALE) return found.error();
  // Replaced, or a file changed, since the listing judged it: judge it now.
  if (!found || (!S_ISDIR(found->st.st_mode) && !(Stamp::of(found->st) == Stamp::of(judged->st))))
    return lookup_verified(dir_fd, name);
  s.metrics.lookups.fetch_add(1, std::memory_order_relaxed);
  count_hit(s, judged->kind);
  return found;
}

Result<Listing> StoreReading::list(int dir_fd, pid_t caller) {
  Impl& s = *impl_;
  if (auto again = repeat_entry_root(s, dir_fd, caller)) return std::move(*again);
  auto ctx = s.places.context_of(dir_fd);
  if (!ctx) return make_error(ctx.code() == ESTALE ? ENOENT : ctx.code(), ctx.error().message);
  if (ctx->entry) s.consequences.listed(ctx->entry->st, caller);
  Listing out;
  // The enclosing entry is checked once here, not once per name.
  std::shared_ptr<const EntryVerdict> entry;
  bool provisional = false;  // valid only once hard links' records are brought up to date: not kept
  if (ctx->entry) {
    // A verdict that failed only because the entry changed while it was
    // checked (a seal amending its manifest) says nothing about it: check
    // again for a while, as judge_settled does for a name, rather than show
    // an empty directory that a plain one never would.
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    auto pause = std::chrono::microseconds(500);
    for (;;) {
      auto checked = s.judge.check_entry(dir_entry_location(*ctx->entry), VerifyDepth::stat_only, {}, nullptr,
                                         &provisional);
      if (!checked) return checked.error();
      entry = std::move(*checked);
      if (entry->valid || !entry->transient || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(16000));
    }
  }
  std::optional<ListingBasis> basis;
  if (entry && entry->valid && !provisional)
    basis = ListingBasis{Stamp::of(ctx->st), ctx->rel, entry, ctx->sub.empty()};
  if (basis && s.listings.repeat(ctx->st.st_dev, ctx->st.st_ino, *basis, out)) return out;
  // A directory of an entry known (or seen at stat level) to be invalid
  // shows nothing; the next lookup quarantines the entry.
  if (!entry || entry->valid) {
    if (Status listed = list_visible_children(s, *ctx, dir_fd, entry.get(), basis, out); !listed)
      return listed.error();
  }
  s.listings.note(ctx->st.st_dev, ctx->st.st_ino, out, std::move(basis));
  return out;
}

Result<UniqueFd> StoreReading::open_file(int path_fd, int flags, PlaceHint hint) {
  if ((flags & (O_CREAT | O_EXCL)) != 0) return make_error(EINVAL, "open: O_CREAT/O_EXCL belong to create");
  auto st = stat_fd(path_fd);
  // Our own descriptor's object cannot vanish on a local filesystem; on a
  // network one (GlusterFS) a file another host replaced can.
  if (!st) return gone_or(st.error());
  // A read of a sealed file: check that it still is what was verified.
  // -o noatime: reads through M leave B's access times too (issue 23 point 6).
  if (impl_->options.noatime && (flags & O_ACCMODE) == O_RDONLY) flags |= O_NOATIME;
  if (S_ISREG(st->st_mode) && (flags & O_ACCMODE) == O_RDONLY)
    return open_for_reading(*impl_, path_fd, flags, *st, hint);
  return reopen_fd(path_fd, flags, &*st);
}

Result<bool> in_volatile_area(const Store::Impl& s, int path_fd, PlaceHint hint) {
  auto rel = s.places.rel_of(path_fd, hint);
  if (!rel) return rel.error();
  return s.profile.is_volatile(*rel);
}

Result<bool> StoreReading::in_volatile_area(int path_fd, PlaceHint hint) {
  return sealfs::in_volatile_area(*impl_, path_fd, hint);
}

Result<bool> StoreReading::child_in_volatile_area(int dir_fd, std::string_view name) {
  auto ctx = impl_->places.context_of(dir_fd);
  if (!ctx) return ctx.error();
  return ctx->is_volatile || impl_->profile.is_volatile(ctx->child_rel(name));
}

Result<Found> found_at(int dir_fd, std::string_view name, ObjectKind kind, const struct stat* expect) {
  auto fd = open_beneath(dir_fd, name, O_PATH | O_NOFOLLOW);
  if (!fd) return fd.error();
  auto st = stat_fd(fd->get());
  if (!st) return st.error();
  if (expect && !same_object(*st, *expect)) return make_error(ENOENT, "replaced meanwhile");
  Found f;
  f.fd = std::move(*fd);
  f.st = *st;
  f.kind = kind;
  return f;
}

}  // namespace sealfs
