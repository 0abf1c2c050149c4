// `sealfs fsck [--repair] BACKING`: verify every entry of B offline, say
// what the quarantine took since the last fsck and which closes the seal
// journal holds unsealed.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/store/offline.hpp"
#include "core/store/quarantine_report.hpp"
#include "core/store/store.hpp"
#include "core/writers/journal_replay.hpp"
#include "core/writers/seal_journal.hpp"
#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"
#include "fs/cli/progress_line.hpp"

namespace sealfs::cli {
namespace {

// One report line per item, whatever a path or a reason written into B
// holds: control bytes are shown as \xHH.
std::string shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string slot_path(const std::string& name) { return std::string(kQuarantineDir) + "/" + shown(name); }

void print_quarantine(const FsckReport& r, std::ostream& out) {
  if (!r.quarantine_error.empty()) {
    out << "quarantine: not read: " << shown(r.quarantine_error) << "\n";
    return;
  }
  const QuarantineSummary& q = r.quarantine;
  out << "quarantine: " << q.fresh << " new "
      << (q.marker.empty() ? "(no earlier fsck recorded)" : "since the last fsck") << " (" << q.fresh_bytes
      << " bytes); " << q.held << " held in all (" << q.held_bytes << " bytes)"
      << (q.measured ? "" : "; some could not be measured, the bytes are a floor") << "\n";
  for (const QuarantinedSlot& s : q.newest) {
    out << "quarantine: new " << shown(s.time) << " " << shown(s.path) << ": " << shown(s.reason) << " ("
        << s.bytes << " bytes, " << slot_path(s.slot);
    if (!s.dropped.empty()) out << "; only its record kept: " << shown(s.dropped);
    out << ")\n";
  }
  const auto listed = static_cast<std::uint64_t>(q.newest.size());
  // Fresh slots whose reason is unreadable are listed below, not here.
  if (q.fresh > listed) out << "quarantine: " << q.fresh - listed << " more new, not listed above\n";
  for (const std::string& u : q.unreadable) out << "quarantine: unreadable " << slot_path(u) << "\n";
  if (!q.marker_problem.empty())
    out << "quarantine: " << shown(q.marker_problem) << "; every slot counted as new\n";
}

// R4's seal journal (core/writers/seal_journal.hpp): the closes a daemon
// journalled and did not live to seal. With repair they are finished first,
// by the replay a mount runs (the same rules: only a file whose name still
// leads to it with the stamp of its close; a journal still locked is its
// live daemon's own, and another boot's is never replayed), so that the
// walk then finds those files sealed rather than foreign.
void replay_journals_now(Store& store, std::ostream& out) {
  auto root = store.root();
  auto dir = root ? open_journal_dir(root->fd.get()) : Result<UniqueFd>(root.error());
  if (!dir) {
    out << "journal: not replayed: " << shown(dir.error().message) << "\n";
    return;
  }
  ReplayOptions options;
  options.boot_id = this_boot_id();
  options.wait = std::chrono::milliseconds(0);
  options.owner_serving = [](const JournalHeader& /*header*/) { return true; };  // locked: left to it
  options.log = [&out](const std::string& line) { out << shown(line) << "\n"; };
  const ReplayReport r = replay_journals(store, dir->get(), options);
  if (r.journals > 0)
    out << "journal: " << r.journals << " replayed: " << r.sealed << " seals finished, " << r.changed
        << " files changed since their close and " << r.missing << " gone or renamed left hidden, "
        << r.failed << " failed\n";
}

// Each journal left, with its pending seals.
void print_journals(Store& store, std::ostream& out) {
  auto root = store.root();
  auto journals = root ? survey_journals(root->fd.get(), this_boot_id())
                       : Result<std::vector<JournalSurvey>>(root.error());
  if (!journals) {
    out << "journal: not read: " << shown(journals.error().message) << "\n";
    return;
  }
  std::size_t pending = 0;
  std::size_t live = 0;
  for (const JournalSurvey& j : *journals) {
    out << "journal: " << shown(j.name) << ": ";
    if (!j.headed) {
      out << "no valid header, never replayed\n";
      continue;
    }
    pending += j.pending;
    out << "daemon " << j.header.pid << ", ";
    if (!j.this_boot) {
      out << "another boot or host (" << shown(j.header.boot_id) << "), never replayed";
    } else if (j.live) {
      live += j.pending;
      out << "live (locked: its daemon seals them)";
    } else {
      out << "gone (the next mount or fsck --repair seals those unchanged since their close)";
    }
    out << ": " << j.pending << " pending seals";
    if (j.ignored != 0) out << ", " << j.ignored << " lines ignored";
    out << "\n";
  }
  out << "journal: " << pending << " pending seals in " << journals->size() << " journals, " << live
      << " of them a live daemon's" << (pending != 0 ? "; until sealed, their files count as foreign" : "")
      << "\n";
}

}  // namespace

int run_fsck(const BackingOptions& options, bool repair, std::ostream& out, std::ostream& err,
             bool err_is_terminal) {
  auto store = open_offline_store(options, err);
  if (!store) return 8;
  if (repair) replay_journals_now(**store, out);
  ProgressLine progress("fsck", "entries", err, err_is_terminal);
  auto report = sealfs::fsck(**store, repair, &progress);
  progress.finish();
  if (!report) {
    err << "sealfs: fsck " << options.backing << ": " << report.error().message << "\n";
    return 8;
  }
  for (const auto& problem : report->problems) out << problem << "\n";
  print_quarantine(*report, out);
  print_journals(**store, out);
  out << "entries " << report->entries << ", valid " << report->valid << ", invalid " << report->invalid
      << ", foreign " << report->foreign << ", unlisted " << report->unlisted << ", quarantined "
      << report->quarantined << " by this fsck, unchecked " << report->unchecked << "\n";
  if (!report->marker_error.empty())
    err << "sealfs: fsck " << options.backing << ": cannot record what the quarantine holds ("
        << report->marker_error << "): the next fsck counts it as new again\n";
  if (report->invalid != 0) return repair ? 1 : 4;
  if (report->unchecked != 0 || !report->quarantine_error.empty()) return 8;  // could not finish the check
  // Damage found and moved aside since the last fsck, by the mount: found
  // and set right, as fsck(8)'s 1 says.
  return report->quarantine.fresh != 0 ? 1 : 0;
}

}  // namespace sealfs::cli
