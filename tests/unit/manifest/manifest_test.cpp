#include "core/manifest/manifest.hpp"

#include <gtest/gtest.h>
#include <linux/limits.h>

#include <string>

#include "core/layout/paths.hpp"  // kMaxTreeDepth

namespace sealfs {
namespace {

const std::string kHexA = to_hex(sha256_of("a"));
const std::string kHexB = to_hex(sha256_of("b"));

Manifest sample() {
  Manifest m;
  m.files["kernel_lib.so"] = FileRecord{16, sha256_of("a"), std::nullopt};
  m.files["device_kernel.cu"] = FileRecord{16, std::nullopt, std::nullopt};
  m.files["sub/dir/x.bin"] = FileRecord{0, sha256_of(""), std::nullopt};
  m.files["link"] = FileRecord{3, std::nullopt, std::string("a/b")};
  return m;
}

// parse_manifest must fail with EBADMSG and a message mentioning `needle`.
void expect_rejected(std::string_view json, std::string_view needle) {
  auto r = parse_manifest(json);
  ASSERT_FALSE(r.ok()) << "accepted: " << json;
  EXPECT_EQ(r.code(), EBADMSG) << json;
  EXPECT_NE(r.error().message.find(needle), std::string::npos)
      << "message \"" << r.error().message << "\" lacks \"" << needle << "\"";
}

std::string with_files(std::string_view files) {
  return "{\"files\":" + std::string(files) + ",\"sealfs\":1}";
}

TEST(Manifest, SerializeIsCanonical) {
  EXPECT_EQ(serialize_manifest(sample()),
            "{\"files\":{\"device_kernel.cu\":{\"size\":16},\"kernel_lib.so\":{\"sha256\":\"" + kHexA +
                "\",\"size\":16},\"link\":{\"size\":3,\"symlink\":\"a/b\"},\"sub/dir/x.bin\":{\"sha256\":\"" +
                to_hex(sha256_of("")) + "\",\"size\":0}},\"sealfs\":1}");
  EXPECT_EQ(serialize_manifest(Manifest{}), "{\"files\":{},\"sealfs\":1}");
}

TEST(Manifest, RoundTripAllSections) {
  Manifest m = sample();
  m.accept["kernel_lib.so"] = FileRecord{12, sha256_of("b"), std::nullopt};
  m.name = std::string(NAME_MAX, 'n');
  m.extra["cuda"] = "{\"kernel_lib.so\":{\"archs\":[\"sm_90\",\"sm_80\"],\"ok\":true}}";
  m.extra["zz"] = "[1,-2,3.5,null,\"s\"]";
  std::string bytes = serialize_manifest(m);
  auto back = parse_manifest(bytes);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, m);
  EXPECT_EQ(serialize_manifest(*back), bytes);
  // Key order: accept < cuda < files < name < sealfs < zz.
  EXPECT_LT(bytes.find("\"accept\""), bytes.find("\"cuda\""));
  EXPECT_LT(bytes.find("\"cuda\""), bytes.find("\"files\""));
  EXPECT_LT(bytes.find("\"name\""), bytes.find("\"sealfs\""));
  EXPECT_LT(bytes.find("\"sealfs\""), bytes.find("\"zz\""));
}

TEST(Manifest, CanonicalTextSurvivesParseSerialize) {
  const std::string canonical[] = {
      "{\"files\":{},\"sealfs\":1}",
      "{\"files\":{\"a\":{\"size\":0}},\"sealfs\":1}",
      "{\"accept\":{\"f\":{\"sha256\":\"" + kHexB + "\",\"size\":1}},\"files\":{\"f\":{\"sha256\":\"" +
          kHexA + "\",\"size\":1}},\"name\":\"f\",\"sealfs\":1}",
      "{\"a\":{\"x\":[{\"b\":1,\"c\":2}]},\"files\":{},\"sealfs\":1,\"z\":\"\\u0001\\n\\\"\"}",
      "{\"files\":{\"caf\xc3\xa9\":{\"size\":1125899906842624}},\"sealfs\":1}",  // max size, UTF-8 name
  };
  for (const auto& s : canonical) {
    auto m = parse_manifest(s);
    ASSERT_TRUE(m.ok()) << s << ": " << m.error().message;
    EXPECT_EQ(serialize_manifest(*m), s);
  }
}

TEST(Manifest, ParseAcceptsAnyKeyOrderAndWhitespace) {
  std::string loose = " {\n \"sealfs\" : 1 ,\"files\": {\"b\":{\"size\":2},\"a\":{\"size\":1, \"sha256\":\"" +
                      kHexA + "\"}},\"x\":{\"q\":1, \"p\":[ 2 ]} }\n";
  auto m = parse_manifest(loose);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->files.size(), 2u);
  EXPECT_EQ(m->files.at("a").size, 1u);
  EXPECT_EQ(m->files.at("a").sha256, sha256_of("a"));
  EXPECT_FALSE(m->files.at("b").sha256.has_value());
  EXPECT_EQ(m->extra.at("x"), "{\"p\":[2],\"q\":1}");  // extra kept in canonical form
}

