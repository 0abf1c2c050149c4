// CUDA image discovery (core/cuda/cuda.hpp): real images from
// tests/fixtures/cuda (made by nvcc, see regenerate.sh) scanned whole, plain
// host libraries, and the pieces under the scan (file bytes, magic search, PTX).
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "core/base/unique_fd.hpp"
#include "core/cuda/file_bytes.hpp"
#include "core/cuda/magic_scan.hpp"
#include "core/cuda/ptx_text.hpp"
#include "tests/unit/cuda/cuda_fixtures.hpp"

namespace sealfs {
namespace {

using namespace test::cuda_fixtures;  // the helpers shared by the CUDA tests

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

}  // namespace
}  // namespace sealfs
