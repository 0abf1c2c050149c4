// sealfs::Store: opening B, lookup/list/open (R2, R3, R4, R7, R8), creation
// (R5, R7, R10) and removal. Publishing is in publish.cpp, in-place writes in
// seal.cpp, the offline tools in fsck.cpp.
#include "core/store/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>

#include "core/store/impl.hpp"
#include "core/store/publish.hpp"

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

}  // namespace

Store::Impl::Impl(UniqueFd root, std::string root_path_, struct stat root_st_, Profile profile_,
                  StoreOptions options_)
    : root_fd(std::move(root)),
      root_path(std::move(root_path_)),
      root_st(root_st_),
      profile(std::move(profile_)),
      options(std::move(options_)),
      verifier(metrics),
      entries(verifier, options.verdict_ttl, 1u << 13, &profile),
      quarantine(root_fd.get(), options.quarantine_max_objects, options.quarantine_max_bytes, metrics),
      dir_contexts(options.verdict_ttl) {
  entries.set_max_hashed_size(profile.max_file_size);
  entries.set_in_progress([this](const struct stat& st) { return in_progress(st); });
  if (options.fault_hook)
    verifier.set_mid_hash_hook([hook = options.fault_hook] { hook(seal_steps::kHashing); });
}

Store::Store(OpenTag, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
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
    return std::make_unique<Store>(OpenTag{}, std::move(impl));
  } catch (const std::bad_alloc&) {
    return make_error(ENOMEM, "out of memory opening the store");
  }
}

int Store::root_fd() const { return impl_->root_fd.get(); }
const Profile& Store::profile() const { return impl_->profile; }
const StoreOptions& Store::options() const { return impl_->options; }
Metrics& Store::metrics() { return impl_->metrics; }

Result<Found> Store::root() {
  auto fd = open_beneath(impl_->root_fd.get(), "", O_PATH | O_DIRECTORY);
  if (!fd) return fd.error();
  Found f;
  f.fd = std::move(*fd);
  f.st = impl_->root_st;
  f.kind = ObjectKind::root;
  return f;
}

Result<Found> Store::lookup(int dir_fd, std::string_view name) {
  return impl_->lookup(dir_fd, name, VerifyDepth::cached);
}

Result<Found> Store::lookup_verified(int dir_fd, std::string_view name) {
  return impl_->lookup(dir_fd, name, VerifyDepth::cached_only);
}

Result<Found> Store::Impl::lookup(int dir_fd, std::string_view name, VerifyDepth depth) {
  Impl& s = *this;
  s.metrics.lookups.fetch_add(1, std::memory_order_relaxed);
  if (Status ok = check_name(name); !ok) return ok.error();
  if (is_reserved_name(name)) {
    s.metrics.hidden.fetch_add(1, std::memory_order_relaxed);
    return hidden_error(name);
  }
  auto ctx = s.context_of(dir_fd);
  if (!ctx) return make_error(ctx.code() == ESTALE ? ENOENT : ctx.code(), ctx.error().message);
  // A publish may replace the name while we judge it (R6): when the name no
  // longer holds the object judged, judge again instead of answering ENOENT
  // for a name that was visible all along.
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto j = s.judge_settled(*ctx, dir_fd, name, depth);
    if (!j) return j.error();
    if (j->verdict == Verdict::absent) return make_error(ENOENT, std::string(name) + ": absent");
    if (j->verdict == Verdict::visible) {
      auto found = s.found_at(dir_fd, name, j->kind, &j->st);
      // Replaced since judged: judge again. EMFILE and the like: say so (R2).
      if (!found && found.code() != ENOENT && found.code() != ESTALE) return found.error();
      if (!found && attempt < kAttempts) continue;
      if (!found) return make_error(ENOENT, found.error().message);
      if (j->kind == ObjectKind::entry_root || j->kind == ObjectKind::sealed_file ||
          j->kind == ObjectKind::file_in_entry)
        s.metrics.hits.fetch_add(1, std::memory_order_relaxed);
      return found;
    }
    s.act_on_invalid(*ctx, dir_fd, name, *j);
    s.metrics.hidden.fetch_add(1, std::memory_order_relaxed);
    return hidden_error(name);
  }
}

