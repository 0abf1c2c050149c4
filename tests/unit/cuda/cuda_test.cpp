// CUDA image discovery and validation (core/cuda/cuda.hpp): real images from
// tests/fixtures/cuda (made by nvcc, see regenerate.sh), damaged copies of
// them, plain host libraries, the validator, cuda-check, and (when nvcc is
// installed) images compiled at test time.
#include "core/cuda/cuda.hpp"

#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "core/base/unique_fd.hpp"
#include "core/cuda/elf_reader.hpp"
#include "core/cuda/fatbin.hpp"
#include "core/cuda/file_bytes.hpp"
#include "core/cuda/magic_scan.hpp"
#include "core/cuda/ptx_text.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/store.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

fs::path fixture_dir() {
  return fs::path(__FILE__).parent_path().parent_path().parent_path() / "fixtures" / "cuda";
}

Bytes to_bytes(std::string_view s) {
  Bytes out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

Bytes fixture(std::string_view name) {
  const auto content = test::read_file((fixture_dir() / name).string());
  EXPECT_TRUE(content.has_value()) << "missing fixture " << name;
  return to_bytes(content.value_or(""));
}

template <class T>
T get(const Bytes& b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void put(Bytes& b, std::size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

std::vector<std::string> arch_names(const cuda::Scan& scan) {
  std::vector<std::string> out;
  for (const auto& image : scan.images) out.push_back(image.arch_name());
  return out;
}

Bytes truncated(const Bytes& b, std::size_t n) {
  return Bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
}

// Every 1/64th of the file, plus extra cut points (header boundaries ±1).
void expect_all_truncations_rejected(const Bytes& whole, std::set<std::size_t> extra = {}) {
  for (std::size_t i = 0; i < 64; ++i) extra.insert(whole.size() * i / 64);
  extra.insert(whole.size() - 1);
  for (std::size_t cut : extra) {
    if (cut >= whole.size()) continue;
    auto scan = cuda::scan_images(truncated(whole, cut));
    EXPECT_FALSE(scan.ok()) << "a cut at " << cut << " of " << whole.size() << " was accepted";
    if (!scan.ok()) {
      EXPECT_EQ(scan.code(), EBADMSG);
    }
  }
}

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

// Run the validator over bytes written to a file named `name`.
ValidationOutcome validate(const Bytes& content, std::string_view name,
                           std::string_view mode = "structural") {
  test::TempDir dir("sealfs-cuda");
  const std::string path = dir / name;
  test::write_file(path, std::string_view(reinterpret_cast<const char*>(content.data()), content.size()));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  EXPECT_TRUE(fd.valid());
  return cuda::make_validator(mode)(fd.get(), name);
}

// ---- standalone images -------------------------------------------------------

TEST(CudaScan, CubinReportsItsSmFromEFlags) {
  auto scan = cuda::scan_images(fixture("kernel_sm80.cubin"));
  ASSERT_TRUE(scan.ok()) << scan.error().message;
  EXPECT_EQ(arch_names(*scan), (std::vector<std::string>{"sm_80"}));
  ASSERT_EQ(scan->loadables.size(), 1u);
  EXPECT_EQ(scan->loadables[0].form, cuda::Loadable::Form::cubin);
  EXPECT_EQ(scan->loadables[0].bytes.size(), fixture("kernel_sm80.cubin").size());
}

// ptxas 12.9 (the one Triton's wheel ships) writes e_version 129 and ELF ABI
// version 7 into cubins; such a cubin is sound and its SM sits in e_flags' low byte.
TEST(CudaScan, Ptxas129CubinWithCudaEVersionIsSound) {
  const Bytes b = fixture("kernel_sm80_ptxas129.cubin");
  ASSERT_EQ(get<Elf64_Ehdr>(b, 0).e_version, 129u);
  auto scan = cuda::scan_images(b);
  ASSERT_TRUE(scan.ok()) << scan.error().message;
  EXPECT_EQ(arch_names(*scan), (std::vector<std::string>{"sm_80"}));
  Bytes zeroed = b;
  put(zeroed, offsetof(Elf64_Ehdr, e_version), std::uint32_t{0});
  EXPECT_EQ(cuda::scan_images(zeroed).code(), EBADMSG);
}

TEST(CudaScan, MultiArchFatbinListsCubinsAndCompressedPtx) {
  auto scan = cuda::scan_images(fixture("kernel_multi.fatbin"));
  ASSERT_TRUE(scan.ok()) << scan.error().message;
  EXPECT_EQ(arch_names(*scan), (std::vector<std::string>{"sm_80", "sm_90", "compute_90"}));
  EXPECT_FALSE(scan->images[0].compressed);
  EXPECT_TRUE(scan->images[2].compressed);  // nvcc 13 compresses the PTX entry
  ASSERT_EQ(scan->loadables.size(), 1u);
  EXPECT_EQ(scan->loadables[0].form, cuda::Loadable::Form::fatbin);
}

TEST(CudaScan, PtxTextReportsComputeArch) {
  auto scan = cuda::scan_images(fixture("kernel_sm80.ptx"));
  ASSERT_TRUE(scan.ok()) << scan.error().message;
  EXPECT_EQ(arch_names(*scan), (std::vector<std::string>{"compute_80"}));
  EXPECT_EQ(scan->images[0].kind, cuda::ImageKind::ptx);
}

TEST(CudaScan, NvccHostLibraryFatbinsInNvFatbinSection) {
  auto scan = cuda::scan_images(fixture("kernel_lib.so"));
  ASSERT_TRUE(scan.ok()) << scan.error().message;
  const auto names = arch_names(*scan);
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique, (std::set<std::string>{"sm_80", "sm_90", "compute_90"}));
  ASSERT_FALSE(scan->loadables.empty());
  for (const auto& l : scan->loadables) {
    EXPECT_EQ(l.form, cuda::Loadable::Form::fatbin);
    EXPECT_NE(l.where.find(".nv_fatbin"), std::string::npos) << l.where;
  }
}

TEST(CudaScan, DeviceCodeEmbeddedAsDataIsFoundByMagic) {
  auto scan = cuda::scan_images(fixture("kernel_blob.so"));
  ASSERT_TRUE(scan.ok()) << scan.error().message;
  // The raw cubin and the fatbin (whose own cubins are not counted twice),
  // in whatever order the linker laid them out.
  auto names = arch_names(*scan);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"compute_90", "sm_80", "sm_80", "sm_90"}));
  ASSERT_EQ(scan->loadables.size(), 2u);
  std::multiset<std::pair<cuda::Loadable::Form, std::size_t>> found;
  for (const auto& l : scan->loadables) found.emplace(l.form, l.bytes.size());
  EXPECT_EQ(found, (std::multiset<std::pair<cuda::Loadable::Form, std::size_t>>{
                       {cuda::Loadable::Form::fatbin, fixture("kernel_multi.fatbin").size()},
                       {cuda::Loadable::Form::cubin, fixture("kernel_sm80.cubin").size()}}));
}

