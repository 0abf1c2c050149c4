// Structural check of an ELF file held in memory: a host library or a cubin.
// Reads headers only; a defect (truncation, a table or section outside the
// bytes, a bad string table) is EBADMSG with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"

namespace sealfs::cuda::detail {

inline constexpr std::uint16_t kEmCuda = 190;  // e_machine of a cubin

struct ElfSection {
  std::string name;
  std::uint32_t type = 0;   // SHT_*
  std::uint64_t flags = 0;  // SHF_*
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

struct ElfInfo {
  bool is64 = true;
  std::uint16_t machine = 0;  // EM_*
  std::uint32_t e_flags = 0;
  std::uint8_t abi_version = 0;  // e_ident[EI_ABIVERSION]
  // End of the last byte any header, table, section or segment refers to:
  // the length of an ELF image embedded in a larger blob.
  std::uint64_t extent = 0;
  std::vector<ElfSection> sections;  // index order, SHT_NULL included
};

// "\x7f" "ELF" at the start.
bool has_elf_magic(Bytes bytes);
// ELF magic, a known class, little-endian, version 1 and e_machine EM_CUDA:
// how an embedded cubin is recognised inside a data blob.
bool looks_like_cubin(Bytes bytes);

// What parse_elf hands back: cubins inside fatbins need only the header
// fields, host libraries also the section list (which costs allocations).
enum class ElfDetail { headers, sections };

// Validate the ELF image at the start of `bytes`; everything it refers to must
// lie inside `bytes`. Every section is checked either way; `detail` only says
// whether ElfInfo::sections is filled. Big-endian images are ENOTSUP (no CUDA
// target uses them).
Result<ElfInfo> parse_elf(Bytes bytes, ElfDetail detail = ElfDetail::sections);

// The SM number a cubin's e_flags carry: bits 8..15 from ELF ABI version 8
// on (CUDA 12.8+ and 13: sm_90 → 0x...5a..), bits 0..7 before.
unsigned cubin_sm(const ElfInfo& elf);

}  // namespace sealfs::cuda::detail
