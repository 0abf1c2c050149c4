// R10: publish by link. Like a file publish (publish.cpp) that leaves the
// source in place: the new name gets its own record (the destination
// entry's manifest amended, or a sidecar written first), then the link.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/entry_bounds.hpp"
#include "core/store/impl.hpp"
#include "core/store/judge.hpp"
#include "core/store/place.hpp"
#include "core/store/publish.hpp"
#include "core/store/records.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {
namespace {

namespace step = publish_steps;

// The visible object behind src_path_fd, placed in its directory (ENOENT
// when it moved or is hidden; an invalid one is acted on, as lookup does).
Result<Placed> visible_source(Store::Impl& s, int src_path_fd, PlaceHint hint) {
  auto placed = s.places.place(src_path_fd, nullptr, nullptr, hint);
  if (!placed) return make_error(ENOENT, placed.error().message);
  auto sctx = s.places.context_of(placed->parent.get());
  if (!sctx) return sctx.error();
  auto sj = s.judge.judge_settled(*sctx, placed->parent.get(), placed->name, VerifyDepth::cached);
  if (!sj) return sj.error();
  if (sj->verdict != Verdict::visible) {
    s.consequences.act_on_invalid(*sctx, placed->parent.get(), placed->name, *sj);
    return make_error(ENOENT, placed->rel + ": hidden");
  }
  return placed;
}

Status link_at(const Placed& src, int dst_dir_fd, const std::string& dn, const std::string& dst_rel) {
  if (::linkat(src.parent.get(), src.name.c_str(), dst_dir_fd, dn.c_str(), 0) != 0)
    return errno_error("link " + src.rel + " → " + dst_rel);
  return {};
}

// The sealed link: its record written where the destination's entry keeps
// it, around the link itself. Hard links are one inode under two names,
// each covered by its own manifest; a later in-place rewrite through one
// name re-seals that name and records the inode (links.hpp), and the other
// names' records are brought up to date from that at their next look (R4:
// every name stays visible and verified whichever name it is written through).
Status sealed_link(Store::Impl& s, const Placed& src, const DirContext& dctx, int dst_dir_fd,
                   const std::string& dn) {
  const std::string dst_rel = dctx.child_rel(dn);
  const std::string key = dctx.entry ? dctx.entry_key(dn) : dn;
  RecordOptions how;
  how.sync_data = s.policy.durable();
  how.validate = true;
  how.profile_rel = dst_rel;
  how.key = key;
  how.in_dir_entry = dctx.entry.has_value();
  Manifest extras;
  auto rec = s.records.make_record(src.parent.get(), src.name, how, &extras);
  if (!rec) return rec.error();
  if (auto crash = s.policy.step(step::kFilesSynced)) return *crash;
  if (auto crash = s.policy.step(step::kValidated)) return *crash;
  if (dctx.entry) {
    if (Status l = link_at(src, dst_dir_fd, dn, dst_rel); !l) return l;
    if (auto crash = s.policy.step(step::kRenamed)) return *crash;
    if (Status amended = s.records.list_record(*dctx.entry, key, *rec, extras); !amended) return amended;
    if (auto crash = s.policy.step(step::kAmended)) return *crash;
    return {};
  }
  // In a container until the link is made: EAGAIN when its directory became
  // (part of) an entry since dctx was found (entry_bounds.hpp).
  auto outside = s.bounds.keep_container(dst_dir_fd);
  if (!outside) return outside.error();
  if (Status w = s.records.write_sidecar(dst_dir_fd, dctx.rel, dn, *rec, std::nullopt, &extras, &src.st); !w)
    return w;
  if (auto crash = s.policy.step(step::kManifestWritten)) return *crash;
  if (Status l = link_at(src, dst_dir_fd, dn, dst_rel); !l) return l;
  if (auto crash = s.policy.step(step::kRenamed)) return *crash;
  return s.policy.sync_directory(dst_dir_fd);
}

}  // namespace

Result<Found> StorePublishing::link(int src_path_fd, int dst_dir_fd, std::string_view dst_name,
                                    PlaceHint src_hint) {
  Impl& s = *impl_;
  DeferredInvalidations held(s.consequences);
  if (Status ok = check_name(dst_name); !ok) return ok.error();
  if (is_reserved_name(dst_name)) return make_error(EPERM, "reserved name");
  auto st = stat_fd(src_path_fd);
  if (!st) return st.error();
  if (S_ISDIR(st->st_mode)) return make_error(EPERM, "hard links to directories are not allowed");
  auto placed = visible_source(s, src_path_fd, src_hint);
  if (!placed) return placed.error();
  auto dctx = s.places.context_of(dst_dir_fd);
  if (!dctx) return dctx.error();
  const std::string dst_rel = dctx->child_rel(dst_name);
  const std::string dn(dst_name);
  if (s.profile.is_volatile(dst_rel)) {
    if (Status l = link_at(*placed, dst_dir_fd, dn, dst_rel); !l) return l.error();
    return found_at(dst_dir_fd, dst_name, ObjectKind::volatile_obj, &placed->st);
  }
  auto dj = s.consequences.clear_hidden(*dctx, dst_dir_fd, dst_name);
  if (!dj) return dj.error();
  if (dj->verdict == Verdict::visible) return make_error(EEXIST, dn + " exists");
  if (is_special_file(st->st_mode)) {
    if (Status l = link_at(*placed, dst_dir_fd, dn, dst_rel); !l) return l.error();
    return found_at(dst_dir_fd, dst_name, ObjectKind::special, &placed->st);
  }
  const auto started = std::chrono::steady_clock::now();
  Status done = sealed_link(s, *placed, *dctx, dst_dir_fd, dn);
  // The destination's directory became (part of) an entry meanwhile: linked
  // as a file of that entry.
  for (int tries = 1; !done && done.code() == EAGAIN && tries < kPlaceTries; ++tries) {
    auto again = s.places.context_of(dst_dir_fd);
    if (!again) return again.error();
    *dctx = std::move(*again);
    done = sealed_link(s, *placed, *dctx, dst_dir_fd, dn);
  }
  if (!done) return done.error();
  s.metrics.publishes.fetch_add(1, std::memory_order_relaxed);
  s.metrics.publish_seconds.observe(std::chrono::steady_clock::now() - started);
  return found_at(dst_dir_fd, dst_name, dctx->entry ? ObjectKind::file_in_entry : ObjectKind::sealed_file,
                  &placed->st);
}

}  // namespace sealfs
