// R4: files written in place through the mount: visible while open, sealed
// at the last close; abandoned (hidden, quarantined) when the writer dies
// of a signal with the file open. An exit, with any status, is a close.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/support/process.hpp"

namespace sealfs::test {
namespace {

class InPlace : public MountTest {
 protected:
  // A writer (another process) creates name, writes data, and ends as `how`
  // says (HeldWriter::end) with the file still open. Returns its exit status.
  int writer_that_dies(const std::string& name, const std::string& data, int how) {
    HeldWriter writer(mount_->m(name), data);
    EXPECT_EQ(writer.error(), "") << name << "\n" << mount_->log();
    // While the writer lives the file is in progress, hence visible.
    if (writer.error().empty()) {
      EXPECT_EQ(lstat_errno(mount_->m(name)), 0);
    }
    return writer.end(how);
  }

  bool quarantine_holds(const std::string& data) const {
    const auto files = quarantined_files(*mount_);
    return std::any_of(files.begin(), files.end(), [&](const std::string& rel) {
      return read_file(mount_->b(".sealfs/quarantine/" + rel)) == data;
    });
  }
};

TEST_F(InPlace, WriteIsVisibleAfterCloseAndSealed) {
  write_file(mount_->m("f"), "hello");
  EXPECT_EQ(read_file(mount_->m("f")), "hello");
  ASSERT_TRUE(eventually([&] { return lstat_errno(mount_->b(".sealfs-manifest.f")) == 0; }))
      << "no sidecar after the last close";
  auto manifest = parse_manifest(read_file(mount_->b(".sealfs-manifest.f")).value_or(""));
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_EQ(manifest->files.at("f").size, 5u);
  EXPECT_EQ(manifest->files.at("f").sha256, sha256_of("hello"));
  EXPECT_EQ(read_file(mount_->m("f")), "hello");
  // Rewritten in place: re-sealed with the new content.
  write_file(mount_->m("f"), "hello, again");
  ASSERT_TRUE(eventually([&] {
    auto again = parse_manifest(read_file(mount_->b(".sealfs-manifest.f")).value_or(""));
    return again && again->files.count("f") && again->files.at("f").size == 12u;
  }));
  EXPECT_EQ(read_file(mount_->m("f")), "hello, again");
}

TEST_F(InPlace, SigkilledWriterLeavesNothingVisibleAndTheFileQuarantined) {
  const std::string data = "half-written by a killed writer";
  EXPECT_EQ(writer_that_dies("killed", data, HeldWriter::kKilled), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount_->m("killed")) == ENOENT; }));
  EXPECT_FALSE(list_dir(mount_->mountpoint()).count("killed"));
  EXPECT_TRUE(eventually([&] { return quarantine_holds(data); })) << "not in quarantine";
  EXPECT_EQ(lstat_errno(mount_->b(".sealfs-manifest.killed")), ENOENT);
  // The name is free again for the next writer.
  write_file(mount_->m("killed"), "whole");
  EXPECT_EQ(read_file(mount_->m("killed")), "whole");
}

// Issue 23, point 2: an exit status is the program's business (R4).
TEST_F(InPlace, WriterExitingNonZeroWithTheFileOpenSeals) {
  const std::string data = "written by a failing writer";
  EXPECT_EQ(writer_that_dies("failed", data, 3), 3);
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount_->b(".sealfs-manifest.failed")) == 0; }))
      << "not sealed";
  EXPECT_EQ(read_file(mount_->m("failed")), data);
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

// `cmd > f 2>&1` whose command fails: every failing build's log. It used to
// be quarantined as abandoned.
TEST_F(InPlace, ACommandThatExitsNonZeroKeepsItsOutput) {
  const auto sh = run_process({"sh", "-c", "sh -c 'echo output; exit 1' > \"$0\"", mount_->m("out.txt")});
  EXPECT_EQ(sh.status, 1);
  EXPECT_EQ(read_file(mount_->m("out.txt")), "output\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past cache_timeout: looked up again
  EXPECT_EQ(read_file(mount_->m("out.txt")), "output\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
  // And a death after the same write still abandons it (R4).
  const auto killed = run_process(
      {"sh", "-c", "echo half > \"$0\"; exec 3>>\"$0\"; echo more >&3; kill -9 $$", mount_->m("killed.txt")});
  EXPECT_EQ(killed.status, 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount_->m("killed.txt")) == ENOENT; }))
      << "a killed writer's file stayed visible";
}

TEST_F(InPlace, WriterExitingZeroWithTheFileOpenSeals) {
  ASSERT_EQ(writer_that_dies("ok", "fine", 0), 0);
  EXPECT_TRUE(eventually([&] { return lstat_errno(mount_->b(".sealfs-manifest.ok")) == 0; }));
  EXPECT_EQ(read_file(mount_->m("ok")), "fine");
}

