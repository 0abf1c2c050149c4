// Fuzz target: the fatbin container parser. An accepted container and every
// entry's payload must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/cuda/fatbin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto fatbin = sealfs::cuda::detail::parse_fatbin(bytes);
  if (!fatbin.ok()) return 0;
  if (fatbin->total_size > size) std::abort();
  for (const auto& entry : fatbin->entries)
    if (!sealfs::cuda::detail::in_bounds(fatbin->total_size, entry.payload_offset, entry.payload_size))
      std::abort();
  return 0;
}
