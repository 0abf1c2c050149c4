#include "core/base/metrics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/manifest/manifest.hpp"

namespace sealfs {
namespace {

using std::chrono::microseconds;

constexpr const char* kZeroByReason =
    "{\"abandoned\":0,\"digest\":0,\"foreign\":0,\"manifest\":0,\"missing\":0,\"only_hidden\":0,\"reserved\":"
    "0,"
    "\"size\":0,\"type\":0,\"unlisted\":0}";

TEST(Metrics, ZeroJsonListsEveryCounterSorted) {
  Metrics m;
  EXPECT_EQ(
      m.to_json(),
      std::string("{\"abandoned\":0,\"bytes_hashed\":0,\"bytes_pushed\":0,\"descriptor_limit\":0,"
                  "\"descriptors\":0,\"files_hashed\":0,\"hidden\":0,"
                  "\"hidden_by_reason\":") +
          kZeroByReason +
          ",\"hits\":0,\"in_progress\":0,\"inode_bound\":0,\"inode_files\":0,\"inodes\":0,\"judgements\":0,"
          "\"lookups\":0,"
          "\"misses\":0,\"open_handles\":0,\"parked_handles\":0,\"passthrough_opens\":0,"
          "\"publish_seconds\":{\"bounds_us\":[500,1000,2500,5000,10000,25000,50000,100000,250000,500000,"
          "1000000,2500000,5000000,10000000],\"counts\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"sum_ns\":0},"
          "\"publishes\":0,\"quarantined\":0,\"quarantined_by_reason\":" +
          kZeroByReason + ",\"reads\":0,\"rejected\":0,\"seals\":0,\"unseen_writes_refused\":0}");
}

// The keys `sealfs status` always printed keep their names and values.
TEST(Metrics, EachCounterLandsUnderItsOwnKey) {
  Metrics m;
  // Distinct values so a swapped key would show.
  m.abandoned = 1;
  m.bytes_hashed = 18446744073709551615ull;  // full 64-bit range survives
  m.files_hashed = 3;
  m.hidden = 4;
  m.hits = 5;
  m.lookups = 6;
  m.publishes = 7;
  m.quarantined = 8;
  m.rejected = 9;
  m.seals = 10;
  m.misses = 11;
  m.reads = 14;
  m.bytes_pushed = 15;
  m.unseen_writes_refused = 16;
  m.passthrough_opens = 17;
  const std::string j = m.snapshot(Gauges{12, 13}).to_json();
  for (const char* pair :
       {"{\"abandoned\":1,", ",\"bytes_hashed\":18446744073709551615,", ",\"files_hashed\":3,",
        ",\"hidden\":4,", ",\"hits\":5,", ",\"lookups\":6,", ",\"publishes\":7,", ",\"quarantined\":8,",
        ",\"rejected\":9,", ",\"seals\":10,", ",\"misses\":11,", ",\"in_progress\":12,",
        ",\"open_handles\":13,", ",\"reads\":14,", ",\"bytes_pushed\":15,", ",\"unseen_writes_refused\":16}",
        ",\"passthrough_opens\":17,"})
    EXPECT_NE(j.find(pair), std::string::npos) << pair << " in " << j;
}

TEST(Metrics, JsonIsCanonicalOneLine) {
  Metrics m;
  m.hits = 42;
  m.count_hidden(HideReason::digest);
  m.publish_seconds.observe(microseconds(700));
  std::string j = m.to_json();
  EXPECT_EQ(j.find('\n'), std::string::npos);
  auto canonical = canonical_json(j);  // valid JSON, already in canonical form
  ASSERT_TRUE(canonical.ok()) << canonical.error().message;
  EXPECT_EQ(*canonical, j);
}

TEST(Metrics, ConcurrentIncrementsAreCounted) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m] {
      for (int i = 0; i < 10000; ++i) {
        m.lookups.fetch_add(1, std::memory_order_relaxed);
        m.count_quarantined(HideReason::size);
        m.publish_seconds.observe(microseconds(i % 3 == 0 ? 100 : 3000));
      }
    });
  for (auto& th : threads) th.join();
  const MetricsSnapshot s = m.snapshot();
  EXPECT_EQ(s.lookups, 40000u);
  EXPECT_EQ(s.quarantined, 40000u);
  EXPECT_EQ(s.quarantined_by[static_cast<std::size_t>(HideReason::size)], 40000u);
  EXPECT_EQ(s.publish_seconds.count(), 40000u);
}

