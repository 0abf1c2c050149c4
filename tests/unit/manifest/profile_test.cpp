#include "core/manifest/profile.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs {
namespace {

// tests/fixtures/profiles.
std::string fixture(std::string_view name) {
  return (sealfs::test::fixtures_dir() / "profiles" / name).string();
}

Profile must_parse(std::string_view json) {
  auto p = parse_profile(json);
  EXPECT_TRUE(p.ok()) << json << ": " << p.error().message;
  return p.ok() ? *p : Profile{};
}

void expect_invalid(std::string_view json, std::string_view needle) {
  auto p = parse_profile(json);
  ASSERT_FALSE(p.ok()) << "accepted: " << json;
  EXPECT_EQ(p.code(), EINVAL) << json;
  EXPECT_NE(p.error().message.find(needle), std::string::npos)
      << "message \"" << p.error().message << "\" lacks \"" << needle << "\"";
}

TEST(Profile, GenericHasNothingVolatileAndHashesEverything) {
  auto p = builtin_profile("generic");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "generic");
  for (const char* rel : {"", "tmp", "tmp/x", "a/.staging/b", "k/device_kernel.cu", "k/kernel_lib.so"}) {
    EXPECT_FALSE(p->is_volatile(rel)) << rel;
    EXPECT_FALSE(p->is_size_only(rel)) << rel;
    EXPECT_TRUE(p->validators_for(rel).empty()) << rel;
  }
}

TEST(Profile, TileLang) {
  auto p = builtin_profile("tilelang");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "tilelang");
  // Volatile: tmp/ and every .staging/ with all below them, nothing else.
  EXPECT_TRUE(p->is_volatile("tmp"));
  EXPECT_TRUE(p->is_volatile("tmp/tmpab12.so"));
  EXPECT_TRUE(p->is_volatile("ns/.staging"));
  EXPECT_TRUE(p->is_volatile("ns/.staging/key_123_ab/kernel_lib.so"));
  EXPECT_FALSE(p->is_volatile(""));
  EXPECT_FALSE(p->is_volatile("ns"));
  EXPECT_FALSE(p->is_volatile("ns/kernels/key/kernel_lib.so"));
  EXPECT_FALSE(p->is_volatile("ns/tmp/x"));  // only the top-level tmp/
  // Size-only sources, hashed binaries.
  EXPECT_TRUE(p->is_size_only("ns/kernels/key/device_kernel.cu"));
  EXPECT_TRUE(p->is_size_only("ns/kernels/key/host_kernel.cu"));
  EXPECT_TRUE(p->is_size_only("ns/kernels/key/launcher.cpp"));
  EXPECT_TRUE(p->is_size_only("device_kernel.cu"));
  EXPECT_FALSE(p->is_size_only("ns/kernels/key/kernel_lib.so"));
  EXPECT_FALSE(p->is_size_only("ns/kernels/key/params.pkl"));
  // CUDA validator on images only.
  EXPECT_EQ(p->validators_for("ns/kernels/key/kernel_lib.so"), std::vector<std::string>{"cuda"});
  EXPECT_EQ(p->validators_for("k/a.cubin"), std::vector<std::string>{"cuda"});
  EXPECT_EQ(p->validators_for("k/a.fatbin"), std::vector<std::string>{"cuda"});
  EXPECT_TRUE(p->validators_for("ns/kernels/key/params.pkl").empty());
  EXPECT_TRUE(p->validators_for("ns/kernels/key/device_kernel.cu").empty());
}

TEST(Profile, Triton) {
  auto p = builtin_profile("triton");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "triton");
  EXPECT_TRUE(p->is_volatile("KEY/tmp.pid_123_0f1e2d3c-uuid"));
  EXPECT_TRUE(p->is_volatile("KEY/tmp.pid_123_0f1e2d3c-uuid/add_kernel.cubin"));
  EXPECT_FALSE(p->is_volatile("KEY/add_kernel.cubin"));
  EXPECT_FALSE(p->is_volatile("KEY/add_kernel.json"));
  EXPECT_FALSE(p->is_size_only("KEY/add_kernel.ptx"));
  EXPECT_EQ(p->validators_for("KEY/add_kernel.cubin"), std::vector<std::string>{"cuda"});
  EXPECT_TRUE(p->validators_for("KEY/add_kernel.ptx").empty());
}

