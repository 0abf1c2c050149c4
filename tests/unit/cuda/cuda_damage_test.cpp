// CUDA image validation against damage (core/cuda/cuda.hpp): the fixtures of
// tests/fixtures/cuda cut short at every header boundary, and with flipped or
// overstated header fields; every damaged copy must be refused with EBADMSG.
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <set>

#include "tests/unit/cuda/cuda_fixtures.hpp"

namespace sealfs {
namespace {

using namespace test::cuda_fixtures;  // the helpers shared by the CUDA tests

// Offset of the first entry header, and of each later one, in a fatbin at `base`.
std::vector<std::size_t> fatbin_entry_offsets(const Bytes& b, std::size_t base) {
  std::vector<std::size_t> out;
  const std::size_t end = base + 16 + get<std::uint64_t>(b, base + 8);
  for (std::size_t at = base + 16; at < end;) {
    out.push_back(at);
    at += get<std::uint32_t>(b, at + 4) + get<std::uint64_t>(b, at + 8);
  }
  return out;
}

const Elf64_Shdr* find_section(const Bytes& b, std::string_view name) {
  const auto eh = get<Elf64_Ehdr>(b, 0);
  const auto* shdrs = reinterpret_cast<const Elf64_Shdr*>(b.data() + eh.e_shoff);
  const char* names = reinterpret_cast<const char*>(b.data() + shdrs[eh.e_shstrndx].sh_offset);
  for (unsigned i = 0; i < eh.e_shnum; ++i)
    if (name == names + shdrs[i].sh_name) return &shdrs[i];
  return nullptr;
}

// ---- truncation ------------------------------------------------------------------

TEST(CudaDamage, TruncatedCubinIsRejectedEverywhere) {
  const Bytes b = fixture("kernel_sm80.cubin");
  const auto eh = get<Elf64_Ehdr>(b, 0);
  std::set<std::size_t> cuts{1, 3, 4, 15, 16, sizeof(Elf64_Ehdr) - 1, sizeof(Elf64_Ehdr)};
  for (std::size_t d : {0, 1}) {
    cuts.insert(eh.e_shoff - d);
    cuts.insert(eh.e_phoff + d);
  }
  expect_all_truncations_rejected(b, cuts);
}

TEST(CudaDamage, TruncatedFatbinIsRejectedEverywhere) {
  const Bytes b = fixture("kernel_multi.fatbin");
  std::set<std::size_t> cuts{1, 4, 8, 15, 16, 17};
  for (std::size_t at : fatbin_entry_offsets(b, 0))
    for (std::size_t d : {0, 1, 8, 63, 64, 65}) cuts.insert(at + d);
  expect_all_truncations_rejected(b, cuts);
}

TEST(CudaDamage, TruncatedHostLibrariesAreRejectedEverywhere) {
  for (const char* name : {"kernel_lib.so", "kernel_blob.so"}) {
    SCOPED_TRACE(name);
    const Bytes b = fixture(name);
    std::set<std::size_t> cuts{sizeof(Elf64_Ehdr)};
    for (const char* sec : {".nv_fatbin", ".rodata"})
      if (const auto* sh = find_section(b, sec)) {
        cuts.insert(sh->sh_offset + 1);
        cuts.insert(sh->sh_offset + sh->sh_size / 2);
        cuts.insert(sh->sh_offset + sh->sh_size - 1);
      }
    expect_all_truncations_rejected(b, cuts);
  }
}

TEST(CudaDamage, TruncatedPtxBodyIsRejected) {
  const Bytes b = fixture("kernel_sm80.ptx");
  const std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
  const std::size_t open = text.find('{');
  ASSERT_NE(open, std::string_view::npos);
  for (std::size_t cut = open + 1; cut < text.rfind('}'); cut += 7)
    EXPECT_EQ(cuda::scan_images(truncated(b, cut)).code(), EBADMSG) << "cut at " << cut;
}

// ---- flipped and overstated header fields --------------------------------------

struct Patch {
  const char* what;
  std::function<void(Bytes&)> apply;
};

void expect_patches_rejected(const Bytes& sound, const std::vector<Patch>& patches) {
  ASSERT_TRUE(cuda::scan_images(sound).ok());
  for (const auto& patch : patches) {
    Bytes b = sound;
    patch.apply(b);
    auto scan = cuda::scan_images(b);
    EXPECT_EQ(scan.code(), EBADMSG) << patch.what << " was accepted";
  }
}

TEST(CudaDamage, FatbinHeaderDefectsAreRejected) {
  const Bytes sound = fixture("kernel_multi.fatbin");
  const auto entries = fatbin_entry_offsets(sound, 0);
  ASSERT_EQ(entries.size(), 3u);
  const std::size_t cubin = entries[0], ptx = entries[2];
  const std::size_t cubin_payload = cubin + get<std::uint32_t>(sound, cubin + 4);
  expect_patches_rejected(
      sound,
      {
          {"container version 2", [](Bytes& b) { put<std::uint16_t>(b, 4, 2); }},
          {"container header size 24", [](Bytes& b) { put<std::uint16_t>(b, 6, 24); }},
          {"fat size overstated", [](Bytes& b) { put<std::uint64_t>(b, 8, get<std::uint64_t>(b, 8) + 8); }},
          {"fat size understated", [](Bytes& b) { put<std::uint64_t>(b, 8, get<std::uint64_t>(b, 8) - 8); }},
          {"entry kind 3", [cubin](Bytes& b) { put<std::uint16_t>(b, cubin, 3); }},
          {"entry header size 63", [cubin](Bytes& b) { put<std::uint32_t>(b, cubin + 4, 63); }},
          {"entry header size huge", [cubin](Bytes& b) { put<std::uint32_t>(b, cubin + 4, 1u << 30); }},
          {"entry payload overstated",
           [cubin](Bytes& b) { put<std::uint64_t>(b, cubin + 8, get<std::uint64_t>(b, cubin + 8) + 8); }},
          {"entry payload 2^63", [cubin](Bytes& b) { put<std::uint64_t>(b, cubin + 8, 1ull << 63); }},
          {"entry arch 0", [cubin](Bytes& b) { put<std::uint32_t>(b, cubin + 28, 0); }},
          {"entry arch differs from its cubin", [cubin](Bytes& b) { put<std::uint32_t>(b, cubin + 28, 86); }},
          {"compressed size past payload",
           [ptx](Bytes& b) {
             put<std::uint32_t>(b, ptx + 16, static_cast<std::uint32_t>(get<std::uint64_t>(b, ptx + 8) + 1));
           }},
          {"uncompressed size implausible", [ptx](Bytes& b) { put<std::uint64_t>(b, ptx + 56, 1ull << 40); }},
          {"embedded cubin e_shoff past end",
           [cubin_payload](Bytes& b) {
             put<std::uint64_t>(b, cubin_payload + offsetof(Elf64_Ehdr, e_shoff), 1u << 20);
           }},
          {"embedded cubin ELF magic", [cubin_payload](Bytes& b) { b[cubin_payload + 1] = std::byte{'X'}; }},
      });
}

TEST(CudaDamage, CubinHeaderDefectsAreRejected) {
  const Bytes sound = fixture("kernel_sm80.cubin");
  const auto eh = get<Elf64_Ehdr>(sound, 0);
  auto field = [](std::size_t off, auto value) { return [off, value](Bytes& b) { put(b, off, value); }; };
  expect_patches_rejected(
      sound, {
                 {"class 3", [](Bytes& b) { b[EI_CLASS] = std::byte{3}; }},
                 {"data 0", [](Bytes& b) { b[EI_DATA] = std::byte{0}; }},
                 {"ident version 2", [](Bytes& b) { b[EI_VERSION] = std::byte{2}; }},
                 {"e_version 0", field(offsetof(Elf64_Ehdr, e_version), std::uint32_t{0})},
                 {"e_ehsize 60", field(offsetof(Elf64_Ehdr, e_ehsize), std::uint16_t{60})},
                 {"e_shentsize 40", field(offsetof(Elf64_Ehdr, e_shentsize), std::uint16_t{40})},
                 {"e_phentsize 50", field(offsetof(Elf64_Ehdr, e_phentsize), std::uint16_t{50})},
                 {"e_shoff past end", field(offsetof(Elf64_Ehdr, e_shoff), std::uint64_t{sound.size()})},
                 {"e_phoff past end", field(offsetof(Elf64_Ehdr, e_phoff), std::uint64_t{sound.size() - 8})},
                 {"e_shnum overstated", field(offsetof(Elf64_Ehdr, e_shnum), std::uint16_t(eh.e_shnum + 1))},
                 {"e_shstrndx out of range", field(offsetof(Elf64_Ehdr, e_shstrndx), eh.e_shnum)},
                 {"e_shstrndx not a string table", field(offsetof(Elf64_Ehdr, e_shstrndx), std::uint16_t{0})},
                 {"a section past the end",
                  [eh](Bytes& b) {
                    const std::size_t sh1 = eh.e_shoff + sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_size);
                    put<std::uint64_t>(b, sh1, b.size());
                  }},
             });
}

TEST(CudaDamage, HostLibraryWithDamagedNvFatbinIsRejected) {
  const Bytes sound = fixture("kernel_lib.so");
  const auto* sh = find_section(sound, ".nv_fatbin");
  ASSERT_NE(sh, nullptr);
  const std::size_t at = sh->sh_offset;
  const std::size_t size = sh->sh_size;
  expect_patches_rejected(
      sound,
      {
          {"fatbin magic", [at](Bytes& b) { b[at] = std::byte{0x51}; }},
          {"fat size past the section", [at, size](Bytes& b) { put<std::uint64_t>(b, at + 8, size); }},
          {"first entry's payload size",
           [at](Bytes& b) { put<std::uint64_t>(b, at + 16 + 8, get<std::uint64_t>(b, at + 16 + 8) * 2); }},
          {"a cubin's bytes zeroed", [at](Bytes& b) { std::memset(b.data() + at + 16 + 64, 0, 64); }},
      });
}

TEST(CudaDamage, EmbeddedBlobCubinWithOverstatedTablesIsRejected) {
  const Bytes sound = fixture("kernel_blob.so");
  const auto* rodata = find_section(sound, ".rodata");
  ASSERT_NE(rodata, nullptr);
  Bytes b = sound;
  // Where the scan found the blob cubin; point its section table past the
  // end of the section that holds it.
  std::size_t at = 0;
  {
    auto scan = cuda::scan_images(b);
    ASSERT_TRUE(scan.ok());
    for (const auto& l : scan->loadables)
      if (l.form == cuda::Loadable::Form::cubin) at = static_cast<std::size_t>(l.bytes.data() - b.data());
  }
  ASSERT_GE(at, rodata->sh_offset);
  put<std::uint64_t>(b, at + offsetof(Elf64_Ehdr, e_shoff), rodata->sh_size);
  EXPECT_EQ(cuda::scan_images(b).code(), EBADMSG);
}

}  // namespace
}  // namespace sealfs
