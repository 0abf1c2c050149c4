// ELF structural validation for host libraries and cubins (see elf_reader.hpp).
#include "core/cuda/elf_reader.hpp"

#include <elf.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"

namespace sealfs::cuda::detail {
namespace {

constexpr unsigned char kElfMagic[] = {0x7f, 'E', 'L', 'F'};

Error damaged(std::string what) { return make_error(EBADMSG, "ELF: " + std::move(what)); }

// Class-specific header types, so one template walks ELF32 and ELF64.
struct Elf32Types {
  using Ehdr = Elf32_Ehdr;
  using Shdr = Elf32_Shdr;
  using Phdr = Elf32_Phdr;
};
struct Elf64Types {
  using Ehdr = Elf64_Ehdr;
  using Shdr = Elf64_Shdr;
  using Phdr = Elf64_Phdr;
};

struct Range {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;  // callers checked offset + size for overflow
};
bool overlap(Range a, Range b) {
  return a.size != 0 && b.size != 0 && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

// The steps of parse_class, in the order the checks must run (each error
// message names the first defect found).

void cover(ElfInfo& info, std::uint64_t end) {
  if (end > info.extent) info.extent = end;
}

// The ELF header's own fields, and what ElfInfo takes from them.
template <class Types>
Result<ElfInfo> check_header(const typename Types::Ehdr& eh) {
  // Host ELF files carry EV_CURRENT. Cubins reuse the field for the CUDA ELF
  // ABI revision (ptxas 12.9 writes 129 with ABI version 7; nvcc 13 writes 1),
  // so for EM_CUDA only 0 (EV_NONE) is a defect.
  if (eh.e_machine == kEmCuda ? eh.e_version == EV_NONE : eh.e_version != EV_CURRENT)
    return damaged("unknown e_version");
  if (eh.e_ehsize != sizeof(typename Types::Ehdr)) return damaged("bad e_ehsize");
  ElfInfo info;
  info.is64 = sizeof(typename Types::Ehdr) == sizeof(Elf64_Ehdr);
  info.machine = eh.e_machine;
  info.e_flags = eh.e_flags;
  info.abi_version = eh.e_ident[EI_ABIVERSION];
  info.extent = sizeof(typename Types::Ehdr);
  return info;
}

// Program headers: the table and every segment's file bytes.
template <class Types>
Status check_segments(Bytes bytes, const typename Types::Ehdr& eh, ElfInfo& info) {
  using Phdr = typename Types::Phdr;
  if (eh.e_phnum == 0) return {};
  if (eh.e_phentsize != sizeof(Phdr)) return damaged("bad e_phentsize");
  const std::uint64_t table = std::uint64_t{eh.e_phnum} * sizeof(Phdr);
  if (!in_bounds(bytes.size(), eh.e_phoff, table))
    return damaged("program header table outside the file (truncated?)");
  cover(info, eh.e_phoff + table);
  for (std::uint64_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_at<Phdr>(bytes, eh.e_phoff + i * sizeof(Phdr));
    if (!ph) return damaged("truncated program header");
    if (!in_bounds(bytes.size(), ph->p_offset, ph->p_filesz))
      return damaged("segment " + std::to_string(i) + " outside the file (truncated?)");
    if (ph->p_type == PT_LOAD && ph->p_filesz > ph->p_memsz)
      return damaged("segment larger on file than in memory");
    cover(info, ph->p_offset + ph->p_filesz);
  }
  return {};
}

// Where the section headers are, with extended numbering resolved.
struct SectionTable {
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  std::uint64_t names_index = 0;  // the section name string table
};

// The section header table lies inside the bytes and overlaps no other header.
template <class Types>
Result<SectionTable> locate_sections(Bytes bytes, const typename Types::Ehdr& eh, ElfInfo& info) {
  using Shdr = typename Types::Shdr;
  if (eh.e_shentsize != sizeof(Shdr)) return damaged("bad e_shentsize");
  const auto first = read_at<Shdr>(bytes, eh.e_shoff);
  if (!first) return damaged("section header table outside the file (truncated?)");
  // Extended numbering: counts too big for the header live in section 0.
  const SectionTable sections{eh.e_shoff, eh.e_shnum != 0 ? eh.e_shnum : first->sh_size,
                              eh.e_shstrndx != SHN_XINDEX ? eh.e_shstrndx : first->sh_link};
  if (sections.count == 0) return damaged("empty section header table");
  if (sections.count > bytes.size() / sizeof(Shdr)) return damaged("section count larger than the file");
  const std::uint64_t table = sections.count * sizeof(Shdr);
  if (!in_bounds(bytes.size(), eh.e_shoff, table))
    return damaged("section header table outside the file (truncated?)");
  cover(info, eh.e_shoff + table);
  if (sections.names_index == SHN_UNDEF || sections.names_index >= sections.count)
    return damaged("bad section name string table index");
  // Real linkers never overlap the headers, the two tables and the sections;
  // an overlap means a count or offset was overstated into other data.
  const Range ehdr{0, sizeof(typename Types::Ehdr)};
  const Range shdr_table{eh.e_shoff, table};
  const Range phdr_table{eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(typename Types::Phdr)};
  if (overlap(shdr_table, ehdr) || overlap(shdr_table, phdr_table))
    return damaged("section header table overlaps another header table");
  return sections;
}

// Every section's bytes lie inside the file, clear of the ELF header and the
// section header table.
template <class Types>
Status check_section_bounds(Bytes bytes, const SectionTable& sections, ElfInfo& info) {
  using Shdr = typename Types::Shdr;
  const Range ehdr{0, sizeof(typename Types::Ehdr)};
  const Range shdr_table{sections.offset, sections.count * sizeof(Shdr)};
  for (std::uint64_t i = 0; i < sections.count; ++i) {
    const auto sh = read_at<Shdr>(bytes, sections.offset + i * sizeof(Shdr));
    if (!sh) return damaged("truncated section header");
    if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL) continue;
    if (!in_bounds(bytes.size(), sh->sh_offset, sh->sh_size))
      return damaged("section " + std::to_string(i) + " outside the file (truncated?)");
    const Range bytes_range{sh->sh_offset, sh->sh_size};
    if (overlap(bytes_range, ehdr) || overlap(bytes_range, shdr_table))
      return damaged("section " + std::to_string(i) + " overlaps the ELF header or section table");
    cover(info, sh->sh_offset + sh->sh_size);
  }
  return {};
}

// Every section name lies inside the name string table and ends there; with
// ElfDetail::sections the list goes into info. Needs check_section_bounds
// first (the table's headers and the string table are then in bounds).
template <class Types>
Status read_section_names(Bytes bytes, const SectionTable& sections, ElfDetail detail, ElfInfo& info) {
  using Shdr = typename Types::Shdr;
  const auto section_header = [&](std::uint64_t i) {
    return *read_at<Shdr>(bytes, sections.offset + i * sizeof(Shdr));
  };
  const Shdr strtab = section_header(sections.names_index);
  if (strtab.sh_type != SHT_STRTAB) return damaged("section name table is not a string table");
  const std::string_view names(reinterpret_cast<const char*>(bytes.data() + strtab.sh_offset),
                               strtab.sh_size);
  if (detail == ElfDetail::sections) info.sections.reserve(sections.count);
  for (std::uint64_t i = 0; i < sections.count; ++i) {
    const Shdr sh = section_header(i);
    if (sh.sh_name >= names.size() && !(i == 0 && sh.sh_name == 0))
      return damaged("section name outside the name table");
    std::string_view name;
    if (sh.sh_name < names.size()) {
      name = names.substr(sh.sh_name);
      const auto nul = name.find('\0');
      if (nul == std::string_view::npos) return damaged("unterminated section name");
      name = name.substr(0, nul);
    }
    if (detail == ElfDetail::sections)
      info.sections.push_back(
          ElfSection{std::string(name), sh.sh_type, sh.sh_flags, sh.sh_offset, sh.sh_size});
  }
  return {};
}

template <class Types>
Result<ElfInfo> parse_class(Bytes bytes, ElfDetail detail) {
  const auto eh = read_at<typename Types::Ehdr>(bytes, 0);
  if (!eh) return damaged("truncated inside the ELF header");
  auto info = check_header<Types>(*eh);
  if (!info) return info;
  if (auto st = check_segments<Types>(bytes, *eh, *info); !st) return st.error();
  if (eh->e_shoff == 0) {
    // No section header table (allowed, e.g. by sstrip); then no sections.
    if (eh->e_shnum != 0 || eh->e_shstrndx != SHN_UNDEF) return damaged("sections declared without a table");
    return info;
  }
  auto sections = locate_sections<Types>(bytes, *eh, *info);
  if (!sections) return sections.error();
  if (auto st = check_section_bounds<Types>(bytes, *sections, *info); !st) return st.error();
  if (auto st = read_section_names<Types>(bytes, *sections, detail, *info); !st) return st.error();
  return info;
}

}  // namespace

bool has_elf_magic(Bytes bytes) { return starts_with(bytes, kElfMagic); }

bool looks_like_cubin(Bytes bytes) {
  if (!has_elf_magic(bytes) || bytes.size() < EI_NIDENT + 4) return false;
  const auto cls = static_cast<unsigned char>(bytes[EI_CLASS]);
  if ((cls != ELFCLASS32 && cls != ELFCLASS64) || static_cast<unsigned char>(bytes[EI_DATA]) != ELFDATA2LSB ||
      static_cast<unsigned char>(bytes[EI_VERSION]) != EV_CURRENT)
    return false;
  const auto machine = read_at<std::uint16_t>(bytes, EI_NIDENT + 2);  // e_machine follows e_type
  return machine && *machine == kEmCuda;
}

Result<ElfInfo> parse_elf(Bytes bytes, ElfDetail detail) {
  if (bytes.size() < EI_NIDENT) return damaged("truncated inside e_ident");
  if (!has_elf_magic(bytes)) return damaged("no ELF magic");
  if (static_cast<unsigned char>(bytes[EI_VERSION]) != EV_CURRENT) return damaged("unknown ELF version");
  switch (static_cast<unsigned char>(bytes[EI_DATA])) {
    case ELFDATA2LSB:
      break;
    case ELFDATA2MSB:
      return make_error(ENOTSUP, "ELF: big-endian image not inspected");
    default:
      return damaged("bad data encoding");
  }
  switch (static_cast<unsigned char>(bytes[EI_CLASS])) {
    case ELFCLASS64:
      return parse_class<Elf64Types>(bytes, detail);
    case ELFCLASS32:
      return parse_class<Elf32Types>(bytes, detail);
    default:
      return damaged("bad ELF class");
  }
}

unsigned cubin_sm(const ElfInfo& elf) {
  constexpr std::uint8_t kAbiV2 = 8;  // ELFABIVERSION_CUDA_V2: SM moved to bits 8..15
  return elf.abi_version >= kAbiV2 ? (elf.e_flags >> 8) & 0xffu : elf.e_flags & 0xffu;
}

}  // namespace sealfs::cuda::detail
