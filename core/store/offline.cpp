// Offline tools beside fsck (fsck.cpp): adopt (seal foreign content
// deliberately, telling an OfflineProgress how far it has come) and
// adopt --resign (sign again what another key signed).
#include "core/store/offline.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/impl.hpp"  // IWYU pragma: keep (StoreState, reached through the alias Store::Impl)
#include "core/store/judge.hpp"
#include "core/store/offline_walk.hpp"
#include "core/store/place.hpp"
#include "core/store/progress.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {

namespace {

struct AdoptWalk {
  Store::Impl& s;
  std::vector<std::string>& sealed;
  Tally& tally;

  void adopt_file(const DirContext& ctx, int dir_fd, std::string_view name) {
    seal_if_foreign(ctx, dir_fd, name);
    tally.item();
  }

  // Seals one foreign regular file or symlink where it lies.
  void seal_if_foreign(const DirContext& ctx, int dir_fd, std::string_view name) {
    auto j = s.judge.judge(ctx, dir_fd, name, VerifyDepth::cached);
    // Only foreign or unlisted content; what a manifest that no listed key
    // signed covers is left to --resign, which checks it against that manifest.
    if (!j || j->verdict != Verdict::hidden || j->unauthenticated) return;
    if (s.records.seal_at(ctx, dir_fd, name, s.policy.durable())) sealed.push_back(ctx.child_rel(name));
  }

  void walk(int dir_fd, int depth) {
    if (depth > kMaxTreeDepth) return;
    auto ctx = s.places.context_of(dir_fd);
    if (!ctx || ctx->is_volatile) return;
    auto children = read_dir(dir_fd);
    if (!children) return;
    for (const auto& c : *children) {
      if (is_reserved_name(c.name) || s.profile.is_volatile(ctx->child_rel(c.name))) continue;
      auto st = stat_at(dir_fd, c.name);
      if (!st) continue;
      if (S_ISDIR(st->st_mode)) {
        auto sub = open_beneath(dir_fd, c.name, O_PATH | O_DIRECTORY);
        if (sub) walk(sub->get(), depth + 1);
      } else if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) {
        adopt_file(*ctx, dir_fd, c.name);
      }
    }
  }
};

}  // namespace

namespace {

// adopt's plan: the tree below the root, or what each path names.
Work adopt_plan(Store::Impl& s, const std::vector<std::string>& rel_paths) {
  PlanWalk plan{s.profile, ItemIs::file, {}};
  if (rel_paths.empty()) {
    plan.walk(s.root_fd.get(), "", false, 0);
    return plan.total;
  }
  for (const auto& rel : rel_paths) {
    if (!is_valid_manifest_path(rel) || s.profile.is_volatile(rel)) continue;
    auto [parent_rel, name] = split_parent(rel);
    auto parent = open_beneath(s.root_fd.get(), parent_rel, O_PATH | O_DIRECTORY);
    if (!parent) continue;
    auto st = stat_at(parent->get(), name);
    if (!st) continue;
    if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) {
      ++plan.total.items;
      plan.add_file(rel, *st);
      continue;
    }
    auto dir = open_beneath(parent->get(), name, O_PATH | O_DIRECTORY);
    auto ctx = s.places.context_of(parent->get());
    if (!dir || !ctx) continue;
    if (ctx->entry) {
      plan.walk(dir->get(), rel, true, 0);  // amended file by file
    } else if (!stat_at(dir->get(), kDirManifest)) {
      PlanWalk whole{s.profile, ItemIs::nothing, {}};  // one entry made of the whole tree
      whole.walk(dir->get(), rel, true, 0);
      plan.total.items += 1;
      plan.total.bytes += whole.total.bytes;
    }
  }
  return plan.total;
}

}  // namespace

Result<std::vector<std::string>> adopt(Store& store, const std::vector<std::string>& rel_paths,
                                       OfflineProgress* progress) {
  Store::Impl& s = *store.impl_;
  std::vector<std::string> sealed;
  Tally tally(s.metrics, progress);
  if (progress != nullptr) tally.planned(adopt_plan(s, rel_paths));
  AdoptWalk walker{s, sealed, tally};
  if (rel_paths.empty()) {
    walker.walk(s.root_fd.get(), 0);
    return sealed;
  }
  for (const auto& rel : rel_paths) {
    const auto parts = split_rel(rel);
    if (parts.empty() || !is_valid_manifest_path(rel))
      return make_error(EINVAL, "adopt: invalid path " + rel);
    for (const auto& p : parts)
      if (is_reserved_name(p)) return make_error(EPERM, "adopt: reserved name in " + rel);
    if (s.profile.is_volatile(rel)) continue;  // volatile areas are never sealed
    auto [parent_rel, name] = split_parent(rel);
    auto parent = open_beneath(s.root_fd.get(), parent_rel, O_PATH | O_DIRECTORY);
    if (!parent) return make_error(parent.code(), "adopt " + rel + ": " + parent.error().message);
    auto ctx = s.places.context_of(parent->get());
    if (!ctx) return ctx.error();
    auto st = stat_at(parent->get(), name);
    if (!st) return make_error(st.code(), "adopt " + rel + ": " + st.error().message);
    if (S_ISDIR(st->st_mode)) {
      auto dir = open_beneath(parent->get(), name, O_PATH | O_DIRECTORY);
      if (!dir) return dir.error();
      if (ctx->entry) {
        walker.walk(dir->get(), 0);  // inside an entry: amend what is foreign
        continue;
      }
      if (auto m = stat_at(dir->get(), kDirManifest); m) continue;  // already an entry
      // Trust on first use: the directory as it is becomes an entry.
      auto records = s.records.records_for_tree(dir->get(), "", rel);
      if (!records) return make_error(records.code(), "adopt " + rel + ": " + records.error().message);
      Status w = s.records.write_manifest(dir->get(), kDirManifest, std::move(*records), rel);
      s.places.contexts().moved();  // the directory (and all below it) is an entry now
      if (!w) return w.error();
      if (Status d = s.policy.sync_directory(dir->get()); !d) return d.error();
      sealed.push_back(rel);
      tally.item();
    } else if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) {
      walker.adopt_file(*ctx, parent->get(), name);
    } else {
      return make_error(EINVAL, "adopt " + rel + ": not a file or directory");
    }
  }
  return sealed;
}

