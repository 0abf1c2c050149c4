// Hard links (R4, core/store/links.hpp): a seal through one name of a
// hard-linked file records its inode, and the other names' records are
// brought up to date from that record when a look at them finds them stale,
// as long as the file holds exactly what it says. Anything else stays as
// before: a mismatch with no record, or with a record that is malformed,
// planted without the key, or no longer matching, is damage.
#include "core/store/links.hpp"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/manifest/manifest_mac.hpp"
#include "core/store/judge.hpp"
#include "core/store/offline.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_keys.hpp"

namespace sealfs::test {
namespace {

class LinksTest : public StoreTest {
 public:
  // What a writer through M does: the file written (created through the
  // store the first time), then sealed at its last close.
  void write_through(const std::string& rel, const std::string& data) {
    auto [parent, name] = split_parent(rel);
    if (!exists_nofollow(B(rel))) {
      UniqueFd d = dir(parent);
      auto c = store().create(d.get(), name, 0644, O_WRONLY);
      ASSERT_TRUE(c.ok()) << c.error().message;
    }
    write_file(B(rel), data);
    UniqueFd f(::open(B(rel).c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    ASSERT_TRUE(f);
    Status sealed = store().seal(f.get());
    ASSERT_TRUE(sealed.ok()) << sealed.error().message;
  }
  void link(const std::string& from, const std::string& to) {
    auto [parent, name] = split_parent(to);
    auto src = lookup(from);
    ASSERT_TRUE(src.ok()) << src.error().message;
    UniqueFd d = dir(parent);
    auto l = store().link(src->fd.get(), d.get(), name);
    ASSERT_TRUE(l.ok()) << l.error().message;
  }
  ino_t ino_of(const std::string& rel) const {
    struct stat st {};
    EXPECT_EQ(::lstat(B(rel).c_str(), &st), 0) << rel;
    return st.st_ino;
  }
  std::string inode_record(const std::string& rel) const { return B(LinkRecords::record_rel(ino_of(rel))); }
  std::uint64_t recorded_size(const std::string& dir_rel, const std::string& manifest,
                              const std::string& key) {
    UniqueFd d = dir(dir_rel);
    auto m = read_manifest_at(d.get(), manifest);
    EXPECT_TRUE(m.ok()) << dir_rel << "/" << manifest;
    return m && m->manifest.files.count(key) ? m->manifest.files.at(key).size : 0;
  }
};

TEST_F(LinksTest, AWriteThroughOneNameIsSeenThroughTheOther) {
  write_through("f", "a\n");
  link("f", "g");
  EXPECT_FALSE(exists_nofollow(inode_record("f"))) << "a link alone changes no content";
  write_through("g", "a\nbb\n");
  // The seal through g recorded the inode, signed for nothing (no keys).
  auto rec = read_file(inode_record("g"));
  ASSERT_TRUE(rec);
  auto parsed = parse_manifest(*rec);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->files.begin()->second.size, 5u);
  EXPECT_EQ(parsed->files.begin()->second.sha256, sha256_of("a\nbb\n"));
  // f's sidecar is stale, and a listing (which hashes nothing) shows f
  // without touching it.
  EXPECT_EQ(recorded_size("", ".sealfs-manifest.f", "f"), 2u);
  EXPECT_EQ(listed("").count("f"), 1u);
  EXPECT_EQ(recorded_size("", ".sealfs-manifest.f", "f"), 2u);
  // A lookup brings it up to date.
  EXPECT_EQ(read_visible("f"), "a\nbb\n");
  EXPECT_EQ(recorded_size("", ".sealfs-manifest.f", "f"), 5u);
  EXPECT_EQ(read_visible("g"), "a\nbb\n");
  // A truncate through f, and g follows.
  UniqueFd f(::open(B("f").c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  ASSERT_TRUE(store().truncate(f.get(), 1).ok());
  EXPECT_EQ(read_visible("g"), "a");
  EXPECT_EQ(quarantine_slots(), 0u);
  EXPECT_EQ(store().metrics().quarantined.load(), 0u);
}

// fsck without --repair writes nothing, not even the record a lookup
// would bring up to date: the stale name is reported (as before the judge
// did fsck's sorting). --repair brings it up to date, as a lookup would,
// and quarantines nothing.
// fsck without --repair says what a lookup shows (valid), and writes nothing:
// f's record stays stale, with a note, until a lookup or --repair.
TEST_F(LinksTest, FsckShowsAStaleRecordValidWithoutWritingAndRepairBringsItUpToDate) {
  write_through("f", "a\n");
  link("f", "g");
  write_through("g", "a\nbb\n");
  auto looked = sealfs::fsck(store(), false);
  ASSERT_TRUE(looked.ok()) << looked.error().message;
  EXPECT_EQ(looked->invalid, 0u);
  EXPECT_EQ(looked->valid, 2u);
  EXPECT_THAT(looked->problems, ::testing::Contains("f: " + std::string(kStaleLinkRecordReason)));
  EXPECT_EQ(recorded_size("", ".sealfs-manifest.f", "f"), 2u);
  EXPECT_TRUE(exists_nofollow(inode_record("g")));
  auto repaired = sealfs::fsck(store(), true);
  ASSERT_TRUE(repaired.ok()) << repaired.error().message;
  EXPECT_EQ(repaired->invalid, 0u);
  EXPECT_EQ(repaired->valid, 2u);
  EXPECT_EQ(repaired->quarantined, 0u);
  EXPECT_EQ(recorded_size("", ".sealfs-manifest.f", "f"), 5u);
  EXPECT_EQ(quarantine_slots(), 0u);
  EXPECT_EQ(read_visible("f"), "a\nbb\n");
}

// A record that vouches for nothing any more is damage to fsck as to a
// lookup; without --repair even that record stays where it is.
TEST_F(LinksTest, FsckWithoutRepairCallsContentChangedBehindTheMountDamageAndWritesNothing) {
  write_through("f", "sealed");
  link("f", "g");
  write_through("g", "sealed again");
  write_file(B("g"), "SEALED AGAIN");  // same inode, same size, no seal
  auto looked = sealfs::fsck(store(), false);
  ASSERT_TRUE(looked.ok()) << looked.error().message;
  EXPECT_EQ(looked->invalid, 2u);
  EXPECT_EQ(looked->valid, 0u);
  EXPECT_EQ(looked->quarantined, 0u);
  EXPECT_TRUE(exists_nofollow(inode_record("g")));
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(LinksTest, TheRecordsSurviveTheStore) {
  write_through("f", "one");
  link("f", "g");
  write_through("g", "one two");
  open_store();  // a remount: nothing of this daemon's memory is left
  EXPECT_EQ(read_visible("f"), "one two");
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(LinksTest, ContentChangedBehindTheMountIsStillDamage) {
  write_through("f", "sealed");
  link("f", "g");
  write_through("g", "sealed again");
  write_file(B("g"), "SEALED AGAIN");  // same inode, same size, no seal
  EXPECT_EQ(lookup_errno("f"), ENOENT);
  EXPECT_GE(quarantine_slots(), 1u);
  // The record vouched for nothing any more: gone.
  EXPECT_FALSE(exists_nofollow(B(LinkRecords::record_rel(ino_of("g")))));
  EXPECT_EQ(lookup_errno("g"), ENOENT);
}

TEST_F(LinksTest, MalformedOrForeignInodeRecordsCountAsAbsent) {
  const std::vector<std::string> bad = {
      "",
      "not json",
      "{\"sealfs\":1}",
      "{\"files\":{\"1\":{\"size\":5}},\"sealfs\":1}",  // another inode's, size only
      std::string("{\"files\":{\"x\":{\"size\":1}},\"sealfs\":1}\xef\xbb\xbf"),
  };
  int n = 0;
  for (const auto& text : bad) {
    const std::string f = "f" + std::to_string(n), g = "g" + std::to_string(n);
    ++n;
    write_through(f, "short");
    link(f, g);
    write_through(g, "longer content");
    write_file(inode_record(g), text);
    EXPECT_EQ(lookup_errno(f), ENOENT) << text;
  }
  // A record for the right inode, size only: no digest, no vouching.
  write_through("s", "short");
  link("s", "t");
  write_through("t", "longer content");
  const std::string ino = std::to_string(ino_of("t"));
  write_file(inode_record("t"), "{\"files\":{\"" + ino + "\":{\"size\":14}},\"sealfs\":1}");
  EXPECT_EQ(lookup_errno("s"), ENOENT);
  // A directory where the record should be.
  write_through("d1", "short");
  link("d1", "d2");
  write_through("d2", "longer content");
  ASSERT_EQ(::unlink(inode_record("d2").c_str()), 0);
  make_dirs(inode_record("d2"));
  EXPECT_EQ(lookup_errno("d1"), ENOENT);
  EXPECT_EQ(read_visible("d2"), "longer content");
}

TEST_F(LinksTest, TheNameLeftAfterTheWrittenOneIsUnlinkedFollowsToo) {
  write_through("f", "a\n");
  link("f", "g");
  write_through("g", "a\nbb\n");
  UniqueFd root = dir("");
  ASSERT_TRUE(store().unlink(root.get(), "g").ok());
  const std::string record = inode_record("f");
  EXPECT_EQ(read_visible("f"), "a\nbb\n");
  EXPECT_FALSE(exists_nofollow(record)) << "one name left, and up to date: nothing left to vouch for";
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(LinksTest, OneLinkLeftMeansNoRecord) {
  write_through("f", "x");
  link("f", "g");
  write_through("g", "xy");
  EXPECT_TRUE(exists_nofollow(inode_record("g")));
  const std::string record = inode_record("g");
  EXPECT_EQ(read_visible("f"), "xy");
  UniqueFd root = dir("");
  ASSERT_TRUE(store().unlink(root.get(), "g").ok());
  EXPECT_TRUE(exists_nofollow(record)) << "f's own record may still need it";
  write_through("f", "xyz");  // sealed with one link: no other name to follow
  EXPECT_FALSE(exists_nofollow(record));
  link("f", "h");
  write_through("h", "xyzw");
  EXPECT_TRUE(exists_nofollow(record));
  EXPECT_EQ(read_visible("f"), "xyzw");
  ASSERT_TRUE(store().unlink(root.get(), "h").ok());
  EXPECT_TRUE(exists_nofollow(record));
  ASSERT_TRUE(store().unlink(root.get(), "f").ok());  // the last name
  EXPECT_FALSE(exists_nofollow(record));
}

TEST_F(LinksTest, ALinkIntoADirectoryEntryKeepsTheEntryValid) {
  publish_entry("e", {{"data.bin", "old"}, {"other.bin", "other"}});
  link("c/e/data.bin", "x");
  write_through("x", "old and new");
  EXPECT_EQ(listed("c/e"), (std::set<std::string>{"data.bin", "other.bin"}));
  EXPECT_TRUE(visible("c/e"));
  EXPECT_EQ(read_visible("c/e/data.bin"), "old and new");
  EXPECT_EQ(read_visible("c/e/other.bin"), "other");
  EXPECT_EQ(recorded_size("c/e", ".sealfs-manifest", "data.bin"), 11u);
  write_through("c/e/data.bin", "the entry's turn");
  EXPECT_EQ(read_visible("x"), "the entry's turn");
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(LinksTest, TheOtherNamesValidatorsStillDecide) {
  // test-reject refuses content holding its marker: written through g, it
  // is g's seal that fails; f must not show it either.
  write_through("f", "fine");
  link("f", "g");
  write_file(B("g"), "SEALFS-TEST-REJECT");
  UniqueFd g(::open(B("g").c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  EXPECT_EQ(store().seal(g.get()).code(), EBADMSG);
  EXPECT_EQ(lookup_errno("f"), ENOENT);
}

// R2: bringing a record up to date stopped by a lack of descriptors is no
// verdict. Whatever number of descriptors is left, the lookup either brings
// f up to date or answers the error; f is never quarantined.
TEST_F(LinksTest, OutOfDescriptorsWhileBringingUpToDateIsAnErrorNotDamage) {
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  for (int spare = 0; spare < 8; ++spare) {
    const std::string f = "f" + std::to_string(spare), g = "g" + std::to_string(spare);
    write_through(f, "a");
    link(f, g);
    write_through(g, "ab");
    UniqueFd root = dir("");
    std::vector<UniqueFd> filler;
    int answer = 0;
    {
      struct rlimit low = old;
      low.rlim_cur = 256;
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
      for (;;) {  // take every descriptor left
        UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!fd) break;
        filler.push_back(std::move(fd));
      }
      filler.resize(filler.size() > static_cast<std::size_t>(spare) ? filler.size() - spare : 0);
      answer = store().lookup(root.get(), f).code();
      filler.clear();
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
    }
    EXPECT_TRUE(answer == 0 || answer == EMFILE) << spare << ": " << answer;
    EXPECT_EQ(quarantine_slots(), 0u) << spare;
    EXPECT_EQ(read_visible(f), "ab") << spare;
  }
}

// The daemon holds one descriptor per inode, opened through the first name
// it saw; once that name is unlinked, /proc calls it "<path> (deleted)". A
// seal, a truncate or a link through the inode then finds its other name in
// the same directory instead of failing (EBUSY, ENOENT).
TEST_F(LinksTest, AnInodeWhoseFirstNameWasUnlinkedIsPlacedByItsOtherName) {
  write_through("f", "first");
  link("f", "g");
  UniqueFd held(::open(B("f").c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  ASSERT_TRUE(held);
  UniqueFd root = dir("");
  ASSERT_TRUE(store().unlink(root.get(), "f").ok());
  write_file(B("g"), "first and more");
  Status sealed = store().seal(held.get());
  ASSERT_TRUE(sealed.ok()) << sealed.error().message;
  EXPECT_EQ(recorded_size("", ".sealfs-manifest.g", "g"), 14u);
  ASSERT_TRUE(store().truncate(held.get(), 5).ok());
  EXPECT_EQ(read_visible("g"), "first");
  auto l = store().link(held.get(), root.get(), "h");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(read_visible("h"), "first");
  // A name that really ends in " (deleted)" is itself.
  write_through("x (deleted)", "odd name");
  UniqueFd odd(::open(B("x (deleted)").c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  write_file(B("x (deleted)"), "odd name, again");
  ASSERT_TRUE(store().seal(odd.get()).ok());
  EXPECT_EQ(read_visible("x (deleted)"), "odd name, again");
  EXPECT_EQ(quarantine_slots(), 0u);
}

class SignedLinksTest : public LinksTest {
 public:
  void SetUp() override {
    LinksTest::SetUp();
    options().keys = key_ring({key_line("A", 0x10)});
    open_store();
  }
};

TEST_F(SignedLinksTest, RecordsAreSignedForTheirPlaceAndPlantedOnesShowNothing) {
  write_through("f", "a");
  link("f", "g");
  write_through("g", "ab");
  auto rec = read_file(inode_record("g"));
  ASSERT_TRUE(rec);
  auto parsed = parse_manifest(*rec);
  ASSERT_TRUE(parsed.ok());
  auto mac = check_manifest_mac(*parsed, *options().keys, LinkRecords::record_rel(ino_of("g")));
  ASSERT_TRUE(mac.ok());
  EXPECT_EQ(*mac, MacCheck::authentic);
  EXPECT_EQ(read_visible("f"), "ab");

  // Changed behind the mount, with an unsigned record vouching for it.
  write_through("p", "p");
  link("p", "q");
  write_through("q", "pq");
  write_file(B("q"), "planted");
  const std::string ino = std::to_string(ino_of("q"));
  write_file(inode_record("q"), "{\"files\":{\"" + ino + "\":{\"sha256\":\"" + to_hex(sha256_of("planted")) +
                                    "\",\"size\":7}},\"sealfs\":1}");
  EXPECT_EQ(lookup_errno("p"), ENOENT);
  EXPECT_EQ(lookup_errno("q"), ENOENT);
  // And one signed by the same key for another inode's place.
  write_through("r", "r");
  link("r", "s");
  write_through("s", "rs");
  write_file(B("s"), "ab");  // the content another inode's record vouches for
  ASSERT_EQ(::rename(B(LinkRecords::record_rel(ino_of("f"))).c_str(), inode_record("s").c_str()), 0);
  EXPECT_EQ(lookup_errno("r"), ENOENT);
}

}  // namespace
}  // namespace sealfs::test
