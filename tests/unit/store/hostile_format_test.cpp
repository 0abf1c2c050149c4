// Issue 12, items 7–9: hostile manifests and what the store writes.
//  7 symlink records: a name a validator guards must be a regular file, and a
//    target must stay inside its entry (verify and publish/seal alike);
//  8 a manifest gets the narrowest access of the files it covers;
//  9 canonical means canonical: no byte-order mark, no invalid UTF-8.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/offline.hpp"
#include "core/verify/entry.hpp"
#include "tests/support/entry_location.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

// ---- 9: canonical means canonical ------------------------------------------

const std::string kValid = "{\"files\":{\"a\":{\"size\":1}},\"sealfs\":1}";

TEST(HostileFormat, ByteOrderMarkIsRefused) {
  ASSERT_TRUE(parse_manifest(kValid).ok());
  auto r = parse_manifest("\xEF\xBB\xBF" + kValid);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), EBADMSG);
  EXPECT_NE(r.error().message.find("byte-order mark"), std::string::npos) << r.error().message;
  EXPECT_FALSE(canonical_json("\xEF\xBB\xBF{}").ok());
}

TEST(HostileFormat, InvalidUtf8AnywhereIsRefused) {
  const std::string bad[] = {
      "{\"files\":{\"a\":{\"size\":1}},\"sealfs\":1,\"x\":\"\xff\"}",  // an unknown section's value
      "{\"files\":{\"a\":{\"size\":1}},\"sealfs\":1,\"x\xc3\":1}",  // an unknown section's name (truncated)
      "{\"files\":{\"a\":{\"size\":1}},\"sealfs\":1,\"x\":{\"k\":[\"\xc0\xaf\"]}}",  // overlong, nested
      "{\"files\":{\"a\":{\"size\":1}},\"sealfs\":1,\"x\":\"\xed\xa0\x80\"}",        // a surrogate, raw
      "{\"files\":{\"a\":{\"size\":1}},\"sealfs\":1,\"x\":\"\\udc00\"}",  // a lone low surrogate, escaped
      "{\"files\":{\"a\":{\"note\":\"\xfe\",\"size\":1}},\"sealfs\":1}",  // in a record's other field
  };
  // File names and symlink targets are bytes (POSIX): recorded verbatim.
  EXPECT_TRUE(parse_manifest("{\"files\":{\"caf\xe9\":{\"size\":1}},\"sealfs\":1}").ok());
  EXPECT_TRUE(parse_manifest("{\"files\":{\"a\":{\"size\":1,\"symlink\":\"\xfe\"}},\"sealfs\":1}").ok());
  for (const auto& json : bad) {
    auto r = parse_manifest(json);
    EXPECT_FALSE(r.ok()) << "accepted: " << json;
    if (!r.ok()) {
      EXPECT_EQ(r.code(), EBADMSG);
    }
  }
  EXPECT_FALSE(canonical_json("[\"\\udc00\"]").ok());
  // Valid UTF-8 and escaped pairs stay accepted.
  EXPECT_TRUE(
      parse_manifest(
          "{\"files\":{\"caf\xc3\xa9\":{\"size\":1}},\"sealfs\":1,\"x\":\"\\ud83d\\ude00\xf0\x9f\x98\x80\"}")
          .ok());
}

