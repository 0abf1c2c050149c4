// The crash points of the store's transactions, by name: the fault hook
// (StoreOptions::fault_hook, the daemon's SEALFS_FAULT_STEP) is called with
// these right after each step, so tests and the daemon's crash injection
// agree on them. Each is one `policy.step(name)` line in the transaction
// (policy.hpp). The names are on the wire: never change them.
#pragma once

#include <array>
#include <string_view>

namespace sealfs::publish_steps {

// Directory publish: files_synced → validated → manifest_written →
// dst_cleared → renamed → dir_synced.
// File publish: files_synced → validated → manifest_written (dst sidecar) →
// dst_cleared → renamed → dir_synced → source_cleaned.
// File replace (R6): … → manifest_written (sidecar accepting old and new) →
// renamed → dir_synced → sidecar_final.
// Amend (into an entry): files_synced → validated → source_unlisted →
// renamed → amended.
// Unlink (namespace.cpp): manifest_written (inside an entry: unlisted
// first) → unlinked.
inline constexpr std::string_view kFilesSynced = "files_synced";
inline constexpr std::string_view kValidated = "validated";
inline constexpr std::string_view kSourceUnlisted = "source_unlisted";
inline constexpr std::string_view kManifestWritten = "manifest_written";
inline constexpr std::string_view kDstCleared = "dst_cleared";
inline constexpr std::string_view kRenamed = "renamed";
inline constexpr std::string_view kDirSynced = "dir_synced";
inline constexpr std::string_view kSidecarFinal = "sidecar_final";
inline constexpr std::string_view kAmended = "amended";
inline constexpr std::string_view kSourceCleaned = "source_cleaned";
inline constexpr std::string_view kUnlinked = "unlinked";

inline constexpr std::array<std::string_view, 11> kAll = {
    kFilesSynced, kValidated,    kSourceUnlisted, kManifestWritten, kDstCleared, kRenamed,
    kDirSynced,   kSidecarFinal, kAmended,        kSourceCleaned,   kUnlinked};

}  // namespace sealfs::publish_steps

// R4 seal at the last close of an in-place write (seal.cpp): digested →
// manifest_written (the sidecar, or the entry's manifest amended).
namespace sealfs::seal_steps {

inline constexpr std::string_view kDigested = "digested";
// Not a crash point: the fault hook is called with it between reading a file
// and checking its stamp again, so tests can pause a hash there.
inline constexpr std::string_view kHashing = "hashing";
inline constexpr std::string_view kManifestWritten = publish_steps::kManifestWritten;

// The crash points (kHashing is a pause point, not one).
inline constexpr std::array<std::string_view, 2> kAll = {kDigested, kManifestWritten};

}  // namespace sealfs::seal_steps
