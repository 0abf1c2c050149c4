// -o metrics_file: where it may be, the atomic rewrite, and the thread that
// rewrites it (fs/fuse/metrics_file.hpp). No mount needed.
#include "fs/fuse/metrics_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace sealfs::fuse {
namespace {

using sealfs::test::exists_nofollow;
using sealfs::test::make_dirs;
using sealfs::test::read_file;
using sealfs::test::TempDir;
using namespace std::chrono_literals;

TEST(MetricsFilePath, IsMadeAbsoluteInAnExistingDirectory) {
  TempDir dir("sealfs-metrics-path");
  make_dirs(dir / "prom");
  make_dirs(dir / "B");
  make_dirs(dir / "M");
  auto p = metrics_file_path(dir / "prom/../prom/sealfs.prom", dir / "M", dir / "B");
  ASSERT_TRUE(p.ok()) << p.error().message;
  char* real = ::realpath((dir / "prom").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(*p, std::string(real) + "/sealfs.prom");
  std::free(real);
}

TEST(MetricsFilePath, RefusesTheMountTheBackingStoreAndNonsense) {
  TempDir dir("sealfs-metrics-path");
  make_dirs(dir / "B/sub");
  make_dirs(dir / "M");
  make_dirs(dir / "prom/is-a-dir");
  for (const std::string& bad : {dir / "M/x.prom", dir / "M", dir / "B/sub/x.prom", dir / "missing/x.prom",
                                 dir / "prom/is-a-dir", dir / "prom/", std::string("")}) {
    auto p = metrics_file_path(bad, dir / "M", dir / "B");
    EXPECT_FALSE(p.ok()) << bad;
  }
  auto inside = metrics_file_path(dir / "M/x.prom", dir / "M", dir / "B");
  ASSERT_FALSE(inside.ok());
  EXPECT_NE(inside.error().message.find("outside the mountpoint"), std::string::npos)
      << inside.error().message;
  // A name that merely starts like the mountpoint is outside it.
  make_dirs(dir / "M2");
  EXPECT_TRUE(metrics_file_path(dir / "M2/x.prom", dir / "M", dir / "B").ok());
}

TEST(MetricsFileWrite, ReplacesTheFileAndLeavesNoTemporary) {
  TempDir dir("sealfs-metrics-write");
  const std::string path = dir / "m.prom";
  ASSERT_TRUE(write_file_replacing(path, "first\n").ok());
  ASSERT_TRUE(write_file_replacing(path, "second\n").ok());
  EXPECT_EQ(read_file(path), "second\n");
  EXPECT_FALSE(exists_nofollow(path + ".tmp"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0644u & ~mask);
  EXPECT_EQ(write_file_replacing(dir / "no/such/dir.prom", "x").code(), ENOENT);
}

// The renders and log lines the thread made, shared with the test's thread.
struct Seen {
  std::mutex mu;
  std::vector<std::string> log;
  std::atomic<int> renders{0};
};

TEST(MetricsFileThread, WritesAtOnceRepeatsAndWritesOnceMoreAtTheEnd) {
  TempDir dir("sealfs-metrics-thread");
  const std::string path = dir / "m.prom";
  Seen seen;
  {
    MetricsFile file(
        path, 20ms, [&seen] { return "render " + std::to_string(++seen.renders) + "\n"; },
        [&seen](const std::string& line) {
          std::lock_guard lock(seen.mu);
          seen.log.push_back(line);
        });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (seen.renders < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    EXPECT_GE(seen.renders.load(), 3);
  }
  const int renders = seen.renders.load();
  EXPECT_EQ(read_file(path), "render " + std::to_string(renders) + "\n");  // the last one, at the end
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(seen.renders.load(), renders) << "the thread is gone";
  EXPECT_TRUE(seen.log.empty());
}

TEST(MetricsFileThread, AFailureIsLoggedOnceAndTheThreadKeepsTrying) {
  TempDir dir("sealfs-metrics-fail");
  const std::string path = dir / "later/m.prom";  // its directory comes later
  Seen seen;
  {
    MetricsFile file(
        path, 20ms, [&seen] { return "n " + std::to_string(++seen.renders) + "\n"; },
        [&seen](const std::string& line) {
          std::lock_guard lock(seen.mu);
          seen.log.push_back(line);
        });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (seen.renders < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    {
      std::lock_guard lock(seen.mu);
      ASSERT_EQ(seen.log.size(), 1u);
      EXPECT_NE(seen.log[0].find(path), std::string::npos) << seen.log[0];
    }
    make_dirs(dir / "later");
    const int failed = seen.renders.load();
    while (seen.renders < failed + 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(read_file(path).has_value());
  std::lock_guard lock(seen.mu);
  ASSERT_EQ(seen.log.size(), 2u);
  EXPECT_NE(seen.log[1].find("written again"), std::string::npos) << seen.log[1];
}

}  // namespace
}  // namespace sealfs::fuse
