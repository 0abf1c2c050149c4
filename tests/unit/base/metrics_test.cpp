#include "core/base/metrics.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/manifest/manifest.hpp"

namespace sealfs {
namespace {

TEST(Metrics, ZeroJsonListsEveryCounterSorted) {
  Metrics m;
  EXPECT_EQ(
      m.to_json(),
      "{\"abandoned\":0,\"bytes_hashed\":0,\"bytes_pushed\":0,\"files_hashed\":0,\"hidden\":0,\"hits\":0,"
      "\"lookups\":0,\"publishes\":0,\"quarantined\":0,\"reads\":0,\"rejected\":0,\"seals\":0}");
}

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
  m.reads = 11;
  m.bytes_pushed = 12;
  EXPECT_EQ(m.to_json(),
            "{\"abandoned\":1,\"bytes_hashed\":18446744073709551615,\"bytes_pushed\":12,\"files_hashed\":3,"
            "\"hidden\":4,\"hits\":5,\"lookups\":6,\"publishes\":7,\"quarantined\":8,\"reads\":11,"
            "\"rejected\":9,\"seals\":10}");
}

TEST(Metrics, JsonIsCanonicalOneLine) {
  Metrics m;
  m.hits = 42;
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
      for (int i = 0; i < 10000; ++i) m.lookups.fetch_add(1, std::memory_order_relaxed);
    });
  for (auto& th : threads) th.join();
  EXPECT_NE(m.to_json().find("\"lookups\":40000"), std::string::npos);
}

}  // namespace
}  // namespace sealfs
