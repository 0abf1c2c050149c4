// `sealfs fsck [--repair] BACKING`: verify every entry of B offline.
#include <ostream>

#include "core/store/offline.hpp"
#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"
#include "fs/cli/progress_line.hpp"

namespace sealfs::cli {

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
  out << "entries " << report->entries << ", valid " << report->valid << ", invalid " << report->invalid
      << ", foreign " << report->foreign << ", unlisted " << report->unlisted << ", quarantined "
      << report->quarantined << ", unchecked " << report->unchecked << "\n";
  if (report->invalid == 0) return report->unchecked == 0 ? 0 : 8;  // 8: could not finish the check
  return repair ? 1 : 4;
}

}  // namespace sealfs::cli