TEST(Profile, UnknownBuiltinListsKnownOnes) {
  auto p = builtin_profile("tilelan");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), ENOENT);
  EXPECT_NE(p.error().message.find("\"tilelan\""), std::string::npos);
  EXPECT_NE(p.error().message.find("generic, tilelang, triton"), std::string::npos);
}

TEST(Profile, VolatileCoversAncestors) {
  Profile p = must_parse(R"({"volatile":["scratch"]})");
  EXPECT_TRUE(p.is_volatile("scratch"));
  EXPECT_TRUE(p.is_volatile("scratch/a/b"));  // inside a volatile directory
  EXPECT_FALSE(p.is_volatile("a/scratch"));
  EXPECT_FALSE(p.is_volatile("scratchy"));
}

TEST(Profile, ValidatorsInRuleOrderDeduplicated) {
  Profile p = must_parse(R"({"validators":[{"glob":"**/*.so","validator":"b"},
                                           {"glob":"**","validator":"a"},
                                           {"validator":"b","glob":"x/*.so"},
                                           {"glob":"**/*.so","validator":"c"}]})");
  EXPECT_EQ(p.validators_for("x/y.so"), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(p.validators_for("x/y.txt"), std::vector<std::string>{"a"});
}

TEST(Profile, ParseFullProfile) {
  Profile p = must_parse(R"({"name":"mine","volatile":["tmp/**"],"size_only":["**/*.cu"],
                            "validators":[{"glob":"**/*.so","validator":"cuda"}]})");
  EXPECT_EQ(p.name, "mine");
  EXPECT_EQ(p.volatile_globs, std::vector<std::string>{"tmp/**"});
  EXPECT_EQ(p.size_only_globs, std::vector<std::string>{"**/*.cu"});
  ASSERT_EQ(p.validators.size(), 1u);
  EXPECT_EQ(p.validators[0], (ValidatorRule{"**/*.so", "cuda"}));
}

TEST(Profile, ParseEmptyObjectIsGenericLike) {
  Profile p = must_parse("{}");
  EXPECT_TRUE(p.volatile_globs.empty());
  EXPECT_TRUE(p.size_only_globs.empty());
  EXPECT_TRUE(p.validators.empty());
}

TEST(Profile, ValidatorNamesAreNotCheckedAtParse) {
  // Documented decision: the store checks names against its registry.
  Profile p = must_parse(R"({"validators":[{"glob":"**","validator":"no-such-validator"}]})");
  EXPECT_EQ(p.validators_for("a"), std::vector<std::string>{"no-such-validator"});
}

