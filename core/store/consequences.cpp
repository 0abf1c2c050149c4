// What follows from a verdict (consequences.hpp).
#include "core/store/consequences.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/judge.hpp"
#include "core/store/quarantine.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {

Result<Judgement> Consequences::judge_visible(const DirContext& ctx, int dir_fd, std::string_view name) {
  auto j = judge_.judge_settled(ctx, dir_fd, name, VerifyDepth::cached);
  if (!j) return j;
  if (j->verdict == Verdict::absent) return make_error(ENOENT, std::string(name) + ": absent");
  if (j->verdict != Verdict::visible) {
    act_on_invalid(ctx, dir_fd, name, *j);
    return make_error(ENOENT, std::string(name) + ": hidden");
  }
  return j;
}

Result<Judgement> Consequences::judge_removal(const DirContext& ctx, int dir_fd, std::string_view name,
                                              pid_t remover) {
  if (ctx.entry) removals_.note(ctx.entry->st, remover);
  auto j = judge_.judge_settled(ctx, dir_fd, name, VerifyDepth::cached);
  if (!j) return j;
  if (j->verdict == Verdict::absent) return make_error(ENOENT, std::string(name) + ": absent");
  const bool damaged = !j->transient && (j->verdict == Verdict::invalid_self ||
                                         (j->verdict == Verdict::invalid_entry && ctx.entry));
  if (j->verdict != Verdict::visible && !damaged) return make_error(ENOENT, std::string(name) + ": hidden");
  return j;
}

bool Consequences::shown_to_remover(const DirContext& ctx, const Judgement& j, pid_t caller) const {
  if (j.transient) return false;
  if (j.verdict == Verdict::invalid_self) return removals_.recent_by(j.st, caller);
  return j.verdict == Verdict::invalid_entry && ctx.entry && removals_.recent_by(ctx.entry->st, caller);
}

void Consequences::act_on_invalid(const DirContext& ctx, int dir_fd, std::string_view name,
                                  const Judgement& j) {
  if (j.transient) return;  // it changed while judged: nothing to blame it for
  // A removal in flight in the entry moves it itself (Store::rmdir); moved
  // now, the remover's next unlink or its rmdir would fail (removals.hpp).
  // Meanwhile the kernel is told all the same, so that no other caller goes
  // on using what it cached of the entry; the remover looks its names up
  // again (Consequences::shown_to_remover).
  if (j.verdict == Verdict::invalid_self) {
    if (!removals_.recent(j.st))
      quarantine_object(dir_fd, name, j.st, ctx.child_rel(name), j.cause, j.reason, j.companions);
    else
      invalidate(dir_fd, name, j.st);
  } else if (j.verdict == Verdict::invalid_entry && ctx.entry) {
    if (!removals_.recent(ctx.entry->st)) {
      quarantine_entry_root(*ctx.entry, j.cause, j.reason);
    } else {
      invalidate(dir_fd, name, j.st);
      invalidate_entry_root(*ctx.entry);
    }
  }
}

Result<Judgement> Consequences::clear_hidden(const DirContext& ctx, int dir_fd, std::string_view name) {
  auto j = judge_.judge_settled(ctx, dir_fd, name, VerifyDepth::cached);
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
      quarantine_object(dir_fd, name, j->st, ctx.child_rel(name), j->cause,
                        "R5: hidden object in the way: " + j->reason, std::move(companions));
      auto again = judge_.judge(ctx, dir_fd, name, VerifyDepth::cached);
      if (!again) return again.error();
      if (again->verdict != Verdict::absent && again->verdict != Verdict::visible)
        return make_error(EBUSY, "hidden object could not be moved out of the way");
      return again;
    }
  }
  return j;
}

bool Consequences::quarantine_object(int parent_fd, std::string_view name, const struct stat& st,
                                     std::string rel, HideReason cause, std::string reason,
                                     std::vector<std::string> companions) {
  Quarantine::Request req;
  req.parent_fd = parent_fd;
  req.name = std::string(name);
  req.dev = st.st_dev;
  req.ino = st.st_ino;
  req.rel = std::move(rel);
  req.reason = std::move(reason);
  req.cause = cause;
  req.companions = std::move(companions);
  auto moved = quarantine_.move(req);
  if (!moved) {
    std::fprintf(stderr, "sealfs: cannot quarantine %s: %s\n", req.rel.c_str(),
                 moved.error().message.c_str());
    return false;
  }
  if (!*moved) return false;  // replaced meanwhile: not the object we judged
  if (S_ISDIR(st.st_mode)) places_.contexts().moved();
  entries_.forget(st.st_dev, st.st_ino);
  removals_.forget(st);
  invalidate(parent_fd, name, st);
  return true;
}

void Consequences::quarantine_entry_root(const EntryRoot& entry, HideReason cause, std::string reason) {
  auto [parent_rel, name] = split_parent(entry.rel);
  auto parent = open_beneath(root_fd_, parent_rel, O_PATH | O_DIRECTORY);
  if (!parent) return;
  quarantine_object(parent->get(), name, entry.st, entry.rel, cause, std::move(reason));
}

void Consequences::invalidate_entry_root(const EntryRoot& entry) {
  auto [parent_rel, name] = split_parent(entry.rel);
  auto parent = open_beneath(root_fd_, parent_rel, O_PATH | O_DIRECTORY);
  if (!parent) return;
  invalidate(parent->get(), name, entry.st);
}

void Consequences::invalidate(int parent_fd, std::string_view name, const struct stat& st) {
  if (!on_invalidate_) return;
  Invalidation inv;
  if (auto pst = stat_fd(parent_fd)) {
    inv.parent_dev = pst->st_dev;
    inv.parent_ino = pst->st_ino;
  }
  inv.name = std::string(name);
  inv.dev = st.st_dev;
  inv.ino = st.st_ino;
  if (auto* held = DeferredInvalidations::current; held != nullptr && &held->owner_ == this) {
    held->held_.push_back(std::move(inv));
    return;
  }
  on_invalidate_(inv);
}

Consequences::DeferredInvalidations::~DeferredInvalidations() {
  if (!outer_) return;
  current = nullptr;
  for (const auto& inv : held_) owner_.on_invalidate_(inv);
}

}  // namespace sealfs