TEST(HostileFormat, Utf8Validator) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii\x7f"));
  EXPECT_TRUE(is_valid_utf8("\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"));
  for (const char* s :
       {"\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x8f\xbf\xbf",
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xc2", "\xe2\x82", "\xe2\x28\xa1"})
    EXPECT_FALSE(is_valid_utf8(s)) << ::testing::PrintToString(std::string(s));
}

// ---- 7: symlink records ------------------------------------------------------

TEST(HostileFormat, SymlinkTargetsStayInsideTheEntry) {
  EXPECT_TRUE(symlink_stays_inside("l", "x"));
  EXPECT_TRUE(symlink_stays_inside("l", "./sub/x"));
  EXPECT_TRUE(symlink_stays_inside("sub/l", "../x"));
  EXPECT_TRUE(symlink_stays_inside("a/b/l", "../../x/y"));
  EXPECT_FALSE(symlink_stays_inside("l", "/etc/shadow"));
  EXPECT_FALSE(symlink_stays_inside("l", "../x"));
  EXPECT_FALSE(symlink_stays_inside("l", ".."));
  EXPECT_FALSE(symlink_stays_inside("a/l", "../../x"));
  EXPECT_FALSE(symlink_stays_inside("sub/l", "x/../../y"));  // ".." after a name: where "x" leads is unknown
  EXPECT_FALSE(symlink_stays_inside("sub/l", "x/.."));
  // The format itself allows any target: where a symlink may point is the
  // entry verifier's rule (a file entry in a container may point anywhere).
  EXPECT_TRUE(
      parse_manifest("{\"files\":{\"l\":{\"size\":11,\"symlink\":\"/etc/shadow\"}},\"sealfs\":1}").ok());
}

class HostileEntry : public ::testing::Test {
 protected:
  void SetUp() override {
    make_dirs(tmp_ / "e");
    dir_.reset(::open((tmp_ / "e").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir_.valid());
    profile_.name = "t";
    profile_.size_only_globs = {"**/*.src"};
  }
  EntryLocation where() { return dir_entry_at(dir_.get(), "c/e"); }
  TempDir tmp_{"sealfs-hostile"};
  UniqueFd dir_;
  Profile profile_;
  Metrics metrics_;
  Verifier verifier_{metrics_};
  EntryVerifier entries_{verifier_, std::chrono::hours(1), 16, &profile_};
};

TEST_F(HostileEntry, ASymlinkUnderAValidatedNameMakesTheEntryInvalid) {
  profile_.validators = {{"**/*.so", "cuda"}};
  write_file(tmp_ / "e/real.so", "ELF bytes");
  ASSERT_EQ(::symlink("real.so", (tmp_ / "e/kernel_lib.so").c_str()), 0);
  Manifest m;
  m.files["real.so"] = FileRecord{9, sha256_of("ELF bytes"), std::nullopt};
  m.files["kernel_lib.so"] = FileRecord{7, std::nullopt, std::string("real.so")};
  ASSERT_TRUE(write_manifest_atomic(dir_.get(), kDirManifest, m, false).ok());
  auto v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_FALSE(v->valid);
  EXPECT_NE(v->reason.find("kernel_lib.so: a symlink where the profile validates"), std::string::npos)
      << v->reason;
  // Hashed but guarded by no validator: through M it leads to real.so,
  // which the manifest verifies, so the entry is valid.
  profile_.validators.clear();
  v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_TRUE(v->valid) << v->reason;
  profile_.validators = {{"**/*.so", "cuda"}};
  // The same symlink under a size-only name is fine (its target stays inside).
  ASSERT_EQ(::rename((tmp_ / "e/kernel_lib.so").c_str(), (tmp_ / "e/link.src").c_str()), 0);
  m.files.erase("kernel_lib.so");
  m.files["link.src"] = FileRecord{7, std::nullopt, std::string("real.so")};
  ASSERT_TRUE(write_manifest_atomic(dir_.get(), kDirManifest, m, false).ok());
  v = entries_.check(where(), VerifyDepth::fresh);
  EXPECT_TRUE(v->valid) << v->reason;
  // A symlink in B where a hashed name's record says regular file: invalid.
  m.files.erase("link.src");
  m.files["x.so"] = FileRecord{7, sha256_of("real.so"), std::nullopt};
  ASSERT_EQ(::symlink("real.so", (tmp_ / "e/x.so").c_str()), 0);
  ASSERT_TRUE(write_manifest_atomic(dir_.get(), kDirManifest, m, false).ok());
  EXPECT_FALSE(entries_.check(where(), VerifyDepth::fresh)->valid);
}

// ---- store: publish, seal, symlink(2) refuse what verification would -------------

class HostileStore : public StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    make_dirs(B("c"));
  }
  mode_t mode_of(std::string_view rel) {
    struct stat st {};
    return ::lstat(B(rel).c_str(), &st) == 0 ? st.st_mode & 07777 : 07777777;
  }
  gid_t gid_of(std::string_view rel) {
    struct stat st {};
    return ::lstat(B(rel).c_str(), &st) == 0 ? st.st_gid : static_cast<gid_t>(-1);
  }
  void chmod_b(std::string_view rel, mode_t mode) { ASSERT_EQ(::chmod(B(rel).c_str(), mode), 0); }
};

