// Fuzz target: parse_manifest on any bytes must not crash, and an accepted
// manifest must survive a serialize/parse round trip unchanged, with the
// canonical bytes stable (serialize(parse(serialize(m))) == serialize(m)).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/manifest/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto manifest = sealfs::parse_manifest(json);
  if (!manifest.ok()) return 0;
  const std::string canonical = sealfs::serialize_manifest(*manifest);
  auto again = sealfs::parse_manifest(canonical);
  if (!again.ok()) std::abort();
  if (!(*again == *manifest)) std::abort();
  if (sealfs::serialize_manifest(*again) != canonical) std::abort();
  return 0;
}
