// Locator (core/store/place.hpp), asked directly: where an object sits below
// the backing root (its path, read from /proc, and for a name unlinked
// behind it, another of its names), what each directory is to the rules
// (its DirContext), and an object's parent and name (place).
#include "core/store/place.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "core/base/unique_fd.hpp"
#include "core/layout/known_names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/impl.hpp"
#include "tests/support/store_parts.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class LocatorTest : public StorePartsTest {
 protected:
  void SetUp() override {
    StorePartsTest::SetUp();
    publish_entry("e", {{"a.bin", "AAAA"}, {"sub/b.bin", "BB"}});
  }
  const Locator& places() { return parts().places; }
  UniqueFd path_fd(std::string_view rel) {
    UniqueFd fd(::open(B(rel).c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    EXPECT_TRUE(fd) << "open " << B(rel);
    return fd;
  }
  // rel_of(fd), or what it failed with.
  std::string rel(int fd) {
    auto r = places().rel_of(fd);
    return r ? *r : "error: " + r.error().message;
  }
  static bool same(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }
};

TEST_F(LocatorTest, AnObjectsPathIsBelowTheRoot) {
  EXPECT_EQ(rel(dir("").get()), "");
  EXPECT_EQ(rel(dir("c/e/sub").get()), "c/e/sub");
  EXPECT_EQ(rel(path_fd("c/e/a.bin").get()), "c/e/a.bin");
}

TEST_F(LocatorTest, NothingInsideTheStateDirectoryHasAPlace) {
  auto rel = places().rel_of(dir(".sealfs/quarantine").get());
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.code(), ENOENT);
}

TEST_F(LocatorTest, AFileWhoseNameWasUnlinkedIsFoundByItsOtherName) {
  UniqueFd fd = path_fd("c/e/a.bin");
  ASSERT_EQ(::link(B("c/e/a.bin").c_str(), B("c/e/a2.bin").c_str()), 0);
  ASSERT_EQ(::unlink(B("c/e/a.bin").c_str()), 0);
  EXPECT_EQ(rel(fd.get()), "c/e/a2.bin");

  ASSERT_EQ(::unlink(B("c/e/a2.bin").c_str()), 0);
  auto gone = places().rel_of(fd.get());
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.code(), ESTALE);
}