TEST_F(HostileStore, PublishOfATreeWithAHashedSymlinkFailsAndPublishesNothing) {
  stage("tmp/s", {{"real.so", "ELF"}});
  ASSERT_EQ(::symlink("real.so", B("tmp/s/kernel_lib.so").c_str()), 0);
  Status s = rename("tmp/s", "c/k");
  EXPECT_EQ(s.code(), EBADMSG);
  EXPECT_FALSE(exists_nofollow(B("c/k")));
  EXPECT_FALSE(exists_nofollow(B("tmp/s/.sealfs-manifest")));
  EXPECT_TRUE(exists_nofollow(B("tmp/s/kernel_lib.so")));  // the writer's staging dir is left as it was
}

TEST_F(HostileStore, PublishOfATreeWithAnEscapingSymlinkFails) {
  for (const char* target : {"/etc/shadow", "../../outside", "sub/../../x"}) {
    SCOPED_TRACE(target);
    make_dirs(B("tmp/s/sub"));
    write_file(B("tmp/s/a"), "a");
    ASSERT_EQ(::symlink(target, B("tmp/s/sub/l.src").c_str()), 0);  // size-only: only the target is wrong
    EXPECT_EQ(rename("tmp/s", "c/k").code(), EBADMSG);
    EXPECT_FALSE(exists_nofollow(B("c/k")));
    ASSERT_EQ(::unlink(B("tmp/s/sub/l.src").c_str()), 0);
  }
  // One level up from sub/ is still inside: published.
  ASSERT_EQ(::symlink("../a", B("tmp/s/sub/l.src").c_str()), 0);
  ASSERT_TRUE(rename("tmp/s", "c/k").ok());
  EXPECT_TRUE(visible("c/k/sub/l.src"));
}

// In a container a symlink is shown as it is (R10), wherever it points,
// unless a validator guards its name (the test profile's "**" guards every
// name, so size-only names stand for "not an artefact" here). Inside a
// directory entry a target must stay inside the entry.
TEST_F(HostileStore, SymlinkThroughTheStoreUnderAGuardedNameOrEscapingAnEntryIsRefused) {
  UniqueFd root = dir("");
  EXPECT_EQ(store().symlink(root.get(), "kernel_lib.so", "x").code(), EPERM);
  EXPECT_FALSE(exists_nofollow(B("kernel_lib.so")));
  EXPECT_FALSE(exists_nofollow(B(".sealfs-manifest.kernel_lib.so")));
  profile().validators.clear();  // a generic-like profile: nothing guarded
  open_store();
  root = dir("");
  EXPECT_TRUE(store().symlink(root.get(), "abs", "/usr/bin/python3").ok());
  EXPECT_TRUE(store().symlink(root.get(), "up", "../x").ok());
  EXPECT_EQ(lookup_errno("abs"), 0);
  stage("tmp/e", {{"real.so", "ELF"}});
  ASSERT_TRUE(rename("tmp/e", "e").ok());
  UniqueFd e = dir("e");
  EXPECT_EQ(store().symlink(e.get(), "l.src", "../../x").code(), EPERM);
  EXPECT_TRUE(store().symlink(e.get(), "l.src", "real.so").ok());
  EXPECT_EQ(lookup_errno("e/l.src"), 0);
  // A hashed name no validator guards leads, through M, to a name the entry
  // verifies: recorded.
  EXPECT_TRUE(store().symlink(e.get(), "h.so", "real.so").ok());
  EXPECT_EQ(lookup_errno("e/h.so"), 0);
}

TEST_F(HostileStore, PlantedSymlinkRecordsAreHidden) {
  // The reproduction: a sidecar vouching for /etc/shadow under *.so.
  ASSERT_EQ(::symlink("/etc/shadow", B("kernel_lib.so").c_str()), 0);
  write_file(B(".sealfs-manifest.kernel_lib.so"),
             "{\"files\":{\"kernel_lib.so\":{\"size\":11,\"symlink\":\"/etc/shadow\"}},\"sealfs\":1}");
  // A relative climb out of a directory entry, under a size-only name.
  make_dirs(B("c/k"));
  ASSERT_EQ(::symlink("../../x", B("c/k/l.src").c_str()), 0);
  write_file(B("c/k/.sealfs-manifest"),
             "{\"files\":{\"l.src\":{\"size\":7,\"symlink\":\"../../x\"}},\"sealfs\":1}");
  // A hashed name as a symlink to a sibling inside the entry.
  make_dirs(B("c/j"));
  write_file(B("c/j/real.so"), "ELF");
  ASSERT_EQ(::symlink("real.so", B("c/j/kernel_lib.so").c_str()), 0);
  write_file(B("c/j/.sealfs-manifest"),
             "{\"files\":{\"kernel_lib.so\":{\"size\":7,\"symlink\":\"real.so\"},\"real.so\":{\"sha256\":\"" +
                 to_hex(sha256_of("ELF")) + "\",\"size\":3}},\"sealfs\":1}");
  auto report = sealfs::fsck(store(), false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->invalid, 3u);
  EXPECT_EQ(lookup_errno("kernel_lib.so"), ENOENT);
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
  EXPECT_EQ(lookup_errno("c/j"), ENOENT);
}

