// The CUDA fat binary container (.nv_fatbin, `nvcc -fatbin`), as nvcc 12/13
// writes it (field offsets confirmed against nvcc 13.0 output):
//
//   container header, 16 bytes:  u32 magic 0xBA55ED50 | u16 version (1) |
//                                u16 header_size (16) | u64 fat_size
//   then entries tiling fat_size, each:
//     +0  u16 kind (1 PTX, 2 ELF cubin, 8 LTO IR)   +2  u16 version (0x0101)
//     +4  u32 header_size (64, 80, 112, 120 seen)   +8  u64 payload_size
//     +16 u32 compressed_size (compressed entries)  +20 u32 (64 for PTX: address size)
//     +24 u16 minor, u16 major (PTX ISA / ELF ABI)  +28 u32 arch (SM number)
//     +32 u32 name offset, +36 u32 name length     +40 u64 flags
//     +48 u64 (0)                                   +56 u64 uncompressed size
//   payload_size bytes of payload follow the entry header.
//
// flags: 0x1 64-bit, 0x10 Linux, 0x2000 LZ4-compressed, 0x8000 compressed
// (zstd, CUDA 12.8+), 0x100000 arch-specific "a" target, 0x200000 family "f".
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"

namespace sealfs::cuda::detail {

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
inline constexpr std::uint16_t kFatbinVersion = 1;
inline constexpr std::uint16_t kFatbinHeaderSize = 16;
inline constexpr std::uint32_t kFatbinEntryMinHeader = 64;
inline constexpr std::uint32_t kFatbinEntryMaxHeader = 4096;

enum class FatbinKind : std::uint16_t { ptx = 1, elf = 2, lto = 8 };

inline constexpr std::uint64_t kFatbinFlag64Bit = 0x1;
inline constexpr std::uint64_t kFatbinFlagCompressedLz4 = 0x2000;
inline constexpr std::uint64_t kFatbinFlagCompressedZstd = 0x8000;
inline constexpr std::uint64_t kFatbinFlagArchSpecific = 0x100000;
inline constexpr std::uint64_t kFatbinFlagFamily = 0x200000;

// Compressed entries declaring more than this many times their compressed
// size are implausible (cubins and PTX compress 3–20×; this bounds a flipped
// size field without rejecting highly repetitive real code).
inline constexpr std::uint64_t kMaxCompressionRatio = 1024;
inline constexpr std::uint64_t kMaxUncompressedEntry = 4ull << 30;

struct FatbinEntry {
  FatbinKind kind = FatbinKind::elf;
  std::uint32_t arch = 0;
  std::uint64_t flags = 0;
  std::uint64_t payload_offset = 0;  // from the start of the container
  std::uint64_t payload_size = 0;
  bool compressed() const { return (flags & (kFatbinFlagCompressedLz4 | kFatbinFlagCompressedZstd)) != 0; }
};

struct Fatbin {
  std::uint64_t total_size = 0;  // header + fat_size: the container's length
  std::vector<FatbinEntry> entries;
};

// Magic, version 1 and a 16-byte header: 8 bytes that a fatbin found by
// scanning a data section must match before it is held to the format.
bool looks_like_fatbin(Bytes bytes);

// Validate the container at the start of `bytes` (which may extend past its
// end) and every entry: bounds, kinds, arches, compressed sizes, and each
// uncompressed cubin as an ELF image for EM_CUDA whose SM matches the entry.
// EBADMSG with the reason on any defect.
Result<Fatbin> parse_fatbin(Bytes bytes);

}  // namespace sealfs::cuda::detail
