#include "core/manifest/manifest_mac.hpp"

#include <string>
#include <string_view>

#include "core/base/hmac.hpp"
#include "core/base/result.hpp"
#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kMacDomain = "sealfs-manifest-mac-v1\n";

}  // namespace

std::string mac_message(const Manifest& manifest, std::string_view place) {
  std::string out(kMacDomain);
  out += place;
  out += '\0';  // a place holds no NUL, so where it ends is never in doubt
  out += serialize_manifest(manifest, false);
  return out;
}

Result<MacCheck> check_manifest_mac(const Manifest& manifest, const KeyRing& keys, std::string_view place) {
  if (!manifest.mac) return MacCheck::no_mac;
  const ManifestKey* key = keys.find(manifest.mac->key);
  if (key == nullptr) return MacCheck::unknown_key;
  auto expected = hmac_sha256(key->secret, mac_message(manifest, place));
  if (!expected) return expected.error();
  return same_mac(*expected, manifest.mac->hmac) ? MacCheck::authentic : MacCheck::mismatch;
}

Status sign_manifest(Manifest& manifest, const KeyRing* keys, std::string_view place) {
  manifest.mac.reset();
  if (keys == nullptr) return {};
  const ManifestKey& signer = keys->signer();
  auto mac = hmac_sha256(signer.secret, mac_message(manifest, place));
  if (!mac) return mac.error();
  manifest.mac = ManifestMac{signer.id, *mac};
  return {};
}

std::string describe_mac(MacCheck check, const Manifest& manifest) {
  switch (check) {
    case MacCheck::authentic:
      return "signed by key '" + manifest.mac->key + "'";
    case MacCheck::no_mac:
      return "not signed";
    case MacCheck::unknown_key:
      return "signed by key '" + manifest.mac->key + "', which the key file does not list";
    case MacCheck::mismatch:
      return "its MAC by key '" + manifest.mac->key + "' does not match (changed, or made for another place)";
  }
  return "unknown";
}

}  // namespace sealfs
