// Authenticated manifests on real mounts (-o key_file): daemons without the
// key, or with another one, publish into the same B and a keyed mount never
// shows their entries; a manifest correct but for its MAC is hidden; key
// rotation; the key file's checks at start-up; fsck and adopt with a key.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/support/test_keys.hpp"

namespace sealfs::test {
namespace {

const std::string kKeyA = key_line("fleet-a", 0x10);
const std::string kKeyB = key_line("fleet-b", 0x20);
const std::string kImpostor = key_line("fleet-a", 0x30);  // A's id, another secret

class SignedMounts : public ::testing::Test {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    make_dirs(backing());
  }
  std::string backing() const { return dir_ / "B"; }
  // A key file with these lines (first signs), under a fresh name.
  std::string key_file(const std::vector<std::string>& lines) {
    const std::string path = dir_ / ("keys" + std::to_string(++key_files_));
    std::string text = "# test keys\n";
    for (const auto& l : lines) text += l + "\n";
    write_key_file(path, text);
    return path;
  }
  std::unique_ptr<Mount> mount(const std::string& keys = "") {
    std::string opts = "profile=tilelang,cache_timeout=0";
    if (!keys.empty()) opts += ",key_file=" + keys;
    auto m = std::make_unique<Mount>(MountConfig::with({opts}).backed_by(backing()));
    EXPECT_TRUE(m->ok()) << m->error();
    return m;
  }
  std::size_t quarantined() const { return files_under(backing() + "/.sealfs/quarantine").size(); }

