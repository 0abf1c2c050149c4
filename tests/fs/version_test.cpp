// `sealfs --version`'s text (fs/cli/version.cpp); packaging/tests/version_test.sh
// checks the binary's against the man pages, the changelog and git.
#include "fs/cli/version.hpp"

#include <fuse_lowlevel.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace sealfs::cli {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Version, FourLines) {
  const auto lines = lines_of(version_text());
  ASSERT_EQ(lines.size(), 4U) << version_text();
  EXPECT_EQ(lines[0], "sealfs " + version_number());
  EXPECT_FALSE(version_number().empty());
  EXPECT_EQ(lines[1].rfind("commit: ", 0), 0U) << lines[1];
  EXPECT_GT(lines[1].size(), std::string("commit: ").size());
  EXPECT_EQ(lines[2], std::string("libfuse: ") + fuse_pkgversion());
  EXPECT_EQ(lines[3].rfind("OpenSSL: ", 0), 0U) << lines[3];
  EXPECT_GT(lines[3].size(), std::string("OpenSSL: ").size());
}

}  // namespace
}  // namespace sealfs::cli
