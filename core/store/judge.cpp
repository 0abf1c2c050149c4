// The visibility verdict on one name (judge.hpp).
#include "core/store/judge.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/links.hpp"
#include "core/store/place.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {
namespace {

Judgement hidden(Judgement j, HideReason cause, std::string reason) {
  j.verdict = Verdict::hidden;
  j.cause = cause;
  j.reason = std::move(reason);
  return j;
}

Judgement shown(Judgement j, ObjectKind kind) {
  j.verdict = Verdict::visible;
  j.kind = kind;
  return j;
}

// An entry whose manifest no listed key signed: foreign (R3), so hidden and
// left where it is, whatever its files hold.
Judgement foreign(Judgement j, const EntryVerdict& v) {
  j.verdict = Verdict::hidden;
  j.reason = v.reason;
  j.cause = HideReason::foreign;
  j.unauthenticated = true;
  return j;
}

Judgement condemned(Judgement j, Verdict verdict, const EntryVerdict& v) {
  if (v.foreign) return foreign(std::move(j), v);
  j.verdict = verdict;
  j.reason = v.reason;
  j.cause = v.cause;
  j.transient = v.transient;
  return j;
}

// What the judge tells about a file that a manifest at `where` covers as `key`.
void note_manifest(Judgement& j, EntryLocation where, std::string key, const EntryVerdict& v) {
  if (auto seen = v.file_stamps.find(key); seen != v.file_stamps.end()) j.seen = seen->second;
  j.where = std::move(where);
  j.key = std::move(key);
}

}  // namespace

Status Judge::each_child(const DirContext& ctx, int dir_fd, const EntryVerdict* entry_verdict,
                         const ChildVisit& visit) const {
  auto children = read_dir(dir_fd);
  if (!children) return children.error();
  for (const DirChild& c : *children) {
    if (is_reserved_name(c.name)) {
      if (!visit(c, nullptr)) break;
      continue;
    }
    const Result<Judgement> j = judge(ctx, dir_fd, c.name, VerifyDepth::stat_only, entry_verdict);
    if (!visit(c, &j)) break;
  }
  return {};
}

Result<Judgement> Judge::recheck(Judgement j, const struct stat& st, bool rehash) const {
  Result<std::shared_ptr<const EntryVerdict>> checked = std::shared_ptr<const EntryVerdict>();
  if (rehash)
    checked = check_entry(*j.where, VerifyDepth::fresh, ForceHash::only(j.key));
  else if (!j.seen || !(*j.seen == Stamp::of(st)))
    checked = check_entry(*j.where, VerifyDepth::fresh);
  if (!checked) return checked.error();
  const auto& v = *checked;
  if (!v || v->valid) return j;
  if (v->error) return make_error(v->error, v->reason);  // no verdict: say why
  const Verdict invalid = j.where->file_entry ? Verdict::invalid_self : Verdict::invalid_entry;
  return condemned(std::move(j), invalid, *v);
}

Result<Judgement> Judge::judge(const DirContext& ctx, int dir_fd, std::string_view name, VerifyDepth depth,
                               const EntryVerdict* entry_verdict) const {
  metrics_.judgements.fetch_add(1, std::memory_order_relaxed);
  Judgement j;
  auto st = stat_at(dir_fd, name);
  if (!st) {
    if (st.code() == ENOENT) return j;  // absent
    return st.error();
  }
  j.st = *st;
  if (is_reserved_name(name)) return hidden(std::move(j), HideReason::reserved, "reserved name");
  const mode_t type = st->st_mode & S_IFMT;
  if (profile_.is_volatile(ctx.child_rel(name))) return shown(std::move(j), ObjectKind::volatile_obj);
  if (is_special_file(type)) return shown(std::move(j), ObjectKind::special);
  if (ctx.entry) return judge_in_entry(ctx, dir_fd, name, std::move(j), depth, entry_verdict);
  if (type == S_IFDIR) return judge_dir(ctx, dir_fd, name, std::move(j), depth);
  if (type == S_IFREG || type == S_IFLNK) return judge_file_entry(ctx, dir_fd, name, std::move(j), depth);
  return hidden(std::move(j), HideReason::type, "unknown file type");
}

