// Paths deeper than PATH_MAX inside B (R10): /proc/self/fd cannot name such
// objects, so directories find their path by climbing ".." and files by the
// caller's PlaceHint; open_beneath walks them one component at a time.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

constexpr int kLevels = 32;  // 32 names of 127 bytes: over 4096 bytes of path

void write_file_at(int dir_fd, const char* name, std::string_view data) {
  UniqueFd fd(::openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  ASSERT_EQ(::write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
}

std::string level_name(int i) { return std::string(126, 'a') + static_cast<char>('A' + i % 26); }

class DeepPaths : public StoreFixture {
 protected:
  void TearDown() override {
    // The TempDir's own removal goes by path and stops at PATH_MAX.
    store_.reset();
    UniqueFd root(::open(B().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return;
    for (const std::string top : {"tmp", "deep", ".sealfs"}) (void)remove_tree_at(root.get(), top);
  }

  // Makes `levels` directories under B/<top> (made by path), returning an
  // O_PATH fd of each level (fds[0] is B/<top>) and the deepest rel.
  std::vector<UniqueFd> make_deep(const std::string& top, std::string* rel, int levels = kLevels) {
    make_dirs(B(top));
    std::vector<UniqueFd> fds;
    fds.emplace_back(::open(B(top).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    *rel = top;
    for (int i = 0; i < levels; ++i) {
      const std::string name = level_name(i);
      EXPECT_EQ(::mkdirat(fds.back().get(), name.c_str(), 0755), 0) << std::strerror(errno);
      fds.emplace_back(
          ::openat(fds.back().get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      EXPECT_TRUE(fds.back().valid());
      *rel = join_rel(*rel, name);
    }
    return fds;
  }

  struct stat root_stat() {
    struct stat st {};
    EXPECT_EQ(::stat(B().c_str(), &st), 0);
    return st;
  }
};

TEST_F(DeepPaths, ProcCannotNameTheDeepestLevel) {
  std::string rel;
  auto fds = make_deep("deep", &rel);
  ASSERT_GT(rel.size(), static_cast<std::size_t>(PATH_MAX));
  EXPECT_EQ(fd_path(fds.back().get()).code(), ENAMETOOLONG);  // why the fallbacks exist
}

TEST_F(DeepPaths, ClimbFindsTheRelOfEveryLevel) {
  std::string rel;
  auto fds = make_deep("deep", &rel);
  const struct stat root = root_stat();
  auto got = dir_rel_by_climbing(fds.back().get(), root);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, rel);
  auto top = dir_rel_by_climbing(fds.front().get(), root);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(*top, "deep");
  UniqueFd root_fd(::open(B().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto self = dir_rel_by_climbing(root_fd.get(), root);
  ASSERT_TRUE(self.ok());
  EXPECT_EQ(*self, "");
}

TEST_F(DeepPaths, ClimbFollowsARenameAndRefusesWhatLeftTheRoot) {
  std::string rel;
  auto fds = make_deep("deep", &rel, 3);
  const struct stat root = root_stat();
  ASSERT_EQ(::renameat(fds[0].get(), level_name(0).c_str(), fds[0].get(), "moved"), 0);
  auto got = dir_rel_by_climbing(fds.back().get(), root);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, "deep/moved/" + level_name(1) + "/" + level_name(2));
  // A directory outside the root: the climb reaches "/" without meeting it.
  TempDir elsewhere("sealfs-deep-out");
  UniqueFd out(::open(elsewhere.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(dir_rel_by_climbing(out.get(), root).code(), ENOENT);
}

TEST_F(DeepPaths, ClimbOfADeletedDirectoryIsENOENT) {
  std::string rel;
  auto fds = make_deep("deep", &rel, 2);
  ASSERT_EQ(::unlinkat(fds[1].get(), level_name(1).c_str(), AT_REMOVEDIR), 0);
  EXPECT_EQ(dir_rel_by_climbing(fds[2].get(), root_stat()).code(), ENOENT);
}

TEST_F(DeepPaths, OpenBeneathWalksPathsLongerThanPathMax) {
  std::string rel;
  auto fds = make_deep("deep", &rel);
  UniqueFd root_fd(::open(B().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto fd = open_beneath(root_fd.get(), rel, O_PATH | O_DIRECTORY);
  ASSERT_TRUE(fd.ok()) << fd.error().message;
  EXPECT_TRUE(same_object(*stat_fd(fd->get()), *stat_fd(fds.back().get())));
  // Still no symlinks on the way, however long the path.
  ASSERT_EQ(::symlinkat(".", fds[kLevels - 1].get(), "link"), 0);
  auto [parent, leaf] = split_parent(rel);
  EXPECT_FALSE(
      open_beneath(root_fd.get(), join_rel(join_rel(parent, "link"), leaf), O_PATH | O_DIRECTORY).ok());
}

TEST_F(DeepPaths, StoreSealsAndOpensADeepFileThroughItsHint) {
  std::string rel;
  auto fds = make_deep("deep", &rel);
  const int bottom = fds.back().get();
  // The deep directory's context comes from the climb: lookups and creates work.
  auto c = store().create(bottom, "x", 0644, O_WRONLY);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(::write(c->open_fd.get(), "hi\n", 3), 3);
  c->open_fd.reset();
  const int file = c->found.fd.get();
  // Without a hint a file this deep cannot be placed: an errno, no guess.
  EXPECT_EQ(store().seal(file).code(), ENAMETOOLONG);
  // A hint that names something else is not believed.
  write_file_at(bottom, "other", "no");
  EXPECT_EQ(store().seal(file, PlaceHint{bottom, "other"}).code(), ENAMETOOLONG);
  ASSERT_TRUE(store().seal(file, PlaceHint{bottom, "x"}).ok());
  EXPECT_TRUE(stat_at(bottom, ".sealfs-manifest.x").ok());
  auto found = store().lookup(bottom, "x");
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->kind, ObjectKind::sealed_file);
  auto rd = store().open_file(found->fd.get(), O_RDONLY, PlaceHint{bottom, "x"});
  ASSERT_TRUE(rd.ok()) << rd.error().message;
  char buf[8] = {};
  EXPECT_EQ(::read(rd->get(), buf, sizeof buf), 3);
  auto in_tmp = store().in_volatile_area(found->fd.get(), PlaceHint{bottom, "x"});
  ASSERT_TRUE(in_tmp.ok()) << in_tmp.error().message;
  EXPECT_FALSE(*in_tmp);
  // The same depth below tmp/ is volatile; a directory needs no hint.
  std::string vrel;
  auto vfds = make_deep("tmp/v", &vrel);
  auto v = store().in_volatile_area(vfds.back().get());
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(*v);
  EXPECT_TRUE(store().unlink(bottom, "x").ok());
  EXPECT_FALSE(stat_at(bottom, ".sealfs-manifest.x").ok());
}

TEST_F(DeepPaths, ADirectoryEntryWithADeepFileVerifies) {
  std::string rel;
  auto fds = make_deep("tmp/stage", &rel);
  write_file_at(fds.back().get(), "x", "deep content");
  UniqueFd tmp = dir("tmp");
  UniqueFd top = dir("");
  ASSERT_TRUE(store().rename(tmp.get(), "stage", top.get(), "deep", 0).ok());
  // The manifest at the top lists a key longer than PATH_MAX, and verifies.
  auto entry = store().lookup(top.get(), "deep");
  ASSERT_TRUE(entry.ok()) << entry.error().message;
  EXPECT_EQ(entry->kind, ObjectKind::entry_root);
  auto f = store().lookup(fds.back().get(), "x");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->kind, ObjectKind::file_in_entry);
  auto rd = store().open_file(f->fd.get(), O_RDONLY, PlaceHint{fds.back().get(), "x"});
  ASSERT_TRUE(rd.ok()) << rd.error().message;
}

}  // namespace
}  // namespace sealfs::test
