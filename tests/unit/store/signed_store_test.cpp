// Authenticated manifests in the store (-o key_file): what a keyed store
// writes is signed for its place, and what no listed key signed for its
// place is foreign (R3): hidden, left in place, never quarantined, until its
// name is needed (R5) or `adopt --resign` signs it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/store/offline.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_keys.hpp"

namespace sealfs::test {
namespace {

const std::map<std::string, std::string> kFiles = {{"lib.so", "library"}, {"k.src", "source"}};

class SignedStoreTest : public StoreTest {
 public:
  void with_keys(const std::vector<std::string>& lines) {
    options().keys = lines.empty() ? nullptr : key_ring(lines);
    open_store();
  }
  Manifest manifest_at(const std::string& dir_rel, const std::string& name = ".sealfs-manifest") {
    UniqueFd d = dir(dir_rel);
    auto m = read_manifest_at(d.get(), name);
    EXPECT_TRUE(m.ok()) << dir_rel << "/" << name;
    return m ? m->manifest : Manifest{};
  }
  // The MAC of the manifest at dir_rel/name for place, by the store's keys.
  MacCheck mac_of(const std::string& dir_rel, const std::string& place,
                  const std::string& name = ".sealfs-manifest") {
    auto c = check_manifest_mac(manifest_at(dir_rel, name), *options().keys, place);
    EXPECT_TRUE(c.ok());
    return c ? *c : MacCheck::mismatch;
  }
  FsckReport fsck(bool repair = false) {
    auto r = sealfs::fsck(store(), repair);
    EXPECT_TRUE(r.ok());
    return r ? *r : FsckReport{};
  }