// A directory: a container (or a directory of the enclosing entry) unless it
// holds a manifest of its own, which must verify.
Result<Judgement> Judge::judge_dir(const DirContext& ctx, int dir_fd, std::string_view name, Judgement j,
                                   VerifyDepth depth) const {
  auto child = open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
  if (!child) return child.error();
  auto m = stat_at(child->get(), kDirManifest);
  if (!m || !S_ISREG(m->st_mode))
    return shown(std::move(j), ctx.entry ? ObjectKind::dir_in_entry : ObjectKind::container);
  const Stamp manifest_now = Stamp::of(*m);
  auto checked =
      check_entry(dir_entry_location(child->get(), j.st, ctx.child_rel(name)), depth, {}, &manifest_now);
  if (!checked) return checked.error();
  const auto& v = *checked;
  if (v->unknown) return make_error(EAGAIN, std::string(name) + ": not verified yet");
  if (v->error) return make_error(v->error, std::string(name) + ": " + v->reason);
  if (v->valid) {
    j.reason = v->reason;  // a note, if any (kStaleLinkRecordReason)
    j.unhashed = !v->hashed;
    return shown(std::move(j), ObjectKind::entry_root);
  }
  return condemned(std::move(j), Verdict::invalid_self, *v);
}

// Inside a directory entry: the entry must verify, and a file must be listed.
Result<Judgement> Judge::judge_in_entry(const DirContext& ctx, int dir_fd, std::string_view name, Judgement j,
                                        VerifyDepth depth, const EntryVerdict* known) const {
  const mode_t type = j.st.st_mode & S_IFMT;
  // Asked before the entry's verdict is taken: a seal that ends in between
  // has listed the file by then. Asked after, a file whose seal ended
  // meanwhile was neither in progress nor in the (older) verdict's manifest,
  // "unlisted", and an rmdir of its directory deleted it as a leftover (R5;
  // scenario.rmdir_race under ASan, 2 full local runs of 2).
  const bool written = type == S_IFREG && policy_.in_progress(j.st);
  auto where = dir_entry_location(*ctx.entry);
  std::shared_ptr<const EntryVerdict> checked;
  if (known == nullptr) {
    auto c = check_entry(where, depth);
    if (!c) return c.error();
    checked = std::move(*c);
  }
  const EntryVerdict* v = known != nullptr ? known : checked.get();
  if (v->unknown) return make_error(EAGAIN, std::string(name) + ": entry not verified yet");
  j.unhashed = !v->hashed;
  // Written through M right now: visible whatever a check of it says (R4).
  if (v->error && type == S_IFREG && (written || policy_.in_progress(j.st)))
    return shown(std::move(j), ObjectKind::in_progress);
  if (v->error) return make_error(v->error, std::string(name) + ": " + v->reason);
  const bool file = type == S_IFREG || type == S_IFLNK;
  if (file) note_manifest(j, std::move(where), ctx.entry_key(name), *v);
  if (!v->valid) return condemned(std::move(j), Verdict::invalid_entry, *v);
  if (type == S_IFDIR) return judge_dir(ctx, dir_fd, name, std::move(j), depth);
  if (!file) return hidden(std::move(j), HideReason::type, "unknown file type");
  // Written through M right now, listed or not: its seal decides (R4).
  if (written) return shown(std::move(j), ObjectKind::in_progress);
  if (v->manifest && v->manifest->files.count(j.key) != 0)
    return shown(std::move(j), ObjectKind::file_in_entry);
  // Unlisted: asked once more only here (a writer that opened it since the
  // first question), not on the common path of a listed file.
  if (policy_.in_progress(j.st)) return shown(std::move(j), ObjectKind::in_progress);
  return hidden(std::move(j), HideReason::unlisted, std::string(kUnlistedReason));
}

