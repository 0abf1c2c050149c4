// Fuzz target: parse_manifest on any bytes must not crash, and an accepted
// manifest must survive a serialize/parse round trip unchanged, with the
// canonical bytes stable (serialize(parse(serialize(m))) == serialize(m)).
// The signed format too: checking any parsed manifest's MAC never crashes
// (and with an id the ring does not list is never authentic); a manifest
// signed here verifies after its own round trip, and not for another place.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/manifest/keys.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_mac.hpp"

namespace {

const sealfs::KeyRing& fuzz_keys() {
  static const sealfs::KeyRing ring = [] {
    std::vector<sealfs::ManifestKey> keys(2);
    keys[0].id = "fuzz";
    keys[1].id = "old";
    for (std::size_t i = 0; i < 32; ++i) {
      keys[0].secret[i] = static_cast<std::uint8_t>(i);
      keys[1].secret[i] = static_cast<std::uint8_t>(0x80 + i);
    }
    return sealfs::KeyRing(std::move(keys));
  }();
  return ring;
}

void check_signatures(const sealfs::Manifest& manifest) {
  const sealfs::KeyRing& ring = fuzz_keys();
  constexpr std::string_view kPlace = "ns/kernels/k";
  auto found = sealfs::check_manifest_mac(manifest, ring, kPlace);
  if (!found.ok()) std::abort();
  if (*found == sealfs::MacCheck::authentic && ring.find(manifest.mac->key) == nullptr) std::abort();
  sealfs::Manifest signed_copy = manifest;
  if (!sealfs::sign_manifest(signed_copy, &ring, kPlace).ok()) std::abort();
  auto back = sealfs::parse_manifest(sealfs::serialize_manifest(signed_copy));
  if (!back.ok() || !(*back == signed_copy)) std::abort();
  auto again = sealfs::check_manifest_mac(*back, ring, kPlace);
  if (!again.ok() || *again != sealfs::MacCheck::authentic) std::abort();
  auto elsewhere = sealfs::check_manifest_mac(*back, ring, "ns/kernels/other");
  if (!elsewhere.ok() || *elsewhere != sealfs::MacCheck::mismatch) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto manifest = sealfs::parse_manifest(json);
  if (!manifest.ok()) return 0;
  const std::string canonical = sealfs::serialize_manifest(*manifest);
  auto again = sealfs::parse_manifest(canonical);
  if (!again.ok()) std::abort();
  if (!(*again == *manifest)) std::abort();
  if (sealfs::serialize_manifest(*again) != canonical) std::abort();
  check_signatures(*manifest);
  return 0;
}
