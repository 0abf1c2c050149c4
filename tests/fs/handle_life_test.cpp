#include "fs/fuse/handle_life.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/writers/writer_tracking.hpp"

namespace sealfs::fuse {
namespace {

TEST(HandleLifeTest, AHandleReleasedWithoutAFlushIsAbandoned) {
  HandleLife life;
  life.opened({.made = true});
  const HandleEnd end = life.end();
  EXPECT_TRUE(end.made);
  EXPECT_TRUE(end.abandoned);  // a create cut short by SIGKILL: no FLUSH ever came
  EXPECT_FALSE(end.changed);
  EXPECT_FALSE(end.closed_normally);
}

TEST(HandleLifeTest, ANormalCloseAfterAWriteIsNotAbandoned) {
  HandleLife life;
  life.opened({});
  life.change();
  life.closer(true);
  life.flush();
  const HandleEnd end = life.end();
  EXPECT_TRUE(end.changed);
  EXPECT_FALSE(end.abandoned);
  EXPECT_TRUE(end.closed_normally);
  EXPECT_FALSE(end.made);
}

// R10: a lock file its creator closed normally and whose last holder (a
// child sharing the descriptor) was killed: both closes are remembered, and
// WriterTracking seals it because one close was normal and nothing changed.
TEST(HandleLifeTest, ANormalAndADyingCloserAreBothRemembered) {
  HandleLife life;
  life.opened({.made = true});
  life.closer(true);
  life.flush();
  life.closer(false);
  life.flush();
  const HandleEnd end = life.end();
  EXPECT_TRUE(end.abandoned);
  EXPECT_TRUE(end.closed_normally);
  WriterTracking writers;
  writers.opened(1, 2);
  EXPECT_EQ(writers.released(1, 2, end), LastClose::seal);
}

TEST(HandleLifeTest, ATruncatingOpenIsAChange) {
  HandleLife life;
  life.opened({.truncated = true});
  EXPECT_TRUE(life.changed());
  life.abandon();
  life.flush();
  WriterTracking writers;
  writers.opened(1, 2);
  EXPECT_EQ(writers.released(1, 2, life.end()), LastClose::abandon);
}

TEST(HandleLifeTest, ReleaseIsAwaitedOnceAndTakenOnce) {
  HandleLife life;
  EXPECT_FALSE(life.take_awaited_release());
  EXPECT_TRUE(life.await_release());
  EXPECT_FALSE(life.await_release());  // a second FLUSH (a dup's close) is not counted again
  EXPECT_TRUE(life.take_awaited_release());
  EXPECT_FALSE(life.take_awaited_release());
}

// WRITE, FLUSH and the reaper record on their own threads: no fact is lost.
TEST(HandleLifeTest, FactsRecordedConcurrentlyAreAllKept) {
  for (int round = 0; round < 200; ++round) {
    HandleLife life;
    int counted = 0;
    std::vector<std::thread> threads;
    threads.emplace_back([&] { life.change(); });
    threads.emplace_back([&] { life.closer(true); });
    threads.emplace_back([&] { life.abandon(); });
    threads.emplace_back([&] { life.flush(); });
    threads.emplace_back([&] { counted += life.await_release() ? 1 : 0; });
    for (auto& t : threads) t.join();
    const HandleEnd end = life.end();
    ASSERT_TRUE(end.changed && end.abandoned && end.closed_normally && life.flushed());
    ASSERT_EQ(counted, 1);
    ASSERT_TRUE(life.take_awaited_release());
  }
}

}  // namespace
}  // namespace sealfs::fuse
