#include "core/base/metrics_text.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace sealfs {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

TEST(MetricsText, AFamilyIsHelpTypeThenItsSample) {
  MetricsSnapshot m;
  m.hits = 5;
  const std::string text = prometheus_text(m, "/mnt/cache");
  EXPECT_NE(text.find("# HELP sealfs_hits_total Lookups answered with a verified sealed object.\n"
                      "# TYPE sealfs_hits_total counter\n"
                      "sealfs_hits_total{mountpoint=\"/mnt/cache\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(has_line(text, "# TYPE sealfs_open_handles gauge")) << text;
  EXPECT_TRUE(has_line(text, "# TYPE sealfs_in_progress_files gauge")) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsText, WithoutAMountpointSamplesCarryOnlyTheirOwnLabels) {
  MetricsSnapshot m;
  m.misses = 3;
  m.hidden_by[static_cast<std::size_t>(HideReason::digest)] = 2;
  const std::string text = prometheus_text(m, "");
  EXPECT_TRUE(has_line(text, "sealfs_misses_total 3")) << text;
  EXPECT_TRUE(has_line(text, "sealfs_hidden_total{reason=\"digest\"} 2")) << text;
  EXPECT_EQ(text.find("mountpoint"), std::string::npos);
}

TEST(MetricsText, EveryReasonIsListedInBothFamilies) {
  MetricsSnapshot m;
  m.quarantined_by[static_cast<std::size_t>(HideReason::abandoned)] = 7;
  const std::string text = prometheus_text(m, "/m");
  for (std::size_t i = 0; i < kHideReasons; ++i) {
    const std::string label = std::string(label_of(static_cast<HideReason>(i)));
    const std::string q = label == "abandoned" ? "7" : "0";
    EXPECT_TRUE(has_line(text, "sealfs_hidden_total{mountpoint=\"/m\",reason=\"" + label + "\"} 0")) << label;
    EXPECT_TRUE(has_line(text, "sealfs_quarantined_total{mountpoint=\"/m\",reason=\"" + label + "\"} " + q))
        << label;
  }
}

TEST(MetricsText, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("plain/path"), "plain/path");
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_label_value("tab\tand é"), "tab\tand é");  // only the three the format names
  MetricsSnapshot m;
  const std::string text = prometheus_text(m, "/odd \"dir\"\\\nx");
  EXPECT_TRUE(has_line(text, "sealfs_lookups_total{mountpoint=\"/odd \\\"dir\\\"\\\\\\nx\"} 0")) << text;
}

TEST(MetricsText, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Metrics live;
  live.publish_seconds.observe(std::chrono::microseconds(300));   // le 0.0005
  live.publish_seconds.observe(std::chrono::microseconds(2000));  // le 0.0025
  live.publish_seconds.observe(std::chrono::microseconds(2500));  // le 0.0025 (bound included)
  live.publish_seconds.observe(std::chrono::seconds(30));         // +Inf
  const std::string text = prometheus_text(live.snapshot(), "");
  const std::vector<std::string> expected = {
      "# HELP sealfs_publish_duration_seconds Time a successful publish took, from judging its source to its "
      "last fsync.",
      "# TYPE sealfs_publish_duration_seconds histogram",
      "sealfs_publish_duration_seconds_bucket{le=\"0.0005\"} 1",
      "sealfs_publish_duration_seconds_bucket{le=\"0.001\"} 1",
      "sealfs_publish_duration_seconds_bucket{le=\"0.0025\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.005\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.01\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.025\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.05\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.1\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.25\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"0.5\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"1\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"2.5\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"5\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"10\"} 3",
      "sealfs_publish_duration_seconds_bucket{le=\"+Inf\"} 4",
      "sealfs_publish_duration_seconds_sum 30.0048",
      "sealfs_publish_duration_seconds_count 4",
  };
  const auto lines = lines_of(text);
  auto at = std::find(lines.begin(), lines.end(), expected[0]);
  ASSERT_NE(at, lines.end()) << text;
  ASSERT_GE(static_cast<std::size_t>(lines.end() - at), expected.size()) << text;
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(*(at + static_cast<long>(i)), expected[i]);
}

TEST(MetricsText, HistogramOfAnOlderDaemonIsEmptyNotMissing) {
  MetricsSnapshot m;  // from_json of a daemon without publish_seconds: no buckets
  const std::string text = prometheus_text(m, "");
  EXPECT_TRUE(has_line(text, "sealfs_publish_duration_seconds_bucket{le=\"+Inf\"} 0")) << text;
  EXPECT_TRUE(has_line(text, "sealfs_publish_duration_seconds_sum 0")) << text;
  EXPECT_TRUE(has_line(text, "sealfs_publish_duration_seconds_count 0")) << text;
}

// The format's rules for every family: HELP then TYPE before its samples,
// the prefix, _total on counters and only there, each family once.
TEST(MetricsText, EveryFamilyFollowsTheNamingRules) {
  const std::string text = prometheus_text(Metrics{}.snapshot(), "/m");
  std::set<std::string> families;
  std::string family;
  std::string type;
  std::string help_of;
  for (const auto& line : lines_of(text)) {
    if (line.rfind("# HELP ", 0) == 0) {
      help_of = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      type = line.substr(line.rfind(' ') + 1);
      EXPECT_EQ(help_of, family) << "TYPE without its HELP: " << line;
      EXPECT_TRUE(families.insert(family).second) << "twice: " << family;
      EXPECT_EQ(family.rfind("sealfs_", 0), 0u) << family;
      EXPECT_EQ(family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0, type == "counter")
          << family << " " << type;
      continue;
    }
    ASSERT_FALSE(family.empty()) << "a sample before any TYPE: " << line;
    EXPECT_EQ(line.rfind(family, 0), 0u) << line << " outside " << family;
    EXPECT_NE(line.find("mountpoint=\"/m\""), std::string::npos) << line;
  }
  EXPECT_EQ(families.size(), 25u);
}

TEST(MetricsText, SecondsAreExactShortestDecimals) {
  EXPECT_EQ(seconds_from_us(500), "0.0005");
  EXPECT_EQ(seconds_from_us(1000000), "1");
  EXPECT_EQ(seconds_from_us(2500000), "2.5");
  EXPECT_EQ(seconds_from_ns(0), "0");
  EXPECT_EQ(seconds_from_ns(1), "0.000000001");
  EXPECT_EQ(seconds_from_ns(12345678901234), "12345.678901234");
  EXPECT_EQ(seconds_from_ns(18446744073709551615ull), "18446744073.709551615");
}

}  // namespace
}  // namespace sealfs
