// Shared helpers of the CUDA unit tests (cuda_scan_test.cpp,
// cuda_damage_test.cpp, cuda_validator_test.cpp): the committed fixture images
// of tests/fixtures/cuda, byte access to them, and the truncation sweep.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/cuda/cuda.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test::cuda_fixtures {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

inline fs::path fixture_dir() { return sealfs::test::fixtures_dir() / "cuda"; }

inline Bytes to_bytes(std::string_view s) {
  Bytes out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

inline Bytes fixture(std::string_view name) {
  const auto content = test::read_file((fixture_dir() / name).string());
  EXPECT_TRUE(content.has_value()) << "missing fixture " << name;
  return to_bytes(content.value_or(""));
}

template <class T>
inline T get(const Bytes& b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
inline void put(Bytes& b, std::size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

inline std::vector<std::string> arch_names(const cuda::Scan& scan) {
  std::vector<std::string> out;
  for (const auto& image : scan.images) out.push_back(image.arch_name());
  return out;
}

inline Bytes truncated(const Bytes& b, std::size_t n) {
  return Bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
}

// Every 1/64th of the file, plus extra cut points (header boundaries ±1).
inline void expect_all_truncations_rejected(const Bytes& whole, std::set<std::size_t> extra = {}) {
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

}  // namespace sealfs::test::cuda_fixtures
