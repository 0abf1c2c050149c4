#include "fs/fuse/descriptors.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace sealfs::fuse {
namespace {

TEST(Descriptors, TheMinimumIsTheLowestLimitThatLeavesAWorkingSetPastTheHeadroom) {
  constexpr std::uint64_t minimum = minimum_descriptor_limit();
  EXPECT_GE(minimum - descriptor_headroom(minimum), kWorkingDescriptors);
  EXPECT_LT((minimum - 1) - descriptor_headroom(minimum - 1), kWorkingDescriptors);
  EXPECT_EQ(minimum, 273u) << "sealfs(8) states it";
  EXPECT_GT(descriptor_headroom(64), 64u) << "a limit of 64 is all headroom";
}

// This process's soft limit lowered for a scope, the hard one kept.
class SoftLimit {
 public:
  explicit SoftLimit(rlim_t soft) {
    ok_ = ::getrlimit(RLIMIT_NOFILE, &saved_) == 0;
    struct rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(soft, saved_.rlim_max);
    ok_ = ok_ && ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~SoftLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  SoftLimit(const SoftLimit&) = delete;
  SoftLimit& operator=(const SoftLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  struct rlimit saved_ {};
  bool ok_ = false;
};

TEST(Descriptors, ALimitBelowTheMinimumIsOneLineThatSaysTheMinimum) {
  {
    SoftLimit low(64);
    ASSERT_TRUE(low.ok());
    const std::string problem = descriptor_limit_problem();
    EXPECT_NE(problem.find("the open file limit is 64, below the 273 descriptors a mount needs"),
              std::string::npos)
        << problem;
    EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
  }
  {
    SoftLimit at(minimum_descriptor_limit());
    ASSERT_TRUE(at.ok());
    EXPECT_EQ(descriptor_limit_problem(), "");
  }
}

}  // namespace
}  // namespace sealfs::fuse
