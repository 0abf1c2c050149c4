// The plan of an offline job (offline_walk.hpp).
#include "core/store/offline_walk.hpp"

#include <fcntl.h>

#include <cstdint>
#include <string>

#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"

namespace sealfs {

void PlanWalk::add_file(const std::string& rel, const struct stat& st) {
  if (S_ISREG(st.st_mode) && !profile.is_size_only(rel))
    total.bytes += static_cast<std::uint64_t>(st.st_size);
}

void PlanWalk::walk(int dir_fd, const std::string& rel, bool in_entry, int depth) {
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
      const bool counted = item == ItemIs::file ||
                           (item == ItemIs::entry && !in_entry && stat_at(dir_fd, sidecar_name(c.name)).ok());
      if (counted) ++total.items;
      if (counted || in_entry || item == ItemIs::nothing) add_file(child_rel, *st);
    }
  }
}

}  // namespace sealfs
