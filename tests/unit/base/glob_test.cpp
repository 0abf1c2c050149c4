#include "core/base/glob.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sealfs {
namespace {

struct GlobCase {
  const char* pattern;
  const char* path;
  bool match;
};

void PrintTo(const GlobCase& c, std::ostream* os) {
  *os << "glob_match(\"" << c.pattern << "\", \"" << c.path << "\") should be "
      << (c.match ? "true" : "false");
}

class GlobTable : public ::testing::TestWithParam<GlobCase> {};

TEST_P(GlobTable, Matches) {
  const GlobCase& c = GetParam();
  EXPECT_EQ(glob_match(c.pattern, c.path), c.match);
}

// Literal components and single-component wildcards.
INSTANTIATE_TEST_SUITE_P(GlobLiteral, GlobTable,
                         ::testing::Values(GlobCase{"a", "a", true}, GlobCase{"a", "b", false},
                                           GlobCase{"a/b", "a/b", true}, GlobCase{"a/b", "a", false},
                                           GlobCase{"a", "a/b", false}, GlobCase{"a/b", "a/b/c", false},
                                           GlobCase{"abc", "ab", false}, GlobCase{"ab", "abc", false},
                                           GlobCase{"", "", true}, GlobCase{"", "a", false},
                                           GlobCase{"a", "", false}));

INSTANTIATE_TEST_SUITE_P(
    GlobStar, GlobTable,
    ::testing::Values(GlobCase{"*", "a", true}, GlobCase{"*", "", false}, GlobCase{"*", "a/b", false},
                      GlobCase{"*.so", "kernel_lib.so", true}, GlobCase{"*.so", ".so", true},
                      GlobCase{"*.so", "kernel_lib.so.1", false}, GlobCase{"*.so", "dir/x.so", false},
                      GlobCase{"a*b*c", "abc", true}, GlobCase{"a*b*c", "axxbyyc", true},
                      GlobCase{"a*b*c", "axxbyy", false}, GlobCase{"a*b", "abab", true},
                      GlobCase{"a*b", "abba", false}, GlobCase{"*a*", "bab", true},
                      GlobCase{"**a", "bba", true},  // '**' inside a component is just two '*'
                      GlobCase{"tmp.pid_*", "tmp.pid_12_ab-cd", true}, GlobCase{"tmp.pid_*", "tmp.pi", false},
                      GlobCase{"device_kernel.*", "device_kernel.cu", true},
                      GlobCase{"device_kernel.*", "device_kernel", false}));

INSTANTIATE_TEST_SUITE_P(GlobQuestion, GlobTable,
                         ::testing::Values(GlobCase{"?", "a", true}, GlobCase{"?", "", false},
                                           GlobCase{"?", "ab", false}, GlobCase{"a?c", "abc", true},
                                           GlobCase{"a?c", "a/c", false},
                                           GlobCase{"?"
                                                    "?/?",
                                                    "ab/c", true}));

INSTANTIATE_TEST_SUITE_P(GlobClass, GlobTable,
                         ::testing::Values(GlobCase{"[abc]", "b", true}, GlobCase{"[abc]", "d", false},
                                           GlobCase{"[a-c]x", "cx", true}, GlobCase{"[a-c]x", "dx", false},
                                           GlobCase{"[!a-c]", "d", true}, GlobCase{"[!a-c]", "a", false},
                                           GlobCase{"[^a]", "b", true}, GlobCase{"[]]", "]", true},
                                           GlobCase{"[a-]", "-", true}, GlobCase{"*.[ch]", "x.h", true},
                                           GlobCase{"*.[ch]", "x.o", false},
                                           GlobCase{"[ab", "[ab", true},  // unclosed: literal '['
                                           GlobCase{"[ab", "a", false}, GlobCase{"[/]", "/", false}));

INSTANTIATE_TEST_SUITE_P(
    GlobDoubleStar, GlobTable,
    ::testing::Values(
        GlobCase{"**", "", true}, GlobCase{"**", "a", true}, GlobCase{"**", "a/b/c", true},
        GlobCase{"tmp/**", "tmp", true},  // the directory itself
        GlobCase{"tmp/**", "tmp/x", true}, GlobCase{"tmp/**", "tmp/x/y/z", true},
        GlobCase{"tmp/**", "tmpx", false}, GlobCase{"tmp/**", "a/tmp/x", false},
        GlobCase{"tmp/**", "", false}, GlobCase{"**/*.so", "kernel_lib.so", true},  // zero components
        GlobCase{"**/*.so", "ns/kernels/k/kernel_lib.so", true}, GlobCase{"**/*.so", "ns/x.so/y", false},
        GlobCase{"**/.staging/**", "ns/.staging", true}, GlobCase{"**/.staging/**", ".staging", true},
        GlobCase{"**/.staging/**", "ns/.staging/k_1_2/kernel_lib.so", true},
        GlobCase{"**/.staging/**", "ns/staging/x", false}, GlobCase{"**/.staging/**", "ns/x.staging", false},
        GlobCase{"a/**/b", "a/b", true}, GlobCase{"a/**/b", "a/x/y/b", true},
        GlobCase{"a/**/b", "a/x/y/c", false}, GlobCase{"a/**/b", "b", false},
        GlobCase{"**/a/**/b/**", "x/a/y/b", true}, GlobCase{"**/a/**/b/**", "x/a/y/z/b/w/v", true},
        GlobCase{"**/a/**/b/**", "x/b/y/a", false}, GlobCase{"**/**", "a/b", true},
        GlobCase{"**/x", "a/x/b", false},
        GlobCase{"**/tmp.pid_*/**", "key/tmp.pid_42_uuid/kernel.cubin", true},
        GlobCase{"**/tmp.pid_*/**", "key/kernel.cubin", false}));

TEST(Glob, HostileInputIsFast) {
  // Classic exponential case for naive backtracking; must finish quickly.
  std::string name(5000, 'a');
  std::string pattern;
  for (int i = 0; i < 50; ++i) pattern += "a*";
  pattern += "b";
  EXPECT_FALSE(glob_match(pattern, name));
  std::string deep;
  for (int i = 0; i < 2000; ++i) deep += "a/";
  deep += "c";
  std::string deep_pattern;
  for (int i = 0; i < 50; ++i) deep_pattern += "**/a/";
  deep_pattern += "b";
  EXPECT_FALSE(glob_match(deep_pattern, deep));
  EXPECT_TRUE(glob_match("**/a/**/c", deep));
}

}  // namespace
}  // namespace sealfs
