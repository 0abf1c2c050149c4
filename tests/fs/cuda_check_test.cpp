// `sealfs cuda-check` (fs/cli/cuda_check.cpp) on the CUDA fixtures and a
// damaged copy of one.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "fs/cli/commands.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::cli {
namespace {

std::filesystem::path fixture_dir() { return sealfs::test::fixtures_dir() / "cuda"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A fatbin of 1,000 copies of the multi-architecture fixture (sm_80 and
// sm_90 cubins, compressed compute_90 PTX): 3,000 images, as a large
// library (libtorch_cuda.so) holds thousands.
std::string many_images(const test::TempDir& dir) {
  const auto one = test::read_file(fixture_dir() / "kernel_multi.fatbin");
  EXPECT_TRUE(one.has_value());
  std::string all;
  for (int i = 0; i < 1000; ++i) all += one.value_or("");
  const std::string path = dir / "many.fatbin";
  test::write_file(path, all);
  return path;
}

// Issue 27 point 4: by default one summary per file, not one word per image.
TEST(CudaCheck, SummaryCountsImagesPerArchitectureAndKind) {
  test::TempDir dir("sealfs-cuda-check");
  const std::string many = many_images(dir);
  std::ostringstream out, err;
  ASSERT_EQ(run_cuda_check({many}, "structural", out, err), 0) << err.str();
  EXPECT_EQ(lines_of(out.str()), (std::vector<std::string>{
                                     many + ": sound, 3000 CUDA images (driver: not-run)",
                                     "  sm_80       elf    1000",
                                     "  sm_90       elf    1000",
                                     "  compute_90  ptx    1000  compressed",
                                 }));
}

TEST(CudaCheck, BrokenFileSaysItsFirstProblem) {
  test::TempDir dir("sealfs-cuda-check");
  const auto lib = test::read_file(fixture_dir() / "kernel_multi.fatbin");
  ASSERT_TRUE(lib.has_value());
  test::write_file(dir / "cut.fatbin", std::string_view(*lib).substr(0, lib->size() / 2));
  std::ostringstream out, err;
  EXPECT_EQ(run_cuda_check({dir / "cut.fatbin"}, "structural", out, err), 1);
  const auto lines = lines_of(out.str());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].rfind(std::string(dir / "cut.fatbin") + ": BROKEN: ", 0), 0U) << out.str();
  EXPECT_NE(lines[0].find("before it)"), std::string::npos) << out.str();
}

TEST(CudaCheck, VerboseListsEveryImage) {
  test::TempDir dir("sealfs-cuda-check");
  const std::string many = many_images(dir);
  std::ostringstream out, err;
  ASSERT_EQ(run_cuda_check({many}, "structural", out, err, {.format = "text", .verbose = true}), 0);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3001U);
  EXPECT_EQ(lines[1], "       1  sm_80       elf");
  EXPECT_EQ(lines[3], "       3  compute_90  ptx  compressed");
  EXPECT_EQ(lines[3000], "    3000  compute_90  ptx  compressed");
}

// --format=json: the same, one array for all files, for scripts.
TEST(CudaCheck, JsonGivesTheSameForScripts) {
  test::TempDir dir("sealfs-cuda-check");
  const std::string many = many_images(dir);
  const std::string missing = dir / "missing.so";
  for (const bool verbose : {false, true}) {
    std::ostringstream out, err;
    EXPECT_EQ(run_cuda_check({many, missing}, "structural", out, err, {.format = "json", .verbose = verbose}),
              2);
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(out.str().c_str()).HasParseError()) << out.str().substr(0, 200);
    ASSERT_TRUE(doc.IsArray());
    ASSERT_EQ(doc.Size(), 2U);
    const auto& file = doc[0];
    EXPECT_EQ(std::string(file["file"].GetString()), many);
    EXPECT_EQ(std::string(file["verdict"].GetString()), "sound");
    EXPECT_TRUE(file["problem"].IsNull());
    EXPECT_EQ(file["images"].GetUint64(), 3000U);
    ASSERT_EQ(file["by_arch"].Size(), 3U);
    EXPECT_EQ(std::string(file["by_arch"][2]["arch"].GetString()), "compute_90");
    EXPECT_EQ(std::string(file["by_arch"][2]["kind"].GetString()), "ptx");
    EXPECT_EQ(file["by_arch"][2]["count"].GetUint64(), 1000U);
    EXPECT_EQ(file["by_arch"][2]["compressed"].GetUint64(), 1000U);
    EXPECT_EQ(file.HasMember("image_list"), verbose);
    if (verbose) {
      EXPECT_EQ(file["image_list"].Size(), 3000U);
    }
    EXPECT_EQ(std::string(doc[1]["verdict"].GetString()), "error");
    EXPECT_FALSE(doc[1]["problem"].IsNull());
  }
  std::ostringstream out, err;
  EXPECT_EQ(run_cuda_check({many}, "structural", out, err, {.format = "yaml"}), 2);
}

TEST(CudaCheck, ExitCodes) {
  test::TempDir dir("sealfs-cuda-check");
  const std::string good = (fixture_dir() / "kernel_lib.so").string();
  const auto lib = test::read_file(good);
  ASSERT_TRUE(lib.has_value()) << "missing fixture " << good;
  test::write_file(dir / "bad.so", std::string_view(*lib).substr(0, lib->size() / 3));
  std::ostringstream out, err;
  EXPECT_EQ(run_cuda_check({good}, "structural", out, err), 0) << err.str();
  EXPECT_NE(out.str().find("sm_90"), std::string::npos) << out.str();
  EXPECT_EQ(run_cuda_check({good, dir / "bad.so"}, "structural", out, err), 1);
  EXPECT_NE(out.str().find("BROKEN"), std::string::npos);
  EXPECT_EQ(run_cuda_check({"/lib/x86_64-linux-gnu/libc.so.6"}, "", out, err), 0);
  EXPECT_EQ(run_cuda_check({dir / "missing.so"}, "structural", out, err), 2);
  EXPECT_EQ(run_cuda_check({good}, "bogus", out, err), 2);
  EXPECT_EQ(run_cuda_check({}, "structural", out, err), 2);
}

}  // namespace
}  // namespace sealfs::cli
