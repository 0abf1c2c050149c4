// ImplicitHandles: the per-inode handles of a connection without OPEN, and
// the /proc readers it relies on (thread groups, a process's descriptors).
#include "fs/fuse/implicit_handles.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/writer_tasks.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::fuse {
namespace {

using test::TempDir;

ImplicitHandles::MakeHandle maker(int& made) {
  return [&made]() -> Result<std::shared_ptr<FileHandle>> {
    ++made;
    return std::make_shared<FileHandle>();
  };
}
const ImplicitHandles::UndoHandle kNoUndo = [](FileHandle&) {};
const auto kNeverOpen = [](pid_t) { return false; };

TEST(ThreadGroup, ParsedFromStatusText) {
  EXPECT_EQ(
      thread_group_from_status("Name:\tpython3\nUmask:\t0022\nState:\tS\nTgid:\t4242\nNgid:\t0\n", 4243),
      4242);
  EXPECT_EQ(thread_group_from_status("Name:\tx\n", 77), 77);               // no Tgid line: the tid
  EXPECT_EQ(thread_group_from_status("Name:\tx\nTgid:\tjunk\n", 77), 77);  // unparsable: the tid
  EXPECT_EQ(thread_group_of(::getpid()), ::getpid());
  EXPECT_EQ(thread_group_of(0), 0);  // a task of another pid namespace
}

// The mnt_id: of one of this process's descriptors.
std::uint64_t mount_id_of_fd(int fd) {
  char text[4096];
  const std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
  const int info = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (info < 0) return 0;
  const ssize_t n = ::read(info, text, sizeof text - 1);
  ::close(info);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* at = std::strstr(text, "\nmnt_id:");
  return at == nullptr ? 0 : std::strtoull(at + 8, nullptr, 10);
}

TEST(ProcessHolds, SeesItsOwnDescriptorOnTheMountOnly) {
  TempDir dir("sealfs-holds");
  const std::string path = dir / "f";
  test::write_file(path, "x");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::uint64_t mount = mount_id_of_fd(fd);
  ASSERT_NE(mount, 0u);
  EXPECT_TRUE(process_holds(::getpid(), st.st_ino, mount));
  EXPECT_TRUE(process_holds(::getpid(), st.st_ino, 0));                // mount unknown: by inode alone
  EXPECT_FALSE(process_holds(::getpid(), st.st_ino, mount + 100000));  // another mount
  EXPECT_FALSE(process_holds(::getpid(), st.st_ino + 1, mount));       // another file
  {
    // Found among many descriptors elsewhere.
    std::vector<UniqueFd> others;
    for (int i = 0; i < 200; ++i) others.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(process_holds(::getpid(), st.st_ino, mount));
  }
  ::close(fd);
  EXPECT_FALSE(process_holds(::getpid(), st.st_ino, mount));
  EXPECT_FALSE(process_holds(0, st.st_ino, mount));
}

TEST(FuseMountId, TheTopmostFuseMountAtThePathEscapedAsMountinfoDoes) {
  const std::string mountinfo =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "47 22 8:1 /c /home/u/.cache/my\\040cache rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "48 47 0:41 / /home/u/.cache/my\\040cache rw,nosuid,nodev - fuse.sealfs /home/u/b rw,user_id=0\n"
      "49 22 0:42 / /mnt/other rw - fuse.sealfs /b rw\n"
      "garbage\n";
  EXPECT_EQ(fuse_mount_id(mountinfo, "/home/u/.cache/my cache"), 48u);  // over its own backing directory
  EXPECT_EQ(fuse_mount_id(mountinfo, "/mnt/other"), 49u);
  EXPECT_EQ(fuse_mount_id(mountinfo, "/"), 0u);  // not FUSE
  EXPECT_EQ(fuse_mount_id(mountinfo, "/nowhere"), 0u);
  EXPECT_EQ(fuse_mount_id("", "/mnt/other"), 0u);
  EXPECT_EQ(fuse_mount_device(mountinfo, "/home/u/.cache/my cache"), "0:41");
  EXPECT_EQ(fuse_mount_device(mountinfo, "/"), "");
}

// A sidecar's app sees the daemon's mount propagated into its own mount
// namespace, under other IDs: the device tells them (issue 23, point 3: a
// killed writer in the app was sealed, its fdinfo's mnt_id never matched).
TEST(FuseMountId, TheSameMountInAnotherNamespaceIsFoundByItsDevice) {
  const std::string app_view =
      "601 590 0:77 / / rw - overlay overlay rw\n"
      "612 601 8:1 /view /sealfs ro,relatime master:3 - ext4 /dev/sda1 rw\n"
      "640 612 0:41 / /sealfs/cache rw,nosuid,nodev master:9 - fuse.sealfs /vol/backing rw\n"
      "641 601 0:42 / /elsewhere rw - fuse.other x rw\n";
  EXPECT_EQ(fuse_mount_ids_of_device(app_view, "0:41"), std::vector<std::uint64_t>{640});
  EXPECT_TRUE(fuse_mount_ids_of_device(app_view, "").empty());
  EXPECT_TRUE(fuse_mount_ids_of_device(app_view, "0:99").empty());
  const auto own = fuse_mount_ids_seen_by(::getpid(), "0:999999");  // no such device here
  EXPECT_TRUE(own.empty());
}

TEST(ImplicitHandles, OneWriterPerInodeUntilItsLastProcessFlushes) {
  ImplicitHandles table;
  int made = 0;
  const pid_t self = ::getpid();
  auto first = table.writer_for_change(7, self, maker(made), kNoUndo);
  ASSERT_TRUE(first);
  auto again = table.writer_for_change(7, self, maker(made), kNoUndo);
  ASSERT_TRUE(again);
  EXPECT_EQ(*first, *again);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(table.size(), 1u);
  // A process that did not write closes: nothing ends.
  EXPECT_FALSE(table.flushed_by(7, 1, kNeverOpen).writer);
  // The writer still holds another descriptor: counted, not ended.
  auto held = table.flushed_by(7, self, [](pid_t) { return true; });
  EXPECT_TRUE(held.writer);
  EXPECT_FALSE(held.last);
  // Its last close ends the writer, which leaves the table.
  auto last = table.flushed_by(7, self, kNeverOpen);
  EXPECT_EQ(last.writer, *first);
  EXPECT_TRUE(last.last);
  EXPECT_EQ(table.writer(7), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

TEST(ImplicitHandles, WritebackCountsNoProcessAndEndsWhenUnheld) {
  ImplicitHandles table;
  int made = 0;
  ASSERT_TRUE(table.writer_for_change(3, 0, maker(made), kNoUndo));  // writeback of a mapping
  EXPECT_NE(table.take_if_unheld(3), nullptr);
  EXPECT_EQ(table.writer(3), nullptr);
  ASSERT_TRUE(table.writer_for_change(3, ::getpid(), maker(made), kNoUndo));
  ASSERT_TRUE(table.writer_for_change(3, 0, maker(made), kNoUndo));
  EXPECT_EQ(table.take_if_unheld(3), nullptr) << "a process still writes it";
  EXPECT_EQ(made, 2);
}

// A writer is found by its handle as well as by its id, while it is kept
// and while it is being ended as an orphan: the kernel may have forgotten
// the inode id (a creator killed before its open returned sent no FLUSH).
TEST(ImplicitHandles, AWriterIsFoundByItsHandleUntilItsOrphanEnds) {
  ImplicitHandles table;
  std::shared_ptr<FileHandle> mine = std::make_shared<FileHandle>();
  const auto is_mine = [&](const FileHandle& h) { return &h == mine.get(); };
  EXPECT_EQ(table.writer_id_where(is_mine), std::nullopt);
  constexpr pid_t kGone = 999999;  // no such process: counted, then gone
  ASSERT_TRUE(table.writer_for_change(
      9, kGone, [&]() -> Result<std::shared_ptr<FileHandle>> { return mine; }, kNoUndo));
  int made = 0;
  ASSERT_TRUE(table.writer_for_change(4, ::getpid(), maker(made), kNoUndo));  // another file's
  EXPECT_EQ(table.writer_id_where(is_mine), std::optional<fuse_ino_t>(9));
  const auto gone = [](pid_t group) { return group == kGone; };
  ASSERT_TRUE(table.writer_orphaned(9, gone));
  ASSERT_NE(table.take_orphaned(9, gone), nullptr);
  EXPECT_EQ(table.writer(9), nullptr);
  EXPECT_EQ(table.writer_id_where(is_mine), std::optional<fuse_ino_t>(9)) << "lost while being ended";
  EXPECT_TRUE(table.writer_orphaned(9, gone));
  table.orphan_ended(9);
  EXPECT_EQ(table.writer_id_where(is_mine), std::nullopt);
}

TEST(ImplicitHandles, AFailedFirstOpenLeavesNothing) {
  ImplicitHandles table;
  auto failed = table.writer_for_change(
      5, ::getpid(), []() -> Result<std::shared_ptr<FileHandle>> { return make_error(EACCES, "no"); },
      kNoUndo);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.code(), EACCES);
  EXPECT_EQ(table.writer(5), nullptr);
}

TEST(ImplicitHandles, ReadersAreBoundedAndForgotten) {
  ImplicitHandles table;
  int made = 0;
  for (fuse_ino_t ino = 1; ino <= ImplicitHandles::kMaxReaders + 10; ++ino)
    ASSERT_TRUE(table.reader(ino, maker(made)));
  EXPECT_EQ(table.size(), ImplicitHandles::kMaxReaders);
  // The newest is kept; the oldest left first.
  ASSERT_TRUE(table.reader(ImplicitHandles::kMaxReaders + 10, maker(made)));
  EXPECT_EQ(made, static_cast<int>(ImplicitHandles::kMaxReaders + 10));
  ASSERT_TRUE(table.reader(1, maker(made)));
  EXPECT_EQ(made, static_cast<int>(ImplicitHandles::kMaxReaders + 11));
  table.forget(1);
  EXPECT_EQ(table.size(), ImplicitHandles::kMaxReaders - 1);
}

// Issue 24: a daemon with few descriptors keeps fewer readers, and sheds
// all but the most recently used when descriptors run low.
TEST(ImplicitHandles, ReadersFollowTheDaemonsBoundAndAreShed) {
  ImplicitHandles table;
  table.set_max_readers(100);
  int made = 0;
  for (fuse_ino_t ino = 1; ino <= 150; ++ino) ASSERT_TRUE(table.reader(ino, maker(made)));
  EXPECT_EQ(table.size(), 100U);
  table.shed_readers(10);
  EXPECT_EQ(table.size(), 10U);
  ASSERT_TRUE(table.reader(150, maker(made)));
  EXPECT_EQ(made, 150) << "the most recently used are the ones kept";
  table.set_max_readers(ImplicitHandles::kMaxReaders * 2);
  EXPECT_EQ(table.max_readers(), ImplicitHandles::kMaxReaders);
}

}  // namespace
}  // namespace sealfs::fuse
