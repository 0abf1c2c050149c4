// The key file of -o key_file: its format and the checks on who may read it.
#include "core/manifest/keys.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/temp_dir.hpp"
#include "tests/support/test_keys.hpp"

namespace sealfs::test {
namespace {

Error parse_error(const std::string& text) {
  auto keys = parse_key_file(text, "kf");
  EXPECT_FALSE(keys.ok()) << text;
  return keys ? Error{} : keys.error();
}

TEST(KeyFile, ParsesKeysInOrderSkippingCommentsAndBlankLines) {
  auto keys = parse_key_file(
      "# fleet keys\n\n" + key_line("new-2", 7) + "\n  \t\n" + key_line("old.1", 9) + "\r\n# end\n", "kf");
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].id, "new-2");
  EXPECT_EQ((*keys)[0].secret[0], 7);
  EXPECT_EQ((*keys)[0].secret[31], 7 + 31);
  EXPECT_EQ((*keys)[1].id, "old.1");
  KeyRing ring(std::move(*keys));
  EXPECT_EQ(ring.signer().id, "new-2");
  ASSERT_NE(ring.find("old.1"), nullptr);
  EXPECT_EQ(ring.find("old.1")->secret[0], 9);
  EXPECT_EQ(ring.find("other"), nullptr);
}

TEST(KeyFile, UpperCaseHexIsTheSameKey) {
  std::string line = key_line("k", 0xa0);
  std::string upper = line;
  for (std::size_t i = 2; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  auto a = parse_key_file(line, "kf");
  auto b = parse_key_file(upper, "kf");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].secret, (*b)[0].secret);
}

TEST(KeyFile, RefusesEveryDefectWithItsLine) {
  EXPECT_NE(parse_error("").message.find("no keys"), std::string::npos);
  EXPECT_NE(parse_error("# only a comment\n\n").message.find("no keys"), std::string::npos);
  const std::string good = key_line("a", 1);
  EXPECT_NE(parse_error(good + "\n" + key_line("a", 2)).message.find("line 2: key id 'a' appears twice"),
            std::string::npos);
  // 31 bytes, 33 bytes, a non-hex digit.
  EXPECT_NE(parse_error(good.substr(0, good.size() - 2)).message.find("not 32 bytes"), std::string::npos);
  EXPECT_NE(parse_error(good + "00").message.find("not 32 bytes"), std::string::npos);
  std::string bad_digit = good;
  bad_digit.back() = 'g';
  EXPECT_NE(parse_error(bad_digit).message.find("line 1"), std::string::npos);
  EXPECT_NE(parse_error("a").message.find("expected"), std::string::npos);
  EXPECT_NE(parse_error(good + " extra").message.find("expected"), std::string::npos);
  EXPECT_NE(parse_error("bad/id " + good.substr(2)).message.find("key id"), std::string::npos);
  EXPECT_NE(parse_error(std::string(65, 'x') + " " + good.substr(2)).message.find("key id"),
            std::string::npos);
  EXPECT_EQ(parse_error("x").code, EINVAL);
}

class KeyFileOnDisk : public ::testing::Test {
 protected:
  TempDir tmp_{"sealfs-keys"};
  std::string path_ = tmp_ / "keys";
};

TEST_F(KeyFileOnDisk, LoadsAPrivateFile) {
  write_key_file(path_, key_line("a", 3) + "\n");
  auto keys = load_key_file(path_);
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  EXPECT_EQ((*keys)[0].id, "a");
}

TEST_F(KeyFileOnDisk, RefusesAFileOthersMayReadOrWrite) {
  write_key_file(path_, key_line("a", 3) + "\n");
  for (mode_t mode : {0640, 0604, 0620, 0602, 0700 | 0010}) {
    ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
    auto keys = load_key_file(path_);
    ASSERT_FALSE(keys.ok()) << std::oct << mode;
    EXPECT_EQ(keys.code(), EPERM);
    EXPECT_NE(keys.error().message.find(path_), std::string::npos);
    EXPECT_NE(keys.error().message.find("mode"), std::string::npos);
    EXPECT_EQ(keys.error().message.find('\n'), std::string::npos);  // one line
  }
  ASSERT_EQ(::chmod(path_.c_str(), 0400), 0);
  EXPECT_TRUE(load_key_file(path_).ok());
}

TEST_F(KeyFileOnDisk, RefusesAFileOfAnotherOwner) {
  write_key_file(path_, key_line("a", 3) + "\n");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file away";
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
  auto keys = load_key_file(path_);
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.error().message.find("owned by uid 65534"), std::string::npos);
}

TEST_F(KeyFileOnDisk, RefusesSymlinksDirectoriesMissingAndEmptyFiles) {
  write_key_file(path_, key_line("a", 3) + "\n");
  ASSERT_EQ(::symlink(path_.c_str(), (tmp_ / "link").c_str()), 0);
  EXPECT_FALSE(load_key_file(tmp_ / "link").ok());
  EXPECT_FALSE(load_key_file(tmp_.path()).ok());
  EXPECT_EQ(load_key_file(tmp_ / "absent").code(), ENOENT);
  write_key_file(tmp_ / "empty", "");
  auto empty = load_key_file(tmp_ / "empty");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("no keys"), std::string::npos);
}

}  // namespace
}  // namespace sealfs::test