Result<std::vector<DirItem>> Store::list(int dir_fd) {
  Impl& s = *impl_;
  auto ctx = s.context_of(dir_fd);
  if (!ctx) return make_error(ctx.code() == ESTALE ? ENOENT : ctx.code(), ctx.error().message);
  std::vector<DirItem> out;
  if (ctx->entry) {
    // A directory of an entry known (or seen at stat level) to be invalid
    // shows nothing; the next lookup quarantines the entry.
    auto v = s.entries.check(s.dir_entry_location(ctx->entry->fd.get(), ctx->entry->st, ctx->entry->rel),
                             VerifyDepth::stat_only);
    if (!v->valid) return out;
  }
  auto children = read_dir(dir_fd);
  if (!children) return children.error();
  for (const auto& c : *children) {
    if (is_reserved_name(c.name)) continue;
    auto j = s.judge(*ctx, dir_fd, c.name, VerifyDepth::stat_only);
    if (!j || j->verdict != Verdict::visible) continue;
    out.push_back(DirItem{c.name, j->st.st_ino, dt_of(j->st.st_mode)});
  }
  return out;
}

Result<UniqueFd> Store::open_file(int path_fd, int flags, PlaceHint hint) {
  Impl& s = *impl_;
  if ((flags & (O_CREAT | O_EXCL)) != 0) return make_error(EINVAL, "open: O_CREAT/O_EXCL belong to create");
  auto st = stat_fd(path_fd);
  if (!st) return st.error();
  const mode_t type = st->st_mode & S_IFMT;
  if (type == S_IFREG && (flags & O_ACCMODE) == O_RDONLY) {
    // A read of a sealed file: check that it still is what was verified.
    // Replaced or unlinked since its lookup. A native filesystem would still
    // open the old inode; serve it when it is exactly the file a verdict
    // vouched for (a reader caught in an R6 swap), else ESTALE: the handle
    // names an object that is no longer there, and a caller (the kernel's
    // VFS) retries with a fresh lookup of the name.
    auto open_replaced = [&](const std::string& why) -> Result<UniqueFd> {
      // Content identity only: unlinking the old name changed its ctime.
      auto v = s.entries.cached_by_key(st->st_dev, st->st_ino);
      if (v && v->valid && v->file_stamps.size() == 1) {
        const Stamp& seen = v->file_stamps.begin()->second;
        const Stamp now = Stamp::of(*st);
        if (seen.dev == now.dev && seen.ino == now.ino && seen.size == now.size &&
            seen.mtime.tv_sec == now.mtime.tv_sec && seen.mtime.tv_nsec == now.mtime.tv_nsec)
          return reopen_fd(path_fd, flags, &*st);
      }
      return make_error(ESTALE, why);
    };
    DirContext parent_ctx;
    auto placed = s.place(path_fd, &parent_ctx, &*st, hint);
    if (!placed) return open_replaced(placed.error().message);
    const DirContext* ctx = &parent_ctx;
    if (!s.profile.is_volatile(placed->rel)) {
      const bool always = s.options.verify == VerifyMode::always;
      std::optional<EntryLocation> where;
      std::string key;
      if (ctx->entry) {
        where = s.dir_entry_location(ctx->entry->fd.get(), ctx->entry->st, ctx->entry->rel);
        key = ctx->entry_key(placed->name);
      } else if (stat_at(placed->parent.get(), sidecar_name(placed->name))) {
        where = s.file_entry_location(placed->parent.get(), placed->name, placed->st, ctx->rel);
        key = placed->name;
      }
      if (where) {
        auto v = s.entries.check(*where, VerifyDepth::cached);
        const bool listed = v->manifest && v->manifest->files.count(key) != 0;
        if (v->valid && listed) {
          auto seen = v->file_stamps.find(key);
          const bool changed = seen == v->file_stamps.end() || !(seen->second == Stamp::of(*st));
          if (always)
            v = s.entries.check(*where, VerifyDepth::fresh, ForceHash::only(key));
          else if (changed)
            v = s.entries.check(*where, VerifyDepth::fresh);
        }
        if (!v->valid && !s.in_progress(*st)) {
          if (v->error) return make_error(v->error, placed->rel + ": " + v->reason);  // no verdict: say why
          auto now = stat_at(placed->parent.get(), placed->name);
          if (v->transient || !now || !same_object(*now, *st))
            return open_replaced(placed->rel + ": replaced meanwhile");
          if (ctx->entry) {
            s.quarantine_entry_root(*ctx->entry, v->reason);
          } else {
            s.quarantine_object(placed->parent.get(), placed->name, placed->st, placed->rel, v->reason,
                                {sidecar_name(placed->name)});
          }
          return make_error(ENOENT, placed->rel + ": " + v->reason);
        }
      }
    }
  }
  return reopen_fd(path_fd, flags, &*st);
}

Result<bool> Store::in_volatile_area(int path_fd, PlaceHint hint) {
  auto rel = impl_->rel_of(path_fd, hint);
  if (!rel) return rel.error();
  return impl_->profile.is_volatile(*rel);
}