TEST(ProfileReject, NotJson) { expect_invalid("{", "invalid JSON"); }
TEST(ProfileReject, TrailingGarbage) { expect_invalid("{} {}", "invalid JSON"); }
TEST(ProfileReject, NotObject) { expect_invalid("[]", "top level is not an object"); }
TEST(ProfileReject, UnknownKey) {
  expect_invalid(R"({"volatiles":["tmp/**"]})", "unknown key \"volatiles\"");
}
TEST(ProfileReject, DuplicateKey) { expect_invalid(R"({"name":"a","name":"b"})", "duplicate key \"name\""); }
TEST(ProfileReject, NameNotString) { expect_invalid(R"({"name":3})", "name: not a string"); }
TEST(ProfileReject, VolatileNotArray) {
  expect_invalid(R"({"volatile":"tmp/**"})", "volatile: not an array");
}
TEST(ProfileReject, SizeOnlyEntryNotString) {
  expect_invalid(R"({"size_only":["a",1]})", "size_only[1]: not a string");
}
TEST(ProfileReject, EmptyGlob) { expect_invalid(R"({"volatile":["tmp/**",""]})", "volatile[1]: empty glob"); }
TEST(ProfileReject, AbsoluteGlob) { expect_invalid(R"({"size_only":["/etc/*"]})", "size_only[0]: glob"); }
TEST(ProfileReject, GlobWithNul) {
  expect_invalid(R"({"volatile":["a\u0000b"]})", "volatile[0]: glob contains NUL");
}
TEST(ProfileReject, ValidatorsNotArray) {
  expect_invalid(R"({"validators":{}})", "validators: not an array");
}
TEST(ProfileReject, ValidatorEntryNotObject) {
  expect_invalid(R"({"validators":["cuda"]})", "validators[0]: not an object");
}
TEST(ProfileReject, ValidatorMissingGlob) {
  expect_invalid(R"({"validators":[{"validator":"cuda"}]})", "validators[0]: missing \"glob\"");
}
TEST(ProfileReject, ValidatorMissingName) {
  expect_invalid(R"({"validators":[{"glob":"**"}]})", "validators[0]: missing \"validator\"");
}
TEST(ProfileReject, ValidatorEmptyName) {
  expect_invalid(R"({"validators":[{"glob":"**","validator":""}]})", "validators[0].validator");
}
TEST(ProfileReject, ValidatorEmptyGlob) {
  expect_invalid(R"({"validators":[{"glob":"","validator":"cuda"}]})", "validators[0].glob: empty glob");
}
TEST(ProfileReject, ValidatorUnknownKey) {
  expect_invalid(R"({"validators":[{"glob":"**","validator":"cuda","mode":"x"}]})", "unknown key \"mode\"");
}
TEST(ProfileReject, ValidatorNameNotString) {
  expect_invalid(R"({"validators":[{"glob":"**","validator":1}]})", "validators[0].validator: not a string");
}
TEST(ProfileReject, TooDeep) { expect_invalid(R"({"volatile":[[[["x"]]]]})", "nested deeper"); }

TEST(ProfileFile, LoadsFixture) {
  auto p = load_profile_file(fixture("ccache.json"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->name, "ccache-like");
  EXPECT_TRUE(p->is_volatile("tmp/a"));
  EXPECT_TRUE(p->is_volatile("d/x.tmp.123"));
  EXPECT_TRUE(p->is_size_only("d/x.stderr"));
  EXPECT_EQ(p->validators_for("d/x.so"), (std::vector<std::string>{"cuda", "test-reject"}));
}

TEST(ProfileFile, InvalidFixtureNamesFileAndField) {
  std::string path = fixture("unknown_key.json");
  auto p = load_profile_file(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), EINVAL);
  EXPECT_NE(p.error().message.find("\"volatiles\""), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find(path), std::string::npos) << p.error().message;
}

TEST(ProfileFile, MissingFileGivesOpenErrno) {
  test::TempDir dir;
  auto p = load_profile_file(dir / "nope.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), ENOENT);
  EXPECT_NE(p.error().message.find("nope.json"), std::string::npos);
}

TEST(ProfileFile, DirectoryIsRefused) {
  test::TempDir dir;
  auto p = load_profile_file(dir.path());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), EINVAL);
}

TEST(ProfileFile, TooBigIsRefused) {
  test::TempDir dir;
  test::write_file(dir / "big.json", "{\"name\":\"" + std::string(2u << 20, 'x') + "\"}");
  auto p = load_profile_file(dir / "big.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.code(), EINVAL);
  EXPECT_NE(p.error().message.find("larger than"), std::string::npos);
}

TEST(ProfileFile, NamelessProfileIsNamedByItsPath) {
  test::TempDir dir;
  test::write_file(dir / "p.json", R"({"volatile":["t/**"]})");
  auto p = load_profile_file(dir / "p.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->name, dir / "p.json");
}

TEST(ProfileResolve, NamesAndPaths) {
  auto builtin = resolve_profile("tilelang");
  ASSERT_TRUE(builtin.ok());
  EXPECT_EQ(builtin->name, "tilelang");

  auto by_path = resolve_profile(fixture("ccache.json"));
  ASSERT_TRUE(by_path.ok()) << by_path.error().message;
  EXPECT_EQ(by_path->name, "ccache-like");

  // A bare "x.json" is a (relative) file path, not a built-in name.
  auto json_name = resolve_profile("surely-not-here.json");
  ASSERT_FALSE(json_name.ok());
  EXPECT_EQ(json_name.code(), ENOENT);
  EXPECT_NE(json_name.error().message.find("open"), std::string::npos);

  auto unknown = resolve_profile("nosuch");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.code(), ENOENT);
  EXPECT_NE(unknown.error().message.find("known: generic"), std::string::npos);
}

TEST(Profile, MaxFileSizeHasADefaultAndParses) {
  EXPECT_EQ(builtin_profile("generic")->max_file_size, kDefaultMaxFileSize);
  auto p = parse_profile(R"({"name":"x","max_file_size":1048576})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->max_file_size, 1048576u);
  EXPECT_EQ(parse_profile(R"({"max_file_size":0})").code(), EINVAL);
  EXPECT_EQ(parse_profile(R"({"max_file_size":-1})").code(), EINVAL);
  EXPECT_EQ(parse_profile(R"({"max_file_size":"1G"})").code(), EINVAL);
}

}  // namespace
}  // namespace sealfs
