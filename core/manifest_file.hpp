// Manifests on disk: where they live (dir manifest, sidecar, hashed sidecar),
// reading them without trusting B (no symlinks, no FIFOs, bounded size), and
// replacing them atomically (temporary name, fsync, rename).
#pragma once

#include <string>
#include <string_view>

#include "core/manifest.hpp"
#include "core/result.hpp"
#include "core/verifier.hpp"

namespace sealfs {

// Sidecar name of the file entry `name`: ".sealfs-manifest.<name>", or, when
// that would exceed NAME_MAX, ".sealfs-manifest.#<sha256 hex of name>" (the
// manifest then records the real name in Manifest::name).
std::string sidecar_name(std::string_view file_name);
bool sidecar_is_hashed(std::string_view file_name);

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

// Replaces dir_fd/name with the canonical bytes of manifest: written to
// ".sealfs-manifest.tmp.<random>", fsync'ed (when sync), renamed over name.
// The caller fsyncs dir_fd afterwards when the rename itself must be durable.
Status write_manifest_atomic(int dir_fd, std::string_view name, const Manifest& manifest, bool sync);

}  // namespace sealfs
