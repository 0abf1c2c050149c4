// Quarantine: objects move with their reason, only if still the judged
// object, companions along; bounds by count and allocated bytes, oldest
// first, never for a slot over the cap (issue 12, item 4); a quarantine that
// cannot complete leaves nothing, or a reason.json that says why (item 5).
#include "core/store/quarantine.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "core/layout/paths.hpp"
#include "core/store/store.hpp"
#include "tests/support/quarantine_root.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class QuarantineTest : public QuarantineRootTest {
 protected:
  QuarantineTest() : QuarantineRootTest("sealfs-quarantine") {}
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

  std::string slot_path(const std::string& slot) const { return tmp_ / (".sealfs/quarantine/" + slot); }
  static std::vector<std::string> list_names(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..")
          names.emplace_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
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

// A slot over the byte cap alone keeps only its reason; nothing older is
// evicted for it (it used to flush every older slot and stay whole).
TEST_F(QuarantineTest, SlotOverTheCapKeepsItsReasonOnlyAndEvictsNothing) {
  Quarantine q(root_.get(), 100, 200 * 1024, metrics_);
  write_file(tmp_ / "small", std::string(20 * 1024, 's'));
  ASSERT_TRUE(*q.move(request("small")));
  write_file(tmp_ / "big", std::string(1024 * 1024, 'b'));
  write_file(tmp_ / ".sealfs-manifest.big", "{}");
  auto req = request("big");
  req.companions = {".sealfs-manifest.big"};
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(*q.move(req));
  const std::string log = ::testing::internal::GetCapturedStderr();
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ(read_file(slot_path(slots->front()) + "/small"), std::string(20 * 1024, 's'));
  EXPECT_FALSE(exists_nofollow(slot_path(slots->back()) + "/big"));
  EXPECT_FALSE(exists_nofollow(slot_path(slots->back()) + "/.sealfs-manifest.big"));
  auto reason = read_file(slot_path(slots->back()) + "/reason.json");
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("\"path\":\"big\""), std::string::npos) << *reason;
  EXPECT_NE(reason->find("\"dropped\""), std::string::npos) << *reason;
  EXPECT_NE(reason->find("\"outcome\":\"deleted\""), std::string::npos) << *reason;
  EXPECT_NE(log.find("dropped big"), std::string::npos) << log;
  EXPECT_EQ(log.find("removed"), std::string::npos) << log;
}

