// Fuzz target: the ELF structural reader. An accepted image's extent and
// sections must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/cuda/elf_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto elf = sealfs::cuda::detail::parse_elf(bytes);
  if (!elf.ok()) return 0;
  if (elf->extent > size) std::abort();
  for (const auto& section : elf->sections)
    if (section.type != 8 /* SHT_NOBITS */ && section.type != 0 &&
        !sealfs::cuda::detail::in_bounds(size, section.offset, section.size))
      std::abort();
  return 0;
}
