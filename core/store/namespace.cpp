// Creation and removal (R5, R7, R10): create, mkdir, symlink, mknod,
// unlink, rmdir. A hidden object under a new name is moved out of the way
// first (R5); inside an entry the manifest changes before the name does.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/impl.hpp"
#include "core/store/judge.hpp"
#include "core/store/publish.hpp"
#include "core/store/space.hpp"
#include "core/store/store.hpp"

namespace sealfs {
namespace {

// A name's directory context and the judgement of what is under it.
struct Target {
  DirContext ctx;
  Judgement judgement;
};

// For unlink/rmdir: the name checked, its directory's context, and the
// judgement of the object under it: visible, or hidden by damage
// (Consequences::judge_removal); ENOENT when absent or otherwise hidden.
Result<Target> removal_target(Store::Impl& s, int dir_fd, std::string_view name, pid_t remover) {
  if (Status ok = check_name(name); !ok) return ok.error();
  if (is_reserved_name(name)) return make_error(ENOENT, std::string(name) + ": hidden");
  auto ctx = s.places.context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = s.consequences.judge_removal(*ctx, dir_fd, name, remover);
  if (!j) return j.error();
  return Target{std::move(*ctx), std::move(*j)};
}

// R5 for a removal of a name that damage hides. The caller saw it (the
// kernel sends UNLINK and RMDIR only for a name it looked up), and it is
// gone from M already. Inside an invalid entry: nothing to do, the entry
// keeps it and goes into the quarantine whole, at its own rmdir or at a
// later judgement. An invalid entry itself (a damaged file entry, or the
// root of a directory entry whose removal got this far): moved into the
// quarantine now, as the evidence, instead of being deleted.
Status remove_damaged(Store::Impl& s, int dir_fd, std::string_view name, const Target& t) {
  const Judgement& j = t.judgement;
  if (j.verdict == Verdict::invalid_entry) return {};
  if (!s.consequences.quarantine_object(dir_fd, name, j.st, t.ctx.child_rel(name), j.cause, j.reason,
                                        j.companions))
    return make_error(ENOENT, std::string(name) + ": gone while being removed");
  return {};
}

// For create/mkdir/symlink/mknod: the new name checked (R7), the directory's
// context, and the judgement of what is under the name now, a hidden object
// there moved out of the way first (R5).
Result<Target> cleared_target(Store::Impl& s, int dir_fd, std::string_view name) {
  if (Status ok = check_new_name(name); !ok) return ok.error();
  auto ctx = s.places.context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = s.consequences.clear_hidden(*ctx, dir_fd, name);
  if (!j) return j.error();
  return Target{std::move(*ctx), std::move(*j)};
}

// The record of a symlink or file just made in dir_fd, where ctx says; ctx
// found again while its directory keeps becoming (part of) an entry
// meanwhile (Records::seal_at's EAGAIN).
Status seal_new(Store::Impl& s, DirContext& ctx, int dir_fd, std::string_view name) {
  Status sealed = s.records.seal_at(ctx, dir_fd, name, false);
  for (int tries = 1; !sealed && sealed.code() == EAGAIN && tries < kPlaceTries; ++tries) {
    auto again = s.places.context_of(dir_fd);
    if (!again) return again.error();
    ctx = std::move(*again);
    sealed = s.records.seal_at(ctx, dir_fd, name, false);
  }
  return sealed;
}

}  // namespace

Result<Store::Created> StoreNamespace::create(int dir_fd, std::string_view name, mode_t mode, int flags) {
  Impl& s = *impl_;
  auto t = cleared_target(s, dir_fd, name);
  if (!t) return t.error();
  const DirContext* ctx = &t->ctx;
  const Judgement* j = &t->judgement;
  const std::string n(name);
  if (j->verdict == Verdict::visible) {
    if ((flags & O_EXCL) != 0) return make_error(EEXIST, n + " exists");
    if (S_ISDIR(j->st.st_mode)) return make_error(EISDIR, n + " is a directory");
    int raw = ::openat(dir_fd, n.c_str(), (flags & ~(O_CREAT | O_EXCL)) | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) return errno_error("open " + ctx->child_rel(name));
    UniqueFd fd(raw);
    auto found = found_at(dir_fd, name, j->kind);
    if (!found) return found.error();
    return Created{std::move(*found), std::move(fd), false};
  }
  int raw = ::openat(dir_fd, n.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  while (raw < 0 && out_of_space(errno) && s.quarantine.make_room())
    raw = ::openat(dir_fd, n.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (raw < 0) return errno_error("create " + ctx->child_rel(name));
  UniqueFd fd(raw);
  const bool vol = s.profile.is_volatile(ctx->child_rel(name));
  // Outside volatile areas the new file is in progress until its last close
  // seals it (R4); the daemon registers it as open for writing.
  auto found = found_at(dir_fd, name, vol ? ObjectKind::volatile_obj : ObjectKind::in_progress);
  if (!found) return found.error();
  return Created{std::move(*found), std::move(fd), true};
}

Result<Found> StoreNamespace::mkdir(int dir_fd, std::string_view name, mode_t mode) {
  Impl& s = *impl_;
  auto t = cleared_target(s, dir_fd, name);
  if (!t) return t.error();
  const DirContext* ctx = &t->ctx;
  const Judgement* j = &t->judgement;
  if (j->verdict == Verdict::visible) return make_error(EEXIST, std::string(name) + " exists");
  int made = ::mkdirat(dir_fd, std::string(name).c_str(), mode);
  while (made != 0 && out_of_space(errno) && s.quarantine.make_room())
    made = ::mkdirat(dir_fd, std::string(name).c_str(), mode);
  if (made != 0) return errno_error("mkdir " + ctx->child_rel(name));
  ObjectKind kind = s.profile.is_volatile(ctx->child_rel(name)) ? ObjectKind::volatile_obj
                    : ctx->entry                                ? ObjectKind::dir_in_entry
                                                                : ObjectKind::container;
  return found_at(dir_fd, name, kind);
}

Result<Found> StoreNamespace::symlink(int dir_fd, std::string_view name, std::string_view target) {
  Impl& s = *impl_;
  DeferredInvalidations held(s.consequences);
  if (target.empty() || target.find('\0') != std::string_view::npos || target.size() >= PATH_MAX)
    return make_error(EINVAL, "invalid symlink target");
  auto t = cleared_target(s, dir_fd, name);
  if (!t) return t.error();
  const DirContext* ctx = &t->ctx;
  const Judgement* j = &t->judgement;
  if (j->verdict == Verdict::visible) return make_error(EEXIST, std::string(name) + " exists");
  if (::symlinkat(std::string(target).c_str(), dir_fd, std::string(name).c_str()) != 0)
    return errno_error("symlink " + ctx->child_rel(name));
  if (s.profile.is_volatile(ctx->child_rel(name))) return found_at(dir_fd, name, ObjectKind::volatile_obj);
  // Sealed at once (its content is its target), so that it is visible.
  Status sealed = seal_new(s, t->ctx, dir_fd, name);
  if (!sealed) {
    ::unlinkat(dir_fd, std::string(name).c_str(), 0);
    // Inside a directory entry, a symlink the profile refuses (a hashed
    // name, a target leaving the entry): symlink(2)'s EPERM, "this
    // filesystem does not allow it here". In a container any symlink goes.
    if (sealed.code() == EBADMSG) return make_error(EPERM, sealed.error().message);
    return sealed.error();
  }
  return found_at(dir_fd, name, ctx->entry ? ObjectKind::file_in_entry : ObjectKind::sealed_file);
}

Result<Found> StoreNamespace::mknod(int dir_fd, std::string_view name, mode_t mode, dev_t rdev) {
  Impl& s = *impl_;
  DeferredInvalidations held(s.consequences);
  const mode_t type = mode & S_IFMT;
  // R10: devices like FIFOs and sockets, created and shown, never sealed.
  // Only a caller with CAP_MKNOD gets this far (the kernel checks it), and
  // the mount is nodev, so they never act as devices through it.
  const bool special = is_special_file(type);
  if (type != 0 && type != S_IFREG && !special) return make_error(EINVAL, "unsupported file type");
  auto t = cleared_target(s, dir_fd, name);
  if (!t) return t.error();
  const DirContext* ctx = &t->ctx;
  const Judgement* j = &t->judgement;
  if (j->verdict == Verdict::visible) return make_error(EEXIST, std::string(name) + " exists");
  const bool vol = s.profile.is_volatile(ctx->child_rel(name));
  if (special) {
    if (::mknodat(dir_fd, std::string(name).c_str(), mode, rdev) != 0)
      return errno_error("mknod " + ctx->child_rel(name));
    return found_at(dir_fd, name, vol ? ObjectKind::volatile_obj : ObjectKind::special);
  }
  // A regular file by mknod is a create followed at once by its last close:
  // empty, and sealed now so that it is visible.
  int raw = ::openat(dir_fd, std::string(name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     mode & 07777);
  if (raw < 0) return errno_error("mknod " + ctx->child_rel(name));
  UniqueFd(raw).reset();
  if (vol) return found_at(dir_fd, name, ObjectKind::volatile_obj);
  Status sealed = seal_new(s, t->ctx, dir_fd, name);
  if (!sealed) return sealed.error();
  return found_at(dir_fd, name, ctx->entry ? ObjectKind::file_in_entry : ObjectKind::sealed_file);
}

Status StoreNamespace::unlink(int dir_fd, std::string_view name, pid_t caller) {
  Impl& s = *impl_;
  DeferredInvalidations held(s.consequences);
  auto target = removal_target(s, dir_fd, name, caller);
  if (!target) return target.error();
  const DirContext* ctx = &target->ctx;
  const Judgement* j = &target->judgement;
  if (S_ISDIR(j->st.st_mode)) return make_error(EISDIR, std::string(name) + " is a directory");
  if (j->verdict != Verdict::visible) return remove_damaged(s, dir_fd, name, *target);
  const std::string n(name);
  if (j->kind == ObjectKind::file_in_entry || (ctx->entry && j->kind == ObjectKind::in_progress)) {
    // Inside an entry the manifest goes first: a crash in between leaves an
    // unlisted (hidden) file in a valid entry, never a listed missing one.
    if (Status edited = s.records.unlist(*ctx->entry, ctx->entry_key(name)); !edited) return edited;
    if (auto crash = s.policy.step(publish_steps::kManifestWritten)) return *crash;
  }
  if (::unlinkat(dir_fd, n.c_str(), 0) != 0) return errno_error("unlink " + ctx->child_rel(name));
  if (auto crash = s.policy.step(publish_steps::kUnlinked)) return *crash;
  if (!ctx->entry) {
    // A file entry's sidecar after the file: between the two, a sidecar
    // without its file shows nothing.
    if (::unlinkat(dir_fd, sidecar_name(name).c_str(), 0) != 0 && errno != ENOENT)
      return errno_error("unlink sidecar of " + ctx->child_rel(name));
  }
  s.entries.forget(j->st.st_dev, j->st.st_ino);
  // Its last name: no other is left for its inode's record to bring up to date.
  if (j->st.st_nlink == 1) s.links.forget(j->st);
  s.pending.erase(j->st.st_dev, j->st.st_ino);
  retry_pending_seals(s);  // space came back: seals waiting for it
  return {};
}

Status StoreNamespace::rmdir(int dir_fd, std::string_view name, pid_t caller) {
  Impl& s = *impl_;
  // Even a failed rmdir may have removed the directory's manifest (R5).
  DirMoveGuard dir_moves(s.places.contexts(), true);
  auto target = removal_target(s, dir_fd, name, caller);
  if (!target) return target.error();
  const DirContext* ctx = &target->ctx;
  const Judgement* j = &target->judgement;
  if (!S_ISDIR(j->st.st_mode)) return make_error(ENOTDIR, std::string(name) + " is not a directory");
  if (j->verdict != Verdict::visible) return remove_damaged(s, dir_fd, name, *target);
  auto child = found_at(dir_fd, name, j->kind, &j->st);
  if (!child) return child.error();
  if (j->kind != ObjectKind::volatile_obj) {
    // R5: leftovers that nobody can see (manifests, sidecars, foreign files,
    // invalid entries) do not keep a directory alive. Anything visible does.
    auto cctx = s.places.context_of(child->fd.get());
    if (!cctx) return cctx.error();
    std::vector<std::string> leftovers;
    Status blocked;
    Status listed = s.judge.each_child(
        *cctx, child->fd.get(), nullptr, [&](const DirChild& c, const Result<Judgement>* cj) {
          if (cj != nullptr && !*cj)
            blocked = (*cj).error();
          else if (cj != nullptr && (*cj)->verdict == Verdict::visible)
            blocked = make_error(ENOTEMPTY, ctx->child_rel(name) + " is not empty");
          else if (cj != nullptr && ((*cj)->verdict == Verdict::invalid_entry || (*cj)->transient))
            // The entry was valid when the directory was judged and is not
            // now, or the child changed while it was judged: it changed in
            // between (a seal rewriting a manifest). Such a child is no
            // leftover of this directory; deleting it lost a file just
            // written (fsmix entry seed 1). A plain directory holding it
            // says the same.
            blocked = make_error(ENOTEMPTY, ctx->child_rel(name) + " is not empty (its entry changed)");
          else if (cj == nullptr || (*cj)->verdict != Verdict::absent)
            leftovers.push_back(c.name);
          return blocked.ok();
        });
    if (!listed) return listed;
    if (!blocked) return blocked;
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
  s.consequences.removed(j->st);
  retry_pending_seals(s);  // space came back: seals waiting for it
  return {};
}

}  // namespace sealfs
