#include "core/verify/validator.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/base/unique_fd.hpp"
#include "core/store/validators.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs {
namespace {

class ValidatorTestReject : public ::testing::Test {
 protected:
  // Runs "test-reject" on a file holding `content`.
  ValidationOutcome run(std::string_view content) {
    test::write_file(dir_ / "f", content);
    UniqueFd fd(::open((dir_ / "f").c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd);
    const ValidatorFn* fn = registry_.find("test-reject");
    EXPECT_NE(fn, nullptr);
    if (fn == nullptr) return {};
    return (*fn)(fd.get(), "sub/f");
  }

  test::TempDir dir_;
  ValidatorRegistry registry_ = default_validators();
};

TEST_F(ValidatorTestReject, RejectsMagicPrefix) {
  auto out = run("SEALFS-TEST-REJECT and then anything");
  EXPECT_FALSE(out.accepted);
  EXPECT_NE(out.reason.find("sub/f"), std::string::npos) << out.reason;
  EXPECT_TRUE(out.record_json.empty());
}

TEST_F(ValidatorTestReject, RejectsExactMagic) { EXPECT_FALSE(run("SEALFS-TEST-REJECT").accepted); }

TEST_F(ValidatorTestReject, AcceptsOtherContent) {
  EXPECT_TRUE(run("").accepted);
  EXPECT_TRUE(run("SEALFS-TEST-REJEC").accepted);           // one byte short
  EXPECT_TRUE(run("xSEALFS-TEST-REJECT").accepted);         // not at the start
  EXPECT_TRUE(run("sealfs-test-reject").accepted);          // case matters
  EXPECT_TRUE(run(std::string(1 << 20, '\x7f')).accepted);  // a big ordinary file
}

TEST_F(ValidatorTestReject, LeavesFileOffsetAlone) {
  test::write_file(dir_ / "g", "SEALFS-TEST-REJECT");
  UniqueFd fd(::open((dir_ / "g").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::lseek(fd.get(), 3, SEEK_SET), 3);
  EXPECT_FALSE((*registry_.find("test-reject"))(fd.get(), "g").accepted);
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 3);
}

TEST_F(ValidatorTestReject, UnreadableFileIsRejected) {
  UniqueFd dir(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  auto out = (*registry_.find("test-reject"))(dir.get(), "d");
  EXPECT_FALSE(out.accepted);
  EXPECT_NE(out.reason.find("cannot read"), std::string::npos) << out.reason;
}

TEST(ValidatorRegistry, AddFindReplace) {
  ValidatorRegistry r;
  EXPECT_FALSE(r.has("x"));
  EXPECT_EQ(r.find("x"), nullptr);
  r.add("x", [](int, std::string_view) { return ValidationOutcome{false, "first", {}}; });
  ASSERT_TRUE(r.has("x"));
  EXPECT_EQ((*r.find("x"))(-1, "").reason, "first");
  r.add("x", [](int, std::string_view) { return ValidationOutcome{true, "second", "{}"}; });
  EXPECT_EQ((*r.find("x"))(-1, "").reason, "second");
  EXPECT_FALSE(r.has("X"));
  EXPECT_FALSE(r.has(""));
}

TEST(ValidatorRegistry, DefaultsKnowTestRejectAndCuda) {
  EXPECT_TRUE(default_validators().has("test-reject"));
  EXPECT_TRUE(default_validators("off").has("test-reject"));
  // Every built-in profile names "cuda": it must be registered in every mode.
  for (const char* mode : {"off", "structural", "driver"})
    EXPECT_TRUE(default_validators(mode).has("cuda")) << mode;
  EXPECT_FALSE(default_validators().has("no-such-validator"));
}

}  // namespace
}  // namespace sealfs
