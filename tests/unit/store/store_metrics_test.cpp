// What the store counts (core/base/metrics.hpp): misses apart from hidden
// names, each hidden or quarantined object under its reason, the publish
// latency, and the daemon's gauges in the status it reports.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

std::uint64_t hidden_for(Store& store, HideReason r) {
  return store.status().hidden_by[static_cast<std::size_t>(r)];
}
std::uint64_t quarantined_for(Store& store, HideReason r) {
  return store.status().quarantined_by[static_cast<std::size_t>(r)];
}

TEST_F(StoreTest, AMissIsNotAHiddenName) {
  EXPECT_EQ(lookup_errno("nothing-here"), ENOENT);
  write_file(B("foreign.bin"), "behind the mount");
  EXPECT_EQ(lookup_errno("foreign.bin"), ENOENT);
  EXPECT_EQ(lookup_errno(".sealfs"), ENOENT);
  const MetricsSnapshot s = store().status();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hidden, 2u);
  EXPECT_EQ(hidden_for(store(), HideReason::foreign), 1u);
  EXPECT_EQ(hidden_for(store(), HideReason::reserved), 1u);
}

// Issue 26 point 6: each request judges each name once on the warm paths.
// judgements counts every Judge::judge; these say how many a request takes.
std::uint64_t judgements_of(Store& store) { return store.status().judgements; }

TEST_F(StoreTest, AWarmLookupJudgesItsNameOnce) {
  publish_entry("k", {{"lib.so", "0123456789abcdef"}, {"a.cu", "src"}});
  ASSERT_TRUE(visible("c/k/lib.so"));  // warm: verdicts cached, nothing to hash
  for (const char* rel : {"c", "c/k", "c/k/lib.so", "c/k/a.cu"}) {
    SCOPED_TRACE(rel);
    const auto before = judgements_of(store());
    ASSERT_TRUE(visible(rel));
    EXPECT_EQ(judgements_of(store()) - before, 1u);
  }
  const auto before = judgements_of(store());
  EXPECT_EQ(lookup_errno("c/k/none"), ENOENT);
  EXPECT_EQ(judgements_of(store()) - before, 1u) << "a miss";
}

TEST_F(StoreTest, AListingJudgesEachNameOnce) {
  for (const char* k : {"k1", "k2", "k3"}) publish_entry(k, {{"lib.so", k}, {"a.cu", "src"}});
  ASSERT_EQ(listed("c").size(), 3u);
  ASSERT_EQ(listed("c/k1").size(), 2u);
  auto before = judgements_of(store());
  EXPECT_EQ(listed("c").size(), 3u);
  EXPECT_LE(judgements_of(store()) - before, 3u) << "three entries";
  before = judgements_of(store());
  EXPECT_EQ(listed("c/k2").size(), 2u);
  EXPECT_LE(judgements_of(store()) - before, 2u) << "an entry's two files";
}

// A rename judges its source once and its destination once: the early
// stat-only look at the destination (before the source is hashed) is taken
// only where it can refuse, for RENAME_NOREPLACE.
TEST_F(StoreTest, ARenameJudgesEachSideOnce) {
  make_dirs(B("c"));
  write_file(B("tmp/f1"), "first");
  ASSERT_TRUE(rename("tmp/f1", "c/f").ok());
  ASSERT_TRUE(visible("c/f"));  // the destination's verdict is cached, as on a warm mount
  write_file(B("tmp/f2"), "second");
  auto before = judgements_of(store());
  ASSERT_TRUE(rename("tmp/f2", "c/f").ok());
  EXPECT_EQ(judgements_of(store()) - before, 2u) << "replacing a file entry";
  publish_entry("k", {{"lib.so", "one"}});
  ASSERT_TRUE(visible("c/k/lib.so"));
  stage("tmp/k2", {{"lib.so", "two"}});
  before = judgements_of(store());
  ASSERT_TRUE(rename("tmp/k2", "c/k2").ok());
  EXPECT_EQ(judgements_of(store()) - before, 2u) << "a directory entry to a free name";
  write_file(B("tmp/f3"), "third");
  before = judgements_of(store());
  EXPECT_EQ(rename("tmp/f3", "c/f", RENAME_NOREPLACE).code(), EEXIST);
  EXPECT_EQ(judgements_of(store()) - before, 2u) << "NOREPLACE refused before hashing";
}

