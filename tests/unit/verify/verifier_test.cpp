// Verifier: the R8 stamp cache (hash once, rehash on stamp change or recent
// ctime, force), one hash per file under concurrency, bounded size.
#include "core/verify/verifier.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

UniqueFd open_ro(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  return UniqueFd(fd);
}

// A ctime at least one second old, so the cache may serve it (R8).
void age_past_ctime_window() { std::this_thread::sleep_for(std::chrono::milliseconds(1100)); }

TEST(VerifierTest, DigestMatchesContentAndCountsBytes) {
  TempDir dir("sealfs-verifier");
  write_file(dir / "f", "hello world");
  Metrics m;
  Verifier v(m);
  UniqueFd fd = open_ro(dir / "f");
  auto d = v.digest(fd.get());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, sha256_of("hello world"));
  EXPECT_EQ(m.files_hashed.load(), 1u);
  EXPECT_EQ(m.bytes_hashed.load(), 11u);
}

TEST(VerifierTest, RecentCtimeIsRehashedOldOneIsCached) {
  TempDir dir("sealfs-verifier");
  write_file(dir / "f", "abc");
  Metrics m;
  Verifier v(m);
  UniqueFd fd = open_ro(dir / "f");
  ASSERT_TRUE(v.digest(fd.get()).ok());
  ASSERT_TRUE(v.digest(fd.get()).ok());
  EXPECT_EQ(m.files_hashed.load(), 2u);  // ctime under a second old: not trusted
  age_past_ctime_window();
  ASSERT_TRUE(v.digest(fd.get()).ok());
  ASSERT_TRUE(v.digest(fd.get()).ok());
  EXPECT_EQ(m.files_hashed.load(), 2u);  // same stamp, ctime now old enough: served from the cache
  EXPECT_EQ(v.cached(), 1u);
  ASSERT_TRUE(v.digest(fd.get(), /*force=*/true).ok());
  EXPECT_EQ(m.files_hashed.load(), 3u);
}

TEST(VerifierTest, StampChangeCausesRehash) {
  TempDir dir("sealfs-verifier");
  write_file(dir / "f", "first");
  Metrics m;
  Verifier v(m);
  age_past_ctime_window();
  UniqueFd fd = open_ro(dir / "f");
  ASSERT_EQ(*v.digest(fd.get()), sha256_of("first"));
  write_file(dir / "f", "other");  // same size, new bytes: mtime/ctime change
  auto d = v.digest(fd.get());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, sha256_of("other"));
  EXPECT_EQ(m.files_hashed.load(), 2u);
}

TEST(VerifierTest, ManyThreadsOneHash) {
  TempDir dir("sealfs-verifier");
  write_file(dir / "big", std::string(32u << 20, 'z'));
  age_past_ctime_window();
  Metrics m;
  Verifier v(m);
  const Sha256 expected = sha256_of(std::string(32u << 20, 'z'));
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      UniqueFd fd = open_ro(dir / "big");
      auto d = v.digest(fd.get());
      if (d.ok() && *d == expected) ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 8);
  EXPECT_EQ(m.files_hashed.load(), 1u);
  EXPECT_EQ(m.bytes_hashed.load(), 32u << 20);
}

TEST(VerifierTest, RefusesNonRegularFiles) {
  TempDir dir("sealfs-verifier");
  Metrics m;
  Verifier v(m);
  int raw = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  UniqueFd d(raw);
  EXPECT_EQ(v.digest(d.get()).code(), EINVAL);
  EXPECT_EQ(v.digest(-1).code(), EBADF);
}

TEST(VerifierTest, CacheIsBoundedAndForgettable) {
  TempDir dir("sealfs-verifier");
  for (const char* n : {"a", "b", "c"}) write_file(dir / n, n);
  age_past_ctime_window();
  Metrics m;
  Verifier v(m, 2);
  for (const char* n : {"a", "b", "c"}) {
    UniqueFd fd = open_ro(dir / n);
    ASSERT_TRUE(v.digest(fd.get()).ok());
  }
  EXPECT_EQ(v.cached(), 2u);
  UniqueFd c = open_ro(dir / "c");
  struct stat st {};
  ASSERT_EQ(::fstat(c.get(), &st), 0);
  v.forget(st.st_dev, st.st_ino);
  EXPECT_EQ(v.cached(), 1u);
  UniqueFd a = open_ro(dir / "a");  // "a" was evicted first: hashed again
  const auto before = m.files_hashed.load();
  ASSERT_TRUE(v.digest(a.get()).ok());
  EXPECT_EQ(m.files_hashed.load(), before + 1);
}

TEST(VerifierTest, StampEquality) {
  struct stat a {};
  a.st_dev = 1;
  a.st_ino = 2;
  a.st_size = 3;
  a.st_mtim = {4, 5};
  a.st_ctim = {6, 7};
  struct stat b = a;
  EXPECT_TRUE(Stamp::of(a) == Stamp::of(b));
  b.st_ctim.tv_nsec = 8;
  EXPECT_FALSE(Stamp::of(a) == Stamp::of(b));
  b = a;
  b.st_size = 9;
  EXPECT_FALSE(Stamp::of(a) == Stamp::of(b));
}

}  // namespace
}  // namespace sealfs::test