  TempDir dir_{"sealfs-signed"};
  int key_files_ = 0;
};

TEST_F(SignedMounts, AKeyedMountNeverShowsEntriesOfWritersWithoutItsKey) {
  auto keyed = mount(key_file({kKeyA}));
  auto keyless = mount();
  auto impostor = mount(key_file({kImpostor}));
  auto other = mount(key_file({kKeyB}));
  ASSERT_TRUE(keyed->ok() && keyless->ok() && impostor->ok() && other->ok());
  ASSERT_EQ(tilelang("save", keyless->mountpoint(), "by-keyless").status, 0);
  ASSERT_EQ(tilelang("save", impostor->mountpoint(), "by-impostor").status, 0);
  ASSERT_EQ(tilelang("save", other->mountpoint(), "by-other").status, 0);
  ASSERT_EQ(tilelang("save", keyed->mountpoint(), "by-keyed").status, 0);
  for (const char* key : {"by-keyless", "by-impostor", "by-other"}) {
    EXPECT_EQ(tilelang("load", keyed->mountpoint(), key).status, kMiss) << key;
    EXPECT_EQ(lstat_errno(keyed->m("ns/kernels/") + key), ENOENT) << key;
  }
  EXPECT_EQ(list_dir(keyed->m("ns/kernels")), (std::set<std::string>{".", "..", "by-keyed"}));
  EXPECT_EQ(tilelang("load", keyed->mountpoint(), "by-keyed").status, kHit);
  // Each writer sees its own; the keyless one checks content only.
  EXPECT_EQ(tilelang("load", other->mountpoint(), "by-other").status, kHit);
  EXPECT_EQ(tilelang("load", other->mountpoint(), "by-keyed").status, kMiss);
  EXPECT_EQ(tilelang("load", keyless->mountpoint(), "by-keyed").status, kHit);
  EXPECT_EQ(quarantined(), 0u);  // foreign, not damaged: nothing moved
  // The keyed host's own save takes the name over (R5), and then it is a hit.
  ASSERT_EQ(tilelang("save", keyed->mountpoint(), "by-keyless").status, 0);
  EXPECT_EQ(tilelang("load", keyed->mountpoint(), "by-keyless").status, kHit);
}

TEST_F(SignedMounts, AManifestCorrectExceptForItsMacIsHidden) {
  auto keyed = mount(key_file({kKeyA}));
  ASSERT_TRUE(keyed->ok());
  ASSERT_EQ(tilelang("save", keyed->mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", keyed->mountpoint(), "k").status, kHit);
  const std::string manifest = backing() + "/ns/kernels/k/.sealfs-manifest";
  auto text = read_file(manifest);
  ASSERT_TRUE(text.has_value());
  auto parsed = parse_manifest(*text);
  ASSERT_TRUE(parsed.ok() && parsed->mac.has_value()) << *text;
  parsed->mac->hmac[0] ^= 0x01;  // every file still matches; only the MAC is off
  write_file(manifest + ".new", serialize_manifest(*parsed));
  ASSERT_EQ(::rename((manifest + ".new").c_str(), manifest.c_str()), 0);
  EXPECT_TRUE(eventually([&] { return tilelang("load", keyed->mountpoint(), "k").status == kMiss; }));
  EXPECT_EQ(lstat_errno(keyed->m("ns/kernels/k")), ENOENT);
  EXPECT_EQ(quarantined(), 0u);
  // A copy of a valid manifest into another entry with the same files.
  ASSERT_EQ(tilelang("save", keyed->mountpoint(), "src").status, 0);
  const std::string copy = backing() + "/ns/kernels/copy";
  make_dirs(copy);
  for (const auto& f : files_under(backing() + "/ns/kernels/src"))
    write_file(copy + "/" + f, read_file(backing() + "/ns/kernels/src/" + f).value_or(""));
  ASSERT_TRUE(exists_nofollow(copy + "/.sealfs-manifest"));
  EXPECT_EQ(tilelang("load", keyed->mountpoint(), "src").status, kHit);
  EXPECT_EQ(tilelang("load", keyed->mountpoint(), "copy").status, kMiss);
}

TEST_F(SignedMounts, RotationOldKeyStaysVisibleWhileListedAndIsReSignedAtTheNextChange) {
  {
    auto before = mount(key_file({kKeyB}));
    ASSERT_TRUE(before->ok());
    ASSERT_EQ(tilelang("save", before->mountpoint(), "old").status, 0);
    ASSERT_EQ(tilelang("save", before->mountpoint(), "untouched").status, 0);
  }
  const std::string manifest = backing() + "/ns/kernels/old/.sealfs-manifest";
  auto signer = [&] {
    auto m = parse_manifest(read_file(manifest).value_or(""));
    return m && m->mac ? m->mac->key : std::string("none");
  };
  ASSERT_EQ(signer(), "fleet-b");
  {
    auto rotating = mount(key_file({kKeyA, kKeyB}));  // A signs, B still verifies
    ASSERT_TRUE(rotating->ok());
    EXPECT_EQ(tilelang("load", rotating->mountpoint(), "old").status, kHit);
    EXPECT_EQ(tilelang("load", rotating->mountpoint(), "untouched").status, kHit);
    // The entry's next change (a file written into it) signs it with A.
    write_file(rotating->m("ns/kernels/old/notes.txt"), "tuned");
    EXPECT_TRUE(eventually([&] { return signer() == "fleet-a"; })) << signer();
    ASSERT_EQ(tilelang("save", rotating->mountpoint(), "new").status, 0);
  }
  auto after = mount(key_file({kKeyA}));  // B removed
  ASSERT_TRUE(after->ok());
  EXPECT_EQ(tilelang("load", after->mountpoint(), "old").status, kHit);
  EXPECT_EQ(read_file(after->m("ns/kernels/old/notes.txt")), "tuned");
  EXPECT_EQ(tilelang("load", after->mountpoint(), "new").status, kHit);
  EXPECT_EQ(tilelang("load", after->mountpoint(), "untouched").status, kMiss);
  EXPECT_EQ(quarantined(), 0u);
}

TEST_F(SignedMounts, AKeyFileOthersCanReadStopsStartUpWithOneLine) {
  const std::string keys = key_file({kKeyA});
  ASSERT_EQ(::chmod(keys.c_str(), 0640), 0);
  make_dirs(dir_ / "M");
  ProcessResult r = run_process({sealfs_binary(), "-o", "key_file=" + keys, backing(), dir_ / "M"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sealfs: key file " + keys + ": mode 0640", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(is_fuse_mount(dir_ / "M"));
  ProcessResult f = run_process({sealfs_binary(), "fsck", "--key-file", keys, backing()});
  EXPECT_EQ(f.status, 8);
  EXPECT_EQ(f.err.rfind("sealfs: key file", 0), 0u) << f.err;
  write_key_file(keys, key_line("a", 1) + "\n" + key_line("a", 2) + "\n");
  ProcessResult dup = run_process({sealfs_binary(), "-o", "key_file=" + keys, backing(), dir_ / "M"});
  EXPECT_NE(dup.status, 0);
  EXPECT_NE(dup.err.find("appears twice"), std::string::npos) << dup.err;
}

TEST_F(SignedMounts, FsckCountsForeignAndAdoptResignSignsDeliberately) {
  {
    auto keyless = mount();
    ASSERT_TRUE(keyless->ok());
    ASSERT_EQ(tilelang("save", keyless->mountpoint(), "made-before").status, 0);
  }
  const std::string keys = key_file({kKeyA});
  ProcessResult f =
      run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", "--key-file", keys, backing()});
  EXPECT_EQ(f.status, 0) << f.out << f.err;  // foreign is not damage
  EXPECT_NE(f.out.find("foreign 1"), std::string::npos) << f.out;
  ProcessResult plain =
      run_process({sealfs_binary(), "adopt", "-o", "profile=tilelang,key_file=" + keys, backing()});
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find("made-before"), std::string::npos) << plain.out;  // not without --resign
  ProcessResult resign =
      run_process({sealfs_binary(), "adopt", "--resign", "--key", keys, "-o", "profile=tilelang", backing()});
  EXPECT_EQ(resign.status, 0) << resign.out << resign.err;
  EXPECT_NE(resign.out.find("re-signed ns/kernels/made-before"), std::string::npos) << resign.out;
  auto keyed = mount(keys);
  ASSERT_TRUE(keyed->ok());
  EXPECT_EQ(tilelang("load", keyed->mountpoint(), "made-before").status, kHit);
  ProcessResult needs_key = run_process({sealfs_binary(), "adopt", "--resign", backing()});
  EXPECT_EQ(needs_key.status, 1);
}

}  // namespace
}  // namespace sealfs::test
