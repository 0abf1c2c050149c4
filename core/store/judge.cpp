// Visibility (R2, R3, R4, R7): where a directory sits (container, entry,
// volatile area) and what the rules make of one name in it.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "core/store/impl.hpp"

namespace sealfs {

Result<std::string> Store::Impl::rel_of(int fd, PlaceHint hint) const {
  auto rel = [&]() -> Result<std::string> {
    auto path = fd_path(fd);
    if (path) return rel_below(root_path, *path);
    if (path.code() != ENAMETOOLONG) return path.error();
    return rel_beyond_path_max(fd, hint);
  }();
  if (!rel) return rel.error();
  // Anything under B/.sealfs (the quarantine included) is not ours to show.
  auto parts = split_rel(*rel);
  if (!parts.empty() && is_reserved_name(parts.front()))
    return make_error(ENOENT, "inside " + std::string(kStateDir));
  return rel;
}

// /proc names no object deeper than PATH_MAX, but paths inside B have no such
// limit (R10). A directory can climb ".." to the root; a file's O_PATH fd
// cannot, so it is found through the caller's hint, once the hint checks out.
Result<std::string> Store::Impl::rel_beyond_path_max(int fd, PlaceHint hint) const {
  auto st = stat_fd(fd);
  if (!st) return st.error();
  if (S_ISDIR(st->st_mode)) return dir_rel_by_climbing(fd, root_st);
  if (hint.dir_fd >= 0 && is_valid_name(hint.name)) {
    auto now = stat_at(hint.dir_fd, hint.name);
    if (now && same_object(*now, *st)) {
      auto parent = rel_of(hint.dir_fd);
      if (!parent) return parent.error();
      return join_rel(*parent, hint.name);
    }
  }
  if (st->st_nlink == 0) return make_error(ESTALE, "object was deleted");
  return make_error(ENAMETOOLONG, "path beyond PATH_MAX, and no hint of where the file is");
}

// Walks down from the root along ctx.rel without following symlinks, noting
// the deepest directory that holds an entry manifest (ctx.entry). Returns the
// directory reached (empty for the root itself); the caller checks that it is
// the object it expected, since the path may have changed meanwhile.
Result<UniqueFd> Store::Impl::walk_context(DirContext& ctx) const {
  ctx.is_volatile = profile.is_volatile(ctx.rel);
  std::vector<std::string> parts = split_rel(ctx.rel);
  if (static_cast<int>(parts.size()) > kMaxTreeDepth) return make_error(ELOOP, "directory too deep");
  UniqueFd cur;
  std::string walked;
  for (const auto& part : parts) {
    int raw = ::openat(cur ? cur.get() : root_fd.get(), part.c_str(),
                       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) {
      // Gone or replaced by a non-directory: it moved. EMFILE and the like
      // are answered as themselves (R2: never a verdict).
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
        return make_error(ESTALE, "directory moved while being placed");
      return errno_error("open " + part + " while placing");
    }
    cur.reset(raw);
    walked = join_rel(walked, part);
    if (ctx.is_volatile) continue;
    auto manifest = stat_at(cur.get(), kDirManifest);
    if (manifest && S_ISREG(manifest->st_mode)) {
      int dup = ::openat(cur.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dup < 0) return errno_error("reopen entry root");
      EntryRoot e;
      e.fd.reset(dup);
      auto est = stat_fd(dup);
      if (!est) return est.error();
      e.st = *est;
      e.rel = walked;
      ctx.entry = std::move(e);
    }
  }
  if (ctx.entry)
    ctx.sub = ctx.rel.size() > ctx.entry->rel.size() ? ctx.rel.substr(ctx.entry->rel.size() + 1) : "";
  return cur;
}

Result<DirContext> Store::Impl::context_of(int dir_fd) const {
  auto st = stat_fd(dir_fd);
  if (!st) return st.error();
  if (!S_ISDIR(st->st_mode)) return make_error(ENOTDIR, "not a directory");
  auto rel = rel_of(dir_fd);
  if (!rel) return rel.error();
  // dir_fd is at rel now (its path was just read), so a context stored for
  // the same object at rel is its context.
  if (auto cached = dir_contexts.find(*rel); cached && same_object(cached->st, *st)) {
    cached->st = *st;
    return std::move(*cached);
  }
  const std::uint64_t generation = dir_contexts.generation();
  DirContext ctx;
  ctx.st = *st;
  ctx.rel = std::move(*rel);
  auto cur = walk_context(ctx);
  if (!cur) return cur.error();
  // The walk must end at dir_fd's own object, or the path changed meanwhile.
  if (*cur) {
    auto end = stat_fd(cur->get());
    if (!end || !same_object(*end, ctx.st)) return make_error(ESTALE, "directory moved while being placed");
  } else if (!same_object(ctx.st, root_st)) {
    return make_error(ESTALE, "not the backing root");
  }
  dir_contexts.put(generation, dir_fd, ctx);
  return ctx;
}

Result<Store::Impl::Placed> Store::Impl::place(int path_fd, DirContext* parent_ctx, const struct stat* known,
                                               PlaceHint hint) const {
  Result<struct stat> st = known != nullptr ? Result<struct stat>(*known) : stat_fd(path_fd);
  if (!st) return st.error();
  auto rel = rel_of(path_fd, hint);
  if (!rel) return rel.error();
  if (rel->empty()) return make_error(EINVAL, "the root has no parent");
  auto [parent_rel, name] = split_parent(*rel);
  Result<UniqueFd> parent = make_error(ENOENT, "");
  if (parent_ctx != nullptr) {
    // The object was at parent_rel/name when its path was read; a stored
    // directory that holds it under that name is that parent (for an object
    // with one link; others take the walk).
    UniqueFd cached_fd;
    if (st->st_nlink == 1 || S_ISDIR(st->st_mode)) {
      if (auto cached = dir_contexts.find(parent_rel, &cached_fd)) {
        auto now = stat_at(cached_fd.get(), name);
        auto pst = stat_fd(cached_fd.get());
        if (now && same_object(*now, *st) && pst) {
          *parent_ctx = std::move(*cached);
          parent_ctx->st = *pst;
          Placed p;
          p.parent = std::move(cached_fd);
          p.name = std::move(name);
          p.rel = std::move(*rel);
          p.st = *st;
          return p;
        }
      }
    }
  }
  const std::uint64_t generation = dir_contexts.generation();
  if (parent_ctx != nullptr) {
    // One walk finds the parent and its context (what context_of would find
    // again): the hot path of every open of a sealed file.
    parent_ctx->rel = parent_rel;
    parent = walk_context(*parent_ctx);
    if (parent && !*parent) parent = open_beneath(root_fd.get(), "", O_PATH | O_DIRECTORY);
  } else {
    parent = open_beneath(root_fd.get(), parent_rel, O_PATH | O_DIRECTORY);
  }
  if (!parent) return parent.code() == ESTALE ? make_error(ENOENT, "object moved meanwhile") : parent.error();
  // The object must still be this name in that parent (which also proves the
  // walk reached the right directory).
  auto now = stat_at(parent->get(), name);
  if (!now || !same_object(*now, *st)) return make_error(ENOENT, "object moved meanwhile");
  if (parent_ctx != nullptr) {
    auto pst = stat_fd(parent->get());
    if (!pst) return pst.error();
    parent_ctx->st = *pst;
    dir_contexts.put(generation, parent->get(), *parent_ctx);
  }
  Placed p;
  p.parent = std::move(*parent);
  p.name = std::move(name);
  p.rel = std::move(*rel);
  p.st = *st;
  return p;
}

EntryLocation Store::Impl::dir_entry_location(int dir_fd, const struct stat& st, std::string_view rel) const {
  EntryLocation where;
  where.rel = std::string(rel);
  where.base_fd = dir_fd;
  where.manifest_name = std::string(kDirManifest);
  where.dev = st.st_dev;
  where.ino = st.st_ino;
  return where;
}

EntryLocation Store::Impl::file_entry_location(int parent_fd, std::string_view name, const struct stat& st,
                                               std::string_view parent_rel) const {
  EntryLocation where;
  where.rel = std::string(parent_rel);
  where.base_fd = parent_fd;
  where.manifest_name = sidecar_name(name);
  where.dev = st.st_dev;
  where.ino = st.st_ino;
  where.file_name = std::string(name);
  where.file_entry = true;
  return where;
}

Result<Judgement> Store::Impl::judge(const DirContext& ctx, int dir_fd, std::string_view name,
                                     VerifyDepth depth) {
  Judgement j;
  auto st = stat_at(dir_fd, name);
  if (!st) {
    if (st.code() == ENOENT) return j;  // absent
    return st.error();
  }
  j.st = *st;
  auto hide = [&](std::string reason) {
    j.verdict = Verdict::hidden;
    j.reason = std::move(reason);
    return j;
  };
  auto show = [&](ObjectKind kind) {
    j.verdict = Verdict::visible;
    j.kind = kind;
    return j;
  };
  if (is_reserved_name(name)) return hide("reserved name");
  const mode_t type = st->st_mode & S_IFMT;
  if (profile.is_volatile(ctx.child_rel(name))) return show(ObjectKind::volatile_obj);
  if (is_special_file(type)) return show(ObjectKind::special);

  auto verify_child_dir = [&]() -> Result<Judgement> {
    auto child = open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
    if (!child) return child.error();
    auto m = stat_at(child->get(), kDirManifest);
    if (!m || !S_ISREG(m->st_mode)) return show(ctx.entry ? ObjectKind::dir_in_entry : ObjectKind::container);
    auto v = entries.check(dir_entry_location(child->get(), *st, ctx.child_rel(name)), depth);
    if (v->unknown) return make_error(EAGAIN, std::string(name) + ": not verified yet");
    if (v->error) return make_error(v->error, std::string(name) + ": " + v->reason);
    if (v->valid) return show(ObjectKind::entry_root);
    j.verdict = Verdict::invalid_self;
    j.reason = v->reason;
    j.transient = v->transient;
    return j;
  };

  if (ctx.entry) {
    auto v = entries.check(dir_entry_location(ctx.entry->fd.get(), ctx.entry->st, ctx.entry->rel), depth);
    if (v->unknown) return make_error(EAGAIN, std::string(name) + ": entry not verified yet");
    // Written through M right now: visible whatever a check of it says (R4).
    if (v->error && type == S_IFREG && in_progress(*st)) return show(ObjectKind::in_progress);
    if (v->error) return make_error(v->error, std::string(name) + ": " + v->reason);
    if (!v->valid) {
      j.verdict = Verdict::invalid_entry;
      j.reason = v->reason;
      j.transient = v->transient;
      return j;
    }
    if (type == S_IFDIR) return verify_child_dir();
    if (type == S_IFREG || type == S_IFLNK) {
      // Written through M right now, listed or not: its seal decides (R4).
      if (in_progress(*st)) return show(ObjectKind::in_progress);
      if (v->manifest && v->manifest->files.count(ctx.entry_key(name)) != 0)
        return show(ObjectKind::file_in_entry);
      return hide("not listed in the entry's manifest");
    }
    return hide("unknown file type");
  }

  if (type == S_IFDIR) return verify_child_dir();
  if (type == S_IFREG || type == S_IFLNK) {
    const std::string sidecar = sidecar_name(name);
    auto sst = stat_at(dir_fd, sidecar);
    if (sst) {
      // Written through M right now: the writer's seal will fix the sidecar.
      if (in_progress(*st)) return show(ObjectKind::in_progress);
      auto v = entries.check(file_entry_location(dir_fd, name, *st, ctx.rel), depth);
      if (v->unknown) return make_error(EAGAIN, std::string(name) + ": not verified yet");
      if (v->valid) return show(ObjectKind::sealed_file);
      if (v->error) return make_error(v->error, std::string(name) + ": " + v->reason);
      j.verdict = Verdict::invalid_self;
      j.reason = v->reason;
      j.transient = v->transient;
      j.companions.push_back(sidecar);
      return j;
    }
    if (in_progress(*st)) return show(ObjectKind::in_progress);
    return hide("foreign: no manifest covers it");
  }
  return hide("unknown file type");
}

void Store::Impl::invalidate(int parent_fd, std::string_view name, const struct stat& st) {
  if (!options.on_invalidate) return;
  Invalidation inv;
  if (auto pst = stat_fd(parent_fd)) {
    inv.parent_dev = pst->st_dev;
    inv.parent_ino = pst->st_ino;
  }
  inv.name = std::string(name);
  inv.dev = st.st_dev;
  inv.ino = st.st_ino;
  if (auto* held = DeferredInvalidations::current; held != nullptr && &held->store_ == this) {
    held->held_.push_back(std::move(inv));
    return;
  }
  options.on_invalidate(inv);
}

Store::Impl::DeferredInvalidations::~DeferredInvalidations() {
  if (!outer_) return;
  current = nullptr;
  for (const auto& inv : held_) store_.options.on_invalidate(inv);
}

void Store::Impl::quarantine_object(int parent_fd, std::string_view name, const struct stat& st,
                                    std::string rel, std::string reason,
                                    std::vector<std::string> companions) {
  Quarantine::Request req;
  req.parent_fd = parent_fd;
  req.name = std::string(name);
  req.dev = st.st_dev;
  req.ino = st.st_ino;
  req.rel = std::move(rel);
  req.reason = std::move(reason);
  req.companions = std::move(companions);
  auto moved = quarantine.move(req);
  if (!moved) {
    std::fprintf(stderr, "sealfs: cannot quarantine %s: %s\n", req.rel.c_str(),
                 moved.error().message.c_str());
    return;
  }
  if (!*moved) return;  // replaced meanwhile: not the object we judged
  if (S_ISDIR(st.st_mode)) dir_contexts.moved();
  entries.forget(st.st_dev, st.st_ino);
  invalidate(parent_fd, name, st);
}

void Store::Impl::quarantine_entry_root(const EntryRoot& entry, std::string reason) {
  auto [parent_rel, name] = split_parent(entry.rel);
  auto parent = open_beneath(root_fd.get(), parent_rel, O_PATH | O_DIRECTORY);
  if (!parent) return;
  quarantine_object(parent->get(), name, entry.st, entry.rel, std::move(reason));
}

Result<Judgement> Store::Impl::judge_visible(const DirContext& ctx, int dir_fd, std::string_view name) {
  auto j = judge_settled(ctx, dir_fd, name, VerifyDepth::cached);
  if (!j) return j;
  if (j->verdict == Verdict::absent) return make_error(ENOENT, std::string(name) + ": absent");
  if (j->verdict != Verdict::visible) {
    act_on_invalid(ctx, dir_fd, name, *j);
    return make_error(ENOENT, std::string(name) + ": hidden");
  }
  return j;
}

Result<Store::Impl::Target> Store::Impl::visible_target(int dir_fd, std::string_view name) {
  if (Status ok = check_name(name); !ok) return ok.error();
  if (is_reserved_name(name)) return make_error(ENOENT, std::string(name) + ": hidden");
  auto ctx = context_of(dir_fd);
  if (!ctx) return ctx.error();
  auto j = judge_visible(*ctx, dir_fd, name);
  if (!j) return j.error();
  return Target{std::move(*ctx), std::move(*j)};
}

void Store::Impl::act_on_invalid(const DirContext& ctx, int dir_fd, std::string_view name,
                                 const Judgement& j) {
  if (j.transient) return;  // it changed while judged: nothing to blame it for
  if (j.verdict == Verdict::invalid_self)
    quarantine_object(dir_fd, name, j.st, ctx.child_rel(name), j.reason, j.companions);
  else if (j.verdict == Verdict::invalid_entry && ctx.entry)
    quarantine_entry_root(*ctx.entry, j.reason);
}

Result<Judgement> Store::Impl::judge_settled(const DirContext& ctx, int dir_fd, std::string_view name,
                                             VerifyDepth depth) {
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto j = judge(ctx, dir_fd, name, depth);
    if (!j || attempt == kAttempts) return j;
    if (j->verdict == Verdict::hidden || j->verdict == Verdict::invalid_self ||
        j->verdict == Verdict::invalid_entry) {
      // Judged while a publish replaced it: not the object's fault, judge again.
      auto now = stat_at(dir_fd, name);
      if (j->transient || (now && !same_object(*now, j->st))) continue;
    }
    return j;
  }
}

