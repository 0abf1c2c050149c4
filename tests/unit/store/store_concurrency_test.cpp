// Store under concurrent callers (also run under TSan: the tsan-proof preset
// selects StoreTest.Concurrent* and StoreTest.ReadersNeverMiss*).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/offline.hpp"
#include "core/store/store.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

// ---- concurrency (run under TSan too) ------------------------------------

// fsck verifies on every core, in batches (FsckWalk::kChunk, 256 children):
// each entry is counted once, damage is found across batch edges, and the
// report comes in walk order whatever thread finished first (the same as
// --repair, which runs on one thread). Named Concurrent* for TSan's run
// (the tsan-proof preset).
TEST_F(StoreTest, ConcurrentFsckCountsEachEntryOnceInWalkOrder) {
  for (int i = 0; i < 600; ++i) publish_entry("e" + std::to_string(i), {{"a", "data" + std::to_string(i)}});
  for (int i : {0, 255, 256, 599})
    write_file(B("c/e" + std::to_string(i) + "/a"), "DATA" + std::to_string(i));  // same size
  write_file(B("c/e7/extra"), "x");
  auto first = sealfs::fsck(store(), false);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->entries, 600u);
  EXPECT_EQ(first->valid, 596u);
  EXPECT_EQ(first->invalid, 4u);
  EXPECT_EQ(first->foreign, 0u);
  EXPECT_EQ(first->unlisted, 1u);  // c/e7/extra
  EXPECT_EQ(first->problems.size(), 5u);
  auto second = sealfs::fsck(store(), false);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->problems, first->problems);
  auto repaired = sealfs::fsck(store(), true);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired->problems, first->problems);
  EXPECT_EQ(repaired->quarantined, 4u);
}

TEST_F(StoreTest, ConcurrentLookupsHashEachFileOnce) {
  publish_entry("k", {{"big.so", std::string(8u << 20, 'b')}, {"small.so", "s"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // ctimes old enough to trust (R8)
  options().verdict_ttl = std::chrono::hours(1);
  open_store();  // fresh caches
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      if (lookup("c/k/big.so").ok() && lookup("c/k/small.so").ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(store().metrics().files_hashed.load(), 2u);
}

TEST_F(StoreTest, ConcurrentPublishersOfOneKeyOneWins) {
  UniqueFd root = dir("");
  ASSERT_TRUE(store().mkdir(root.get(), "c", 0755).ok());
  constexpr int kWriters = 6;
  for (int i = 0; i < kWriters; ++i)
    stage("tmp/s" + std::to_string(i), {{"lib.so", "writer " + std::to_string(i)}, {"params.pkl", "p"}});
  std::atomic<int> won{0};
  std::atomic<int> lost{0};
  std::atomic<int> partial{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      // A reader sees no entry, or a complete one.
      if (visible("c/k") && (!visible("c/k/lib.so") || !visible("c/k/params.pkl"))) ++partial;
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i)
    threads.emplace_back([&, i] {
      Status s = rename("tmp/s" + std::to_string(i), "c/k");
      if (s.ok())
        ++won;
      else if (s.code() == ENOTEMPTY || s.code() == EEXIST)
        ++lost;
    });
  for (auto& t : threads) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(lost.load(), kWriters - 1);
  EXPECT_EQ(partial.load(), 0);
  auto content = read_visible("c/k/lib.so");
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(content->rfind("writer ", 0), 0u);
  auto report = sealfs::fsck(store(), false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->invalid, 0u);
}

TEST_F(StoreTest, ConcurrentAmendsLoseNoRecord) {
  publish_entry("k", {{"a", "a"}});
  constexpr int kFiles = 8;
  for (int i = 0; i < kFiles; ++i) write_file(B("tmp/n" + std::to_string(i)), "n" + std::to_string(i));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kFiles; ++i)
    threads.emplace_back([&, i] {
      if (rename("tmp/n" + std::to_string(i), "c/k/n" + std::to_string(i)).ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kFiles);
  UniqueFd k = dir("c/k");
  auto m = read_manifest_at(k.get(), ".sealfs-manifest");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->manifest.files.size(), static_cast<std::size_t>(kFiles + 1));
  for (int i = 0; i < kFiles; ++i)
    EXPECT_EQ(read_visible("c/k/n" + std::to_string(i)), "n" + std::to_string(i));
}

TEST_F(StoreTest, ReadersNeverMissAFileEntryBeingReplaced) {
  UniqueFd root = dir("");
  ASSERT_TRUE(store().mkdir(root.get(), "c", 0755).ok());
  write_file(B("tmp/f"), "version-0");
  ASSERT_TRUE(rename("tmp/f", "c/f").ok());
  std::atomic<bool> done{false};
  std::atomic<int> misses{0};
  std::atomic<int> reads{0};
  std::mutex why_mu;
  std::string why;
  std::thread reader([&] {
    while (!done.load()) {
      ++reads;
      auto f = lookup("c/f");
      if (!f) {
        ++misses;
        std::lock_guard lock(why_mu);
        why = "lookup: " + f.error().message;
        continue;
      }
      auto fd = store().open_file(f->fd.get(), O_RDONLY);
      if (!fd && fd.code() == ESTALE) {  // replaced since the lookup: look again, as the VFS does
        f = lookup("c/f");
        if (f) fd = store().open_file(f->fd.get(), O_RDONLY);
      }
      if (!f || !fd) {
        ++misses;
        std::lock_guard lock(why_mu);
        why = f ? "open: " + fd.error().message : "lookup: " + f.error().message;
      }
    }
  });
  for (int i = 1; i <= 40; ++i) {
    write_file(B("tmp/f"), "version-" + std::to_string(i % 2));
    Status s = rename("tmp/f", "c/f");
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(misses.load(), 0) << why;
  EXPECT_EQ(store().metrics().quarantined.load(), 0u);
}

}  // namespace
}  // namespace sealfs::test