TEST(Manifest, ExtraSectionsAreRecanonicalisedOnSerialize) {
  Manifest a, b;
  a.extra["cuda"] = "{ \"b\": 1, \"a\": [1, 2] }";
  b.extra["cuda"] = "{\"a\":[1,2],\"b\":1}";
  EXPECT_EQ(serialize_manifest(a), serialize_manifest(b));
  Manifest bad;
  bad.extra["cuda"] = "{not json";
  bad.extra["files"] = "{}";  // collides with a known section: skipped
  EXPECT_EQ(serialize_manifest(bad), "{\"cuda\":null,\"files\":{},\"sealfs\":1}");
}

// Found by manifest_fuzz: a number beyond 64 bits in an unknown section was
// parsed to a double whose canonical text read back to another value, so the
// manifest did not survive its own round trip. Such a manifest is refused (a
// malformed manifest: R2); ordinary fractions still pass and round-trip.
TEST(Manifest, NumbersWithoutAStableCanonicalFormAreRefused) {
  auto huge =
      parse_manifest(R"({"sealfs":1,"files":{"x":{"size":3}},"extra":{"n":11111222222222222222232}})");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("no stable canonical form"), std::string::npos) << huge.error().message;
  auto plain = parse_manifest(R"({"sealfs":1,"files":{},"extra":{"a":0.1,"b":-2.5e-3,"c":0e44,"d":1e22}})");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const std::string canonical = serialize_manifest(*plain);
  auto again = parse_manifest(canonical);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->extra, plain->extra);
  EXPECT_EQ(serialize_manifest(*again), canonical);
}

TEST(Manifest, CanonicalJson) {
  auto c = canonical_json(" {\"b\" : [true, false, null], \"a\": {\"d\": 1.5, \"c\": -3}} ");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, "{\"a\":{\"c\":-3,\"d\":1.5},\"b\":[true,false,null]}");
  EXPECT_EQ(canonical_json("{\"a\":1,\"a\":2}").code(), EBADMSG);
  EXPECT_EQ(canonical_json("[1] 2").code(), EBADMSG);
  EXPECT_EQ(canonical_json(std::string(17, '[') + std::string(17, ']')).code(), EBADMSG);
  EXPECT_TRUE(canonical_json(std::string(16, '[') + std::string(16, ']')).ok());
}

// ---- one test per rejection ------------------------------------------------