// R4, a file is an inode: the name held may be unlinked while the file's
// other names are in other directories, which only the known names lead to.
TEST_F(LocatorTest, AFileWhoseNameWasUnlinkedIsFoundByAKnownNameInAnotherDirectory) {
  make_dirs(B("c/other"));
  UniqueFd fd = path_fd("c/e/a.bin");
  ASSERT_EQ(::link(B("c/e/a.bin").c_str(), B("c/other/g").c_str()), 0);
  ASSERT_EQ(::unlink(B("c/e/a.bin").c_str()), 0);
  auto lost = places().rel_of(fd.get());
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.code(), ESTALE);  // the old directory holds no other name

  UniqueFd other = dir("c/other");
  struct stat dst {
  }, fst{};
  ASSERT_EQ(::fstat(other.get(), &dst), 0);
  ASSERT_EQ(::fstat(fd.get(), &fst), 0);
  auto names = std::make_shared<KnownNames>();
  names->seen(ObjectId::of(fst), 2, ObjectId{1, 12345}, "stale");  // a directory not held: skipped
  names->seen(ObjectId::of(fst), 2, ObjectId::of(dst), "wrong");   // not this object there: skipped
  names->seen(ObjectId::of(fst), 2, ObjectId::of(dst), "g");
  parts().places.set_known_names(names, [&](ObjectId id) -> std::shared_ptr<const UniqueFd> {
    if (!(id == ObjectId::of(dst))) return nullptr;
    return std::make_shared<const UniqueFd>(::open(B("c/other").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  });
  write_file(B("c/other/wrong"), "not it");
  EXPECT_EQ(rel(fd.get()), "c/other/g");

  // Every other place is given with its context, for a seal to amend.
  ASSERT_EQ(::link(B("c/other/g").c_str(), B("c/e/back").c_str()), 0);
  names->seen(ObjectId::of(fst), 3, ObjectId::of(dst), "g");
  auto e = dir("c/e");
  struct stat est {};
  ASSERT_EQ(::fstat(e.get(), &est), 0);
  names->seen(ObjectId::of(fst), 3, ObjectId::of(est), "back");
  parts().places.set_known_names(names, [&](ObjectId id) -> std::shared_ptr<const UniqueFd> {
    const char* rel = id == ObjectId::of(dst) ? "c/other" : id == ObjectId::of(est) ? "c/e" : nullptr;
    if (rel == nullptr) return nullptr;
    return std::make_shared<const UniqueFd>(::open(B(rel).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  });
  ASSERT_EQ(::fstat(fd.get(), &fst), 0);
  auto others = places().other_places(fst, "c/other/g");
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].first.rel, "c/e/back");
  ASSERT_TRUE(others[0].second.entry.has_value());
  EXPECT_EQ(others[0].second.entry->rel, "c/e");
}

TEST_F(LocatorTest, EachDirectorysContextSaysWhatItIsToTheRules) {
  auto root = places().context_of(dir("").get());
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->rel, "");
  EXPECT_FALSE(root->is_volatile);
  EXPECT_FALSE(root->entry.has_value());

  auto tmp = places().context_of(dir("tmp").get());
  ASSERT_TRUE(tmp.ok());
  EXPECT_TRUE(tmp->is_volatile);

  auto c = places().context_of(dir("c").get());
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->is_volatile);
  EXPECT_FALSE(c->entry.has_value());  // a container

  auto e = places().context_of(dir("c/e").get());
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e->entry.has_value());
  EXPECT_EQ(e->entry->rel, "c/e");
  EXPECT_EQ(e->sub, "");

  auto sub = places().context_of(dir("c/e/sub").get());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(sub->entry.has_value());
  EXPECT_EQ(sub->entry->rel, "c/e");
  EXPECT_EQ(sub->sub, "sub");
  EXPECT_EQ(sub->entry_key("b.bin"), "sub/b.bin");
}

TEST_F(LocatorTest, AContextFollowsADirectoryRenamedBehindTheMount) {
  ASSERT_TRUE(places().context_of(dir("c/e/sub").get()).ok());
  ASSERT_EQ(::rename(B("c/e").c_str(), B("c/moved").c_str()), 0);
  auto sub = places().context_of(dir("c/moved/sub").get());
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->rel, "c/moved/sub");
  ASSERT_TRUE(sub->entry.has_value());
  EXPECT_EQ(sub->entry->rel, "c/moved");
}

TEST_F(LocatorTest, PlaceGivesTheParentTheNameAndThePath) {
  UniqueFd fd = path_fd("c/e/sub/b.bin");
  DirContext parent_ctx;
  auto placed = places().place(fd.get(), &parent_ctx);
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_EQ(placed->name, "b.bin");
  EXPECT_EQ(placed->rel, "c/e/sub/b.bin");
  struct stat parent_st {
  }, sub_st{};
  ASSERT_EQ(::fstat(placed->parent.get(), &parent_st), 0);
  ASSERT_EQ(::stat(B("c/e/sub").c_str(), &sub_st), 0);
  EXPECT_TRUE(same(parent_st, sub_st));
  ASSERT_TRUE(parent_ctx.entry.has_value());
  EXPECT_EQ(parent_ctx.sub, "sub");

  auto root = places().place(dir("").get());
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.code(), EINVAL);  // the root has no parent
}

TEST_F(LocatorTest, AFileRenamedBehindTheMountIsPlacedWhereItIsNow) {
  UniqueFd fd = path_fd("c/e/a.bin");
  ASSERT_EQ(::rename(B("c/e/a.bin").c_str(), B("c/e/sub/a.bin").c_str()), 0);
  auto placed = places().place(fd.get());
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->rel, "c/e/sub/a.bin");
}

}  // namespace
}  // namespace sealfs::test