  const std::string key_a_ = key_line("A", 0x10);
  const std::string key_b_ = key_line("B", 0x20);
};

TEST_F(SignedStoreTest, PublishesSignedForTheDestination) {
  with_keys({key_a_});
  publish_entry("k", kFiles);
  Manifest m = manifest_at("c/k");
  ASSERT_TRUE(m.mac.has_value());
  EXPECT_EQ(m.mac->key, "A");
  EXPECT_EQ(mac_of("c/k", "c/k"), MacCheck::authentic);
  EXPECT_EQ(mac_of("c/k", "tmp/k"), MacCheck::mismatch);  // signed for where it went, not where it was
  EXPECT_EQ(read_visible("c/k/lib.so"), "library");
  // A file entry: its sidecar is signed for the file's own place.
  write_file(B("tmp/f.part"), "file");
  ASSERT_TRUE(rename("tmp/f.part", "c/f.bin").ok());
  EXPECT_EQ(mac_of("c", "c/f.bin", ".sealfs-manifest.f.bin"), MacCheck::authentic);
  EXPECT_EQ(read_visible("c/f.bin"), "file");
  EXPECT_EQ(fsck().valid, 2u);
}

TEST_F(SignedStoreTest, WithoutKeysNothingIsSigned) {
  publish_entry("k", kFiles);
  EXPECT_FALSE(manifest_at("c/k").mac.has_value());
  EXPECT_EQ(slurp(B("c/k/.sealfs-manifest")).find("\"mac\""), std::string::npos);
  EXPECT_TRUE(visible("c/k"));
}

TEST_F(SignedStoreTest, UnsignedAndWrongKeyEntriesAreForeignHiddenAndKeptInPlace) {
  publish_entry("unsigned", kFiles);  // a writer without a key
  with_keys({key_b_});
  publish_entry("by-b", kFiles);  // a writer with another key
  write_file(B("tmp/f.part"), "file");
  ASSERT_TRUE(rename("tmp/f.part", "c/f.bin").ok());
  with_keys({key_a_});
  for (const char* rel : {"c/unsigned", "c/by-b", "c/f.bin", "c/by-b/lib.so"})
    EXPECT_EQ(lookup_errno(rel), ENOENT) << rel;
  EXPECT_EQ(listed("c"), (std::set<std::string>{}));
  EXPECT_EQ(quarantine_slots(), 0u);
  EXPECT_TRUE(exists_nofollow(B("c/unsigned/lib.so")));
  EXPECT_TRUE(exists_nofollow(B("c/by-b/.sealfs-manifest")));
  EXPECT_TRUE(exists_nofollow(B("c/f.bin")));
  // fsck counts them foreign, not invalid, and --repair leaves them be.
  FsckReport r = fsck(true);
  EXPECT_EQ(r.foreign, 3u);
  EXPECT_EQ(r.invalid, 0u);
  EXPECT_EQ(r.quarantined, 0u);
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(SignedStoreTest, AManifestCorrectButForItsMacIsHidden) {
  with_keys({key_a_});
  publish_entry("k", kFiles);
  Manifest m = manifest_at("c/k");
  m.mac->hmac[7] ^= 0x40;
  write_file(B("c/k/.sealfs-manifest"), serialize_manifest(m));
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
  EXPECT_EQ(quarantine_slots(), 0u);
  // The same manifest unsigned (a writer who knows the format, not the key).
  m.mac.reset();
  write_file(B("c/k/.sealfs-manifest"), serialize_manifest(m));
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
}

TEST_F(SignedStoreTest, AManifestCopiedFromAnotherEntryIsHidden) {
  with_keys({key_a_});
  publish_entry("a", kFiles);
  // Another entry with the same files and a's manifest: a valid manifest for c/a, not for c/b.
  make_dirs(B("c/b"));
  for (const auto& [name, content] : kFiles) write_file(B("c/b/" + name), content);
  write_file(B("c/b/.sealfs-manifest"), slurp(B("c/a/.sealfs-manifest")));
  EXPECT_TRUE(visible("c/a"));
  EXPECT_EQ(lookup_errno("c/b"), ENOENT);
  // A file entry's sidecar copied beside another file with the same bytes.
  write_file(B("tmp/f.part"), "same");
  ASSERT_TRUE(rename("tmp/f.part", "c/one").ok());
  write_file(B("c/two"), "same");
  Manifest side = manifest_at("c", ".sealfs-manifest.one");
  FileRecord rec = side.files.at("one");
  side.files.clear();
  side.files["two"] = rec;  // even with its name fixed up, the MAC names "c/one"
  write_file(B("c/.sealfs-manifest.two"), serialize_manifest(side));
  EXPECT_TRUE(visible("c/one"));
  EXPECT_EQ(lookup_errno("c/two"), ENOENT);
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(SignedStoreTest, AnEntryMovedBehindTheMountIsHiddenThere) {
  with_keys({key_a_});
  publish_entry("k", kFiles);
  ASSERT_TRUE(visible("c/k"));  // its verdict is cached by inode
  ASSERT_EQ(::rename(B("c/k").c_str(), B("c/moved").c_str()), 0);
  EXPECT_EQ(lookup_errno("c/moved"), ENOENT);
}

TEST_F(SignedStoreTest, MovesThroughTheStoreSignAgainForTheNewPlace) {
  with_keys({key_a_});
  publish_entry("k", kFiles);
  ASSERT_TRUE(rename("c/k", "c/k2").ok());  // an entry moved as it is
  EXPECT_EQ(read_visible("c/k2/lib.so"), "library");
  EXPECT_EQ(mac_of("c/k2", "c/k2"), MacCheck::authentic);
  // A container holding entries: each is signed again for its new place.
  UniqueFd root = dir("");
  ASSERT_TRUE(store().mkdir(root.get(), "ns", 0755).ok());
  stage("tmp/e", kFiles);
  ASSERT_TRUE(rename("tmp/e", "ns/e").ok());
  write_file(B("tmp/f.part"), "file");
  ASSERT_TRUE(rename("tmp/f.part", "ns/f.bin").ok());
  ASSERT_TRUE(rename("ns", "ns2").ok());
  EXPECT_EQ(read_visible("ns2/e/lib.so"), "library");
  EXPECT_EQ(read_visible("ns2/f.bin"), "file");
  // A foreign entry inside a moved container stays foreign.
  with_keys({});
  stage("tmp/u", kFiles);
  ASSERT_TRUE(rename("tmp/u", "ns2/u").ok());
  with_keys({key_a_});
  ASSERT_TRUE(rename("ns2", "ns3").ok());
  EXPECT_TRUE(visible("ns3/e"));
  EXPECT_EQ(lookup_errno("ns3/u"), ENOENT);
}

TEST_F(SignedStoreTest, AForeignEntryGivesWayWhenItsNameIsNeeded) {
  publish_entry("k", {{"lib.so", "old"}});
  with_keys({key_a_});
  ASSERT_EQ(lookup_errno("c/k"), ENOENT);
  stage("tmp/k", kFiles);
  ASSERT_TRUE(rename("tmp/k", "c/k").ok());  // R5: the foreign one moves to quarantine
  EXPECT_EQ(read_visible("c/k/lib.so"), "library");
  EXPECT_EQ(quarantine_slots(), 1u);
}

TEST_F(SignedStoreTest, RotationOldKeyVerifiesWhileListedAndIsReplacedAtTheNextChange) {
  with_keys({key_b_});
  publish_entry("amended", kFiles);
  publish_entry("untouched", kFiles);
  with_keys({key_a_, key_b_});  // A signs now, B still verifies
  EXPECT_TRUE(visible("c/amended"));
  EXPECT_TRUE(visible("c/untouched"));
  EXPECT_EQ(manifest_at("c/amended").mac->key, "B");
  write_file(B("tmp/more"), "more");
  ASSERT_TRUE(rename("tmp/more", "c/amended/more").ok());  // an amend re-signs
  EXPECT_EQ(manifest_at("c/amended").mac->key, "A");
  EXPECT_EQ(read_visible("c/amended/more"), "more");
  with_keys({key_a_});  // B removed
  EXPECT_TRUE(visible("c/amended"));
  EXPECT_EQ(read_visible("c/amended/lib.so"), "library");
  EXPECT_EQ(lookup_errno("c/untouched"), ENOENT);
}

TEST_F(SignedStoreTest, AdoptSealsForeignFilesButResignIsDeliberate) {
  publish_entry("unsigned", kFiles);
  publish_entry("damaged", kFiles);
  write_file(B("c/damaged/lib.so"), "LIBRARY");  // same size, other bytes
  write_file(B("c/plain"), "plain");             // no manifest at all
  with_keys({key_b_});
  publish_entry("by-b", kFiles);
  with_keys({key_a_, key_b_});
  ASSERT_TRUE(visible("c/by-b"));
  auto adopted = sealfs::adopt(store(), {});
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(*adopted, (std::vector<std::string>{"c/plain"}));  // unsigned entries are left to --resign
  EXPECT_EQ(mac_of("c", "c/plain", ".sealfs-manifest.plain"), MacCheck::authentic);
  EXPECT_EQ(lookup_errno("c/unsigned"), ENOENT);
  auto resigned = sealfs::resign(store(), {});
  ASSERT_TRUE(resigned.ok());
  std::sort(resigned->signed_again.begin(), resigned->signed_again.end());
  EXPECT_EQ(resigned->signed_again, (std::vector<std::string>{"c/by-b", "c/unsigned"}));
  ASSERT_EQ(resigned->refused.size(), 1u);
  EXPECT_EQ(resigned->refused[0].rfind("c/damaged: ", 0), 0u) << resigned->refused[0];
  EXPECT_EQ(manifest_at("c/by-b").mac->key, "A");
  EXPECT_EQ(read_visible("c/unsigned/lib.so"), "library");
  EXPECT_EQ(lookup_errno("c/damaged"), ENOENT);
  EXPECT_EQ(quarantine_slots(), 0u);
  with_keys({});
  EXPECT_EQ(sealfs::resign(store(), {}).code(), EINVAL);
}

}  // namespace
}  // namespace sealfs::test