TEST_F(HostileStore, ManifestWithAByteOrderMarkIsInvalid) {
  write_file(B("f"), "x");
  write_file(B(".sealfs-manifest.f"), "\xEF\xBB\xBF{\"files\":{\"f\":{\"sha256\":\"" +
                                          to_hex(sha256_of("x")) + "\",\"size\":1}},\"sealfs\":1}");
  EXPECT_EQ(lookup_errno("f"), ENOENT);
  write_file(B("g"), "x");
  write_file(B(".sealfs-manifest.g"), "{\"files\":{\"g\":{\"sha256\":\"" + to_hex(sha256_of("x")) +
                                          "\",\"size\":1}},\"note\":\"\xff\",\"sealfs\":1}");
  EXPECT_EQ(lookup_errno("g"), ENOENT);
}

// File names are bytes: a name that is not UTF-8 is recorded verbatim (one
// spelling per name) and verifies; only other strings must be UTF-8.
// (stress-ng's filename stressor makes such names; they were hidden.)
TEST_F(HostileStore, NamesThatAreNotUtf8AreSealedVerbatim) {
  stage("tmp/s", {{"caf\xe9.so", "x"}});
  ASSERT_TRUE(rename("tmp/s", "c/k").ok());
  EXPECT_EQ(read_visible("c/k/caf\xe9.so"), "x");
  UniqueFd root = dir("");
  auto made = store().create(root.get(), "\xff\xfe", 0644, O_WRONLY);
  ASSERT_TRUE(made.ok()) << made.error().message;
  made->open_fd.reset();
  ASSERT_TRUE(store().seal(made->found.fd.get()).ok());
  EXPECT_EQ(lookup_errno("\xff\xfe"), 0);
  auto parsed = parse_manifest("{\"files\":{\"\xff\":{\"size\":0}},\"sealfs\":1}");
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_FALSE(parse_manifest("{\"files\":{\"\xff\":{\"size\":0}},\"note\":\"\xff\",\"sealfs\":1}").ok());
}

// ---- 8: a manifest gets the narrowest access of the files it covers ---------------

TEST(HostileAccess, NarrowestAccess) {
  auto st = [](mode_t mode, gid_t gid) {
    struct stat s {};
    s.st_mode = S_IFREG | mode;
    s.st_gid = gid;
    return s;
  };
  EXPECT_EQ(narrowest_access({}).mode, 0644u);
  EXPECT_EQ(narrowest_access({st(0644, 5)}), (ManifestAccess{0644, 5}));
  EXPECT_EQ(narrowest_access({st(0600, 5)}), (ManifestAccess{0600, std::nullopt}));
  EXPECT_EQ(narrowest_access({st(0640, 5), st(0600, 5)}), (ManifestAccess{0600, std::nullopt}));
  EXPECT_EQ(narrowest_access({st(0640, 5), st(0644, 5)}), (ManifestAccess{0640, 5}));
  EXPECT_EQ(narrowest_access({st(0644, 5), st(0644, 6)}),
            (ManifestAccess{0604, std::nullopt}));  // two groups
  EXPECT_EQ(narrowest_access({st(0604, 5)}), (ManifestAccess{0604, std::nullopt}));
  EXPECT_EQ(narrowest_access({st(0755, 5)}), (ManifestAccess{0644, 5}));  // never more than read
}

