// `sealfs fsck [--repair] BACKING`: verify every entry of B offline, and say
// what the quarantine took since the last fsck.
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>

#include "core/layout/names.hpp"
#include "core/store/offline.hpp"
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

}  // namespace

int run_fsck(const BackingOptions& options, bool repair, std::ostream& out, std::ostream& err,
             bool err_is_terminal) {
  auto store = open_offline_store(options, err);
  if (!store) return 8;
  ProgressLine progress("fsck", "entries", err, err_is_terminal);
  auto report = sealfs::fsck(**store, repair, &progress);
  progress.finish();
  if (!report) {
    err << "sealfs: fsck " << options.backing << ": " << report.error().message << "\n";
    return 8;
  }
  for (const auto& problem : report->problems) out << problem << "\n";
  print_quarantine(*report, out);
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
