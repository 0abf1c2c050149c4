// Offline tools: fsck (verify every entry, hashing everything; quarantine the
// invalid ones with repair) and adopt (seal foreign content deliberately),
// each telling an OfflineProgress how far it has come.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/store/impl.hpp"

namespace sealfs {

namespace {

// What a walk counts as one item of work.
enum class ItemIs {
  entry,    // fsck: a directory holding a manifest, a file with a sidecar
  file,     // adopt: every regular file and symlink
  nothing,  // adopt of a directory whole: one item for all, counted by the caller
};

// The plan of an offline job (OfflineProgress::planned): a walk of the tree
// the job will walk, with stats only. Bytes: regular files the profile hashes.
struct PlanWalk {
  const Profile& profile;
  ItemIs item;
  Work total;

  void add_file(const std::string& rel, const struct stat& st) {
    if (S_ISREG(st.st_mode) && !profile.is_size_only(rel))
      total.bytes += static_cast<std::uint64_t>(st.st_size);
  }

  void walk(int dir_fd, const std::string& rel, bool in_entry, int depth) {
    if (depth > kMaxTreeDepth) return;
    auto children = read_dir(dir_fd);
    if (!children) return;
    for (const auto& c : *children) {
      if (is_reserved_name(c.name)) continue;
      const std::string child_rel = join_rel(rel, c.name);
      if (profile.is_volatile(child_rel)) continue;
      auto st = stat_at(dir_fd, c.name);
      if (!st) continue;
      if (S_ISDIR(st->st_mode)) {
        auto sub = open_beneath(dir_fd, c.name, O_PATH | O_DIRECTORY);
        if (!sub) continue;
        auto m = stat_at(sub->get(), kDirManifest);
        const bool entry = m && S_ISREG(m->st_mode);
        if (entry && item == ItemIs::entry) ++total.items;
        walk(sub->get(), child_rel, in_entry || entry, depth + 1);
      } else if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) {
        const bool counted = item == ItemIs::file || (item == ItemIs::entry && !in_entry &&
                                                      stat_at(dir_fd, sidecar_name(c.name)).ok());
        if (counted) ++total.items;
        if (counted || in_entry || item == ItemIs::nothing) add_file(child_rel, *st);
      }
    }
  }
};

// Tells progress (when there is one) each item done, with the bytes hashed
// since the job began (the store's own counter: the verifier counts every
// byte it hashes, for verification and for new records alike).
class Tally {
 public:
  Tally(const Metrics& metrics, OfflineProgress* progress)
      : metrics_(metrics), progress_(progress), start_(metrics.bytes_hashed.load()) {}
  void planned(const Work& total) const {
    if (progress_ != nullptr) progress_->planned(total);
  }
  void item() {
    if (progress_ == nullptr) return;
    ++done_.items;
    done_.bytes = metrics_.bytes_hashed.load() - start_;
    progress_->advanced(done_);
  }

 private:
  const Metrics& metrics_;
  OfflineProgress* progress_;
  std::uint64_t start_;
  Work done_;
};

// One entry the walk found, verified on a worker thread (verify_all) and
// its verdict applied to the report in walk order.
struct PendingCheck {
  EntryLocation where;
  int parent_fd = -1;
  std::string name;
  struct stat st {};
  std::string rel;
  std::vector<std::string> companions;
  Result<std::shared_ptr<const EntryVerdict>> verdict = make_error(EINVAL, "not checked");
};

// One child of a directory, as the walk sorted it.
struct FsckChild {
  enum class Is { plain_dir, entry_dir, checked_file, unlisted_file, foreign_file };
  Is is = Is::plain_dir;
  std::string rel;
  UniqueFd sub;                  // directories: open while its chunk is walked
  std::size_t check = SIZE_MAX;  // entry_dir, checked_file: its PendingCheck
};

// Verifies every check, on up to `workers` threads (the hashing is the
// cost: fsck of many small entries is as fast as sha256sum on every core).
// A thread that cannot start leaves its share to the others.
template <class Check>
void verify_all(std::vector<PendingCheck>& checks, unsigned workers, const Check& check) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < checks.size(); i = next++) checks[i].verdict = check(checks[i]);
  };
  std::vector<std::thread> helpers;
  for (unsigned w = 1; w < workers && w < checks.size(); ++w) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (auto& t : helpers) t.join();
}

struct FsckWalk {
  Store::Impl& s;
  bool repair;
  FsckReport& report;
  Tally& tally;
  // --repair quarantines as it goes and brings hard links' records up to
  // date (links.hpp) while it checks: it runs on one thread.
  unsigned workers = 1;

  // Children per batch: their subdirectories' descriptors are open at once.
  static constexpr std::size_t kChunk = 256;

  void problem(const std::string& rel, const std::string& what) {
    report.problems.push_back(rel + ": " + what);
  }

  // One entry: verified with every file hashed, past the stamp cache.
  Result<std::shared_ptr<const EntryVerdict>> verdict_of(const PendingCheck& c) {
    if (repair) return s.judge.check_entry(c.where, VerifyDepth::fresh, ForceHash::every_file());
    return s.entries.check(c.where, VerifyDepth::fresh, ForceHash::every_file());
  }

