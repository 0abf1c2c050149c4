// KernelNotices: every notification to the kernel goes through one gate,
// closed before the unmount closes the device (kernel_notices.hpp). A
// session that was never mounted answers notifications itself (-ENOSYS: no
// protocol agreed), which tells here whether a call reached libfuse.
#include "fs/fuse/kernel_notices.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <thread>
#include <vector>

namespace sealfs::fuse {
namespace {

struct SessionDeleter {
  void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};

std::unique_ptr<fuse_session, SessionDeleter> unmounted_session() {
  static const fuse_lowlevel_ops kNoOps{};
  char arg0[] = "sealfs";
  char* argv[] = {arg0, nullptr};
  fuse_args args = FUSE_ARGS_INIT(1, argv);
  return std::unique_ptr<fuse_session, SessionDeleter>(
      fuse_session_new(&args, &kNoOps, sizeof kNoOps, nullptr));
}

TEST(KernelNotices, NothingReachesLibfuseBeforeOpenOrAfterClose) {
  auto se = unmounted_session();
  ASSERT_NE(se, nullptr);
  KernelNotices notices;
  EXPECT_EQ(notices.inval_inode(1), -ENOTCONN);
  notices.open(se.get());
  EXPECT_EQ(notices.inval_inode(1), -ENOSYS);  // reached libfuse
  EXPECT_EQ(notices.inval_entry(1, "name"), -ENOSYS);
  EXPECT_TRUE(notices.close(std::chrono::milliseconds(100)));
  EXPECT_EQ(notices.inval_inode(1), -ENOTCONN);
  EXPECT_EQ(notices.inval_entry(1, "name"), -ENOTCONN);
  EXPECT_EQ(notices.store(1, 0, nullptr), -ENOTCONN);
}

// Threads notifying all along while the gate closes: close() waits for
// those in flight, and none reaches libfuse once it has returned.
TEST(KernelNotices, CloseWaitsForNotificationsInFlight) {
  auto se = unmounted_session();
  ASSERT_NE(se, nullptr);
  KernelNotices notices;
  notices.open(se.get());
  std::atomic<bool> closed{false};
  std::atomic<int> reached_after_close{0};
  std::atomic<int> sent{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t)
    senders.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        const bool was_closed = closed.load();
        if (notices.inval_inode(1) == -ENOSYS && was_closed) reached_after_close.fetch_add(1);
        sent.fetch_add(1);
      }
    });
  while (sent.load() < 1000) std::this_thread::yield();
  EXPECT_TRUE(notices.close(std::chrono::seconds(5)));
  closed.store(true);
  for (auto& s : senders) s.join();
  EXPECT_EQ(reached_after_close.load(), 0);
}

}  // namespace
}  // namespace sealfs::fuse
