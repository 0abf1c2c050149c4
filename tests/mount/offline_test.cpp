// `sealfs fsck` and `sealfs adopt` on B, and what a mount then shows; their
// progress on a terminal and their summary line elsewhere (no mount needed).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

// B with two foreign files, one in a subdirectory.
void foreign_files(const TempDir& dir) {
  make_dirs(dir / "B/c/d");
  write_file(dir / "B/c/a.so", std::string(4096, 'a'));
  write_file(dir / "B/c/d/b.bin", std::string(1000, 'b'));
}

long lines_in(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

TEST(OfflineTools, AdoptSealsForeignContentSoTheMountShowsIt) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-adopt");
  make_dirs(dir / "B");
  ASSERT_EQ(tilelang("save", dir / "B", "old").status, 0);  // made before sealfs was used
  {
    Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
    ASSERT_TRUE(mount.ok()) << mount.error();
    EXPECT_EQ(tilelang("load", mount.mountpoint(), "old").status, kMiss);
  }
  ProcessResult adopted =
      run_process({sealfs_binary(), "adopt", "-o", "profile=tilelang", dir / "B", "ns/kernels/old"});
  ASSERT_EQ(adopted.status, 0) << adopted.err;
  EXPECT_NE(adopted.out.find("old"), std::string::npos) << adopted.out;
  Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  EXPECT_EQ(tilelang("load", mount.mountpoint(), "old").status, kHit);
}

TEST(OfflineTools, FsckReportsDamageAndRepairQuarantinesIt) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-fsck");
  make_dirs(dir / "B");
  {
    Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
    ASSERT_TRUE(mount.ok()) << mount.error();
    ASSERT_EQ(tilelang("save", mount.mountpoint(), "good").status, 0);
    ASSERT_EQ(tilelang("save", mount.mountpoint(), "bad").status, 0);
  }
  ProcessResult clean = run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(clean.status, 0) << clean.out << clean.err;
  ASSERT_EQ(::truncate((dir / "B/ns/kernels/bad/kernel_lib.so").c_str(), 10), 0);
  ProcessResult found = run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(found.status, 4) << found.out << found.err;
  EXPECT_NE(found.out.find("bad"), std::string::npos) << found.out;
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/bad"), 0);  // without --repair nothing moves
  ProcessResult repaired =
      run_process({sealfs_binary(), "fsck", "--repair", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(repaired.status, 1) << repaired.out << repaired.err;
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/bad"), ENOENT);
  EXPECT_EQ(lstat_errno(dir / "B/ns/kernels/good"), 0);
  ProcessResult after = run_process({sealfs_binary(), "fsck", "-o", "profile=tilelang", dir / "B"});
  EXPECT_EQ(after.status, 0) << after.out << after.err;
}

TEST(OfflineTools, WithoutATerminalFsckAndAdoptPrintOneSummaryLine) {
  TempDir dir("sealfs-offline-summary");
  foreign_files(dir);
  ProcessResult adopted = run_process({sealfs_binary(), "adopt", dir / "B"});  // stderr is a pipe
  ASSERT_EQ(adopted.status, 0) << adopted.err;
  EXPECT_EQ(lines_in(adopted.out), 2) << adopted.out;  // the report is unchanged: one line per file
  EXPECT_EQ(lines_in(adopted.err), 1) << adopted.err;
  EXPECT_EQ(adopted.err.rfind("adopt: 2 items, 5.1 kB hashed in ", 0), 0u) << adopted.err;
  EXPECT_EQ(adopted.err.find('\r'), std::string::npos) << adopted.err;
  ProcessResult checked = run_process({sealfs_binary(), "fsck", dir / "B"});
  ASSERT_EQ(checked.status, 0) << checked.out << checked.err;
  EXPECT_NE(checked.out.find("entries 2, valid 2"), std::string::npos) << checked.out;
  EXPECT_EQ(lines_in(checked.err), 1) << checked.err;
  EXPECT_EQ(checked.err.rfind("fsck: 2 entries, 5.1 kB hashed in ", 0), 0u) << checked.err;
  EXPECT_EQ(checked.err.find('\r'), std::string::npos) << checked.err;
}

// script(1) (util-linux) runs the command on a pseudo-terminal; its output
// is what the terminal received, stdout and stderr together.
TEST(OfflineTools, OnATerminalTheProgressLineIsRewrittenInPlace) {
  if (::access("/usr/bin/script", X_OK) != 0) {
    if (running_under_ci()) FAIL() << "script(1) from util-linux is missing";
    GTEST_SKIP() << "script(1) from util-linux is missing";
  }
  TempDir dir("sealfs-offline-tty");
  foreign_files(dir);
  for (const std::string job : {"adopt", "fsck"}) {
    SCOPED_TRACE(job);
    const std::string command = "'" + sealfs_binary() + "' " + job + " '" + (dir / "B") + "'";
    ProcessResult r = run_process({"/usr/bin/script", "-qec", command, "/dev/null"});
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    const std::string unit = job == "fsck" ? "entries" : "items";
    // The progress line (items done of planned), then the summary over it.
    const auto progress = r.out.find("\r" + job + ": 1/2 " + unit + ", ");
    ASSERT_NE(progress, std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" hashed, ", progress), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(", ETA ", progress), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\r" + job + ": 2 " + unit + ", 5.1 kB hashed in ", progress), std::string::npos)
        << r.out;
  }
}

TEST(OfflineTools, FsckOfAMissingDirectoryFailsWithOneLine) {
  TempDir dir("sealfs-fsck-missing");
  ProcessResult r = run_process({sealfs_binary(), "fsck", dir / "missing"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sealfs: backing directory", 0), 0u) << r.err;
}

}  // namespace
}  // namespace sealfs::test
