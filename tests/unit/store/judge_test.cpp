// Judge (core/store/judge.hpp), asked directly: the verdict on one name at a
// given depth, each child of a directory, the recheck of an opened file; and
// that judging only reads: it moves, quarantines and invalidates nothing
// (acting on a verdict is Consequences', consequences_test.cpp).
#include "core/store/judge.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/impl.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "tests/support/store_parts.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class JudgeTest : public StorePartsTest {
 protected:
  void SetUp() override {
    StorePartsTest::SetUp();
    publish_entry("e", {{"a.bin", "AAAA"}, {"sub/b.bin", "BB"}});
  }
  std::uint64_t judgements() { return status_of(parts()).judgements; }
  // A file written into B at rel behind the mount: judged hidden, for cause.
  void expect_hidden_when_written(const std::string& rel, HideReason cause, std::string_view reason) {
    write_file(B(rel), "x");
    auto j = judge(rel);
    ASSERT_TRUE(j.ok()) << rel;
    EXPECT_EQ(j->verdict, Verdict::hidden) << rel;
    EXPECT_EQ(j->cause, cause) << rel;
    EXPECT_EQ(j->reason, reason) << rel;
  }
};

TEST_F(JudgeTest, AnEntryAndWhatItListsAreVisibleAsTheirKinds) {
  auto e = judge("c/e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->verdict, Verdict::visible);
  EXPECT_EQ(e->kind, ObjectKind::entry_root);

  auto sub = judge("c/e/sub");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->kind, ObjectKind::dir_in_entry);

  auto b = judge("c/e/sub/b.bin");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->sealed_file());
  EXPECT_EQ(b->kind, ObjectKind::file_in_entry);
  // Where its manifest is and what the verdict saw: what open_file checks
  // the opened file against instead of judging again.
  ASSERT_TRUE(b->where.has_value());
  EXPECT_EQ(b->where->rel, "c/e");
  EXPECT_EQ(b->key, "sub/b.bin");
  EXPECT_TRUE(b->seen.has_value());

  auto c = judge("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ObjectKind::container);
  EXPECT_FALSE(c->sealed_file());
}

TEST_F(JudgeTest, ANameThatIsNotThereIsAbsent) {
  auto j = judge("c/nothing");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->verdict, Verdict::absent);
}

TEST_F(JudgeTest, AFileNoManifestCoversIsHiddenAsForeign) {
  expect_hidden_when_written("c/loose.bin", HideReason::foreign, kForeignReason);
}

TEST_F(JudgeTest, AFileAddedBehindAnEntryIsHiddenAsUnlisted) {
  expect_hidden_when_written("c/e/extra.bin", HideReason::unlisted, kUnlistedReason);
  // The entry itself still verifies: an extra name is hidden, not damage.
  auto e = judge("c/e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->verdict, Verdict::visible);
}

TEST_F(JudgeTest, DamageFoundByHashingIsInvalidAndTheJudgeLeavesItWhereItIs) {
  damage("c/e/a.bin", "AAAB");
  const std::size_t slots = quarantine_slots();
  const std::size_t told = invalidation_count();

  auto e = judge("c/e", VerifyDepth::fresh);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->verdict, Verdict::invalid_self);
  EXPECT_EQ(e->cause, HideReason::digest);
  auto a = judge("c/e/a.bin", VerifyDepth::fresh);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->verdict, Verdict::invalid_entry);

  // Nothing acted on: the damaged file is where it was, with its bytes; no
  // quarantine slot, no word to the kernel.
  EXPECT_EQ(slurp(B("c/e/a.bin")), "AAAB");
  EXPECT_EQ(quarantine_slots(), slots);
  EXPECT_EQ(invalidation_count(), told);
}

TEST_F(JudgeTest, AStatLevelJudgementHashesNothing) {
  damage("c/e/a.bin", "AAAB");  // same size: only a hash can tell
  auto e = judge("c/e", VerifyDepth::stat_only);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->verdict, Verdict::visible);
  EXPECT_TRUE(e->unhashed);
  // Hashed, the same entry is damage.
  auto fresh = judge("c/e", VerifyDepth::fresh);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->verdict, Verdict::invalid_self);
}

TEST_F(JudgeTest, EveryJudgementCountsOnce) {
  (void)parts();
  const std::uint64_t before = judgements();
  ASSERT_TRUE(judge("c/e").ok());
  ASSERT_TRUE(judge("c/e/a.bin").ok());
  ASSERT_TRUE(judge("c/nothing").ok());
  EXPECT_EQ(judgements() - before, 3u);
}

TEST_F(JudgeTest, EachChildJudgesNamesAndLeavesReservedOnesUnjudged) {
  At e = at("c/e");
  std::vector<std::string> judged, reserved;
  Status s = parts().judge.each_child(e.ctx, e.dir.get(), nullptr,
                                      [&](const DirChild& child, const Result<Judgement>* j) {
                                        (j != nullptr ? judged : reserved).push_back(child.name);
                                        if (j != nullptr) {
                                          EXPECT_TRUE(j->ok() && (*j)->verdict == Verdict::visible);
                                        }
                                        return true;
                                      });
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(judged, ::testing::UnorderedElementsAre("a.bin", "sub"));
  EXPECT_THAT(reserved, ::testing::Contains(std::string(kDirManifest)));

  int visits = 0;
  ASSERT_TRUE(parts()
                  .judge
                  .each_child(e.ctx, e.dir.get(), nullptr,
                              [&](const DirChild&, const Result<Judgement>*) { return ++visits < 1; })
                  .ok());
  EXPECT_EQ(visits, 1);  // visit said stop
}

TEST_F(JudgeTest, RecheckOfAnOpenedFileThatChangedSinceItsVerdictIsNotVisible) {
  // A verdict borrows its directory's descriptor (Judgement::where): the
  // directory is held while the verdict is used, as a request holds it.
  At e = at("c/e");
  auto a = parts().judge.judge(e.ctx, e.dir.get(), "a.bin", VerifyDepth::fresh);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->sealed_file());
  struct stat seen {};
  ASSERT_EQ(::stat(B("c/e/a.bin").c_str(), &seen), 0);
  auto held = parts().judge.recheck(*a, seen, /*rehash=*/false);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held->verdict, Verdict::visible);  // the file it saw: still holds

  damage("c/e/a.bin", "AAAB");
  struct stat now {};
  ASSERT_EQ(::stat(B("c/e/a.bin").c_str(), &now), 0);
  auto again = parts().judge.recheck(*a, now, /*rehash=*/false);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->verdict, Verdict::invalid_entry);
}

}  // namespace
}  // namespace sealfs::test
