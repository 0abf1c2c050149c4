// R10: path depth has no limit from PATH_MAX on paths inside B (issue 11,
// bug D). 32 levels of 127-byte names make a path of 4095 bytes below the
// mount, which plain syscalls still take relative to M, while the same path
// in B (with B's own prefix) is beyond PATH_MAX: the daemon cannot name it
// through /proc. B is therefore checked here with fds, one level at a time.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/layout/paths.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr int kLevels = 32;
const std::string kName(127, 'a');  // every level, as in the issue's reproduction

// fds of dir_fd's chain of `levels` kName directories (fds[0] is dir_fd's
// own, fds[i] is level i), making each level first when make is set. Empty
// when a level is missing (errno set).
std::vector<UniqueFd> chain(int dir_fd, int levels, bool make) {
  std::vector<UniqueFd> fds;
  fds.emplace_back(::openat(dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < levels; ++i) {
    if (make && ::mkdirat(fds.back().get(), kName.c_str(), 0755) != 0) return {};
    UniqueFd next(::openat(fds.back().get(), kName.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return {};
    fds.push_back(std::move(next));
  }
  return fds;
}

// Content of dir_fd/name, or nullopt with errno.
std::optional<std::string> read_at(int dir_fd, const std::string& name) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// errno of writing data to dir_fd/name with flags and closing it; 0 on success.
int write_at(int dir_fd, const std::string& name, std::string_view data, int flags) {
  const int fd = ::openat(dir_fd, name.c_str(), flags | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  const bool wrote = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  const int saved = errno;
  if (::close(fd) != 0) return errno;
  return wrote ? 0 : saved;
}

int fstatat_errno(int dir_fd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
}

class DeepPaths : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    mount_ = std::make_unique<Mount>(MountConfig::with({"profile=" + GetParam()}));
    ASSERT_TRUE(mount_->ok()) << mount_->error();
    m_root_.reset(::open(mount_->mountpoint().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    b_root_.reset(::open(mount_->backing().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(m_root_.valid() && b_root_.valid());
  }
  void TearDown() override {
    if (!mount_) return;
    m_root_.reset();
    mount_->unmount();
    // The temp dir's own removal goes by path and stops at PATH_MAX: take
    // whatever a failed test left in B (quarantine included) away by fds.
    if (b_root_)
      for (const auto& name : list_dir(mount_->backing()))
        if (name != "." && name != "..") (void)remove_tree_at(b_root_.get(), name);
  }

  // The B directory at `levels` below B/top (fd), or an invalid fd.
  UniqueFd b_level(const std::string& top, int levels) {
    UniqueFd t(::openat(b_root_.get(), top.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!t) return {};
    auto fds = chain(t.get(), levels, false);
    return fds.empty() ? UniqueFd() : std::move(fds.back());
  }
  // The sidecar manifest of name in B's deepest level below top, or nullopt.
  std::optional<std::string> b_sidecar(const std::string& top, int levels, const std::string& name) {
    UniqueFd d = b_level(top, levels);
    if (!d) return std::nullopt;
    return read_at(d.get(), ".sealfs-manifest." + name);
  }

  std::unique_ptr<Mount> mount_;
  UniqueFd m_root_;
  UniqueFd b_root_;
};

// The reproduction of issue 11, as a user typed it.
TEST_P(DeepPaths, ShellReproductionOfIssue11) {
  const std::string script =
      "set -e; cd \"$1\"; c=$(printf 'a%.0s' {1..127}); p=; for i in $(seq 32); do p=$p$c/; done; p=${p%/};"
      "mkdir -p \"$p\"; (cd \"$p\" && echo hi > x && cat x && rm x); rmdir \"$p\";"
      "rm -rf aaa*; test ! -e aaa*";
  ProcessResult r = run_process({"bash", "-c", script, "bash", mount_->mountpoint()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "hi\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(fstatat_errno(b_root_.get(), kName), ENOENT);
}

TEST_P(DeepPaths, FileAtTheBottomIsSealedRenamedRewrittenAndRemoved) {
  auto m = chain(m_root_.get(), kLevels, true);
  ASSERT_EQ(m.size(), static_cast<std::size_t>(kLevels + 1)) << std::strerror(errno);
  const int bottom = m.back().get();
  ASSERT_EQ(write_at(bottom, "x", "hi\n", O_CREAT | O_EXCL), 0);
  EXPECT_EQ(read_at(bottom, "x"), "hi\n");
  struct stat st {};
  ASSERT_EQ(::fstatat(bottom, "x", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 3);
  // Sealed at its close: its sidecar sits beside it in B, at the same depth.
  ASSERT_TRUE(eventually([&] { return b_sidecar(kName, kLevels - 1, "x").has_value(); }));
  // Still visible and readable once sealed (a read open checks the seal).
  EXPECT_EQ(read_at(bottom, "x"), "hi\n");

  ASSERT_EQ(err_of(::renameat(bottom, "x", bottom, "y")), 0);
  EXPECT_EQ(fstatat_errno(bottom, "x"), ENOENT);
  EXPECT_EQ(read_at(bottom, "y"), "hi\n");
  EXPECT_TRUE(b_sidecar(kName, kLevels - 1, "y").has_value());
  EXPECT_FALSE(b_sidecar(kName, kLevels - 1, "x").has_value());
  // Rewritten under its new name (the daemon followed the rename): re-sealed there.
  ASSERT_EQ(write_at(bottom, "y", "more\n", O_APPEND), 0);
  EXPECT_TRUE(eventually([&] {
    auto sidecar = b_sidecar(kName, kLevels - 1, "y");
    return sidecar && sidecar->find("\"size\":8") != std::string::npos;
  })) << b_sidecar(kName, kLevels - 1, "y").value_or("<no sidecar>");
  EXPECT_EQ(read_at(bottom, "y"), "hi\nmore\n");

  ASSERT_EQ(err_of(::unlinkat(bottom, "y", 0)), 0);
  EXPECT_EQ(fstatat_errno(bottom, "y"), ENOENT);
  UniqueFd b_bottom = b_level(kName, kLevels - 1);
  ASSERT_TRUE(b_bottom.valid());
  EXPECT_EQ(fstatat_errno(b_bottom.get(), ".sealfs-manifest.y"), ENOENT);
  EXPECT_EQ(fstatat_errno(b_bottom.get(), "y"), ENOENT);
  // rmdir of every level, bottom up.
  for (int i = kLevels; i >= 1; --i)
    ASSERT_EQ(err_of(::unlinkat(m[static_cast<std::size_t>(i - 1)].get(), kName.c_str(), AT_REMOVEDIR)), 0)
        << "level " << i;
  EXPECT_EQ(fstatat_errno(b_root_.get(), kName), ENOENT);
  EXPECT_TRUE(quarantined_files(*mount_).empty());
}

TEST_P(DeepPaths, RmRfRemovesADeepTree) {
  auto m = chain(m_root_.get(), kLevels, true);
  ASSERT_EQ(m.size(), static_cast<std::size_t>(kLevels + 1)) << std::strerror(errno);
  ASSERT_EQ(write_at(m.back().get(), "x", "bottom\n", O_CREAT | O_EXCL), 0);
  ASSERT_EQ(write_at(m[kLevels / 2].get(), "half", "middle\n", O_CREAT | O_EXCL), 0);
  ASSERT_TRUE(eventually([&] { return b_sidecar(kName, kLevels - 1, "x").has_value(); }));
  m.clear();  // rm must not find the tree busy
  ProcessResult r = run_process({"rm", "-rf", mount_->m(kName)});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lstat_errno(mount_->m(kName)), ENOENT);
  EXPECT_EQ(fstatat_errno(b_root_.get(), kName), ENOENT);
}

// A deep tree renamed into place as "pub". tilelang: staged in tmp/, it is
// published as a directory entry (R1) whose manifest sits at the top, with a
// key for the file at the bottom that is itself longer than PATH_MAX.
// generic: a container holding containers moves as a container, and the file
// at the bottom keeps its sidecar (its seal follows the directory rename).
TEST_P(DeepPaths, DeepTreeRenamedIntoPlace) {
  const bool entry = GetParam() == "tilelang";
  const std::string staging_name = entry ? "tmp" : "staging";
  ASSERT_EQ(::mkdir(mount_->m(staging_name).c_str(), 0755), 0);
  UniqueFd staging(::open(mount_->m(staging_name).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto m = chain(staging.get(), kLevels, true);
  ASSERT_EQ(m.size(), static_cast<std::size_t>(kLevels + 1)) << std::strerror(errno);
  ASSERT_EQ(write_at(m.back().get(), "x", "deep\n", O_CREAT | O_EXCL), 0);
  // Where the seal of x is recorded once the tree is "pub".
  auto record = [&]() -> std::optional<std::string> {
    return entry ? read_file(mount_->b("pub/.sealfs-manifest")) : b_sidecar("pub", kLevels - 1, "x");
  };
  if (!entry) {  // sealed where it was written, before the move
    ASSERT_TRUE(eventually([&] {
      UniqueFd s(::openat(b_root_.get(), staging_name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      auto fds = chain(s.get(), kLevels, false);
      return !fds.empty() && fstatat_errno(fds.back().get(), ".sealfs-manifest.x") == 0;
    }));
  }
  ASSERT_EQ(err_of(::renameat(staging.get(), kName.c_str(), m_root_.get(), "pub")), 0);
  auto recorded = record();
  ASSERT_TRUE(recorded.has_value());
  if (entry) {
    EXPECT_NE(recorded->find(kName + "/" + kName), std::string::npos) << *recorded;
  }
  EXPECT_EQ(lstat_errno(mount_->b("pub/.sealfs-manifest")), entry ? 0 : ENOENT);
  // Through a fresh walk of M: the file verifies and reads.
  UniqueFd pub(::openat(m_root_.get(), "pub", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(pub.valid()) << std::strerror(errno);
  auto p = chain(pub.get(), kLevels - 1, false);
  ASSERT_EQ(p.size(), static_cast<std::size_t>(kLevels)) << std::strerror(errno);
  EXPECT_EQ(read_at(p.back().get(), "x"), "deep\n");
  // An in-place rewrite is sealed again where the file now is (R4).
  ASSERT_EQ(write_at(p.back().get(), "x", "deeper\n", O_TRUNC), 0);
  EXPECT_TRUE(eventually([&] {
    auto now = record();
    return now && now->find("\"size\":7") != std::string::npos;
  })) << record().value_or("<no record>");
  EXPECT_EQ(read_at(p.back().get(), "x"), "deeper\n");
  EXPECT_EQ(lstat_errno(mount_->m("pub")), 0);
  EXPECT_TRUE(quarantined_files(*mount_).empty());
  p.clear();
  m.clear();
  ProcessResult r = run_process({"rm", "-rf", mount_->m("pub")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lstat_errno(mount_->b("pub")), ENOENT);
}

INSTANTIATE_TEST_SUITE_P(Profiles, DeepPaths, ::testing::Values("tilelang", "generic"),
                         [](const auto& profile) { return profile.param; });

}  // namespace
}  // namespace sealfs::test
