// `sealfs fsck` says what the mount quarantined: after a mount moved a
// damaged entry aside, fsck reports it as new since the last fsck (count,
// reason with its path and time, bytes), apart from what fsck quarantined
// itself; the next fsck counts nothing new and still the total.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <string>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

// What `du` (coreutils) says the quarantine occupies: the allocated bytes
// of every inode in it, as the quarantine's cap counts them.
std::string du_bytes(const std::string& dir) {
  ProcessResult du = run_process({"du", "-s", "-B1", dir});
  if (du.status != 0) return "du failed: " + du.err;
  return du.out.substr(0, du.out.find('\t'));
}

TEST(FsckReport, SaysWhatTheMountQuarantinedSinceTheLastFsck) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-fsck-report");
  make_dirs(dir / "B");
  const std::string backing = dir / "B";
  {
    Mount mount(MountConfig{}.backed_by(backing));
    ASSERT_TRUE(mount.ok()) << mount.error();
    ASSERT_EQ(::mkdir(mount.m("e0").c_str(), 0755), 0);
    ASSERT_EQ(::rename(mount.m("e0").c_str(), mount.m("e").c_str()), 0);  // an (empty) entry
    write_file(mount.m("e/f"), "hello\n");                                // amended into it
    write_file(mount.m("e/g"), "untouched\n");
    write_file(mount.m("kept"), "kept\n");  // a file entry of its own
    // The seals follow the closes (RELEASE): the damage must come after them,
    // and after each seal has ended, not only written its record: a file
    // still being sealed is in progress, and a lookup shows it whatever its
    // size (CI's ASan stage, under load, caught the lookup in that window).
    ASSERT_TRUE(eventually([&] {
      auto manifest = read_file(mount.b("e/.sealfs-manifest"));
      return manifest && manifest->find("\"g\":") != std::string::npos &&
             manifest->find("\"f\":") != std::string::npos && daemon_counter(mount, "in_progress") == 0;
    }));
    ASSERT_EQ(::truncate(mount.b("e/f").c_str(), 2), 0);  // damage behind the mount
    EXPECT_EQ(lstat_errno(mount.m("e/f")), ENOENT);       // the lookup quarantines the entry e
    // The kernel is told that e went from another thread, and a lookup that
    // a removal may be racing defers the move (R5): both come soon, not at once.
    EXPECT_TRUE(eventually([&] { return lstat_errno(mount.m("e")) == ENOENT; }));
    ASSERT_TRUE(eventually([&] { return list_dir(mount.b(".sealfs/quarantine")).size() == 3u; }))
        << mount.log();  // ".", ".." and e's slot
    ASSERT_EQ(mount.unmount(), 0);
  }
  const std::string total = du_bytes(dir / "B/.sealfs/quarantine");
  ProcessResult first = run_process({sealfs_binary(), "fsck", backing});
  // 1: damage found and set right (by the mount), since no fsck saw it.
  EXPECT_EQ(first.status, 1) << first.out << first.err;
  // du counts the quarantine directory itself too; fsck counts the slots.
  struct stat qst {};
  ASSERT_EQ(::lstat((dir / "B/.sealfs/quarantine").c_str(), &qst), 0);
  const std::string slots_bytes =
      std::to_string(std::stoull(total) - static_cast<unsigned long long>(qst.st_blocks) * 512);
  EXPECT_NE(first.out.find("quarantine: 1 new (no earlier fsck recorded) (" + slots_bytes +
                           " bytes); 1 held in all (" + slots_bytes + " bytes)\n"),
            std::string::npos)
      << first.out << "du: " << total;
  const std::regex reason(
      "quarantine: new 20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z e: f: is 2 bytes, manifest says 6 bytes \\(" +
      slots_bytes + " bytes, \\.sealfs/quarantine/[0-9T.Z-]+\\)\n");
  EXPECT_TRUE(std::regex_search(first.out, reason)) << first.out;
  EXPECT_NE(first.out.find("quarantined 0 by this fsck, unchecked 0\n"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("entries 1, valid 1, invalid 0,"), std::string::npos) << first.out;  // kept alone

  ProcessResult second = run_process({sealfs_binary(), "fsck", backing});
  EXPECT_EQ(second.status, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("quarantine: 0 new since the last fsck (0 bytes); 1 held in all (" + slots_bytes +
                            " bytes)\n"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(second.out.find("quarantine: new "), std::string::npos) << second.out;
}

// Something in the quarantine that is no slot, or a slot whose reason is
// garbage, is reported, and fsck still finishes.
TEST(FsckReport, SaysWhatItCannotReadInTheQuarantine) {
  TempDir dir("sealfs-fsck-unreadable");
  make_dirs(dir / "B/.sealfs/quarantine/20261207T101501.000000000Z-7-000001");
  write_file(dir / "B/.sealfs/quarantine/20261207T101501.000000000Z-7-000001/reason.json",
             "{\"path\":\n\x01");
  write_file(dir / "B/.sealfs/quarantine/notes.txt", "someone's notes");
  ProcessResult r = run_process({sealfs_binary(), "fsck", dir / "B"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;  // a slot newer than any fsck: new
  EXPECT_NE(r.out.find("quarantine: 1 new (no earlier fsck recorded)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quarantine: unreadable .sealfs/quarantine/20261207T101501.000000000Z-7-000001: "
                       "reason.json is not a JSON object\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("quarantine: unreadable .sealfs/quarantine/notes.txt: not a quarantine slot\n"),
            std::string::npos)
      << r.out;
  ProcessResult again = run_process({sealfs_binary(), "fsck", dir / "B"});
  EXPECT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("quarantine: unreadable .sealfs/quarantine/notes.txt"), std::string::npos)
      << again.out;
}

}  // namespace
}  // namespace sealfs::test