TEST(Metrics, HiddenAndQuarantinedKeepTheTotalAndTheReason) {
  Metrics m;
  m.count_hidden(HideReason::foreign);
  m.count_hidden(HideReason::foreign);
  m.count_hidden(HideReason::reserved);
  m.count_quarantined(HideReason::abandoned);
  const MetricsSnapshot s = m.snapshot();
  EXPECT_EQ(s.hidden, 3u);
  EXPECT_EQ(s.hidden_by[static_cast<std::size_t>(HideReason::foreign)], 2u);
  EXPECT_EQ(s.hidden_by[static_cast<std::size_t>(HideReason::reserved)], 1u);
  EXPECT_EQ(s.quarantined, 1u);
  EXPECT_EQ(s.quarantined_by[static_cast<std::size_t>(HideReason::abandoned)], 1u);
  EXPECT_EQ(s.quarantined_by[static_cast<std::size_t>(HideReason::foreign)], 0u);
}

// "le": an observation equal to a bound belongs to that bucket.
TEST(Metrics, HistogramBucketsByUpperBound) {
  LatencyHistogram h;
  h.observe(microseconds(500));             // le 0.0005
  h.observe(microseconds(501));             // le 0.001
  h.observe(std::chrono::seconds(10));      // le 10
  h.observe(std::chrono::seconds(11));      // +Inf
  h.observe(std::chrono::nanoseconds(-5));  // a clock step back: 0
  const auto counts = h.counts();
  ASSERT_EQ(counts.size(), LatencyHistogram::kBoundsUs.size() + 1);
  EXPECT_EQ(counts[0], 2u);
  EXPECT_EQ(counts[1], 1u);
  EXPECT_EQ(counts[counts.size() - 2], 1u);
  EXPECT_EQ(counts.back(), 1u);
  EXPECT_EQ(h.sum_ns(), 500'000u + 501'000u + 21'000'000'000u);
}

TEST(Metrics, SnapshotSurvivesJson) {
  Metrics m;
  m.hits = 5;
  m.misses = 6;
  m.bytes_hashed = 1ull << 40;
  m.count_hidden(HideReason::unlisted);
  m.count_quarantined(HideReason::digest);
  m.count_quarantined(HideReason::digest);
  m.publish_seconds.observe(microseconds(2000));
  const MetricsSnapshot before = m.snapshot(Gauges{2, 9});
  auto after = MetricsSnapshot::from_json(before.to_json());
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(after->to_json(), before.to_json());
  EXPECT_EQ(after->hidden_by, before.hidden_by);
  EXPECT_EQ(after->quarantined_by[static_cast<std::size_t>(HideReason::digest)], 2u);
  EXPECT_EQ(after->publish_seconds, before.publish_seconds);
  EXPECT_EQ(after->in_progress, 2u);
  EXPECT_EQ(after->open_handles, 9u);
}

// A daemon of the previous version answers with the flat counters only.
TEST(Metrics, OlderDaemonsJsonReadsAsZerosAndNoHistogram) {
  auto s = MetricsSnapshot::from_json(
      "{\"abandoned\":1,\"bytes_hashed\":2,\"files_hashed\":3,\"hidden\":4,\"hits\":5,\"lookups\":6,"
      "\"publishes\":7,\"quarantined\":8,\"rejected\":9,\"seals\":10,\"a_newer_key\":{\"x\":[1]}}");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->hits, 5u);
  EXPECT_EQ(s->seals, 10u);
  EXPECT_EQ(s->misses, 0u);
  EXPECT_EQ(s->hidden_by, (std::array<std::uint64_t, kHideReasons>{}));
  EXPECT_TRUE(s->publish_seconds.counts.empty());
}

TEST(Metrics, FromJsonRefusesWhatIsNotAStatus) {
  for (const char* bad : {"", "[]", "{\"hits\":-1}", "{\"hits\":1.5}", "{\"hits\":\"5\"}",
                          "{\"hidden_by_reason\":[]}", "{\"hidden_by_reason\":{\"size\":-2}}",
                          "{\"publish_seconds\":{\"bounds_us\":[1,2],\"counts\":[0,0],\"sum_ns\":0}}",
                          "{\"publish_seconds\":{\"bounds_us\":[2,1],\"counts\":[0,0,0],\"sum_ns\":0}}",
                          "{\"publish_seconds\":{\"bounds_us\":[1],\"counts\":[0,0]}}", "{\"hits\":1} x"}) {
    auto s = MetricsSnapshot::from_json(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), EBADMSG) << bad;
  }
}

}  // namespace
}  // namespace sealfs