  // Counts one verified entry into the report; true when it is valid.
  bool apply(PendingCheck& c) {
    tally.item();
    ++report.entries;
    if (!c.verdict) {
      ++report.unchecked;
      problem(c.rel, "not checked: " + c.verdict.error().message);
      return false;
    }
    const auto& v = *c.verdict;
    if (v->valid) {
      ++report.valid;
      return true;
    }
    if (v->transient) {
      // Could not be checked now (EMFILE, EIO, changed meanwhile…): not damage.
      ++report.unchecked;
      problem(c.rel, "not checked: " + v->reason);
      return false;
    }
    if (v->foreign) {
      // Not signed by a listed key (-o key_file): foreign, hidden, never
      // quarantined (R3); `sealfs adopt --resign` signs it deliberately.
      ++report.foreign;
      problem(c.rel, v->reason);
      return false;
    }
    ++report.invalid;
    problem(c.rel, v->reason);
    if (repair) {
      const auto before = s.metrics.quarantined.load();
      s.consequences.quarantine_object(c.parent_fd, c.name, c.st, c.rel, v->cause, "fsck: " + v->reason,
                                       std::move(c.companions));
      report.quarantined += s.metrics.quarantined.load() - before;
    }
    return false;
  }

  // Sorts one child; an entry to verify goes into checks.
  std::optional<FsckChild> sort_child(const DirContext& ctx, const EntryVerdict* entry, int dir_fd,
                                      const std::string& name, std::vector<PendingCheck>& checks) {
    FsckChild child;
    child.rel = ctx.child_rel(name);
    if (s.profile.is_volatile(child.rel)) return std::nullopt;
    auto st = stat_at(dir_fd, name);
    if (!st) return std::nullopt;
    if (S_ISDIR(st->st_mode)) {
      auto sub = open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
      if (!sub) return std::nullopt;
      auto m = stat_at(sub->get(), kDirManifest);
      if (m && S_ISREG(m->st_mode)) {
        child.is = FsckChild::Is::entry_dir;
        child.check = checks.size();
        checks.push_back({dir_entry_location(sub->get(), *st, child.rel), dir_fd, name, *st, child.rel, {}});
      }
      child.sub = std::move(*sub);
      return child;
    }
    if (!S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode)) return std::nullopt;
    if (ctx.entry) {
      const bool listed =
          entry != nullptr && entry->manifest && entry->manifest->files.count(ctx.entry_key(name)) != 0;
      if (listed) return std::nullopt;
      child.is = FsckChild::Is::unlisted_file;
    } else if (stat_at(dir_fd, sidecar_name(name))) {
      child.is = FsckChild::Is::checked_file;
      child.check = checks.size();
      checks.push_back({file_entry_location(dir_fd, name, *st, ctx.rel),
                        dir_fd,
                        name,
                        *st,
                        child.rel,
                        {sidecar_name(name)}});
    } else {
      child.is = FsckChild::Is::foreign_file;
    }
    return child;
  }

  // One batch of a directory's children: sorted, their entries verified in
  // parallel, then counted and walked in order.
  void walk_chunk(const DirContext& ctx, const EntryVerdict* entry, int dir_fd,
                  const std::vector<DirChild>& children, std::size_t from, std::size_t to, int depth) {
    std::vector<FsckChild> sorted;
    std::vector<PendingCheck> checks;
    for (std::size_t i = from; i < to; ++i) {
      if (is_reserved_name(children[i].name)) continue;
      if (auto child = sort_child(ctx, entry, dir_fd, children[i].name, checks))
        sorted.push_back(std::move(*child));
    }
    verify_all(checks, workers, [this](const PendingCheck& c) { return verdict_of(c); });
    for (auto& child : sorted) {
      switch (child.is) {
        case FsckChild::Is::entry_dir:
          if (apply(checks[child.check])) walk(child.sub.get(), depth + 1);
          break;  // invalid: nothing below it is visible
        case FsckChild::Is::plain_dir:
          walk(child.sub.get(), depth + 1);
          break;
        case FsckChild::Is::checked_file:
          apply(checks[child.check]);
          break;
        case FsckChild::Is::unlisted_file:
          ++report.foreign;
          problem(child.rel, "not listed in its entry's manifest");
          break;
        case FsckChild::Is::foreign_file:
          ++report.foreign;
          problem(child.rel, "foreign: no manifest covers it");
          break;
      }
    }
  }

  void walk(int dir_fd, int depth) {
    auto ctx = s.places.context_of(dir_fd);
    if (!ctx) return;
    if (depth > kMaxTreeDepth) {
      problem(ctx->rel, "tree too deep, not checked below");
      return;
    }
    std::shared_ptr<const EntryVerdict> entry;
    if (ctx->entry) entry = s.entries.cached(dir_entry_location(*ctx->entry));
    auto children = read_dir(dir_fd);
    if (!children) {
      problem(ctx->rel, "cannot read directory: " + children.error().message);
      return;
    }
    for (std::size_t from = 0; from < children->size(); from += kChunk)
      walk_chunk(*ctx, entry.get(), dir_fd, *children, from, std::min(children->size(), from + kChunk),
                 depth);
  }
};

}  // namespace

Result<FsckReport> Store::fsck(bool repair, OfflineProgress* progress) {
  FsckReport report;
  Tally tally(impl_->metrics, progress);
  if (progress != nullptr) {
    PlanWalk plan{impl_->profile, ItemIs::entry, {}};
    plan.walk(impl_->root_fd.get(), "", false, 0);
    tally.planned(plan.total);
  }
  // The entry a directory belongs to is verified before its children are
  // looked at (walk order: a directory's own manifest is checked by its parent).
  FsckWalk walker{*impl_, repair, report, tally};
  if (!repair) walker.workers = std::clamp(std::thread::hardware_concurrency(), 1U, 8U);
  walker.walk(impl_->root_fd.get(), 0);
  return report;
}

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

Result<std::vector<std::string>> Store::adopt(const std::vector<std::string>& rel_paths,
                                              OfflineProgress* progress) {
  Impl& s = *impl_;
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

Result<ResignReport> Store::resign(const std::vector<std::string>& rel_paths) {
  Impl& s = *impl_;
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
