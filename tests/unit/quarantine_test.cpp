// Quarantine: objects move with their reason, only if still the judged
// object, companions along; bounds by count and bytes, oldest first.
#include "core/quarantine.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/store.hpp"
#include "core/store_paths.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class QuarantineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_dirs(tmp_ / ".sealfs/quarantine");
    int raw = ::open(tmp_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(raw, 0);
    root_.reset(raw);
  }
  Quarantine::Request request(const std::string& name) {
    struct stat st {};
    EXPECT_EQ(::fstatat(root_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0) << name;
    Quarantine::Request r;
    r.parent_fd = root_.get();
    r.name = name;
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.rel = name;
    r.reason = "test reason for " + name;
    return r;
  }

  TempDir tmp_{"sealfs-quarantine"};
  UniqueFd root_;
  Metrics metrics_;
};

TEST_F(QuarantineTest, MovesObjectWithReasonAndCompanions) {
  Quarantine q(root_.get(), 10, 1 << 20, metrics_);
  write_file(tmp_ / "f", "damaged");
  write_file(tmp_ / ".sealfs-manifest.f", "{}");
  auto req = request("f");
  req.companions = {".sealfs-manifest.f"};
  auto moved = q.move(req);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_TRUE(*moved);
  EXPECT_FALSE(exists_nofollow(tmp_ / "f"));
  EXPECT_FALSE(exists_nofollow(tmp_ / ".sealfs-manifest.f"));
  auto slots = q.slots();
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), 1u);
  const std::string slot = tmp_ / (".sealfs/quarantine/" + slots->front());
  EXPECT_EQ(read_file(slot + "/f"), "damaged");
  EXPECT_TRUE(exists_nofollow(slot + "/.sealfs-manifest.f"));
  auto reason = read_file(slot + "/reason.json");
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("\"path\":\"f\""), std::string::npos) << *reason;
  EXPECT_NE(reason->find("test reason for f"), std::string::npos);
  EXPECT_NE(reason->find("\"time\":"), std::string::npos);
  EXPECT_EQ(metrics_.quarantined.load(), 1u);
}

TEST_F(QuarantineTest, ReplacedObjectIsLeftAlone) {
  Quarantine q(root_.get(), 10, 1 << 20, metrics_);
  write_file(tmp_ / "f", "judged");
  auto req = request("f");
  // Another writer replaced it (made first, so it cannot reuse the inode).
  write_file(tmp_ / "f.new", "a new, good one");
  ASSERT_EQ(::rename((tmp_ / "f.new").c_str(), (tmp_ / "f").c_str()), 0);
  auto moved = q.move(req);
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(*moved);
  EXPECT_EQ(read_file(tmp_ / "f"), "a new, good one");
  EXPECT_TRUE(q.slots()->empty());
  EXPECT_EQ(metrics_.quarantined.load(), 0u);
  ASSERT_EQ(::unlink((tmp_ / "f").c_str()), 0);
  auto gone = q.move(req);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(*gone);
}

TEST_F(QuarantineTest, DirectoriesAndOddNamesMove) {
  Quarantine q(root_.get(), 10, 1 << 20, metrics_);
  make_dirs(tmp_ / "d/sub");
  write_file(tmp_ / "d/sub/x", "x");
  ASSERT_TRUE(*q.move(request("d")));
  write_file(tmp_ / "reason.json", "an object with the reason file's name");
  const std::string odd = "ctl\x01\x1b[31m";
  write_file(tmp_ / odd, "o");
  ASSERT_TRUE(*q.move(request("reason.json")));
  ASSERT_TRUE(*q.move(request(odd)));
  EXPECT_EQ(q.slots()->size(), 3u);
  EXPECT_FALSE(exists_nofollow(tmp_ / "d"));
}

TEST_F(QuarantineTest, CountBoundRemovesOldestFirst) {
  Quarantine q(root_.get(), 2, 1 << 20, metrics_);
  for (const char* n : {"a", "b", "c"}) {
    write_file(tmp_ / n, n);
    ASSERT_TRUE(*q.move(request(n)));
  }
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 2u);
  for (const auto& s : *slots) EXPECT_FALSE(exists_nofollow(tmp_ / (".sealfs/quarantine/" + s + "/a")));
  EXPECT_TRUE(exists_nofollow(tmp_ / (".sealfs/quarantine/" + slots->back() + "/c")));
  EXPECT_EQ(metrics_.quarantined.load(), 3u);
}

TEST_F(QuarantineTest, ByteBoundKeepsTheNewestEvenWhenTooBig) {
  Quarantine q(root_.get(), 100, 1000, metrics_);
  write_file(tmp_ / "small", std::string(600, 's'));
  ASSERT_TRUE(*q.move(request("small")));
  write_file(tmp_ / "big", std::string(5000, 'b'));
  ASSERT_TRUE(*q.move(request("big")));
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 1u);
  EXPECT_TRUE(exists_nofollow(tmp_ / (".sealfs/quarantine/" + slots->front() + "/big")));
}

}  // namespace
}  // namespace sealfs::test
