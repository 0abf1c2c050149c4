// Fuzz target: discovery and structural validation of CUDA images over any
// bytes (host ELF, cubin, fatbin, PTX, anything else). Must never crash, and
// whatever it reports must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/cuda/cuda.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto scan = sealfs::cuda::scan_images(bytes);
  if (!scan.ok()) return 0;
  for (const auto& loadable : scan->loadables) {
    const auto* begin = loadable.bytes.data();
    if (begin < bytes.data() || begin + loadable.bytes.size() > bytes.data() + bytes.size()) std::abort();
  }
  static_cast<void>(sealfs::cuda::record_json(scan->images, "not-run"));
  return 0;
}
