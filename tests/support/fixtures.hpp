// Where the committed test fixtures are (tests/fixtures/), from the source
// directory CMake names at build time, not from __FILE__ (a compiler cache's
// base_dir, or a relative build, makes __FILE__ relative to the build tree).
#pragma once

#include <filesystem>

namespace sealfs::test {

inline std::filesystem::path fixtures_dir() {
  return std::filesystem::path(SEALFS_SOURCE_DIR) / "tests" / "fixtures";
}

}  // namespace sealfs::test
