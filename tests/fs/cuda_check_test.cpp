// `sealfs cuda-check` (fs/cli/cuda_check.cpp) on the CUDA fixtures and a
// damaged copy of one.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "fs/cli/commands.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::cli {
namespace {

std::filesystem::path fixture_dir() { return sealfs::test::fixtures_dir() / "cuda"; }

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
