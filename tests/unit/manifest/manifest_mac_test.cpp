// Signed manifests: the "mac" section's format, what the MAC covers (the
// canonical manifest and the entry's place), tampering, copies and rotation.
#include "core/manifest/manifest_mac.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "core/base/digest.hpp"
#include "core/base/hmac.hpp"
#include "tests/support/test_keys.hpp"

namespace sealfs::test {
namespace {

Manifest sample() {
  Manifest m;
  m.files["kernel_lib.so"] = FileRecord{16, sha256_of("0123456789abcdef"), std::nullopt};
  m.files["device_kernel.cu"] = FileRecord{5, std::nullopt, std::nullopt};
  m.accept["kernel_lib.so"] = FileRecord{3, sha256_of("old"), std::nullopt};
  m.extra["cuda"] = R"({"kernel_lib.so":{"images":1}})";
  return m;
}

constexpr std::string_view kPlace = "ns/kernels/k1";

// The check of a manifest's bytes as a reader does it: parse, then MAC.
std::optional<MacCheck> check_text(const std::string& text, const KeyRing& ring, std::string_view place) {
  auto parsed = parse_manifest(text);
  if (!parsed) return std::nullopt;  // does not parse: damage, never authentic
  auto c = check_manifest_mac(*parsed, ring, place);
  return c ? std::optional<MacCheck>(*c) : std::nullopt;
}

TEST(ManifestMac, HmacSha256MatchesRfc4231) {
  // RFC 4231 test case 2 ("Jefe"), with the key padded as HMAC pads it.
  const std::string key = "Jefe";
  auto mac = hmac_sha256(std::span(reinterpret_cast<const std::uint8_t*>(key.data()), key.size()),
                         "what do ya want for nothing?");
  ASSERT_TRUE(mac.ok());
  EXPECT_EQ(to_hex(*mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ManifestMac, SignedRoundTripVerifies) {
  auto ring = key_ring({key_line("k1", 1)});
  Manifest m = sample();
  ASSERT_TRUE(sign_manifest(m, ring.get(), kPlace).ok());
  ASSERT_TRUE(m.mac.has_value());
  EXPECT_EQ(m.mac->key, "k1");
  const std::string text = serialize_manifest(m);
  EXPECT_NE(text.find(R"("mac":{"hmac-sha256":")"), std::string::npos) << text;
  auto back = parse_manifest(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, m);
  EXPECT_EQ(serialize_manifest(*back), text);  // still one canonical form
  EXPECT_EQ(check_text(text, *ring, kPlace), MacCheck::authentic);
  // The MAC is HMAC-SHA-256 of the documented message.
  auto expect = hmac_sha256(ring->signer().secret, "sealfs-manifest-mac-v1\n" + std::string(kPlace) + '\0' +
                                                       serialize_manifest(m, false));
  ASSERT_TRUE(expect.ok());
  EXPECT_EQ(m.mac->hmac, *expect);
}

TEST(ManifestMac, WithoutKeysTheBytesAreTheUnsignedFormat) {
  Manifest m = sample();
  const std::string unsigned_text = serialize_manifest(m);
  EXPECT_EQ(unsigned_text.find("mac"), std::string::npos);
  auto ring = key_ring({key_line("k1", 1)});
  ASSERT_TRUE(sign_manifest(m, ring.get(), kPlace).ok());
  EXPECT_EQ(serialize_manifest(m, false), unsigned_text);
  // A writer without keys that rewrites a signed manifest drops the stale MAC.
  ASSERT_TRUE(sign_manifest(m, nullptr, kPlace).ok());
  EXPECT_EQ(serialize_manifest(m), unsigned_text);
  EXPECT_EQ(check_text(unsigned_text, *ring, kPlace), MacCheck::no_mac);
}

TEST(ManifestMac, EveryByteAndFieldIsCovered) {
  auto ring = key_ring({key_line("k1", 1)});
  Manifest m = sample();
  ASSERT_TRUE(sign_manifest(m, ring.get(), kPlace).ok());
  const std::string text = serialize_manifest(m);
  // Any byte changed: either the text no longer parses or the MAC fails.
  for (std::size_t i = 0; i < text.size(); ++i) {
    for (char flip : {'\x01', '\x20'}) {
      std::string t = text;
      t[i] = static_cast<char>(t[i] ^ flip);
      auto c = check_text(t, *ring, kPlace);
      EXPECT_NE(c, MacCheck::authentic) << "byte " << i << " of " << text;
    }
  }
  // Field by field: each change of what the manifest says breaks the MAC.
  std::vector<std::function<void(Manifest&)>> edits = {
      [](Manifest& x) { x.files["kernel_lib.so"].size = 17; },
      [](Manifest& x) { x.files["kernel_lib.so"].sha256 = sha256_of("other"); },
      [](Manifest& x) { x.files["device_kernel.cu"].sha256 = sha256_of("x"); },
      [](Manifest& x) {
        x.files["new.so"] = FileRecord{1, sha256_of("n"), std::nullopt};
      },
      [](Manifest& x) { x.files.erase("device_kernel.cu"); },
      [](Manifest& x) { x.accept.clear(); },
      [](Manifest& x) { x.name = "kernel_lib.so"; },
      [](Manifest& x) { x.extra["cuda"] = R"({"kernel_lib.so":{"images":2}})"; },
      [](Manifest& x) { x.extra["note"] = "1"; },
      [](Manifest& x) {
        x.files["l"] = FileRecord{1, std::nullopt, std::string("a")};
      },
  };
  for (std::size_t i = 0; i < edits.size(); ++i) {
    Manifest t = m;
    edits[i](t);
    auto c = check_manifest_mac(t, *ring, kPlace);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*c, MacCheck::mismatch) << "edit " << i;
  }
  // The mac section itself: another key id, another MAC.
  Manifest other_id = m;
  other_id.mac->key = "k2";
  EXPECT_EQ(*check_manifest_mac(other_id, *ring, kPlace), MacCheck::unknown_key);
  Manifest other_mac = m;
  other_mac.mac->hmac[0] ^= 1;
  EXPECT_EQ(*check_manifest_mac(other_mac, *ring, kPlace), MacCheck::mismatch);
}

TEST(ManifestMac, AManifestCopiedToAnotherPlaceFails) {
  auto ring = key_ring({key_line("k1", 1)});
  Manifest m = sample();
  ASSERT_TRUE(sign_manifest(m, ring.get(), kPlace).ok());
  for (std::string_view place : {"ns/kernels/k2", "ns2/kernels/k1", "kernels/k1", "ns/kernels/k1/sub", ""})
    EXPECT_EQ(*check_manifest_mac(m, *ring, place), MacCheck::mismatch) << place;
  EXPECT_EQ(*check_manifest_mac(m, *ring, kPlace), MacCheck::authentic);
}

TEST(ManifestMac, AnotherSecretUnderTheSameIdFails) {
  auto ring = key_ring({key_line("k1", 1)});
  auto impostor = key_ring({key_line("k1", 2)});
  Manifest m = sample();
  ASSERT_TRUE(sign_manifest(m, impostor.get(), kPlace).ok());
  EXPECT_EQ(*check_manifest_mac(m, *ring, kPlace), MacCheck::mismatch);
}

TEST(ManifestMac, RotationFirstKeySignsEveryListedKeyVerifies) {
  const std::string a = key_line("A", 0x10);
  const std::string b = key_line("B", 0x20);
  auto old_ring = key_ring({b});     // before: B signs
  auto rotating = key_ring({a, b});  // during: A signs, B still verifies
  auto rotated = key_ring({a});      // after: B removed
  Manifest by_b = sample();
  ASSERT_TRUE(sign_manifest(by_b, old_ring.get(), kPlace).ok());
  Manifest by_a = sample();
  ASSERT_TRUE(sign_manifest(by_a, rotating.get(), kPlace).ok());
  EXPECT_EQ(by_a.mac->key, "A");
  EXPECT_EQ(*check_manifest_mac(by_a, *rotating, kPlace), MacCheck::authentic);
  EXPECT_EQ(*check_manifest_mac(by_b, *rotating, kPlace), MacCheck::authentic);
  EXPECT_EQ(*check_manifest_mac(by_a, *rotated, kPlace), MacCheck::authentic);
  EXPECT_EQ(*check_manifest_mac(by_b, *rotated, kPlace), MacCheck::unknown_key);
  EXPECT_EQ(*check_manifest_mac(by_a, *old_ring, kPlace), MacCheck::unknown_key);
}

TEST(ManifestMac, TheMacSectionIsStrict) {
  const std::string base = R"({"files":{},"mac":)";
  const std::string hex(64, 'a');
  EXPECT_TRUE(parse_manifest(base + R"({"hmac-sha256":")" + hex + R"(","key":"k"},"sealfs":1})").ok());
  for (const std::string& mac :
       {std::string(R"("x")"), std::string(R"({"key":"k"})"), R"({"hmac-sha256":")" + hex + R"("})",
        R"({"hmac-sha256":")" + std::string(64, 'A') + R"(","key":"k"})",
        R"({"hmac-sha256":")" + hex.substr(2) + R"(","key":"k"})",
        R"({"hmac-sha256":")" + hex + R"(","key":"bad/id"})", R"({"hmac-sha256":")" + hex + R"(","key":""})",
        R"({"hmac-sha256":")" + hex + R"(","key":"k","x":1})",
        R"({"hmac-sha256":")" + hex + R"(","key":7})"}) {
    auto r = parse_manifest(base + mac + R"(,"sealfs":1})");
    EXPECT_FALSE(r.ok()) << mac;
    EXPECT_EQ(r.code(), EBADMSG) << mac;
  }
}

}  // namespace
}  // namespace sealfs::test