TEST(ManifestReject, BadJson) { expect_rejected("{\"sealfs\":1,\"files\":{}", "invalid JSON"); }
TEST(ManifestReject, EmptyInput) { expect_rejected("", "invalid JSON"); }
TEST(ManifestReject, TrailingGarbage) { expect_rejected("{\"sealfs\":1,\"files\":{}} x", "invalid JSON"); }
TEST(ManifestReject, SecondDocument) { expect_rejected("{\"sealfs\":1,\"files\":{}}{}", "invalid JSON"); }
TEST(ManifestReject, TopLevelArray) { expect_rejected("[1]", "top level is not an object"); }
TEST(ManifestReject, TopLevelString) { expect_rejected("\"sealfs\"", "top level is not an object"); }
TEST(ManifestReject, MissingVersion) { expect_rejected("{\"files\":{}}", "missing \"sealfs\""); }
TEST(ManifestReject, MissingFiles) { expect_rejected("{\"sealfs\":1}", "missing \"files\""); }
TEST(ManifestReject, UnknownVersion) {
  expect_rejected("{\"sealfs\":2,\"files\":{}}", "unsupported version 2");
}
TEST(ManifestReject, VersionZero) { expect_rejected("{\"sealfs\":0,\"files\":{}}", "unsupported version 0"); }
TEST(ManifestReject, VersionAsString) {
  expect_rejected("{\"sealfs\":\"1\",\"files\":{}}", "not an integer");
}
TEST(ManifestReject, VersionAsDouble) { expect_rejected("{\"sealfs\":1.0,\"files\":{}}", "not an integer"); }
TEST(ManifestReject, FilesNotObject) {
  expect_rejected("{\"sealfs\":1,\"files\":[]}", "files: not an object");
}
TEST(ManifestReject, AcceptNotObject) {
  expect_rejected("{\"sealfs\":1,\"files\":{},\"accept\":1}", "accept: not an object");
}
TEST(ManifestReject, RecordNotObject) { expect_rejected(with_files("{\"a\":16}"), "not an object"); }
TEST(ManifestReject, MissingSize) { expect_rejected(with_files("{\"a\":{}}"), "missing \"size\""); }
TEST(ManifestReject, NegativeSize) {
  expect_rejected(with_files("{\"a\":{\"size\":-1}}"), "size: not an unsigned");
}
TEST(ManifestReject, FractionalSize) {
  expect_rejected(with_files("{\"a\":{\"size\":1.5}}"), "size: not an unsigned");
}
TEST(ManifestReject, IntegralDoubleSize) {
  expect_rejected(with_files("{\"a\":{\"size\":16.0}}"), "size: not an unsigned");
}
TEST(ManifestReject, ExponentSize) {
  expect_rejected(with_files("{\"a\":{\"size\":1e3}}"), "size: not an unsigned");
}
TEST(ManifestReject, StringSize) {
  expect_rejected(with_files("{\"a\":{\"size\":\"16\"}}"), "size: not an unsigned");
}
TEST(ManifestReject, SizeOverLimit) {
  expect_rejected(with_files("{\"a\":{\"size\":" + std::to_string(kMaxManifestFileSize + 1) + "}}"),
                  "larger than");
}
TEST(ManifestReject, SizeOverUint64) {
  expect_rejected(with_files("{\"a\":{\"size\":18446744073709551616}}"), "size: not an unsigned");
}
TEST(ManifestReject, UppercaseDigest) {
  std::string upper = kHexA;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  expect_rejected(with_files("{\"a\":{\"sha256\":\"" + upper + "\",\"size\":1}}"), "sha256");
}
TEST(ManifestReject, ShortDigest) {
  expect_rejected(with_files("{\"a\":{\"sha256\":\"" + kHexA.substr(1) + "\",\"size\":1}}"), "sha256");
}
TEST(ManifestReject, DigestNotString) {
  expect_rejected(with_files("{\"a\":{\"sha256\":1,\"size\":1}}"), "sha256");
}
TEST(ManifestReject, EmptySymlinkTarget) {
  expect_rejected(with_files("{\"a\":{\"size\":0,\"symlink\":\"\"}}"), "symlink");
}
TEST(ManifestReject, SymlinkTargetWithNul) {
  expect_rejected(with_files("{\"a\":{\"size\":3,\"symlink\":\"a\\u0000b\"}}"), "symlink");
}
TEST(ManifestReject, UnknownRecordKey) {
  expect_rejected(with_files("{\"a\":{\"size\":1,\"mode\":420}}"), "unknown key \"mode\"");
}
TEST(ManifestReject, AbsolutePath) {
  expect_rejected(with_files("{\"/etc/passwd\":{\"size\":1}}"), "invalid path");
}
TEST(ManifestReject, DotDotComponent) {
  expect_rejected(with_files("{\"a/../b\":{\"size\":1}}"), "invalid path");
}
TEST(ManifestReject, DotComponent) { expect_rejected(with_files("{\"./a\":{\"size\":1}}"), "invalid path"); }
TEST(ManifestReject, EmptyComponent) {
  expect_rejected(with_files("{\"a//b\":{\"size\":1}}"), "invalid path");
}
TEST(ManifestReject, TrailingSlash) { expect_rejected(with_files("{\"a/\":{\"size\":1}}"), "invalid path"); }
TEST(ManifestReject, EmptyPath) { expect_rejected(with_files("{\"\":{\"size\":1}}"), "invalid path"); }
TEST(ManifestReject, NulInName) {
  expect_rejected(with_files("{\"a\\u0000b\":{\"size\":1}}"), "invalid path");
}
TEST(ManifestReject, DuplicateTopLevelKey) {
  expect_rejected("{\"sealfs\":1,\"files\":{},\"sealfs\":1}", "duplicate key \"sealfs\"");
}
TEST(ManifestReject, DuplicateFile) {
  expect_rejected(with_files("{\"a\":{\"size\":1},\"a\":{\"size\":2}}"), "duplicate key \"a\"");
}
TEST(ManifestReject, DuplicateRecordKey) {
  expect_rejected(with_files("{\"a\":{\"size\":1,\"size\":2}}"), "duplicate key \"size\"");
}
TEST(ManifestReject, DuplicateInExtraSection) {
  expect_rejected("{\"sealfs\":1,\"files\":{},\"cuda\":{\"x\":{\"k\":1,\"k\":2}}}", "duplicate key \"k\"");
}
TEST(ManifestReject, NestingTooDeep) {
  std::string deep = "{\"sealfs\":1,\"files\":{},\"x\":" + std::string(16, '[') + std::string(16, ']') + "}";
  expect_rejected(deep, "nested deeper");
  // Very deep input must be refused without recursing (no stack overflow).
  expect_rejected(std::string(1 << 20, '['), "nested deeper");
}
TEST(ManifestReject, BracketsInsideStringsDoNotCountAsNesting) {
  std::string s = "{\"files\":{},\"sealfs\":1,\"x\":\"" + std::string(100, '[') + "\\\"" + "\"}";
  EXPECT_TRUE(parse_manifest(s).ok());
}
TEST(ManifestReject, NameNotString) { expect_rejected("{\"sealfs\":1,\"files\":{},\"name\":1}", "\"name\""); }
TEST(ManifestReject, NameWithSlash) {
  expect_rejected("{\"sealfs\":1,\"files\":{},\"name\":\"a/b\"}", "\"name\"");
}
TEST(ManifestReject, TooBig) {
  std::string big = "{\"sealfs\":1,\"files\":{},\"pad\":\"" + std::string(kMaxManifestBytes, 'x') + "\"}";
  expect_rejected(big, "larger than");
}
TEST(ManifestReject, ControlCharacterInString) {
  expect_rejected("{\"sealfs\":1,\"files\":{},\"x\":\"a\nb\"}", "invalid JSON");
}
TEST(ManifestReject, MessageQuotesHostileNamesSafely) {
  auto r = parse_manifest(with_files("{\"a\\u001b[31m/..\":{\"size\":1}}"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.find('\x1b'), std::string::npos) << "control byte copied into a log line";
  EXPECT_NE(r.error().message.find("\\x1b"), std::string::npos);
}

// ---- paths ------------------------------------------------------------------

TEST(ManifestPath, Valid) {
  EXPECT_TRUE(is_valid_manifest_path("a"));
  EXPECT_TRUE(is_valid_manifest_path("a/b/c.so"));
  EXPECT_TRUE(is_valid_manifest_path("..."));  // only "." and ".." are special
  EXPECT_TRUE(is_valid_manifest_path(".hidden/..x"));
  EXPECT_TRUE(is_valid_manifest_path(std::string(NAME_MAX, 'x')));
}

TEST(ManifestPath, Invalid) {
  using namespace std::string_literals;
  const std::string bad[] = {"",
                             "/",
                             "/a",
                             "a/",
                             "a//b",
                             ".",
                             "..",
                             "a/.",
                             "a/..",
                             "../a",
                             "./a",
                             "a\0b"s,
                             std::string(NAME_MAX + 1, 'x')};
  for (const auto& p : bad) EXPECT_FALSE(is_valid_manifest_path(p)) << p;
}

// No PATH_MAX bound (R10: an entry may hold a file deeper than that); the
// bound is the store's walking depth, kMaxTreeDepth components.
TEST(ManifestPath, DepthBoundNotLengthBound) {
  std::string deep;
  for (int i = 0; i < 32; ++i) deep += std::string(127, 'd') + "/";
  deep += "f";
  ASSERT_GT(deep.size(), static_cast<std::size_t>(PATH_MAX));
  EXPECT_TRUE(is_valid_manifest_path(deep));
  std::string at_bound;
  for (int i = 1; i < kMaxTreeDepth; ++i) at_bound += "d/";
  EXPECT_TRUE(is_valid_manifest_path(at_bound + "f"));
  EXPECT_FALSE(is_valid_manifest_path("d/" + at_bound + "f"));
}

}  // namespace
}  // namespace sealfs
