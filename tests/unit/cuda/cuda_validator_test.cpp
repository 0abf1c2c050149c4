// The CUDA validator (core/cuda/cuda.hpp) and its manifest record: modes,
// outcomes on fixture images from tests/fixtures/cuda, a TileLang-style
// publish through a Store, and (when nvcc is installed) images compiled at
// test time.
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "core/base/unique_fd.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/store.hpp"
#include "tests/unit/cuda/cuda_fixtures.hpp"

namespace sealfs {
namespace {

using namespace test::cuda_fixtures;  // the helpers shared by the CUDA tests

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
