#include "fs/fuse/inode_table.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "fs/fuse/handle_table.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::fuse {
namespace {

Found found_for(const std::string& path, ObjectKind kind) {
  Found f;
  f.fd = UniqueFd(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  EXPECT_TRUE(f.fd.valid()) << path;
  ::fstatat(f.fd.get(), "", &f.st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
  f.kind = kind;
  return f;
}

class InodeTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_file(dir_ / "a", "a");
    test::write_file(dir_ / "b", "b");
    table_.set_root(found_for(dir_.path(), ObjectKind::root));
  }
  test::TempDir dir_{"sealfs-inodes"};
  InodeTable table_;
};

TEST_F(InodeTableTest, RootIsFuseRootIdAndNeverForgotten) {
  ASSERT_NE(table_.get(FUSE_ROOT_ID), nullptr);
  table_.forget(FUSE_ROOT_ID, 100);
  EXPECT_NE(table_.get(FUSE_ROOT_ID), nullptr);
  // Looking the root up again (e.g. through "..") keeps the same id.
  EXPECT_EQ(table_.remember(found_for(dir_.path(), ObjectKind::root))->id, FUSE_ROOT_ID);
}

TEST_F(InodeTableTest, SameObjectSameIdAndCountedLookups) {
  auto first = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  auto second = table_.remember(found_for(dir_ / "a", ObjectKind::in_progress));
  EXPECT_EQ(first->id, second->id);
  EXPECT_EQ(second->kind.load(), ObjectKind::in_progress);  // the latest lookup's view
  auto other = table_.remember(found_for(dir_ / "b", ObjectKind::sealed_file));
  EXPECT_NE(other->id, first->id);
  table_.forget(first->id, 1);
  EXPECT_NE(table_.get(first->id), nullptr);  // one lookup left
  table_.forget(first->id, 1);
  EXPECT_EQ(table_.get(first->id), nullptr);
  EXPECT_EQ(table_.find(first->dev, first->ino), nullptr);
  // The held reference keeps its fd usable after the kernel forgot it.
  struct stat st {};
  EXPECT_EQ(::fstatat(first->path_fd()->get(), "", &st, AT_EMPTY_PATH), 0);
}

TEST_F(InodeTableTest, ANewerLookupsFdReplacesTheOldOne) {
  ASSERT_EQ(::link((dir_ / "a").c_str(), (dir_ / "a2").c_str()), 0);
  auto inode = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  auto held = inode->path_fd();  // a request still using the old fd
  auto again = table_.remember(found_for(dir_ / "a2", ObjectKind::sealed_file));
  ASSERT_EQ(again, inode);
  EXPECT_NE(inode->path_fd()->get(), held->get());
  // The fd now names the object by its newest name.
  char buf[4096] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(inode->path_fd()->get());
  ASSERT_GT(::readlink(link.c_str(), buf, sizeof buf - 1), 0);
  EXPECT_EQ(std::string(buf), dir_ / "a2");
  struct stat st {};
  EXPECT_EQ(::fstatat(held->get(), "", &st, AT_EMPTY_PATH), 0);  // still open for its holder
}

TEST_F(InodeTableTest, IdsAreNotReusedAndUnknownIdsAreNotFound) {
  auto a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  const fuse_ino_t old_id = a->id;
  table_.forget(old_id, 1);
  auto again = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  EXPECT_NE(again->id, old_id);
  EXPECT_EQ(table_.get(old_id), nullptr);
  EXPECT_EQ(table_.get(987654321), nullptr);
  table_.forget(987654321, 1);  // harmless
}

TEST_F(InodeTableTest, SeenAtGivesAHintThatOutlivesTheNextSighting) {
  InodeRef a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  EXPECT_EQ(a->last_seen().hint().dir_fd, -1);  // never seen under a name: no hint
  InodeRef root = table_.get(FUSE_ROOT_ID);
  a->seen_at(*root, "a");
  const auto seen = a->last_seen();
  EXPECT_EQ(seen.hint().dir_fd, root->path_fd()->get());
  EXPECT_EQ(seen.hint().name, "a");
  a->seen_at(*root, "renamed");      // a rename through the mount
  EXPECT_EQ(seen.hint().name, "a");  // the copy a request holds stays as it was
  EXPECT_EQ(a->last_seen().hint().name, "renamed");
  EXPECT_EQ(a->last_seen().parent, FUSE_ROOT_ID);
}

// Issue 24: a directory looked up again keeps the fd it has instead of
// opening one more; a detached one takes the lookup's.
TEST_F(InodeTableTest, ADirectoryKeepsItsFdAcrossLookups) {
  test::make_dirs(dir_ / "d");
  auto d = table_.remember(found_for(dir_ / "d", ObjectKind::container));
  const int fd = d->path_fd()->get();
  auto again = table_.remember(found_for(dir_ / "d", ObjectKind::container));
  ASSERT_EQ(again, d);
  EXPECT_EQ(d->path_fd()->get(), fd);
  d->seen_at(*table_.get(FUSE_ROOT_ID), "d");
  ASSERT_TRUE(d->detach());
  const std::int64_t live = UniqueFd::live();
  table_.remember(found_for(dir_ / "d", ObjectKind::container));
  EXPECT_TRUE(d->attached());
  EXPECT_EQ(UniqueFd::live(), live + 1);
  EXPECT_EQ(table_.files(), 0u) << "directories and the root are not files";
}

// Issue 24: a file the kernel remembers gives its descriptor back while no
// request uses it, and is opened again by the name it was seen under;
// what that name leads to now must be the same object, or the request
// gets an invalid fd (ESTALE), never another file's.
TEST_F(InodeTableTest, ADetachedFileIsOpenedAgainByNameOnlyIfStillTheSame) {
  InodeRef root = table_.get(FUSE_ROOT_ID);
  InodeRef a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  EXPECT_FALSE(a->detach()) << "never seen under a name: nothing to open it by";
  a->seen_at(*root, "a");
  {
    const auto held = a->path_fd();
    EXPECT_FALSE(a->detach()) << "a request holds the descriptor";
  }
  const std::int64_t live = UniqueFd::live();
  ASSERT_TRUE(a->detach());
  EXPECT_FALSE(a->attached());
  EXPECT_EQ(UniqueFd::live(), live - 1);
  struct stat st {};
  ASSERT_EQ(::fstatat(a->path_fd()->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(st.st_ino, a->ino);
  EXPECT_TRUE(a->attached());
  // Replaced behind the mount: the name leads to another object now.
  ASSERT_TRUE(a->detach());
  ASSERT_EQ(::rename((dir_ / "b").c_str(), (dir_ / "a").c_str()), 0);
  EXPECT_FALSE(a->path_fd()->valid());
  EXPECT_FALSE(a->attached()) << "a failed reopen is tried again, not kept";
}

// Issue 24 (git's getcwd): directories give their descriptors back too,
// since the kernel may have to keep them (a process's working directory):
// the objects seen in a directory hold its inode, not its fd. A file below
// detached directories opens them again on the way down, and keeps them.
TEST_F(InodeTableTest, DetachedDirectoriesAreOpenedAgainOnTheWayToAFile) {
  test::make_dirs(dir_ / "d/e");
  test::write_file(dir_ / "d/e/f", "f");
  InodeRef root = table_.get(FUSE_ROOT_ID);
  InodeRef d = table_.remember(found_for(dir_ / "d", ObjectKind::container));
  InodeRef e = table_.remember(found_for(dir_ / "d/e", ObjectKind::container));
  InodeRef f = table_.remember(found_for(dir_ / "d/e/f", ObjectKind::sealed_file));
  d->seen_at(*root, "d");
  e->seen_at(*d, "e");
  f->seen_at(*e, "f");
  EXPECT_EQ(table_.files(), 1u);
  const std::int64_t live = UniqueFd::live();
  ASSERT_TRUE(d->detach()) << "a name seen in d holds no descriptor of d";
  ASSERT_TRUE(e->detach());
  ASSERT_TRUE(f->detach());
  EXPECT_FALSE(root->detach()) << "the root has no name to open it by";
  EXPECT_EQ(UniqueFd::live(), live - 3);
  struct stat st {};
  ASSERT_EQ(::fstatat(f->path_fd()->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(st.st_ino, f->ino);
  EXPECT_TRUE(d->attached());
  EXPECT_TRUE(e->attached());
  EXPECT_EQ(UniqueFd::live(), live);
  EXPECT_EQ(f->last_seen().hint().dir_fd, e->path_fd()->get());
  // A directory moved behind the mount: what is below it is stale, not another object's.
  ASSERT_TRUE(f->detach());
  ASSERT_TRUE(e->detach());
  ASSERT_TRUE(d->detach());
  ASSERT_EQ(::rename((dir_ / "d").c_str(), (dir_ / "moved").c_str()), 0);
  test::make_dirs(dir_ / "d/e");
  test::write_file(dir_ / "d/e/f", "other");
  EXPECT_FALSE(f->path_fd()->valid());
  EXPECT_FALSE(d->attached());
  EXPECT_EQ(f->last_seen().dir, nullptr) << "no hint into a directory that is not d";
}

// git's loose objects: tmp_obj_X is linked to the object's name, looked up
// again and unlinked. The inode was last seen under the name removed; a
// detached one is opened again by its other name, not answered ESTALE
// ('loose object … is corrupt' on a 1,024-descriptor daemon).
TEST_F(InodeTableTest, AnObjectWhoseLastSeenNameIsRemovedIsOpenedByItsOtherName) {
  InodeRef root = table_.get(FUSE_ROOT_ID);
  InodeRef a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  a->seen_at(*root, "a");
  ASSERT_EQ(::link((dir_ / "a").c_str(), (dir_ / "object").c_str()), 0);
  a->seen_at(*root, "object");  // the LINK's reply
  a->seen_at(*root, "a");       // a LOOKUP of the old name
  ASSERT_EQ(::unlink((dir_ / "a").c_str()), 0);
  a->unseen_at(*root, "a");
  EXPECT_EQ(a->last_name().name, "object");
  ASSERT_TRUE(a->detach());
  ASSERT_TRUE(a->path_fd()->valid()) << "opened again by the name removed";
  a->unseen_at(*root, "object");  // its only name left: nothing else to go by
  EXPECT_EQ(a->last_name().name, "object");
}

// R4, a file is an inode: the table hands the store's registry of names
// (KnownNames) each name a hard-linked file is seen by, the names it was
// seen by before its second link, and forgets them with the inode.
TEST_F(InodeTableTest, NamedHandsEveryNameOfAHardLinkedFileToTheRegistry) {
  InodeRef root = table_.get(FUSE_ROOT_ID);
  InodeRef a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  table_.named(*a, *root, "a", 1);
  EXPECT_EQ(table_.names()->objects(), 0u);  // one link: nothing kept
  ASSERT_EQ(::link((dir_ / "a").c_str(), (dir_ / "g").c_str()), 0);
  table_.named(*a, *root, "g", 2);  // the LINK's reply
  const ObjectId id{a->dev, a->ino};
  auto names = table_.names()->names_of(id);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].name, "g");
  EXPECT_EQ(names[1].name, "a");  // seen before the second link
  EXPECT_EQ(names[1].dir, (ObjectId{root->dev, root->ino}));
  table_.forget(a->id, 1);
  EXPECT_TRUE(table_.names()->names_of(id).empty());
}

// cold(): what no request used since the last call, oldest first, only
// inodes seen under a name (the kernel is asked to forget them by it).
TEST_F(InodeTableTest, ColdListsInodesUnusedSinceTheLastLook) {
  InodeRef root = table_.get(FUSE_ROOT_ID);
  InodeRef a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  InodeRef b = table_.remember(found_for(dir_ / "b", ObjectKind::sealed_file));
  a->seen_at(*root, "a");
  b->seen_at(*root, "b");
  EXPECT_TRUE(table_.cold(10).empty());  // both just used: the first look only clears the marks
  table_.get(b->id);                     // b used since
  auto cold = table_.cold(10);
  ASSERT_EQ(cold.size(), 1u);
  EXPECT_EQ(cold[0].inode, a);
  EXPECT_EQ(cold[0].seen.name, "a");
  EXPECT_EQ(cold[0].seen.parent, FUSE_ROOT_ID);
  cold = table_.cold(1);  // both unused now: the oldest
  ASSERT_EQ(cold.size(), 1u);
  EXPECT_EQ(cold[0].inode, a);
}

// Directories only after files (only files are asked to be forgotten), the
// newest first (the oldest is everyone's ancestor).
TEST_F(InodeTableTest, ColdListsDirectoriesAfterFilesNewestFirst) {
  InodeRef root = table_.get(FUSE_ROOT_ID);
  test::make_dirs(dir_ / "d");
  test::make_dirs(dir_ / "d/e");
  InodeRef d = table_.remember(found_for(dir_ / "d", ObjectKind::container));
  InodeRef e = table_.remember(found_for(dir_ / "d/e", ObjectKind::container));
  InodeRef a = table_.remember(found_for(dir_ / "a", ObjectKind::sealed_file));
  d->seen_at(*root, "d");
  e->seen_at(*d, "e");
  a->seen_at(*root, "a");
  EXPECT_TRUE(table_.cold(10).empty());
  auto cold = table_.cold(10);
  ASSERT_EQ(cold.size(), 3u);
  EXPECT_EQ(cold[0].inode, a);
  EXPECT_EQ(cold[1].inode, e);
  EXPECT_EQ(cold[2].inode, d);
}

// cold() looks at files and at directories that hold a descriptor, not at
// every directory the kernel keeps (a million-file cache keeps 200,000): a
// detached directory is left out until a request opens it again.
TEST_F(InodeTableTest, ColdLeavesOutDetachedDirectoriesUntilOpenedAgain) {
  InodeRef root = table_.get(FUSE_ROOT_ID);
  test::make_dirs(dir_ / "d");
  test::write_file(dir_ / "d/f", "f");
  InodeRef d = table_.remember(found_for(dir_ / "d", ObjectKind::container));
  InodeRef f = table_.remember(found_for(dir_ / "d/f", ObjectKind::sealed_file));
  d->seen_at(*root, "d");
  f->seen_at(*d, "f");
  EXPECT_TRUE(table_.cold(10).empty());
  ASSERT_TRUE(d->detach());
  ASSERT_TRUE(f->detach());
  auto cold = table_.cold(10);
  ASSERT_EQ(cold.size(), 1u) << "the detached directory is still looked at";
  EXPECT_EQ(cold[0].inode, f) << "a detached file may still be asked to be forgotten";
  table_.get(f->id);                   // a request on f
  ASSERT_TRUE(f->path_fd()->valid());  // opens d again on the way
  ASSERT_TRUE(d->attached());
  cold = table_.cold(10);
  ASSERT_EQ(cold.size(), 1u) << "d, opened again outside the table, is not looked at again";
  EXPECT_EQ(cold[0].inode, d);
  cold = table_.cold(10);
  ASSERT_EQ(cold.size(), 2u);
  EXPECT_EQ(cold[0].inode, f);
  EXPECT_EQ(cold[1].inode, d);
  // Given the lookup's descriptor: looked at again too.
  ASSERT_TRUE(d->detach());
  EXPECT_EQ(table_.cold(10).size(), 1u);
  table_.remember(found_for(dir_ / "d", ObjectKind::container));
  EXPECT_TRUE(d->attached());
  EXPECT_EQ(table_.cold(10).size(), 1u) << "d's lookup marked it used";
  EXPECT_EQ(table_.cold(10).size(), 2u);
}

TEST(HandleTableTest, TakeRemovesAndUnknownIsNull) {
  HandleTable<int> handles;
  const auto id = handles.add(std::make_shared<int>(7));
  ASSERT_NE(handles.get(id), nullptr);
  EXPECT_EQ(*handles.get(id), 7);
  auto taken = handles.take(id);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(handles.get(id), nullptr);
  EXPECT_EQ(handles.take(id), nullptr);
  EXPECT_EQ(handles.size(), 0u);
}

}  // namespace
}  // namespace sealfs::fuse
