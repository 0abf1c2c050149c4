// The names sealfs gives a meaning to in B, and the one check of a name that
// comes from outside (a FUSE request, a manifest, a hint).
#pragma once

#include <string>
#include <string_view>

#include "core/base/result.hpp"

namespace sealfs {

inline constexpr std::string_view kReservedPrefix = ".sealfs";
inline constexpr std::string_view kStateDir = ".sealfs";                  // B/.sealfs/
inline constexpr std::string_view kQuarantineDir = ".sealfs/quarantine";  // B/.sealfs/quarantine/
// Quarantine slots made in advance, for a quarantine on a full B (quarantine.hpp).
inline constexpr std::string_view kSpareDir = ".sealfs/spare";
// The newest quarantine slot the last `sealfs fsck` saw (quarantine_report.hpp).
inline constexpr std::string_view kFsckSeenFile = ".sealfs/fsck-seen";
inline constexpr std::string_view kDirManifest = ".sealfs-manifest";     // <entry>/.sealfs-manifest
inline constexpr std::string_view kSidecarPrefix = ".sealfs-manifest.";  // <dir>/.sealfs-manifest.<name>

// Begins with ".sealfs": never shown, never created through M (R7).
bool is_reserved_name(std::string_view name);

// One path component: EINVAL for "", ".", "..", a '/' or a NUL;
// ENAMETOOLONG above NAME_MAX bytes.
Status check_name(std::string_view name);
inline bool is_valid_name(std::string_view name) { return check_name(name).ok(); }
// check_name, then EPERM for a reserved name: what a caller may create (R7).
Status check_new_name(std::string_view name);

// Sidecar name of the file entry `name`: ".sealfs-manifest.<name>", or, when
// that would exceed NAME_MAX, ".sealfs-manifest.#<sha256 hex of name>" (the
// manifest then records the real name in Manifest::name).
std::string sidecar_name(std::string_view file_name);
bool sidecar_is_hashed(std::string_view file_name);

}  // namespace sealfs