// ---- plain files ---------------------------------------------------------------

TEST(CudaScan, PlainHostLibrariesAreSoundWithoutImages) {
  for (const char* lib : {"/lib/x86_64-linux-gnu/libm.so.6", "/proc/self/exe"}) {
    auto content = test::read_file(lib);
    if (!content) continue;
    auto scan = cuda::scan_images(to_bytes(*content));
    ASSERT_TRUE(scan.ok()) << lib << ": " << scan.error().message;
    EXPECT_TRUE(scan->images.empty()) << lib;
  }
}

TEST(CudaScan, NonCudaContentHasNoImages) {
  auto scan = cuda::scan_images(to_bytes("just some bytes of a file"));
  ASSERT_TRUE(scan.ok());
  EXPECT_TRUE(scan->images.empty());
}

TEST(CudaScan, EmptyAndCutMagicAreRejected) {
  EXPECT_EQ(cuda::scan_images(Bytes{}).code(), EBADMSG);
  EXPECT_EQ(cuda::scan_images(to_bytes("\x7f"
                                       "E"))
                .code(),
            EBADMSG);
  EXPECT_EQ(cuda::scan_images(to_bytes("\x50\xed\x55")).code(), EBADMSG);
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

// ---- reading files ----------------------------------------------------------------------

TEST(CudaFileBytes, ReadsSmallFilesWholeAndRefusesNonFiles) {
  test::TempDir dir("sealfs-cuda-bytes");
  test::write_file(dir / "f", "0123456789");
  test::write_file(dir / "empty", "");
  UniqueFd f(::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  auto bytes = cuda::detail::FileBytes::load(f.get());
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  ASSERT_EQ(bytes->bytes().size(), 10u);
  EXPECT_EQ(std::memcmp(bytes->bytes().data(), "0123456789", 10), 0);
  // The view outlives the fd and survives a move.
  f.reset();
  cuda::detail::FileBytes moved = std::move(*bytes);
  EXPECT_EQ(static_cast<char>(moved.bytes()[9]), '9');

  UniqueFd empty(::open((dir / "empty").c_str(), O_RDONLY | O_CLOEXEC));
  auto none = cuda::detail::FileBytes::load(empty.get());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->bytes().empty());

  UniqueFd d(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(cuda::detail::FileBytes::load(d.get()).code(), EINVAL);
  EXPECT_EQ(cuda::detail::FileBytes::load(-1).code(), EBADF);
}

// ---- magic search -------------------------------------------------------------------

TEST(CudaMagicScan, FindsEitherMagicAtEveryOffsetAndLength) {
  // Every placement around the 16-byte SIMD blocks and the buffer's end.
  for (std::size_t size = 4; size <= 70; ++size) {
    for (std::size_t at = 0; at + 4 <= size; ++at) {
      for (const auto* magic : {cuda::detail::kFatbinMagicBytes, cuda::detail::kElfMagicBytes}) {
        Bytes b(size, std::byte{0x7f});  // first bytes of a magic everywhere: near misses
        std::memcpy(b.data() + at, magic, 4);
        ASSERT_EQ(cuda::detail::find_next_magic(b, 0), at) << "size " << size << " at " << at;
        ASSERT_EQ(cuda::detail::find_next_magic(b, at + 1), size) << "size " << size << " at " << at;
      }
    }
  }
  Bytes cut{std::byte{0x50}, std::byte{0xed}, std::byte{0x55}};
  EXPECT_EQ(cuda::detail::find_next_magic(cut, 0), cut.size());
  EXPECT_EQ(cuda::detail::find_next_magic(Bytes{}, 0), 0u);
}

// ---- PTX --------------------------------------------------------------------------

TEST(CudaPtx, ChecksDirectivesAndBalance) {
  EXPECT_TRUE(cuda::detail::check_ptx(".version 8.0\n.target sm_90a\n.entry k() { ret; }\n").ok());
  EXPECT_EQ(cuda::detail::check_ptx(".version 8.0\n.target sm_90a\n")->suffix, "a");
  EXPECT_EQ(cuda::detail::check_ptx(".version 8.0\n.entry k() { ret; }\n").code(), EBADMSG);  // no .target
  EXPECT_EQ(cuda::detail::check_ptx(".target sm_80\n").code(), EBADMSG);                      // no .version
  EXPECT_EQ(cuda::detail::check_ptx(".version 8.0\n.target sm_80\n}{").code(), EBADMSG);
  EXPECT_EQ(cuda::detail::check_ptx(".version 8.0\n.target sm_80\n/* cut").code(), EBADMSG);
  EXPECT_EQ(cuda::detail::check_ptx(std::string_view(".version 8.0\n\0.target sm_80\n", 27)).code(), EBADMSG);
  EXPECT_EQ(cuda::detail::check_ptx(".version 8.0\n.target compute_80\n").code(), EBADMSG);
}

// ---- the validator and the manifest record ----------------------------------------

TEST(CudaValidator, RecordsArchitecturesCanonically) {
  const auto outcome = validate(fixture("kernel_multi.fatbin"), "k.fatbin");
  EXPECT_TRUE(outcome.accepted) << outcome.reason;
  EXPECT_EQ(outcome.record_json,
            R"({"driver":"not-run","images":[{"arch":"sm_80","kind":"elf"},{"arch":"sm_90","kind":"elf"},)"
            R"({"arch":"compute_90","kind":"ptx"}]})");
}

TEST(CudaValidator, RejectsTruncatedLibraryWithReason) {
  const Bytes b = fixture("kernel_lib.so");
  const auto outcome = validate(truncated(b, b.size() / 2), "kernel_lib.so");
  EXPECT_FALSE(outcome.accepted);
  EXPECT_NE(outcome.reason.find("kernel_lib.so"), std::string::npos) << outcome.reason;
  EXPECT_TRUE(outcome.record_json.empty());
}

TEST(CudaValidator, LibraryWithoutImagesIsAcceptedWithNothingToRecord) {
  const auto outcome = validate(to_bytes("not an ELF file at all"), "kernel_lib.so");
  EXPECT_TRUE(outcome.accepted) << outcome.reason;
  EXPECT_TRUE(outcome.record_json.empty());
}

TEST(CudaValidator, FileNamedAsDeviceImageMustHoldOne) {
  EXPECT_FALSE(validate(to_bytes("garbage"), "k.cubin").accepted);
  EXPECT_FALSE(validate(to_bytes("garbage"), "k.fatbin").accepted);
  Bytes flipped = fixture("kernel_multi.fatbin");
  flipped[0] = std::byte{0};  // magic gone: unrecognisable, and named .fatbin
  EXPECT_FALSE(validate(flipped, "k.fatbin").accepted);
}

TEST(CudaValidator, OffAcceptsAnythingAndRecordsNothing) {
  const auto outcome = validate(to_bytes("\x7f"
                                         "ELF"),
                                "kernel_lib.so", "off");
  EXPECT_TRUE(outcome.accepted);
  EXPECT_TRUE(outcome.record_json.empty());
}

TEST(CudaValidator, DriverModeWithoutDriverStillRejectsDamageAndSaysNotRun) {
  // On machines without libcuda.so.1 this exercises the "structural only"
  // path; where a GPU exists the record says "loaded" or "not-validated…".
  const auto sound = validate(fixture("kernel_sm80.cubin"), "k.cubin", "driver");
  EXPECT_TRUE(sound.accepted) << sound.reason;
  EXPECT_NE(sound.record_json.find("\"arch\":\"sm_80\""), std::string::npos);
  const Bytes b = fixture("kernel_sm80.cubin");
  EXPECT_FALSE(validate(truncated(b, b.size() - 10), "k.cubin", "driver").accepted);
}

TEST(CudaValidator, ModesParse) {
  EXPECT_EQ(*cuda::parse_mode("off"), cuda::Mode::off);
  EXPECT_EQ(*cuda::parse_mode("structural"), cuda::Mode::structural);
  EXPECT_EQ(*cuda::parse_mode("driver"), cuda::Mode::driver);
  EXPECT_EQ(cuda::parse_mode("Driver").code(), EINVAL);
  EXPECT_EQ(cuda::parse_mode("").code(), EINVAL);
}

TEST(CudaValidator, RegisteredByDefault) {
  const auto registry = default_validators("structural");
  ASSERT_TRUE(registry.has("cuda"));
}

TEST(CudaRecord, SortedAndDeduplicated) {
  const std::vector<cuda::ImageInfo> images{{cuda::ImageKind::ptx, 80, "", true},
                                            {cuda::ImageKind::elf, 90, "a", false},
                                            {cuda::ImageKind::elf, 90, "a", false}};
  EXPECT_EQ(
      cuda::record_json(images, "loaded"),
      R"({"driver":"loaded","images":[{"arch":"sm_90a","kind":"elf"},{"arch":"compute_80","kind":"ptx"}]})");
}

// ---- through a Store publish (R1) -----------------------------------------------------

// A TileLang-style save: files in <ns>/.staging/<key>_<pid>_<rand>/, then
// the directory renamed to <ns>/kernels/<key> through the store.
class CudaPublish : public ::testing::Test {
 protected:
  void SetUp() override {
    test::make_dirs(dir_ / "ns/.staging");
    test::make_dirs(dir_ / "ns/kernels");
    auto profile = builtin_profile("tilelang");
    ASSERT_TRUE(profile.ok());
    StoreOptions options;
    options.durability = Durability::none;
    options.validators = default_validators("structural");
    auto store = Store::open_backing(dir_.path(), std::move(*profile), std::move(options));
    ASSERT_TRUE(store.ok()) << store.error().message;
    store_ = std::move(*store);
  }

  void stage(const std::string& name, const Bytes& kernel_lib) {
    const std::string d = dir_ / ("ns/.staging/" + name);
    test::make_dirs(d);
    test::write_file(d + "/kernel_lib.so",
                     std::string_view(reinterpret_cast<const char*>(kernel_lib.data()), kernel_lib.size()));
    test::write_file(d + "/params.pkl", "pickled params");
    test::write_file(d + "/device_kernel.cu", "__global__ void k() {}");
    test::write_file(d + "/host_kernel.cu", "int main() {}");
  }

  Found dir(std::string_view a, std::string_view b = {}) {
    auto root = store_->root();
    EXPECT_TRUE(root.ok());
    auto first = store_->lookup(root->fd.get(), a);
    EXPECT_TRUE(first.ok()) << a;
    if (b.empty() || !first.ok()) return std::move(*first);
    auto second = store_->lookup(first->fd.get(), b);
    EXPECT_TRUE(second.ok()) << b;
    return std::move(*second);
  }

  Status publish(const std::string& staged, const std::string& key) {
    Found staging = dir("ns", ".staging");
    Found kernels = dir("ns", "kernels");
    return store_->rename(staging.fd.get(), staged, kernels.fd.get(), key, 0);
  }

  test::TempDir dir_{"sealfs-cuda-publish"};
  std::unique_ptr<Store> store_;
};

TEST_F(CudaPublish, TruncatedKernelLibraryIsRefusedAndNothingBecomesVisible) {
  const Bytes lib = fixture("kernel_lib.so");
  stage("k_1_2", truncated(lib, lib.size() - 4096));
  EXPECT_EQ(publish("k_1_2", "k").code(), EBADMSG);
  Found kernels = dir("ns", "kernels");
  EXPECT_EQ(store_->lookup(kernels.fd.get(), "k").code(), ENOENT);
  EXPECT_FALSE(test::exists_nofollow(dir_ / "ns/kernels/k"));
  EXPECT_TRUE(
      test::exists_nofollow(dir_ / "ns/.staging/k_1_2/kernel_lib.so"));  // left for the writer to clean
}

TEST_F(CudaPublish, SoundKernelLibraryPublishesAndTheManifestRecordsArchitectures) {
  stage("k_3_4", fixture("kernel_lib.so"));
  const Status st = publish("k_3_4", "k");
  ASSERT_TRUE(st.ok()) << st.error().message;
  Found kernels = dir("ns", "kernels");
  auto entry = store_->lookup(kernels.fd.get(), "k");
  ASSERT_TRUE(entry.ok()) << entry.error().message;
  EXPECT_EQ(entry->kind, ObjectKind::entry_root);
  const auto text = test::read_file(dir_ / "ns/kernels/k/.sealfs-manifest");
  ASSERT_TRUE(text.has_value());
  auto manifest = parse_manifest(*text);
  ASSERT_TRUE(manifest.ok()) << manifest.error().message;
  ASSERT_TRUE(manifest->files.count("kernel_lib.so"));
  ASSERT_TRUE(manifest->extra.count("cuda")) << *text;
  const std::string& cuda = manifest->extra.at("cuda");
  EXPECT_NE(cuda.find("\"kernel_lib.so\""), std::string::npos) << cuda;
  for (const char* arch : {"\"sm_80\"", "\"sm_90\"", "\"compute_90\""})
    EXPECT_NE(cuda.find(arch), std::string::npos) << arch << " missing from " << cuda;
  EXPECT_NE(cuda.find("\"driver\":\"not-run\""), std::string::npos) << cuda;
}

// ---- images compiled now, where nvcc exists ---------------------------------------------

std::string find_nvcc() {
  if (const char* env = std::getenv("NVCC"); env != nullptr && ::access(env, X_OK) == 0) return env;
  return ::access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : "";
}

TEST(CudaNvcc, FreshlyBuiltImagesMatchTheirTargets) {
  const std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not installed; the committed fixtures cover this";
  test::TempDir dir("sealfs-nvcc");
  const std::string src = (fixture_dir() / "kernel.cu").string();
  const std::string cmd =
      nvcc + " -cubin -arch=sm_90 -o " + (dir / "k.cubin") + " " + src + " && " + nvcc +
      " -fatbin -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=compute_80 -o " +
      (dir / "k.fatbin") + " " + src;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto cubin = cuda::scan_images(to_bytes(test::read_file(dir / "k.cubin").value_or("")));
  ASSERT_TRUE(cubin.ok()) << cubin.error().message;
  EXPECT_EQ(arch_names(*cubin), (std::vector<std::string>{"sm_90"}));
  const Bytes fat = to_bytes(test::read_file(dir / "k.fatbin").value_or(""));
  auto fatbin = cuda::scan_images(fat);
  ASSERT_TRUE(fatbin.ok()) << fatbin.error().message;
  EXPECT_EQ(arch_names(*fatbin), (std::vector<std::string>{"sm_90a", "compute_80"}));
  expect_all_truncations_rejected(fat);
}

}  // namespace
}  // namespace sealfs