// A file outside any directory entry: its sidecar makes it a file entry.
Result<Judgement> Judge::judge_file_entry(const DirContext& ctx, int dir_fd, std::string_view name,
                                          Judgement j, VerifyDepth depth) const {
  // Written through M right now: the writer's seal makes or fixes the sidecar.
  if (policy_.in_progress(j.st)) return shown(std::move(j), ObjectKind::in_progress);
  const std::string sidecar = sidecar_name(name);
  if (!stat_at(dir_fd, sidecar))
    return hidden(std::move(j), HideReason::foreign, std::string(kForeignReason));
  auto where = file_entry_location(dir_fd, name, j.st, ctx.rel);
  auto checked = check_entry(where, depth);
  if (!checked) return checked.error();
  const auto& v = *checked;
  if (v->unknown) return make_error(EAGAIN, std::string(name) + ": not verified yet");
  note_manifest(j, std::move(where), std::string(name), *v);
  j.companions.push_back(sidecar);
  if (v->valid) {
    j.reason = v->reason;  // a note, if any (kStaleLinkRecordReason)
    j.unhashed = !v->hashed;
    return shown(std::move(j), ObjectKind::sealed_file);
  }
  if (v->error) return make_error(v->error, std::string(name) + ": " + v->reason);
  return condemned(std::move(j), Verdict::invalid_self, *v);
}

Result<std::shared_ptr<const EntryVerdict>> Judge::check_entry(const EntryLocation& where, VerifyDepth depth,
                                                               const ForceHash& force,
                                                               const Stamp* manifest_now,
                                                               bool* provisional) const {
  auto v = entries_.check(where, depth, force, manifest_now);
  // Only content can be a hard link's stale record: a size or digest that a
  // seal through another name changed.
  const bool on_content = v->cause == HideReason::size || v->cause == HideReason::digest;
  if (v->valid || !v->manifest || v->foreign || v->error || v->unknown || v->transient || !on_content)
    return v;
  // readdirplus hashes nothing: a name that may only need its record brought
  // up to date is left to the lookup that follows.
  const bool hash = depth != VerifyDepth::stat_only && depth != VerifyDepth::cached_only;
  auto r = links_.refresh(where, *v->manifest, hash, write_links_);
  if (!r) return r.error();
  switch (*r) {
    case LinkRefresh::none:
      return v;
    case LinkRefresh::refreshed:
      return entries_.check(where, depth, force);
    case LinkRefresh::plausible: {
      auto shown = std::make_shared<EntryVerdict>(*v);
      if (depth == VerifyDepth::cached_only) {
        shown->unknown = true;
      } else {
        shown->valid = true;
        shown->reason.clear();
      }
      if (provisional != nullptr) *provisional = true;
      return std::shared_ptr<const EntryVerdict>(std::move(shown));
    }
    case LinkRefresh::would_refresh: {
      auto shown = std::make_shared<EntryVerdict>(*v);
      shown->valid = true;
      shown->reason = std::string(kStaleLinkRecordReason);
      if (provisional != nullptr) *provisional = true;
      return std::shared_ptr<const EntryVerdict>(std::move(shown));
    }
  }
  return v;
}

Result<Judgement> Judge::judge_settled(const DirContext& ctx, int dir_fd, std::string_view name,
                                       VerifyDepth depth) const {
  // Each retry means a writer made progress on this very name, so a reader
  // keeps asking while the writer keeps replacing, as a native lookup never
  // fails then; after a few tries it backs off to let a swap finish, and
  // gives up after a while so that a name replaced without end (a hostile
  // writer in B) costs a lookup bounded time, then a miss.
  using Clock = std::chrono::steady_clock;
  constexpr int kEagerAttempts = 4;
  constexpr auto kPatience = std::chrono::seconds(1);
  const auto deadline = Clock::now() + kPatience;
  auto pause = std::chrono::microseconds(500);
  for (int attempt = 1;; ++attempt) {
    auto j = judge(ctx, dir_fd, name, depth);
    if (!j) return j;
    if (j->verdict != Verdict::hidden && j->verdict != Verdict::invalid_self &&
        j->verdict != Verdict::invalid_entry)
      return j;
    // Judged while a publish replaced it: not the object's fault, judge again.
    auto now = stat_at(dir_fd, name);
    if (!j->transient && now && same_object(*now, j->st)) return j;
    if (Clock::now() >= deadline) return j;
    if (attempt >= kEagerAttempts) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(16000));
    }
  }
}

}  // namespace sealfs