TEST_F(HostileStore, EveryManifestWriterGivesTheNarrowestMode) {
  UniqueFd root = dir("");
  // publish of a file entry (sidecar written before the rename)
  write_file(B("tmp/f"), "secret");
  chmod_b("tmp/f", 0600);
  ASSERT_TRUE(rename("tmp/f", "c/f").ok());
  EXPECT_EQ(mode_of("c/.sealfs-manifest.f"), 0600u);
  // replacing it (R6: accept both) with a 0644 file: the sidecar covers the new file only at the end
  write_file(B("tmp/f2"), "public");
  chmod_b("tmp/f2", 0644);
  ASSERT_TRUE(rename("tmp/f2", "c/f").ok());
  EXPECT_EQ(mode_of("c/.sealfs-manifest.f"), 0644u);
  // publish of a directory covering a 0640 and a 0600 file
  stage("tmp/s", {{"a.so", "a"}, {"sub/b.src", "b"}});
  chmod_b("tmp/s/a.so", 0640);
  chmod_b("tmp/s/sub/b.src", 0600);
  ASSERT_TRUE(rename("tmp/s", "c/k").ok());
  EXPECT_EQ(mode_of("c/k/.sealfs-manifest"), 0600u);
  // amend: a 0644 file moved in keeps it 0600; after the 0600 one leaves, the entry is 0640
  write_file(B("tmp/n"), "n");
  chmod_b("tmp/n", 0644);
  ASSERT_TRUE(rename("tmp/n", "c/k/n").ok());
  EXPECT_EQ(mode_of("c/k/.sealfs-manifest"), 0600u);
  UniqueFd sub = dir("c/k/sub");
  ASSERT_TRUE(store().unlink(sub.get(), "b.src").ok());
  EXPECT_EQ(mode_of("c/k/.sealfs-manifest"), 0640u);
  EXPECT_EQ(gid_of("c/k/.sealfs-manifest"), gid_of("c/k/a.so"));
  // seal of a file written in place
  auto c = store().create(root.get(), "w", 0600, O_WRONLY);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(::fchmod(c->open_fd.get(), 0600), 0);  // whatever the umask
  ASSERT_TRUE(store().seal(c->found.fd.get()).ok());
  EXPECT_EQ(mode_of(".sealfs-manifest.w"), 0600u);
  // link (R10): the new name's sidecar before the link exists
  auto f = lookup("c/f");
  ASSERT_TRUE(f.ok());
  chmod_b("c/f", 0600);
  auto l = store().link(f->fd.get(), root.get(), "f-link");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(mode_of(".sealfs-manifest.f-link"), 0600u);
  // adopt: foreign content sealed deliberately
  write_file(B("foreign"), "mine");
  chmod_b("foreign", 0600);
  auto adopted = sealfs::adopt(store(), {"foreign"});
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(mode_of(".sealfs-manifest.foreign"), 0600u);
  // Nothing of that changed what is visible.
  EXPECT_TRUE(visible("c/f"));
  EXPECT_TRUE(visible("c/k/a.so"));
  EXPECT_TRUE(visible("w"));
  EXPECT_TRUE(visible("f-link"));
  EXPECT_TRUE(visible("foreign"));
}

TEST_F(HostileStore, ManifestAccessFollowsAChmodOfACoveredFile) {
  write_file(B("tmp/f"), "data");
  chmod_b("tmp/f", 0644);
  ASSERT_TRUE(rename("tmp/f", "c/f").ok());
  EXPECT_EQ(mode_of("c/.sealfs-manifest.f"), 0644u);
  auto f = lookup("c/f");
  ASSERT_TRUE(f.ok());
  chmod_b("c/f", 0600);
  ASSERT_TRUE(store().refresh_manifest_access(f->fd.get()).ok());
  EXPECT_EQ(mode_of("c/.sealfs-manifest.f"), 0600u);
  EXPECT_TRUE(visible("c/f"));  // R10: chmod never unseals
  chmod_b("c/f", 0640);
  ASSERT_TRUE(store().refresh_manifest_access(f->fd.get()).ok());
  EXPECT_EQ(mode_of("c/.sealfs-manifest.f"), 0640u);
  // Inside a directory entry: the entry's manifest follows.
  stage("tmp/s", {{"a", "a"}, {"b", "b"}});
  chmod_b("tmp/s/a", 0644);
  chmod_b("tmp/s/b", 0644);
  ASSERT_TRUE(rename("tmp/s", "c/k").ok());
  EXPECT_EQ(mode_of("c/k/.sealfs-manifest"), 0644u);
  auto a = lookup("c/k/a");
  ASSERT_TRUE(a.ok());
  chmod_b("c/k/a", 0600);
  ASSERT_TRUE(store().refresh_manifest_access(a->fd.get()).ok());
  EXPECT_EQ(mode_of("c/k/.sealfs-manifest"), 0600u);
  EXPECT_TRUE(visible("c/k/a"));
  EXPECT_TRUE(visible("c/k/b"));
}

}  // namespace
}  // namespace sealfs::test
