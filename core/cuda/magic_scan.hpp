// Finding candidate device images in data by magic number, fast enough for
// a 100 MB library (one pass, 16 bytes at a time where SSE2 exists).
#pragma once

#include <cstdint>

#include "core/cuda/byte_reader.hpp"

namespace sealfs::cuda::detail {

// The 4-byte magic numbers sought: a fatbin (0xBA55ED50, little-endian) and an
// ELF image (a cubin when its e_machine says so).
inline constexpr unsigned char kFatbinMagicBytes[] = {0x50, 0xed, 0x55, 0xba};
inline constexpr unsigned char kElfMagicBytes[] = {0x7f, 'E', 'L', 'F'};

// Offset of the first position at or after `from` where either magic starts,
// or bytes.size() when there is none.
std::uint64_t find_next_magic(Bytes bytes, std::uint64_t from);

}  // namespace sealfs::cuda::detail
