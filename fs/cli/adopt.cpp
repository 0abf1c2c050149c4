// `sealfs adopt BACKING [PATH…]`: seal foreign content in B deliberately
// (trust on first use, R3).
#include <ostream>
#include <string>
#include <vector>

#include "core/store/offline.hpp"
#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"
#include "fs/cli/progress_line.hpp"

namespace sealfs::cli {

int run_adopt(const BackingOptions& options, const std::vector<std::string>& paths, bool resign,
              std::ostream& out, std::ostream& err, bool err_is_terminal) {
  if (resign && options.key_file.empty()) {
    err << "sealfs: adopt --resign needs a key file (--key-file PATH or -o key_file=PATH)\n";
    return 1;
  }
  auto store = open_offline_store(options, err);
  if (!store) return 1;
  ProgressLine progress("adopt", "items", err, err_is_terminal);
  auto adopted = sealfs::adopt(**store, paths, &progress);
  progress.finish();
  if (!adopted) {
    err << "sealfs: adopt: " << adopted.error().message << "\n";
    return 1;
  }
  for (const auto& path : *adopted) out << "adopted " << path << "\n";
  if (!resign) return 0;
  auto resigned = sealfs::resign(**store, paths);
  if (!resigned) {
    err << "sealfs: adopt --resign: " << resigned.error().message << "\n";
    return 1;
  }
  for (const auto& path : resigned->signed_again) out << "re-signed " << path << "\n";
  for (const auto& problem : resigned->refused) out << "not re-signed " << problem << "\n";
  return resigned->refused.empty() ? 0 : 4;
}

}  // namespace sealfs::cli
