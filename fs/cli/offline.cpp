// The store used directly on B, without a mount, by `sealfs fsck` and
// `sealfs adopt`. They run while no daemon serves B, or beside one (the
// store's own steps are safe against a concurrent mount).
#include <cstring>
#include <memory>
#include <ostream>
#include <utility>

#include "core/base/result.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/store.hpp"
#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"

namespace sealfs::cli {

Result<std::unique_ptr<Store>> open_offline_store(const BackingOptions& options, std::ostream& err) {
  auto profile = resolve_profile(options.profile);
  if (!profile) {
    err << "sealfs: profile " << options.profile << ": " << profile.error().message << "\n";
    return profile.error();
  }
  StoreOptions offline = store_options(options);
  auto keys = load_keys(options);
  if (!keys) {
    err << "sealfs: " << keys.error().message << "\n";
    return keys.error();
  }
  offline.keys = std::move(*keys);
  offline.verify = VerifyMode::always;  // offline checks hash everything they check
  auto store = Store::open_backing(options.backing, std::move(*profile), std::move(offline));
  if (!store)
    err << "sealfs: backing directory " << options.backing << ": " << std::strerror(store.code()) << "\n";
  return store;
}

}  // namespace sealfs::cli
