// A removal racing the quarantine (R5: hidden things never block). A cache
// that rebuilds an entry removes it first, as Python's shutil.rmtree does:
// open the directory, list it, unlink each name it listed, rmdir it. Damage
// found in that entry meanwhile (by a reader's open, or by the remover's own
// unlink) used to move the entry into the quarantine under the remover's
// feet: every later unlink and the rmdir failed with ENOENT, where a plain
// directory lets the removal finish. Now a removal in flight (from its
// listing on) holds the entry's move back, the remover alone still finds
// the names the damage hides, its unlinks of them succeed, and its rmdir
// moves what is left into the quarantine, so the evidence is kept.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr const char* kEntry = "ns/kernels/k";
constexpr const char* kDamaged = "kernel_lib.so";

// What shutil.rmtree does to a directory of files, one step at a time.
class Removal {
 public:
  explicit Removal(std::string path) : path_(std::move(path)) {
    dir_ = UniqueFd(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_) return;
    DIR* d = ::fdopendir(::dup(dir_.get()));
    if (d == nullptr) return;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names_.push_back(n);
    }
    ::closedir(d);
    // The damaged file last, so that the others are removed from a damaged entry.
    std::stable_partition(names_.begin(), names_.end(), [](const std::string& n) { return n != kDamaged; });
  }
  bool opened() const { return static_cast<bool>(dir_); }
  const std::vector<std::string>& names() const { return names_; }
  // unlinkat of the i-th name listed: 0 or the errno.
  int unlink(std::size_t i) const { return err_of(::unlinkat(dir_.get(), names_.at(i).c_str(), 0)); }
  int rmdir() const { return err_of(::rmdir(path_.c_str())); }

 private:
  std::string path_;
  UniqueFd dir_;
  std::vector<std::string> names_;
};

// errno of open(path, O_RDONLY) in a child process (0: it opened).
int open_errno_elsewhere(const std::string& path) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ::_exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

class QuarantineRace : public MountTest {
 protected:
  MountConfig config() const override { return MountConfig::with({"profile=tilelang", "cache_timeout=1"}); }

  void save() {
    ProcessResult r = tilelang("save", m(), "k");
    ASSERT_EQ(r.status, kHit) << r.out << r.err << mount_->log();
  }
  // kernel_lib.so truncated behind the mount, as a crashed writer leaves it.
  void damage() const { ASSERT_EQ(::truncate(b(std::string(kEntry) + "/" + kDamaged).c_str(), 10), 0); }

  bool quarantined(const std::string& name) const {
    auto files = quarantined_files(*mount_);
    return std::any_of(files.begin(), files.end(),
                       [&](const std::string& f) { return f.ends_with("/k/" + name); });
  }

  // After a removal: the name is free, a save fills it, and a load hits.
  void expect_rebuilt() {
    EXPECT_EQ(lstat_errno(m(kEntry)), ENOENT);
    EXPECT_EQ(lstat_errno(b(kEntry)), ENOENT) << "the removal left the entry in B";
    ProcessResult saved = tilelang("save", m(), "k");
    EXPECT_EQ(saved.status, kHit) << saved.out << saved.err << mount_->log();
    EXPECT_EQ(tilelang("load", m(), "k").status, kHit) << mount_->log();
  }
};

// A reader's open finds the damage while a remover is half-way through.
TEST_F(QuarantineRace, ReaderFindsDamageDuringRemoval) {
  save();
  Removal removal(m(kEntry));
  ASSERT_TRUE(removal.opened());
  ASSERT_EQ(removal.names().size(), 4u);
  ASSERT_EQ(removal.unlink(0), 0);
  damage();
  // The reader (another process) gets a miss, never the damaged bytes.
  EXPECT_EQ(open_errno_elsewhere(m(std::string(kEntry) + "/" + kDamaged)), ENOENT) << mount_->log();
  for (std::size_t i = 1; i < removal.names().size(); ++i)
    EXPECT_EQ(removal.unlink(i), 0) << removal.names()[i] << "\n" << mount_->log();
  EXPECT_EQ(removal.rmdir(), 0) << mount_->log();
  // What was left of the damaged entry is kept as evidence.
  EXPECT_TRUE(quarantined(kDamaged)) << mount_->log();
  expect_rebuilt();
}

// Found between the remover's listing and its first unlink: the listing
// is the first step of the removal already.
TEST_F(QuarantineRace, ReaderFindsDamageBeforeTheFirstUnlink) {
  save();
  Removal removal(m(kEntry));
  ASSERT_TRUE(removal.opened());
  ASSERT_EQ(removal.names().size(), 4u);
  damage();
  EXPECT_EQ(open_errno_elsewhere(m(std::string(kEntry) + "/" + kDamaged)), ENOENT) << mount_->log();
  for (std::size_t i = 0; i < removal.names().size(); ++i)
    EXPECT_EQ(removal.unlink(i), 0) << removal.names()[i] << "\n" << mount_->log();
  EXPECT_EQ(removal.rmdir(), 0) << mount_->log();
  EXPECT_TRUE(quarantined(kDamaged)) << mount_->log();
  expect_rebuilt();
}

// The remover's own unlink is the first request to find the damage.
TEST_F(QuarantineRace, RemoverFindsDamage) {
  save();
  Removal removal(m(kEntry));
  ASSERT_TRUE(removal.opened());
  ASSERT_EQ(removal.names().size(), 4u);
  ASSERT_EQ(removal.unlink(0), 0);  // rewrites the manifest: the next unlink verifies the entry again
  damage();
  for (std::size_t i = 1; i < removal.names().size(); ++i)
    EXPECT_EQ(removal.unlink(i), 0) << removal.names()[i] << "\n" << mount_->log();
  EXPECT_EQ(removal.rmdir(), 0) << mount_->log();
  EXPECT_TRUE(quarantined(kDamaged)) << mount_->log();
  expect_rebuilt();
}

// A removal that stops half-way holds the quarantine back only for a
// moment: the damaged entry stays hidden and is then moved as usual.
TEST_F(QuarantineRace, AbandonedRemovalStillQuarantines) {
  save();
  {
    Removal removal(m(kEntry));
    ASSERT_TRUE(removal.opened());
    ASSERT_EQ(removal.unlink(0), 0);
    damage();
    ASSERT_EQ(removal.unlink(1), 0) << mount_->log();
  }
  EXPECT_EQ(open_errno_elsewhere(m(std::string(kEntry) + "/" + kDamaged)), ENOENT) << mount_->log();
  // Once the removal's moment has passed, a lookup moves it as usual.
  EXPECT_TRUE(eventually([&] { return lstat_errno(m(kEntry)) == ENOENT && quarantined(kDamaged); }))
      << mount_->log();
  EXPECT_EQ(lstat_errno(b(kEntry)), ENOENT);
}

}  // namespace
}  // namespace sealfs::test