TEST_F(StoreTest, UnlistedFilesAreHiddenAsUnlisted) {
  publish_entry("k", {{"a", "a"}});
  write_file(B("c/k/extra"), "not listed");
  EXPECT_EQ(lookup_errno("c/k/extra"), ENOENT);
  EXPECT_EQ(hidden_for(store(), HideReason::unlisted), 1u);
  EXPECT_EQ(store().status().quarantined, 0u);
}

// Each kind of damage, found by a lookup: hidden and quarantined under it.
struct Damage {
  const char* name;
  HideReason reason;
  void (*apply)(StoreTest& t);
};

const Damage kDamages[] = {
    {"truncated", HideReason::size,
     [](StoreTest& t) { ASSERT_EQ(::truncate(t.B("c/k/lib.so").c_str(), 3), 0); }},
    {"zeroed", HideReason::digest,
     [](StoreTest& t) { write_file(t.B("c/k/lib.so"), std::string(16, '\0')); }},
    {"deleted", HideReason::missing, [](StoreTest& t) { ASSERT_EQ(::unlink(t.B("c/k/lib.so").c_str()), 0); }},
    {"a directory now", HideReason::type,
     [](StoreTest& t) {
       ASSERT_EQ(::unlink(t.B("c/k/lib.so").c_str()), 0);
       make_dirs(t.B("c/k/lib.so"));
     }},
    {"a bad manifest", HideReason::manifest,
     [](StoreTest& t) { write_file(t.B("c/k/.sealfs-manifest"), "{\"sealfs\":1,"); }},
};

TEST_F(StoreTest, DamageIsCountedUnderItsReason) {
  for (const auto& d : kDamages) {
    SCOPED_TRACE(d.name);
    publish_entry("k", {{"lib.so", "0123456789abcdef"}});
    ASSERT_TRUE(visible("c/k/lib.so"));
    open_store();  // nothing cached, the counters from zero
    d.apply(*this);
    EXPECT_EQ(lookup_errno("c/k"), ENOENT);
    EXPECT_FALSE(exists_nofollow(B("c/k")));
    const MetricsSnapshot s = store().status();
    EXPECT_EQ(s.hidden, 1u);
    EXPECT_EQ(hidden_for(store(), d.reason), 1u);
    EXPECT_EQ(s.quarantined, 1u);
    EXPECT_EQ(quarantined_for(store(), d.reason), 1u);
  }
}

TEST_F(StoreTest, AbandonedAndInTheWayQuarantinesHaveTheirReasons) {
  UniqueFd root = dir("");
  auto c = store().create(root.get(), "half", 0644, O_WRONLY);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(store().abandon(c->found.fd.get()).ok());
  EXPECT_EQ(quarantined_for(store(), HideReason::abandoned), 1u);
  // R5: a foreign file under a name a publish needs moves out of its way.
  make_dirs(B("c"));
  write_file(B("c/k"), "foreign");
  stage("tmp/k", {{"a", "fresh"}});
  ASSERT_TRUE(rename("tmp/k", "c/k").ok());
  EXPECT_EQ(quarantined_for(store(), HideReason::foreign), 1u);
  EXPECT_EQ(store().status().quarantined, 2u);
}

TEST_F(StoreTest, EachPublishIsTimed) {
  publish_entry("k1", {{"a", "1"}});
  publish_entry("k2", {{"a", "2"}});
  const MetricsSnapshot s = store().status();
  EXPECT_EQ(s.publishes, 2u);
  EXPECT_EQ(s.publish_seconds.count(), 2u);
  EXPECT_GT(s.publish_seconds.sum_ns, 0u);
  // A refused publish is not timed.
  stage("tmp/bad", {{"bad.so", "SEALFS-TEST-REJECT"}});
  EXPECT_EQ(rename("tmp/bad", "c/bad").code(), EBADMSG);
  EXPECT_EQ(store().status().rejected, 1u);
  EXPECT_EQ(store().status().publish_seconds.count(), 2u);
}

TEST_F(StoreTest, StatusCarriesTheDaemonsGauges) {
  EXPECT_EQ(store().status().open_handles, 0u);  // no hook: zeros
  options().gauges = [] { return Gauges{3, 11}; };
  open_store();
  const MetricsSnapshot s = store().status();
  EXPECT_EQ(s.in_progress, 3u);
  EXPECT_EQ(s.open_handles, 11u);
  UniqueFd root = dir("");
  auto value = store().get_xattr(root.get(), Store::kStatusXattr, 1 << 16);
  ASSERT_TRUE(value.ok()) << value.error().message;
  EXPECT_NE(value->value.find("\"open_handles\":11"), std::string::npos) << value->value;
}

}  // namespace
}  // namespace sealfs::test