// Issue 12, item 4: a sparse file counts the blocks it has, not its size.
// One of 1 TiB used to evict every earlier slot (and stay itself).
TEST_F(QuarantineTest, SparseObjectCountsItsBlocksNotItsSize) {
  Quarantine q(root_.get(), 100, 1 << 20, metrics_);
  for (const char* n : {"a", "b"}) {
    write_file(tmp_ / n, std::string(1000, n[0]));
    ASSERT_TRUE(*q.move(request(n)));
  }
  {
    UniqueFd fd(::open((tmp_ / "sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), off_t{1} << 40), 0);
    ASSERT_EQ(::pwrite(fd.get(), "x", 1, (off_t{1} << 40) - 1), 1);
  }
  ASSERT_TRUE(*q.move(request("sparse")));
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 3u);
  EXPECT_EQ(read_file(slot_path((*slots)[0]) + "/a"), std::string(1000, 'a'));
  EXPECT_EQ(read_file(slot_path((*slots)[1]) + "/b"), std::string(1000, 'b'));
  struct stat st {};
  ASSERT_EQ(::lstat((slot_path((*slots)[2]) + "/sparse").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, off_t{1} << 40);
}

// Over the byte cap with a slot that fits: the oldest go, one by one, each
// logged with its path; the newest stay.
TEST_F(QuarantineTest, ByteBoundEvictsOldestFirstToMakeRoomForWhatFits) {
  Quarantine q(root_.get(), 100, 700 * 1024, metrics_);
  ::testing::internal::CaptureStderr();
  for (const char* n : {"a", "b", "c"}) {
    write_file(tmp_ / n, std::string(256 * 1024, n[0]));
    ASSERT_TRUE(*q.move(request(n)));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_TRUE(exists_nofollow(slot_path((*slots)[0]) + "/b"));
  EXPECT_TRUE(exists_nofollow(slot_path((*slots)[1]) + "/c"));
  EXPECT_NE(log.find("removed .sealfs/quarantine/"), std::string::npos) << log;
  EXPECT_NE(log.find("(a, "), std::string::npos) << log;
  EXPECT_NE(log.find("to make room for"), std::string::npos) << log;
}

// Slots made by another process (or before a restart) are measured too.
TEST_F(QuarantineTest, SlotsMadeElsewhereAreMeasured) {
  Quarantine q(root_.get(), 100, 700 * 1024, metrics_);
  const std::string foreign = tmp_ / ".sealfs/quarantine/19700101T000000.000000000Z-1-000001";
  make_dirs(foreign);
  write_file(foreign + "/reason.json", "{\"path\":\"old\"}\n");
  write_file(foreign + "/old", std::string(600 * 1024, 'o'));
  write_file(tmp_ / "new", std::string(200 * 1024, 'n'));
  ASSERT_TRUE(*q.move(request("new")));
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 1u);
  EXPECT_TRUE(exists_nofollow(slot_path(slots->front()) + "/new"));
}

// Lowers the soft RLIMIT_NOFILE so that exactly `free` more descriptors can
// be opened; restores it when destroyed.
class FdBudget {
 public:
  explicit FdBudget(int free) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlim_t limit = 0;
    for (int left = free;; ++limit) {
      if (::fcntl(static_cast<int>(limit), F_GETFD) == -1 && errno == EBADF) {
        if (left == 0) break;
        --left;
      }
    }
    struct rlimit lowered = saved_;
    lowered.rlim_cur = limit;
    ok_ = ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~FdBudget() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  FdBudget(const FdBudget&) = delete;
  FdBudget& operator=(const FdBudget&) = delete;
  bool ok() const { return ok_; }

 private:
  struct rlimit saved_ {};
  bool ok_ = false;
};

// Issue 12, item 5: with descriptors running out at every possible step
// (0, 1, 2 … free), a quarantine either completes (object and reason.json
// in the slot) or fails and leaves no slot behind and the object in place.
// The slot directory made before an EMFILE used to stay, empty.
TEST_F(QuarantineTest, RunningOutOfDescriptorsLeavesNoHalfMadeSlot) {
  Quarantine q(root_.get(), 100, 1 << 30, metrics_);
  int failed = 0;
  int moved = 0;
  for (int free = 0; free <= 8; ++free) {
    const std::string name = "f" + std::to_string(free);
    write_file(tmp_ / name, "damaged " + name);
    auto req = request(name);
    std::optional<Result<bool>> result;
    {
      FdBudget budget(free);
      ASSERT_TRUE(budget.ok());
      result.emplace(q.move(req));
    }
    auto slots = q.slots();
    ASSERT_TRUE(slots.ok());
    for (const auto& s : *slots) {
      EXPECT_TRUE(exists_nofollow(slot_path(s) + "/reason.json")) << "with " << free << " free: " << s;
      EXPECT_GE(list_names(slot_path(s)).size(), 2u)
          << "with " << free << " free: a slot without its object: " << s;
    }
    if (result->ok() && **result) {
      ++moved;
      EXPECT_FALSE(exists_nofollow(tmp_ / name));
      EXPECT_EQ(slots->size(), static_cast<std::size_t>(moved));
    } else {
      ++failed;
      if (!result->ok()) {
        EXPECT_EQ(result->code(), EMFILE) << result->error().message;
      }
      EXPECT_EQ(read_file(tmp_ / name), "damaged " + name) << "with " << free << " free";
      EXPECT_EQ(slots->size(), static_cast<std::size_t>(moved)) << "with " << free << " free";
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(moved, 0);
  EXPECT_EQ(metrics_.quarantined.load(), static_cast<std::uint64_t>(moved));
}

// reason.json cannot be written (RLIMIT_FSIZE: a full or capped target):
// the slot goes away again and the object stays where it was.
TEST_F(QuarantineTest, UnwritableReasonLeavesNothingBehind) {
  Quarantine q(root_.get(), 100, 1 << 30, metrics_);
  write_file(tmp_ / "f", "damaged");
  auto req = request("f");
  struct sigaction ignore {};
  struct sigaction saved {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &saved), 0);
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit tiny = old;
  tiny.rlim_cur = 8;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  auto moved = q.move(req);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &saved, nullptr);
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.code(), EFBIG) << moved.error().message;
  EXPECT_TRUE(q.slots()->empty());
  EXPECT_EQ(read_file(tmp_ / "f"), "damaged");
  EXPECT_EQ(metrics_.quarantined.load(), 0u);
}

// The rename refused (an object that cannot be moved: "."): no slot stays.
TEST_F(QuarantineTest, RefusedRenameLeavesNothingBehind) {
  Quarantine q(root_.get(), 100, 1 << 30, metrics_);
  auto moved = q.move(request("."));
  ASSERT_FALSE(moved.ok());
  EXPECT_TRUE(q.slots()->empty());
}

// A companion that cannot move along is named in reason.json, and never
// takes the place of what is already in the slot (it used to replace it).
TEST_F(QuarantineTest, CompanionLeftBehindIsExplainedAndOverwritesNothing) {
  Quarantine q(root_.get(), 100, 1 << 30, metrics_);
  // The object "reason.json" is kept as "object.reason.json"; a companion of
  // that very name cannot join it.
  write_file(tmp_ / "reason.json", "the object");
  write_file(tmp_ / "object.reason.json", "the companion");
  auto req = request("reason.json");
  req.companions = {"object.reason.json"};
  ASSERT_TRUE(*q.move(req));
  auto slots = q.slots();
  ASSERT_EQ(slots->size(), 1u);
  EXPECT_EQ(read_file(slot_path(slots->front()) + "/object.reason.json"), "the object");
  EXPECT_EQ(read_file(tmp_ / "object.reason.json"), "the companion");
  auto reason = read_file(slot_path(slots->front()) + "/reason.json");
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("\"left_behind\":[{\"name\":\"object.reason.json\""), std::string::npos) << *reason;
  EXPECT_NE(reason->find("\"reason\":\"test reason for reason.json\""), std::string::npos) << *reason;
}

}  // namespace
}  // namespace sealfs::test
