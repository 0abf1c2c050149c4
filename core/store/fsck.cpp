// fsck: a walk of the store that asks the judge, at audit depth (every file
// hashed), what a lookup of each name would show, and counts the answers;
// with repair, invalid entries are quarantined as it goes. The rules are the
// judge's own (judge.hpp): fsck keeps none of its own.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/impl.hpp"  // IWYU pragma: keep (StoreState, reached through the alias Store::Impl)
#include "core/store/judge.hpp"
#include "core/store/offline.hpp"
#include "core/store/offline_walk.hpp"
#include "core/store/place.hpp"
#include "core/store/progress.hpp"
#include "core/store/quarantine_report.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {
namespace {

// One child of a directory and the judge's verdict on it.
struct JudgedChild {
  std::string name;
  std::string rel;
  Result<Judgement> judged = make_error(EINVAL, "not judged");
};

// Judges every child, on up to `workers` threads (the hashing is the cost:
// fsck of many small entries is as fast as sha256sum on every core). A
// thread that cannot start leaves its share to the others.
template <class JudgeOne>
void judge_all(std::vector<JudgedChild>& children, unsigned workers, const JudgeOne& judge_one) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < children.size(); i = next++) children[i].judged = judge_one(children[i]);
  };
  std::vector<std::thread> helpers;
  for (unsigned w = 1; w < workers && w < children.size(); ++w) {
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
  const Judge& judge;  // the store's with repair; one that writes nothing without
  bool repair;
  FsckReport& report;
  Tally& tally;
  // --repair quarantines as it goes and brings hard links' records up to
  // date (links.hpp) while it checks: it runs on one thread.
  unsigned workers = 1;

  // Children per batch: judged together, in parallel.
  static constexpr std::size_t kChunk = 256;

  void problem(const std::string& rel, const std::string& what) {
    report.problems.push_back(rel + ": " + what);
  }

  void entry_counted() {
    tally.item();
    ++report.entries;
  }

  void not_checked(const std::string& rel, const std::string& why) {
    entry_counted();
    ++report.unchecked;
    problem(rel, "not checked: " + why);
  }

  // A visible child: counted when it is an entry, walked when it is a directory.
  void shown(int dir_fd, const JudgedChild& c, const Judgement& j, int depth) {
    if (j.kind == ObjectKind::entry_root || j.kind == ObjectKind::sealed_file) {
      entry_counted();
      ++report.valid;
      if (!j.reason.empty()) problem(c.rel, j.reason);  // valid, with a stale hard-link record
    }
    const bool directory = j.kind == ObjectKind::entry_root || j.kind == ObjectKind::container ||
                           j.kind == ObjectKind::dir_in_entry;
    if (!directory) return;
    auto sub = open_beneath(dir_fd, c.name, O_PATH | O_DIRECTORY);
    if (!sub) {
      problem(c.rel, "cannot open directory: " + sub.error().message);
      return;
    }
    walk(sub->get(), depth + 1);
  }

  // A hidden child: foreign or unlisted, as a lookup would hide it.
  void hidden(const JudgedChild& c, const Judgement& j) {
    if (j.unauthenticated) {
      // Not signed by a listed key (-o key_file): foreign, hidden, never
      // quarantined (R3); `sealfs adopt --resign` signs it deliberately.
      entry_counted();
      ++report.foreign;
      problem(c.rel, j.reason);
    } else if (j.cause == HideReason::unlisted) {
      ++report.unlisted;
      problem(c.rel, j.reason);
    } else if (j.cause == HideReason::foreign) {
      ++report.foreign;
      problem(c.rel, j.reason);
    }  // an unknown file type: never shown, and nothing to count
  }

  // An entry that fails verification: quarantined with repair.
  void invalid(int dir_fd, JudgedChild& c, Judgement& j) {
    if (j.transient) {
      // Changed while it was checked: no evidence of damage (R2).
      not_checked(c.rel, j.reason);
      return;
    }
    entry_counted();
    ++report.invalid;
    problem(c.rel, j.reason);
    if (!repair) return;
    const auto before = s.metrics.quarantined.load();
    s.consequences.quarantine_object(dir_fd, c.name, j.st, c.rel, j.cause, "fsck: " + j.reason,
                                     std::move(j.companions));
    report.quarantined += s.metrics.quarantined.load() - before;
  }

  void count(int dir_fd, JudgedChild& c, int depth) {
    if (!c.judged) {
      // EMFILE, EIO…: no verdict, so neither valid nor damaged (R2).
      not_checked(c.rel, c.judged.error().message);
      return;
    }
    Judgement& j = *c.judged;
    switch (j.verdict) {
      case Verdict::absent:  // gone since the directory was read
        break;
      case Verdict::visible:
        shown(dir_fd, c, j, depth);
        break;
      case Verdict::hidden:
        hidden(c, j);
        break;
      case Verdict::invalid_self:
        invalid(dir_fd, c, j);
        break;
      case Verdict::invalid_entry:  // its entry failed while walked: counted with that entry
        break;
    }
  }

  // One batch of a directory's children: judged in parallel, then counted
  // and walked in order.
  void walk_chunk(const DirContext& ctx, const EntryVerdict* entry, int dir_fd,
                  const std::vector<DirChild>& children, std::size_t from, std::size_t to, int depth) {
    std::vector<JudgedChild> batch;
    for (std::size_t i = from; i < to; ++i)
      if (!is_reserved_name(children[i].name))
        batch.push_back({children[i].name, ctx.child_rel(children[i].name)});
    // Inside an entry the names are listed files, judged from the entry's
    // verdict without hashing: a thread per batch would cost more than the
    // judging (3,000 small entries: 0.9 s against 0.56 s on one thread).
    judge_all(batch, ctx.entry ? 1U : workers, [&](const JudgedChild& c) {
      return judge.judge(ctx, dir_fd, c.name, VerifyDepth::audit, entry);
    });
    for (auto& c : batch) count(dir_fd, c, depth);
  }

  void walk(int dir_fd, int depth) {
    auto ctx = s.places.context_of(dir_fd);
    if (!ctx) return;
    if (depth > kMaxTreeDepth) {
      problem(ctx->rel, "tree too deep, not checked below");
      return;
    }
    // The entry this directory belongs to was judged valid by the parent's
    // walk: that verdict, as the cache keeps it for the manifest's stamp,
    // serves every name below instead of a check per name. Checked again
    // only if the cache let it go.
    std::shared_ptr<const EntryVerdict> entry;
    if (ctx->entry) {
      const EntryLocation where = dir_entry_location(*ctx->entry);
      entry = s.entries.cached(where);
      if (!entry) {
        auto v = judge.check_entry(where, VerifyDepth::audit);
        if (v) entry = std::move(*v);
      }
      if (!entry || !entry->valid) return;  // changed since: nothing below it is visible
    }
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

// The next fsck counts as new only the slots made after this one ended:
// the marker names the newest slot now, this run's own included. Written
// only when it moves on; without a slot to name, a marker that could not be
// read goes (it would be reported again and again).
void record_seen(int root_fd, FsckReport& report) {
  if (!report.quarantine_error.empty()) return;  // nothing was seen to record
  auto newest = newest_quarantine_slot(root_fd);
  if (!newest) {
    report.marker_error = newest.error().message;
    return;
  }
  const QuarantineSummary& q = report.quarantine;
  if (newest->empty()) {
    if (!q.marker_problem.empty())
      if (Status gone = forget_quarantine_marker(root_fd); !gone)
        report.marker_error = gone.error().message + ": " + std::strerror(gone.code());
    return;
  }
  if (*newest <= q.marker && q.marker_problem.empty()) return;
  if (Status marked = mark_quarantine_seen(root_fd, *newest); !marked)
    report.marker_error = marked.error().message + ": " + std::strerror(marked.code());
}

}  // namespace

Result<FsckReport> fsck(Store& store, bool repair, OfflineProgress* progress) {
  Store::Impl& s = *store.impl_;
  FsckReport report;
  Tally tally(s.metrics, progress);
  if (progress != nullptr) {
    PlanWalk plan{s.profile, ItemIs::entry, {}};
    plan.walk(s.root_fd.get(), "", false, 0);
    tally.planned(plan.total);
  }
  // Without repair nothing is written, not even a hard link's stale record
  // (which a lookup, or fsck --repair, brings up to date): the entry is
  // valid, as a lookup shows it, with a note that the record is stale.
  const Judge read_only(s.profile, s.entries, s.policy, s.links, s.metrics, false);
  // The quarantine before the walk: what was moved aside since the last
  // fsck, apart from what this run moves itself (report.quarantined).
  if (auto q = summarize_quarantine(s.root_fd.get()))
    report.quarantine = std::move(*q);
  else
    report.quarantine_error = q.error().message;
  FsckWalk walker{s, repair ? s.judge : read_only, repair, report, tally};
  if (!repair) walker.workers = std::clamp(std::thread::hardware_concurrency(), 1U, 8U);
  walker.walk(s.root_fd.get(), 0);
  record_seen(s.root_fd.get(), report);
  return report;
}

}  // namespace sealfs
