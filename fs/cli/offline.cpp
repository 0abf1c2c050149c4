// `sealfs fsck` and `sealfs adopt`: the store used directly on B, without a
// mount. They run while no daemon serves B, or beside one (the store's own
// steps are safe against a concurrent mount).
#include <cstring>
#include <string>

#include "core/manifest/profile.hpp"
#include "core/store/store.hpp"
#include "core/verify/validator.hpp"
#include "fs/cli/commands.hpp"

namespace sealfs::fs {
namespace {

Result<std::unique_ptr<Store>> open_store(const MountOptions& options, std::ostream& err) {
  auto profile = resolve_profile(options.profile);
  if (!profile) {
    err << "sealfs: profile " << options.profile << ": " << profile.error().message << "\n";
    return profile.error();
  }
  StoreOptions store_options;
  store_options.durability = options.durability;
  store_options.verify = VerifyMode::always;  // offline checks hash everything they check
  store_options.validators = default_validators(options.cuda_validate);
  auto store = Store::open_backing(options.backing, std::move(*profile), std::move(store_options));
  if (!store)
    err << "sealfs: backing directory " << options.backing << ": " << std::strerror(store.code()) << "\n";
  return store;
}

}  // namespace

int run_fsck(const MountOptions& options, bool repair, std::ostream& out, std::ostream& err) {
  auto store = open_store(options, err);
  if (!store) return 8;
  auto report = (*store)->fsck(repair);
  if (!report) {
    err << "sealfs: fsck " << options.backing << ": " << report.error().message << "\n";
    return 8;
  }
  for (const auto& problem : report->problems) out << problem << "\n";
  out << "entries " << report->entries << ", valid " << report->valid << ", invalid " << report->invalid
      << ", foreign " << report->foreign << ", quarantined " << report->quarantined << ", unchecked "
      << report->unchecked << "\n";
  if (report->invalid == 0) return report->unchecked == 0 ? 0 : 8;  // 8: could not finish the check
  return repair ? 1 : 4;
}

int run_adopt(const MountOptions& options, const std::vector<std::string>& paths, std::ostream& out,
              std::ostream& err) {
  auto store = open_store(options, err);
  if (!store) return 1;
  auto adopted = (*store)->adopt(paths);
  if (!adopted) {
    err << "sealfs: adopt: " << adopted.error().message << "\n";
    return 1;
  }
  for (const auto& path : *adopted) out << "adopted " << path << "\n";
  return 0;
}

}  // namespace sealfs::fs