namespace {

// adopt --resign: every entry whose manifest the first key did not sign for
// its place is checked against that manifest, every file hashed, by a
// verifier that ignores MACs; where its files match, it is signed.
struct ResignWalk {
  Store::Impl& s;
  EntryVerifier plain;
  ResignReport& report;

  ResignWalk(Store::Impl& store, ResignReport& out)
      : s(store), plain(store.verifier, store.options.verdict_ttl, 1u << 13, &store.profile), report(out) {
    plain.set_max_hashed_size(store.profile.max_file_size);
  }

  void entry(const EntryLocation& where, const std::string& rel) {
    auto loaded = read_manifest_at(where.base_fd, where.manifest_name);
    if (!loaded) {
      report.refused.push_back(rel + ": " + loaded.error().message);
      return;
    }
    const Manifest& m = loaded->manifest;
    auto check = check_manifest_mac(m, *s.options.keys, where.place());
    if (check && *check == MacCheck::authentic && m.mac->key == s.options.keys->signer().id) return;
    auto v = plain.check(where, VerifyDepth::fresh, ForceHash::every_file());
    if (!v->valid) {
      report.refused.push_back(rel + ": " + v->reason);
      return;
    }
    Status w =
        s.records.resign_verified(where.base_fd, where.manifest_name, v->manifest_stamp, where.place());
    if (!w) {
      report.refused.push_back(rel + ": " + w.error().message);
      return;
    }
    report.signed_again.push_back(rel);
  }

  // ctx's directory dir_fd / name: an entry to re-sign, and (a directory) what lies below it.
  void visit(const DirContext& ctx, int dir_fd, const std::string& name, int depth) {
    if (is_reserved_name(name) || s.profile.is_volatile(ctx.child_rel(name))) return;
    auto st = stat_at(dir_fd, name);
    if (!st) return;
    const std::string rel = ctx.child_rel(name);
    if (S_ISDIR(st->st_mode)) {
      auto sub = open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
      if (!sub) return;
      if (auto m = stat_at(sub->get(), kDirManifest); m && S_ISREG(m->st_mode))
        entry(dir_entry_location(sub->get(), *st, rel), rel);
      walk(sub->get(), depth + 1);
    } else if ((S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) && !ctx.entry &&
               stat_at(dir_fd, sidecar_name(name))) {
      entry(file_entry_location(dir_fd, name, *st, ctx.rel), rel);
    }
  }

  void walk(int dir_fd, int depth) {
    if (depth > kMaxTreeDepth) return;
    auto ctx = s.places.context_of(dir_fd);
    if (!ctx || ctx->is_volatile) return;
    auto children = read_dir(dir_fd);
    if (!children) return;
    for (const auto& c : *children) visit(*ctx, dir_fd, c.name, depth);
  }
};

}  // namespace

Result<ResignReport> resign(Store& store, const std::vector<std::string>& rel_paths) {
  Store::Impl& s = *store.impl_;
  if (!s.options.keys) return make_error(EINVAL, "re-signing needs a key file");
  ResignReport report;
  ResignWalk walker(s, report);
  if (rel_paths.empty()) walker.walk(s.root_fd.get(), 0);
  for (const auto& rel : rel_paths) {
    if (split_rel(rel).empty() || !is_valid_manifest_path(rel))
      return make_error(EINVAL, "resign: invalid path " + rel);
    auto [parent_rel, name] = split_parent(rel);
    auto parent = open_beneath(s.root_fd.get(), parent_rel, O_PATH | O_DIRECTORY);
    if (!parent) return make_error(parent.code(), "resign " + rel + ": " + parent.error().message);
    auto ctx = s.places.context_of(parent->get());
    if (!ctx) return ctx.error();
    walker.visit(*ctx, parent->get(), name, 0);
  }
  s.places.contexts().moved();
  return report;
}

}  // namespace sealfs
