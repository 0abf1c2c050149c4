// DirContextCache: what it returns, for how long, and what empties it.
#include "core/store/dir_context.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "core/store/store.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

using namespace std::chrono_literals;

class DirContextCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_dirs(tmp_ / "e/sub");
    write_file(tmp_ / ("e/" + std::string(kDirManifest)), "{}");
  }
  UniqueFd open_dir(const std::string& rel) {
    UniqueFd fd(::open((tmp_ / rel).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    EXPECT_TRUE(fd);
    return fd;
  }
  // The context a walk would find for e/sub: inside the entry e.
  DirContext sub_context() {
    DirContext ctx;
    ctx.rel = "e/sub";
    EXPECT_EQ(::stat((tmp_ / "e/sub").c_str(), &ctx.st), 0);
    EntryRoot e;
    e.fd = open_dir("e");
    EXPECT_EQ(::fstat(e.fd.get(), &e.st), 0);
    e.rel = "e";
    ctx.entry = std::move(e);
    ctx.sub = "sub";
    return ctx;
  }
  // Stores the context of e/sub, found by a walk that began at generation.
  void put_sub(DirContextCache& cache, std::uint64_t generation) {
    UniqueFd sub = open_dir("e/sub");
    cache.put(generation, sub.get(), sub_context());
  }
  void put_sub(DirContextCache& cache) { put_sub(cache, cache.generation()); }
  // Stores the context of rel, a plain container at the top of the store.
  void put_container(DirContextCache& cache, const std::string& rel) {
    make_dirs(tmp_ / rel);
    UniqueFd fd = open_dir(rel);
    DirContext ctx;
    ctx.rel = rel;
    ASSERT_EQ(::fstat(fd.get(), &ctx.st), 0);
    cache.put(cache.generation(), fd.get(), ctx);
  }
  TempDir tmp_;
};

TEST_F(DirContextCacheTest, ReturnsWhatWasStoredWithFdsOfItsOwn) {
  DirContextCache cache(1h);
  UniqueFd sub = open_dir("e/sub");
  DirContext ctx = sub_context();
  cache.put(cache.generation(), sub.get(), ctx);
  ctx.entry.reset();  // the cache keeps fds of its own
  sub.reset();
  UniqueFd dir;
  auto found = cache.find("e/sub", &dir);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->rel, "e/sub");
  EXPECT_EQ(found->sub, "sub");
  ASSERT_TRUE(found->entry.has_value());
  EXPECT_EQ(found->entry->rel, "e");
  struct stat st {};
  ASSERT_EQ(::fstat(dir.get(), &st), 0);  // a usable fd of e/sub
  EXPECT_TRUE(same_object(st, found->st));
  ASSERT_EQ(::fstatat(found->entry->fd.get(), std::string(kDirManifest).c_str(), &st, 0), 0);
  EXPECT_FALSE(cache.find("e").has_value());
}

TEST_F(DirContextCacheTest, ForgetsAfterTheTtl) {
  DirContextCache cache(20ms);
  put_sub(cache);
  ASSERT_TRUE(cache.find("e/sub").has_value());
  std::this_thread::sleep_for(40ms);
  EXPECT_FALSE(cache.find("e/sub").has_value());
}

TEST_F(DirContextCacheTest, ZeroTtlStoresNothing) {
  DirContextCache cache(0ns);
  put_sub(cache);
  EXPECT_FALSE(cache.find("e/sub").has_value());
}

TEST_F(DirContextCacheTest, MovedForgetsAllAndRefusesWalksThatBeganBefore) {
  DirContextCache cache(1h);
  const auto before = cache.generation();
  put_sub(cache, before);
  cache.moved();
  EXPECT_FALSE(cache.find("e/sub").has_value());
  put_sub(cache, before);  // a walk that raced the move
  EXPECT_FALSE(cache.find("e/sub").has_value());
  put_sub(cache);
  EXPECT_TRUE(cache.find("e/sub").has_value());
}

TEST_F(DirContextCacheTest, EntryWhoseManifestWentIsNotReturned) {
  DirContextCache cache(1h);
  put_sub(cache);
  ASSERT_EQ(::unlink((tmp_ / ("e/" + std::string(kDirManifest))).c_str()), 0);
  EXPECT_FALSE(cache.find("e/sub").has_value());
}

TEST_F(DirContextCacheTest, BoundedInSize) {
  DirContextCache cache(1h, 2);
  for (const char* rel : {"c1", "c2", "c3"}) put_container(cache, rel);
  int held = 0;
  for (const char* rel : {"c1", "c2", "c3"}) held += cache.find(rel).has_value() ? 1 : 0;
  EXPECT_LE(held, 2);
  EXPECT_TRUE(cache.find("c3").has_value());  // the newest is always kept
}

// When full, expired contexts go first; live ones are kept while room is made.
TEST_F(DirContextCacheTest, FullCacheDropsExpiredContextsFirst) {
  DirContextCache cache(200ms, 2);
  put_container(cache, "c1");
  std::this_thread::sleep_for(250ms);
  put_container(cache, "c2");
  put_container(cache, "c3");  // full: c1 has expired and makes room; c2 stays
  EXPECT_TRUE(cache.find("c2").has_value());
  EXPECT_TRUE(cache.find("c3").has_value());
}

}  // namespace
}  // namespace sealfs::test