Result<Judgement> Store::Impl::clear_hidden(const DirContext& ctx, int dir_fd, std::string_view name) {
  auto j = judge_settled(ctx, dir_fd, name, VerifyDepth::cached);
  if (!j) return j.error();
  switch (j->verdict) {
    case Verdict::absent:
    case Verdict::visible:
      return j;
    case Verdict::invalid_entry:
      act_on_invalid(ctx, dir_fd, name, *j);
      return make_error(ENOENT, "the enclosing entry is invalid: " + j->reason);
    case Verdict::invalid_self:
    case Verdict::hidden: {
      std::vector<std::string> companions = j->companions;
      const std::string sidecar = sidecar_name(name);
      if (!S_ISDIR(j->st.st_mode) && companions.empty() && !ctx.entry && stat_at(dir_fd, sidecar).ok())
        companions.push_back(sidecar);
      quarantine_object(dir_fd, name, j->st, ctx.child_rel(name),
                        "R5: hidden object in the way: " + j->reason, std::move(companions));
      auto again = judge(ctx, dir_fd, name, VerifyDepth::cached);
      if (!again) return again.error();
      if (again->verdict != Verdict::absent && again->verdict != Verdict::visible)
        return make_error(EBUSY, "hidden object could not be moved out of the way");
      return again;
    }
  }
  return j;
}

Result<Found> Store::Impl::found_at(int dir_fd, std::string_view name, ObjectKind kind,
                                    const struct stat* expect) {
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
