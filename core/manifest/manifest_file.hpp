// Manifests on disk: where they live (dir manifest, sidecar, hashed sidecar),
// reading them without trusting B (no symlinks, no FIFOs, bounded size), and
// replacing them atomically (temporary name, fsync, rename).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/layout/names.hpp"
#include "core/manifest/manifest.hpp"

namespace sealfs {

struct LoadedManifest {
  Manifest manifest;
  Stamp stamp;  // of the manifest file as read
};

// Reads and parses dir_fd/name. ENOENT when absent; EBADMSG (with the reason)
// when it is not a regular file, too big, unreadable as JSON, or invalid.
Result<LoadedManifest> read_manifest_at(int dir_fd, std::string_view name);
// Stamp of dir_fd/name without reading it (ENOENT when absent, EBADMSG when
// not a regular file).
Result<Stamp> manifest_stamp_at(int dir_fd, std::string_view name);

// Who may read a manifest: it tells the size and digest of every file it
// covers, so no one who could not read all of them. A manifest stays owned
// by whoever writes it (the daemon: root, so no user ever gains the right to
// rewrite one); its owner may read and write it (0600), and it grants
//  - other-read when every covered file grants other-read;
//  - group-read when every covered file grants group-read AND they all have
//    one group, which then becomes the manifest's group (files of different
//    groups: no group can read it);
// so a 0600 file's sidecar is 0600, a manifest covering a 0640 and a 0600
// file is 0600, one covering only 0644 files (or none) is 0644 as before.
// Only regular files count (a symlink's target is no secret of its own).
// Permission bits only: ACLs and the directories above are not consulted.
struct ManifestAccess {
  mode_t mode = 0644;
  std::optional<gid_t> gid;  // set with the group-read bit: the manifest's group
  bool operator==(const ManifestAccess&) const = default;
};
// The access for a manifest covering files of these stats.
ManifestAccess narrowest_access(const std::vector<struct stat>& covered);
// The stats of the regular files that manifest lists (files and accept)
// below dir_fd as they are now, plus `also` (a file about to be renamed in).
std::vector<struct stat> covered_files(int dir_fd, const Manifest& manifest,
                                       const std::vector<struct stat>& also = {});
// Gives the open manifest fd that access, never wider on the way: mode
// narrowed first, then the group, then the final mode. A group the writer
// cannot give (not root, not a member) drops the group-read bit instead.
Status apply_access(int fd, const ManifestAccess& access);

// Replaces dir_fd/name with the canonical bytes of manifest: written to
// ".sealfs-manifest.tmp.<random>" (created 0600, then given the narrowest
// access of the files it covers: covered_files(dir_fd, manifest, also)),
// fsync'ed (when sync), renamed over name. The caller fsyncs dir_fd
// afterwards when the rename itself must be durable.
Status write_manifest_atomic(int dir_fd, std::string_view name, const Manifest& manifest, bool sync,
                             const std::vector<struct stat>& also = {});

}  // namespace sealfs
