// R4: a file is an inode, not a name. A seal finds a hard-linked file by any
// of its live names, in any directory, after the name the daemon held was
// unlinked, and every manifest that lists one of its names is amended; no
// write, truncate or link through any name fails where a plain directory
// would not. And an entry inside an entry is its own unit: a change inside
// it never invalidates the outer one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/support/process.hpp"

namespace sealfs::test {
namespace {

class InodeNames : public MountTest {
 protected:
  // A shell line run with M as its working directory: its stdout, or why not.
  std::string sh(const std::string& line) const {
    ProcessResult r = run_process({"/bin/sh", "-c", "cd '" + m() + "' && " + line});
    return r.status == 0 ? r.out : "exit " + std::to_string(r.status) + ": " + r.err;
  }
  std::vector<std::string> quarantined() const { return quarantined_files(*mount_); }
};

// The unlinked name was the one the daemon held the file by (the latest
// link), and the other names are in other directories.
constexpr const char* kLinks = "mkdir a b && echo hello > a/f && ln a/f b/g && ln a/f h && rm h";

TEST_F(InodeNames, ATruncateThroughANameInAnotherDirectoryAfterTheHeldNameWasUnlinked) {
  EXPECT_EQ(sh(kLinks), "");
  EXPECT_EQ(sh("python3 -c 'import os; os.truncate(\"b/g\", 2)' && echo ok"), "ok\n");
  EXPECT_EQ(sh("cat a/f b/g"), "hehe");
  ::usleep(1500 * 1000);
  EXPECT_EQ(sh("cat a/f b/g"), "hehe");
  EXPECT_EQ(sh("ln b/g x && cat x"), "he");
  EXPECT_EQ(quarantined(), std::vector<std::string>{}) << mount_->log();
  // Both names' own records say the new content (amended at the seal, not
  // only brought up to date when judged).
  auto f = parse_manifest(read_file(b("a/.sealfs-manifest.f")).value_or(""));
  auto g = parse_manifest(read_file(b("b/.sealfs-manifest.g")).value_or(""));
  ASSERT_TRUE(f && g);
  EXPECT_EQ(f->files.at("f").size, 2u);
  EXPECT_EQ(g->files.at("g").size, 2u);
}

TEST_F(InodeNames, AnAppendThroughANameInAnotherDirectoryAfterTheHeldNameWasUnlinked) {
  EXPECT_EQ(sh(std::string(kLinks) + " && echo more >> b/g && echo ok"), "ok\n");
  ::usleep(1500 * 1000);  // the seal runs after the release; it failed there
  EXPECT_EQ(sh("cat b/g a/f"), "hello\nmore\nhello\nmore\n");
  ::usleep(5500 * 1000);  // where it was quarantined later
  EXPECT_EQ(sh("cat b/g a/f"), "hello\nmore\nhello\nmore\n");
  EXPECT_EQ(sh("ln b/g x && cat x"), "hello\nmore\n");
  EXPECT_EQ(quarantined(), std::vector<std::string>{}) << mount_->log();
}

TEST_F(InodeNames, InsideAPublishedDirectoryEntryTheWholeEntryStays) {
  // e is a directory entry (an empty directory published by rename, then
  // amended) holding f and an untouched file.
  EXPECT_EQ(sh("mkdir s b && mv s e && echo hello > e/f && echo other > e/other && ln e/f b/g && ln e/f h && "
               "rm h && echo ok"),
            "ok\n");
  EXPECT_EQ(sh("echo more >> b/g && python3 -c 'import os; os.truncate(\"b/g\", 8)' && echo ok"), "ok\n");
  ::usleep(1500 * 1000);
  EXPECT_EQ(sh("cat e/f b/g e/other"), "hello\nmohello\nmoother\n");
  EXPECT_EQ(list_dir(m("e")), (std::set<std::string>{".", "..", "f", "other"}));
  // The entry's own manifest lists f's new size.
  auto manifest = parse_manifest(read_file(b("e/.sealfs-manifest")).value_or(""));
  ASSERT_TRUE(manifest);
  EXPECT_EQ(manifest->files.at("f").size, 8u);
  EXPECT_EQ(quarantined(), std::vector<std::string>{}) << mount_->log();
}

// Programs nobody here wrote that make hard links across directories.
TEST_F(InodeNames, RsyncHardLinksAcrossDirectoriesThenAWriteThroughEachName) {
  if (sh("command -v rsync >/dev/null && echo yes") != "yes\n") GTEST_SKIP() << "rsync is not installed";
  const std::string src = mount_->backing() + "/../src";
  ASSERT_EQ(run_process({"/bin/sh", "-c",
                         "mkdir -p '" + src + "/x' '" + src + "/y' && echo one > '" + src + "/x/a' && ln '" +
                             src + "/x/a' '" + src + "/y/b' && ln '" + src + "/x/a' '" + src + "/c'"})
                .status,
            0);
  EXPECT_EQ(sh("rsync -aH '" + src + "/' dst/ && stat -c %h dst/x/a"), "3\n");
  // The name the daemon last saw (a link of the moment, as git makes) goes,
  // then a truncate through a name in another directory.
  EXPECT_EQ(sh("rm dst/c && cat dst/y/b >/dev/null && ln dst/x/a dst/t && rm dst/t && "
               "python3 -c 'import os; os.truncate(\"dst/y/b\", 2)' && cat dst/x/a dst/y/b"),
            "onon");
  EXPECT_EQ(sh("echo two >> dst/y/b && echo three >> dst/x/a && sleep 1.5 && cat dst/y/b"), "ontwo\nthree\n");
  // Again over what it made: rsync puts the links back.
  EXPECT_EQ(sh("rsync -aH --delete '" + src + "/' dst/ && cat dst/x/a dst/y/b dst/c"), "one\none\none\n");
  EXPECT_EQ(quarantined(), std::vector<std::string>{}) << mount_->log();
}

TEST_F(InodeNames, GitCloneLocalHardLinksObjectsAndGcUnlinksTheOriginals) {
  if (sh("command -v git >/dev/null && echo yes") != "yes\n") GTEST_SKIP() << "git is not installed";
  const std::string git =
      "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t git";
  EXPECT_EQ(sh(git + " init -q repo && cd repo && for i in 1 2 3; do echo $i > f$i && " + git +
               " add f$i && " + git + " commit -qm c$i; done && echo ok"),
            "ok\n");
  EXPECT_EQ(sh(git + " clone -q --local repo clone && find clone/.git/objects -type f -links +1 | wc -l"),
            "9\n");
  EXPECT_EQ(
      sh("cd clone && echo 4 > f4 && " + git + " add f4 && " + git + " commit -qm c4 && cd ../repo && " +
         git + " gc -q --prune=now && " + git + " fsck --strict && cd ../clone && " + git +
         " fsck --strict && " + git + " log --oneline | wc -l"),
      "4\n");
  EXPECT_EQ(quarantined(), std::vector<std::string>{}) << mount_->log();
}

// The outer manifest does not list what lies in an entry inside it: the
// inner entry is its own unit, amended alone.
TEST_F(InodeNames, AnEntryInsideAnEntryIsItsOwnUnit) {
  EXPECT_EQ(sh("mkdir -p c/n0 e0 && mv c/n0 c/n && echo hello > c/n/f && mv e0 e && mv c e/c && "
               "echo more >> e/c/n/f && sleep 1.5 && ls e && cat e/c/n/f"),
            "c\nhello\nmore\n");
  auto outer = parse_manifest(read_file(b("e/.sealfs-manifest")).value_or(""));
  ASSERT_TRUE(outer);
  EXPECT_EQ(outer->files.count("c/n/f"), 0u);
  auto inner = parse_manifest(read_file(b("e/c/n/.sealfs-manifest")).value_or(""));
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->files.at("f").size, 11u);
  // Changed again inside, and a file of the outer entry beside it: both stay.
  EXPECT_EQ(sh("echo x > e/top && echo again >> e/c/n/f && sleep 1.5 && ls e && cat e/top e/c/n/f"),
            "c\ntop\nx\nhello\nmore\nagain\n");
  EXPECT_EQ(quarantined(), std::vector<std::string>{}) << mount_->log();
  ASSERT_EQ(mount_->unmount(), 0) << mount_->log();
  ProcessResult fsck = run_process({sealfs_binary(), "fsck", mount_->backing()});
  EXPECT_EQ(fsck.status, 0) << fsck.out << fsck.err;
}

}  // namespace
}  // namespace sealfs::test