Result<Store::Created> Store::create(int dir_fd, std::string_view name, mode_t mode, int flags) {
  Impl& s = *impl_;
  if (Status ok = check_new_name(name); !ok) return ok.error();
  auto ctx = s.context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = s.clear_hidden(*ctx, dir_fd, name);
  if (!j) return j.error();
  const std::string n(name);
  if (j->verdict == Verdict::visible) {
    if ((flags & O_EXCL) != 0) return make_error(EEXIST, n + " exists");
    if (S_ISDIR(j->st.st_mode)) return make_error(EISDIR, n + " is a directory");
    int raw = ::openat(dir_fd, n.c_str(), (flags & ~(O_CREAT | O_EXCL)) | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) return errno_error("open " + ctx->child_rel(name));
    UniqueFd fd(raw);
    auto found = s.found_at(dir_fd, name, j->kind);
    if (!found) return found.error();
    return Created{std::move(*found), std::move(fd), false};
  }
  int raw = ::openat(dir_fd, n.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (raw < 0) return errno_error("create " + ctx->child_rel(name));
  UniqueFd fd(raw);
  const bool vol = s.profile.is_volatile(ctx->child_rel(name));
  // Outside volatile areas the new file is in progress until its last close
  // seals it (R4); the daemon registers it as open for writing.
  auto found = s.found_at(dir_fd, name, vol ? ObjectKind::volatile_obj : ObjectKind::in_progress);
  if (!found) return found.error();
  return Created{std::move(*found), std::move(fd), true};
}

Result<Found> Store::mkdir(int dir_fd, std::string_view name, mode_t mode) {
  Impl& s = *impl_;
  if (Status ok = check_new_name(name); !ok) return ok.error();
  auto ctx = s.context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = s.clear_hidden(*ctx, dir_fd, name);
  if (!j) return j.error();
  if (j->verdict == Verdict::visible) return make_error(EEXIST, std::string(name) + " exists");
  if (::mkdirat(dir_fd, std::string(name).c_str(), mode) != 0)
    return errno_error("mkdir " + ctx->child_rel(name));
  ObjectKind kind = s.profile.is_volatile(ctx->child_rel(name)) ? ObjectKind::volatile_obj
                    : ctx->entry                                ? ObjectKind::dir_in_entry
                                                                : ObjectKind::container;
  return s.found_at(dir_fd, name, kind);
}

Result<Found> Store::symlink(int dir_fd, std::string_view name, std::string_view target) {
  Impl& s = *impl_;
  Impl::DeferredInvalidations held(s);
  if (Status ok = check_new_name(name); !ok) return ok.error();
  if (target.empty() || target.find('\0') != std::string_view::npos || target.size() >= PATH_MAX)
    return make_error(EINVAL, "invalid symlink target");
  auto ctx = s.context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = s.clear_hidden(*ctx, dir_fd, name);
  if (!j) return j.error();
  if (j->verdict == Verdict::visible) return make_error(EEXIST, std::string(name) + " exists");
  if (::symlinkat(std::string(target).c_str(), dir_fd, std::string(name).c_str()) != 0)
    return errno_error("symlink " + ctx->child_rel(name));
  if (s.profile.is_volatile(ctx->child_rel(name))) return s.found_at(dir_fd, name, ObjectKind::volatile_obj);
  // Sealed at once (its content is its target), so that it is visible.
  Status sealed = s.seal_at(*ctx, dir_fd, name, false);
  if (!sealed) {
    ::unlinkat(dir_fd, std::string(name).c_str(), 0);
    // Inside a directory entry, a symlink the profile refuses (a hashed
    // name, a target leaving the entry): symlink(2)'s EPERM, "this
    // filesystem does not allow it here". In a container any symlink goes.
    if (sealed.code() == EBADMSG) return make_error(EPERM, sealed.error().message);
    return sealed.error();
  }
  return s.found_at(dir_fd, name, ctx->entry ? ObjectKind::file_in_entry : ObjectKind::sealed_file);
}

Result<Found> Store::mknod(int dir_fd, std::string_view name, mode_t mode, dev_t rdev) {
  Impl& s = *impl_;
  Impl::DeferredInvalidations held(s);
  if (Status ok = check_new_name(name); !ok) return ok.error();
  const mode_t type = mode & S_IFMT;
  // R10: devices like FIFOs and sockets, created and shown, never sealed.
  // Only a caller with CAP_MKNOD gets this far (the kernel checks it), and
  // the mount is nodev, so they never act as devices through it.
  const bool special = is_special_file(type);
  if (type != 0 && type != S_IFREG && !special) return make_error(EINVAL, "unsupported file type");
  auto ctx = s.context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = s.clear_hidden(*ctx, dir_fd, name);
  if (!j) return j.error();
  if (j->verdict == Verdict::visible) return make_error(EEXIST, std::string(name) + " exists");
  const bool vol = s.profile.is_volatile(ctx->child_rel(name));
  if (special) {
    if (::mknodat(dir_fd, std::string(name).c_str(), mode, rdev) != 0)
      return errno_error("mknod " + ctx->child_rel(name));
    return s.found_at(dir_fd, name, vol ? ObjectKind::volatile_obj : ObjectKind::special);
  }
  // A regular file by mknod is a create followed at once by its last close:
  // empty, and sealed now so that it is visible.
  int raw = ::openat(dir_fd, std::string(name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     mode & 07777);
  if (raw < 0) return errno_error("mknod " + ctx->child_rel(name));
  UniqueFd(raw).reset();
  if (vol) return s.found_at(dir_fd, name, ObjectKind::volatile_obj);
  Status sealed = s.seal_at(*ctx, dir_fd, name, false);
  if (!sealed) return sealed.error();
  return s.found_at(dir_fd, name, ctx->entry ? ObjectKind::file_in_entry : ObjectKind::sealed_file);
}

Status Store::unlink(int dir_fd, std::string_view name) {
  Impl& s = *impl_;
  Impl::DeferredInvalidations held(s);
  auto target = s.visible_target(dir_fd, name);
  if (!target) return target.error();
  const DirContext* ctx = &target->ctx;
  const Judgement* j = &target->judgement;
  if (S_ISDIR(j->st.st_mode)) return make_error(EISDIR, std::string(name) + " is a directory");
  const std::string n(name);
  if (j->kind == ObjectKind::file_in_entry || (ctx->entry && j->kind == ObjectKind::in_progress)) {
    // Inside an entry the manifest goes first: a crash in between leaves an
    // unlisted (hidden) file in a valid entry, never a listed missing one.
    if (Status edited = s.unlist(*ctx->entry, ctx->entry_key(name)); !edited) return edited;
    if (s.crash_at("manifest_written")) return make_error(ECANCELED, "fault hook: manifest_written");
  }
  if (::unlinkat(dir_fd, n.c_str(), 0) != 0) return errno_error("unlink " + ctx->child_rel(name));
  if (s.crash_at("unlinked")) return make_error(ECANCELED, "fault hook: unlinked");
  if (!ctx->entry) {
    // A file entry's sidecar after the file: between the two, a sidecar
    // without its file shows nothing.
    if (::unlinkat(dir_fd, sidecar_name(name).c_str(), 0) != 0 && errno != ENOENT)
      return errno_error("unlink sidecar of " + ctx->child_rel(name));
  }
  s.entries.forget(j->st.st_dev, j->st.st_ino);
  return {};
}

Status Store::rmdir(int dir_fd, std::string_view name) {
  Impl& s = *impl_;
  // Even a failed rmdir may have removed the directory's manifest (R5).
  DirMoveGuard dir_moves(s.dir_contexts, true);
  auto target = s.visible_target(dir_fd, name);
  if (!target) return target.error();
  const DirContext* ctx = &target->ctx;
  const Judgement* j = &target->judgement;
  if (!S_ISDIR(j->st.st_mode)) return make_error(ENOTDIR, std::string(name) + " is not a directory");
  auto child = s.found_at(dir_fd, name, j->kind, &j->st);
  if (!child) return child.error();
  if (j->kind != ObjectKind::volatile_obj) {
    // R5: leftovers that nobody can see (manifests, sidecars, foreign files,
    // invalid entries) do not keep a directory alive. Anything visible does.
    auto cctx = s.context_of(child->fd.get());
    if (!cctx) return cctx.error();
    auto children = read_dir(child->fd.get());
    if (!children) return children.error();
    std::vector<std::string> leftovers;
    for (const auto& c : *children) {
      if (!is_reserved_name(c.name)) {
        auto cj = s.judge(*cctx, child->fd.get(), c.name, VerifyDepth::stat_only);
        if (!cj) return cj.error();
        if (cj->verdict == Verdict::visible)
          return make_error(ENOTEMPTY, ctx->child_rel(name) + " is not empty");
        if (cj->verdict == Verdict::absent) continue;
      }
      leftovers.push_back(c.name);
    }
    // Remove the manifest last: until then a crash leaves a valid (smaller) entry.
    std::stable_partition(leftovers.begin(), leftovers.end(),
                          [](const std::string& n) { return n != kDirManifest; });
    for (const auto& l : leftovers) {
      Status removed = remove_tree_at(child->fd.get(), l);
      if (!removed) return removed;
    }
  }
  if (::unlinkat(dir_fd, std::string(name).c_str(), AT_REMOVEDIR) != 0)
    return errno_error("rmdir " + ctx->child_rel(name));
  s.entries.forget(j->st.st_dev, j->st.st_ino);
  return {};
}

}  // namespace sealfs