TEST_F(InPlace, TruncateByPathReseals) {
  write_file(mount_->m("t"), "0123456789");
  ASSERT_TRUE(eventually([&] { return lstat_errno(mount_->b(".sealfs-manifest.t")) == 0; }));
  ASSERT_EQ(::truncate(mount_->m("t").c_str(), 4), 0) << std::strerror(errno);
  EXPECT_EQ(read_file(mount_->m("t")), "0123");
  auto manifest = parse_manifest(read_file(mount_->b(".sealfs-manifest.t")).value_or(""));
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_EQ(manifest->files.at("t").size, 4u);
}

TEST_F(InPlace, ModeOwnerAndTimesDoNotUnseal) {
  write_file(mount_->m("a"), "attrs");
  ASSERT_TRUE(eventually([&] { return lstat_errno(mount_->b(".sealfs-manifest.a")) == 0; }));
  ASSERT_EQ(::chmod(mount_->m("a").c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::chown(mount_->m("a").c_str(), 65534, 65534), 0) << std::strerror(errno);
  struct timespec times[2] = {{1000, 0}, {2000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, mount_->m("a").c_str(), times, 0), 0) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::stat(mount_->m("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mtim.tv_sec, 2000);
  EXPECT_EQ(read_file(mount_->m("a")), "attrs");
  EXPECT_EQ(lstat_errno(mount_->b(".sealfs-manifest.a")), 0);
}

// A file listed in a directory entry, rewritten in place: while it is open
// (and until the seal after its last close) it is no evidence against its
// entry. Once the kernel's names and the entry's verdict have expired, a
// lookup of the entry or an open of a sibling judges the entry again; that
// must not hide or quarantine it (R4: visible as it was while open).
TEST(InPlaceEntry, RewritingAListedFileKeepsItsEntryVisibleUntilItsSeal) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-inplace-entry");
  make_dirs(dir / "B/c");
  make_dirs(dir / "B/tmp");
  Mount mount(MountConfig::with({"profile=tilelang,cache_timeout=0.1"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string old_data(5000, 'o'), other(4000, 't'), new_data(3000, 'n');
  make_dirs(mount.m("tmp/s"));
  write_file(mount.m("tmp/s/data.bin"), old_data);
  write_file(mount.m("tmp/s/other.bin"), other);
  ASSERT_EQ(err_of(::rename(mount.m("tmp/s").c_str(), mount.m("c/e").c_str())), 0) << std::strerror(errno);

  const int fd = ::open(mount.m("c/e/data.bin").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, new_data.data(), new_data.size()), static_cast<ssize_t>(new_data.size()));
  ::usleep(300 * 1000);  // past cache_timeout: the kernel asks again, the verdict is stale
  EXPECT_EQ(lstat_errno(mount.m("c/e")), 0) << "the entry was hidden while a listed file was written";
  EXPECT_EQ(read_file(mount.m("c/e/other.bin")), other);
  EXPECT_EQ(read_file(mount.m("c/e/data.bin")), new_data);
  EXPECT_EQ(list_dir(mount.m("c/e")), (std::set<std::string>{".", "..", "data.bin", "other.bin"}));
  EXPECT_EQ(quarantined_files(mount), std::vector<std::string>{});
  ASSERT_EQ(::close(fd), 0);

  EXPECT_TRUE(eventually([&] {
    auto m = parse_manifest(read_file(mount.b("c/e/.sealfs-manifest")).value_or(""));
    return m && m->files.count("data.bin") && m->files.at("data.bin").size == new_data.size();
  })) << "not sealed at its close";
  ::usleep(300 * 1000);
  EXPECT_EQ(read_file(mount.m("c/e/data.bin")), new_data);
  EXPECT_EQ(read_file(mount.m("c/e/other.bin")), other);
  EXPECT_EQ(quarantined_files(mount), std::vector<std::string>{});
}

// R4: every name of a hard-linked file stays visible and verified whichever
// name it is written through (issue 23): the names' records are each their
// own, so a seal through one name leaves the others' stale until a look at
// them brings them up to date from the inode's record (core/store/links.hpp).
class InPlaceLinks : public ::testing::Test {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    make_dirs(backing());
    remount();
  }
  std::string backing() const { return dir_ / "B"; }
  void remount(const std::string& options = "") {
    if (mount_) {
      ASSERT_EQ(mount_->unmount(), 0) << mount_->log();
    }
    mount_.reset();
    mount_ = std::make_unique<Mount>(
        (options.empty() ? MountConfig{} : MountConfig::with({options})).backed_by(backing()));
    ASSERT_TRUE(mount_->ok()) << mount_->error();
  }
  // A shell line run with M as its working directory: its stdout, or why not.
  std::string sh(const std::string& line) const {
    ProcessResult r = run_process({"/bin/sh", "-c", "cd '" + mount_->mountpoint() + "' && " + line});
    return r.status == 0 ? r.out : "exit " + std::to_string(r.status) + ": " + r.err;
  }
  std::string m(const std::string& rel) const { return mount_->m(rel); }

  TempDir dir_{"sealfs-inplace-links"};
  std::unique_ptr<Mount> mount_;
};

TEST_F(InPlaceLinks, AWriteThroughOneNameKeepsTheOtherVisibleAlsoAfterARemount) {
  // The issue's own sequence.
  EXPECT_EQ(sh("echo a > f; ln f g; echo bb >> g; sleep 1.5; cat f"), "a\nbb\n");
  EXPECT_EQ(read_file(m("g")), "a\nbb\n");
  EXPECT_EQ(list_dir(mount_->mountpoint()), (std::set<std::string>{".", "..", "f", "g"}));
  // Through the other name again, then a third name, and every name follows.
  EXPECT_EQ(sh("echo ccc >> f; ln g h; echo d >> h; cat f g h"),
            "a\nbb\nccc\nd\na\nbb\nccc\nd\na\nbb\nccc\nd\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
  remount();
  EXPECT_EQ(read_file(m("f")), "a\nbb\nccc\nd\n");
  EXPECT_EQ(read_file(m("g")), "a\nbb\nccc\nd\n");
  EXPECT_EQ(read_file(m("h")), "a\nbb\nccc\nd\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

TEST_F(InPlaceLinks, ANameNotLookedAtBeforeTheUnmountIsBroughtUpToDateAfterIt) {
  EXPECT_EQ(sh("echo a > f; ln f g; echo bb >> g; cat g"), "a\nbb\n");
  remount();  // f's record is still the old one in B
  EXPECT_EQ(list_dir(mount_->mountpoint()), (std::set<std::string>{".", "..", "f", "g"}));
  EXPECT_EQ(read_file(m("f")), "a\nbb\n");
  EXPECT_EQ(read_file(m("g")), "a\nbb\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

TEST_F(InPlaceLinks, ATruncateThroughOneNameKeepsTheOtherVisible) {
  EXPECT_EQ(sh("echo 0123456789 > t; ln t u; truncate -s 4 u; sleep 1.5; cat t"), "0123");
  EXPECT_EQ(sh(": > u; cat t; ls"), "t\nu\n");  // open(O_TRUNC) through u: both empty
  EXPECT_EQ(read_file(m("t")), "");
  remount();
  EXPECT_EQ(read_file(m("t")), "");
  EXPECT_EQ(read_file(m("u")), "");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

TEST_F(InPlaceLinks, ALinkIntoADirectoryEntryKeepsTheEntryAndTheOtherNameVisible) {
  // e is a directory entry (published by rename); x in the root is a file
  // entry of its own, the same inode as e/data.bin.
  EXPECT_EQ(sh("mkdir s && echo old > s/data.bin && echo other > s/other.bin && mv s e && ln e/data.bin x && "
               "echo new >> x && sleep 1.5 && cat e/data.bin e/other.bin"),
            "old\nnew\nother\n");
  EXPECT_EQ(list_dir(m("e")), (std::set<std::string>{".", "..", "data.bin", "other.bin"}));
  // And written through the entry's name, the file entry follows.
  EXPECT_EQ(sh("echo more >> e/data.bin && sleep 1.5 && cat x"), "old\nnew\nmore\n");
  remount();
  EXPECT_EQ(read_file(m("e/data.bin")), "old\nnew\nmore\n");
  EXPECT_EQ(read_file(m("x")), "old\nnew\nmore\n");
  EXPECT_EQ(read_file(m("e/other.bin")), "other\n");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

TEST_F(InPlaceLinks, WithAKeyEveryNameFollowsAndAPlantedInodeRecordShowsNothing) {
  const std::string keys = dir_ / "keys";
  write_file(keys, "a " + std::string(64, '1') + "\n", 0600);
  ::chmod(keys.c_str(), 0600);
  remount("key_file=" + keys);
  EXPECT_EQ(sh("echo a > f; ln f g; echo bb >> g; sleep 1.5; cat f"), "a\nbb\n");
  remount("key_file=" + keys);
  EXPECT_EQ(read_file(m("f")), "a\nbb\n");
  // Behind the mount: new content, and an unsigned record of the inode
  // vouching for it. Neither name shows it.
  EXPECT_EQ(sh("echo p > p; ln p q; echo ok >> q; cat p"), "p\nok\n");
  struct stat st {};
  ASSERT_EQ(::stat(mount_->b("p").c_str(), &st), 0);
  write_file(mount_->b("p"), "planted\n");
  const std::string record = mount_->b(".sealfs/links/" + std::to_string(st.st_ino));
  write_file(record, "{\"files\":{\"" + std::to_string(st.st_ino) + "\":{\"sha256\":\"" +
                         to_hex(sha256_of("planted\n")) + "\",\"size\":8}},\"sealfs\":1}");
  ::usleep(1100 * 1000);
  remount("key_file=" + keys);
  EXPECT_EQ(lstat_errno(m("p")), ENOENT);
  EXPECT_EQ(lstat_errno(m("q")), ENOENT);
  EXPECT_EQ(read_file(m("f")), "a\nbb\n");
}

}  // namespace
}  // namespace sealfs::test
