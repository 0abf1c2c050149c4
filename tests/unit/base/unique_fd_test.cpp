#include "core/base/unique_fd.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <utility>

namespace sealfs {
namespace {

UniqueFd open_null() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

// Issue 24: the daemon counts the descriptors it holds from UniqueFd's
// count, which must follow every way one is opened, moved, reset and let go.
TEST(UniqueFd, LiveCountsEveryDescriptorOwned) {
  const std::int64_t before = UniqueFd::live();
  {
    UniqueFd a = open_null();
    ASSERT_TRUE(a.valid());
    EXPECT_EQ(UniqueFd::live(), before + 1);
    UniqueFd b = std::move(a);  // moved: still one
    EXPECT_EQ(UniqueFd::live(), before + 1);
    b = open_null();  // the old one closed, a new one owned
    EXPECT_EQ(UniqueFd::live(), before + 1);
    UniqueFd c = open_null();
    EXPECT_EQ(UniqueFd::live(), before + 2);
    b = std::move(c);  // b's closed, c's moved into it
    EXPECT_EQ(UniqueFd::live(), before + 1);
    const int raw = b.release();  // no longer owned
    EXPECT_EQ(UniqueFd::live(), before);
    b.reset(raw);
    EXPECT_EQ(UniqueFd::live(), before + 1);
    b.reset();
    EXPECT_EQ(UniqueFd::live(), before);
    b = open_null();
    UniqueFd invalid(-1);
    EXPECT_EQ(UniqueFd::live(), before + 1);
  }
  EXPECT_EQ(UniqueFd::live(), before);
}

}  // namespace
}  // namespace sealfs
