// The progress line of fsck and adopt (fs/cli/progress_line.hpp): in place
// on a terminal, one summary line otherwise.
#include "fs/cli/progress_line.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

namespace sealfs::cli {
namespace {

TEST(ProgressLine, NotATerminalPrintsOnlyTheSummary) {
  std::ostringstream out;
  ProgressLine p("fsck", "entries", out, false);
  p.planned({3, 3000});
  p.advanced({1, 1000});
  p.advanced({2, 2000});
  p.advanced({3, 3000});
  EXPECT_TRUE(out.str().empty());
  p.finish();
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.rfind("fsck: 3 entries, 3.0 kB hashed in ", 0), 0u) << text;
}

TEST(ProgressLine, OnATerminalTheLineIsRewrittenInPlace) {
  std::ostringstream out;
  ProgressLine p("adopt", "items", out, true);
  p.planned({2, 0});
  p.advanced({1, 0});
  p.finish();
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("\radopt: 1/2 items, 0 B/0 B hashed, ", 0), 0u) << text;
  const auto second = text.find("\radopt: 1 items", 1);
  ASSERT_NE(second, std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  // The summary covers the longer progress line before it.
  EXPECT_GE(text.size() - second - 1, second) << text;
}

TEST(ProgressLine, RedrawsAreThrottled) {
  std::ostringstream out;
  ProgressLine p("fsck", "entries", out, true);
  p.planned({1000, 0});
  for (std::uint64_t i = 1; i <= 1000; ++i) p.advanced({i, 0});
  const std::string text = out.str();
  EXPECT_LT(std::count(text.begin(), text.end(), '\r'), 50) << "a line per item";
  EXPECT_GE(std::count(text.begin(), text.end(), '\r'), 1);
}

TEST(ProgressLine, RateAndEtaFollowTheBytes) {
  std::ostringstream out;
  ProgressLine p("fsck", "entries", out, true);
  p.planned({10, 400'000'000});
  // 100 MB in 2 s: 50 MB/s, 300 MB left: 6 s.
  EXPECT_EQ(p.progress_text({4, 100'000'000}, 2.0),
            "fsck: 4/10 entries, 100.0 MB/400.0 MB hashed, 50.0 MB/s, ETA 0:06");
  // Nothing hashed yet: no ETA to give.
  EXPECT_EQ(p.progress_text({1, 0}, 0.5), "fsck: 1/10 entries, 0 B/400.0 MB hashed, 0.0 MB/s, ETA ?");
  EXPECT_EQ(p.summary_text({10, 400'000'000}, 8.0), "fsck: 10 entries, 400.0 MB hashed in 8.0 s (50.0 MB/s)");
}

TEST(ProgressLine, WithoutBytesTheEtaFollowsTheItems) {
  std::ostringstream out;
  ProgressLine p("adopt", "items", out, true);
  p.planned({4, 0});
  EXPECT_EQ(p.progress_text({1, 0}, 3.0), "adopt: 1/4 items, 0 B/0 B hashed, 0.0 MB/s, ETA 0:09");
}

TEST(ProgressLine, UnitsAndClock) {
  EXPECT_EQ(human_bytes(999), "999 B");
  EXPECT_EQ(human_bytes(1500), "1.5 kB");
  EXPECT_EQ(human_bytes(2'500'000'000ull), "2.5 GB");
  EXPECT_EQ(clock_text(7), "0:07");
  EXPECT_EQ(clock_text(754), "12:34");
  EXPECT_EQ(clock_text(3723), "1:02:03");
  EXPECT_EQ(clock_text(-3), "0:00");
}

}  // namespace
}  // namespace sealfs::cli
