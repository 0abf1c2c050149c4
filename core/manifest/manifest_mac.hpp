// Authenticated manifests (-o key_file): what a manifest's MAC covers, how
// it is made and checked.
//
// The MAC is HMAC-SHA-256, keyed by one of the key file's keys, over
//   "sealfs-manifest-mac-v1\n" <place> "\0" <canonical manifest without "mac">
// where <place> is the entry's path below the backing root: the entry
// directory's for a directory entry ("ns/kernels/k1"), the file's own for a
// file entry ("ns/kernels/k1.bin", not its sidecar's). The place binds a
// manifest to its entry: a manifest copied to another entry (or an entry
// copied or moved behind the mount) does not verify there. Every host of a
// fleet must therefore mount the same directory of the shared filesystem as
// its backing root (paths are relative to it, not to the mountpoint).
#pragma once

#include <string>
#include <string_view>

#include "core/base/result.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"

namespace sealfs {

enum class MacCheck {
  authentic,    // signed by a listed key, and the MAC matches
  no_mac,       // no "mac" section
  unknown_key,  // signed by a key the key file does not list
  mismatch,     // the MAC does not match (changed, copied, or another place)
};

// The bytes a MAC covers (see above).
std::string mac_message(const Manifest& manifest, std::string_view place);
// Whether manifest is signed, for place, by a key of keys. An error only
// when OpenSSL fails (ENOMEM): no verdict.
Result<MacCheck> check_manifest_mac(const Manifest& manifest, const KeyRing& keys, std::string_view place);
// Signs manifest for place with keys' first key; with no keys, drops any MAC
// (a keyless writer changed it, so an old MAC would be stale anyway).
Status sign_manifest(Manifest& manifest, const KeyRing* keys, std::string_view place);
// "not signed", "signed by unknown key 'x'", … for a reason line.
std::string describe_mac(MacCheck check, const Manifest& manifest);

}  // namespace sealfs
