// The manifest of DESIGN.md: parse (never throws, rejects anything odd) and
// write in one canonical form (sorted keys, no spaces), so equal manifests are
// equal bytes.
//
// {"sealfs":1,"files":{"kernel_lib.so":{"sha256":"…","size":16},
//                      "device_kernel.cu":{"size":16},
//                      "link":{"size":3,"symlink":"a/b"}},
//  "accept":{"kernel_lib.so":{"sha256":"…","size":12}},   // optional, R6 swaps
//  "name":"very-long-name…",                                // optional, hashed sidecars
//  "mac":{"hmac-sha256":"…","key":"k1"},                     // optional, -o key_file
//  "cuda":{…}, …}                                           // optional extra sections
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/digest.hpp"
#include "core/base/result.hpp"

namespace sealfs {

inline constexpr int kManifestVersion = 1;
inline constexpr std::uint64_t kMaxManifestFileSize = 1ull << 50;  // sizes above are rejected
inline constexpr std::size_t kMaxManifestBytes = 64u << 20;        // bigger manifests are rejected

struct FileRecord {
  std::uint64_t size = 0;
  std::optional<Sha256> sha256;        // absent: size-only (profile says so)
  std::optional<std::string> symlink;  // present: the object is a symlink with this target
  bool operator==(const FileRecord&) const = default;
};

// A manifest's signature (core/manifest/manifest_mac.hpp says over what):
// the id of the key that made it and the HMAC-SHA-256.
struct ManifestMac {
  std::string key;
  Sha256 hmac{};
  bool operator==(const ManifestMac&) const = default;
};

struct Manifest {
  // Relative paths inside the entry ("kernel_lib.so", "sub/x.bin"), or for a
  // file entry the file's own name. Components are never empty, ".", "..",
  // and never contain '/' or NUL.
  std::map<std::string, FileRecord> files;
  // A second acceptable version per file, used only while a file entry is
  // being replaced (R6): readers in the middle of the swap verify either.
  std::map<std::string, FileRecord> accept;
  // For sidecars named by a digest of a too-long file name: the real name.
  std::optional<std::string> name;
  // Further top-level sections (e.g. "cuda"), kept as canonical JSON text,
  // keyed by section name. Unknown sections survive a parse/serialize trip.
  std::map<std::string, std::string> extra;
  // Written when the daemon has a key (-o key_file); absent otherwise, and
  // then the bytes are what they were before signatures existed.
  std::optional<ManifestMac> mac;

  bool operator==(const Manifest&) const = default;
};

// EBADMSG with a reason on any defect: among them a byte-order mark and invalid
// UTF-8 anywhere (unknown sections and escaped lone surrogates included). Where
// a symlink record may point is the entry verifier's rule (a directory entry's
// symlinks stay inside it, symlink_stays_inside), not the format's.
Result<Manifest> parse_manifest(std::string_view json);
// Canonical bytes. Keys of `extra` that name a known section ("sealfs",
// "files", "accept", "name", "mac") are skipped; an extra value that is not
// valid JSON is written as null (parse_manifest never produces either).
// with_mac false: the bytes without the "mac" section (what a MAC covers).
std::string serialize_manifest(const Manifest& manifest, bool with_mac = true);

// Any JSON text in the canonical form used for Manifest::extra (object keys
// sorted, no spaces); EBADMSG for invalid JSON, duplicate keys, nesting deeper
// than 16 levels or text over kMaxManifestBytes. For building extra sections.
Result<std::string> canonical_json(std::string_view json);

// True when rel is a relative path acceptable as a manifest key: '/'-separated
// components, none empty, ".", ".." or longer than NAME_MAX, no NUL, at most
// kMaxTreeDepth of them (no PATH_MAX bound, R10). Reserved names (".sealfs…") are the store's business, not
// checked here.
bool is_valid_manifest_path(std::string_view rel);

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above
// U+10FFFF. A manifest is UTF-8 JSON, so every name and symlink target it
// records must be valid UTF-8 (a publish of anything else is refused).
bool is_valid_utf8(std::string_view s);

// Whether a symlink recorded under manifest key `key` with `target` stays
// inside the entry: relative, ".." only at its start (never after a name:
// what a name leads to may itself be a symlink) and never above the directory
// that holds the manifest, counting from the symlink's own directory
// ("sub/l" → "../x" stays, "l" → "../x" and "sub/l" → "x/../../y" leave).
bool symlink_stays_inside(std::string_view key, std::string_view target);
// Why a symlink record under a name a validator guards is refused.
inline constexpr std::string_view kSymlinkUnderValidatedName =
    "a symlink where the profile validates (must be a regular file)";
// The path a relative symlink at link_rel names, read as text: target's
// components applied to the symlink's own directory, ".." taking one off
// ("c/e/sub/l" → "../x" is "c/e/x"). Where symlink_stays_inside holds for
// the symlink's key, that path lies in the entry, and no component of it can
// be a symlink leading elsewhere (".." never follows a name).
std::string symlink_destination(std::string_view link_rel, std::string_view target);

}  // namespace sealfs
