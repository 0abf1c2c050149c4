// `sealfs adopt BACKING [PATH…]`: seal foreign content in B deliberately
// (trust on first use, R3).
#include "fs/cli/commands.hpp"

namespace sealfs::cli {

int run_adopt(const BackingOptions& options, const std::vector<std::string>& paths, std::ostream& out,
              std::ostream& err) {
  auto store = open_offline_store(options, err);
  if (!store) return 1;
  auto adopted = (*store)->adopt(paths);
  if (!adopted) {
    err << "sealfs: adopt: " << adopted.error().message << "\n";
    return 1;
  }
  for (const auto& path : *adopted) out << "adopted " << path << "\n";
  return 0;
}

}  // namespace sealfs::cli
