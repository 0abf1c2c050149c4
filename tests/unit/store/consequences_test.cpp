// Consequences (core/store/consequences.hpp), asked directly: what follows
// from a verdict. An invalid entry is quarantined and the kernel told; a
// verdict that is invalid only because the object changed while it was
// judged is no evidence (nothing moves); a hidden object in the way of a new
// name is moved out (R5); a transaction holds its invalidations to its end.
#include "core/store/consequences.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "core/store/impl.hpp"
#include "core/store/judge.hpp"
#include "tests/support/store_parts.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class ConsequencesTest : public StorePartsTest {
 protected:
  void SetUp() override {
    StorePartsTest::SetUp();
    publish_entry("e", {{"a.bin", "AAAA"}});
  }
  Consequences& consequences() { return parts().consequences; }
};

TEST_F(ConsequencesTest, AnInvalidEntryIsQuarantinedAndTheKernelTold) {
  damage("c/e/a.bin", "AAAB");
  auto j = judge("c/e");
  ASSERT_TRUE(j.ok());
  ASSERT_EQ(j->verdict, Verdict::invalid_self);
  const std::size_t slots = quarantine_slots();
  const std::size_t told = invalidation_count();

  At c = at("c");
  consequences().act_on_invalid(c.ctx, c.dir.get(), "e", *j);
  EXPECT_FALSE(exists_nofollow(B("c/e")));
  EXPECT_EQ(quarantine_slots(), slots + 1);
  EXPECT_GT(invalidation_count(), told);
}

TEST_F(ConsequencesTest, AVerdictInvalidOnlyBecauseItsObjectChangedMovesNothing) {
  damage("c/e/a.bin", "AAAB");
  auto j = judge("c/e");
  ASSERT_TRUE(j.ok());
  ASSERT_EQ(j->verdict, Verdict::invalid_self);
  Judgement changing = *j;
  changing.transient = true;  // as judge() says of an object changed mid-check

  At c = at("c");
  consequences().act_on_invalid(c.ctx, c.dir.get(), "e", changing);
  EXPECT_EQ(slurp(B("c/e/a.bin")), "AAAB");
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(ConsequencesTest, AHiddenObjectInTheWayOfANameIsMovedOut) {
  write_file(B("c/loose.bin"), "x");
  At c = at("c");
  auto after = consequences().clear_hidden(c.ctx, c.dir.get(), "loose.bin");
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(after->verdict, Verdict::absent);
  EXPECT_FALSE(exists_nofollow(B("c/loose.bin")));
  EXPECT_EQ(quarantine_slots(), 1u);  // moved, not deleted (R5)
}

TEST_F(ConsequencesTest, AVisibleObjectIsNotInTheWay) {
  At c = at("c");
  auto after = consequences().clear_hidden(c.ctx, c.dir.get(), "e");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->verdict, Verdict::visible);
  EXPECT_EQ(slurp(B("c/e/a.bin")), "AAAA");
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(ConsequencesTest, ATransactionHoldsItsInvalidationsUntilItEnds) {
  At c = at("c");
  struct stat st {};
  ASSERT_EQ(::lstat(B("c/e").c_str(), &st), 0);
  const std::size_t told = invalidation_count();
  {
    Consequences::DeferredInvalidations transaction(consequences());
    consequences().invalidate(c.dir.get(), "e", st);
    {
      // A nested transaction (truncate -> seal) leaves them to the outer one.
      Consequences::DeferredInvalidations nested(consequences());
      consequences().invalidate(c.dir.get(), "e", st);
    }
    EXPECT_EQ(invalidation_count(), told);
  }
  EXPECT_EQ(invalidation_count(), told + 2);
  consequences().invalidate(c.dir.get(), "e", st);  // outside one: at once
  EXPECT_EQ(invalidation_count(), told + 3);
}

// R5: a removal through M in flight in an entry (shutil.rmtree's unlinks)
// holds the entry's quarantine back, and its remover alone still finds the
// names that the damage hides, so that its next unlink and its rmdir work.
TEST_F(ConsequencesTest, ARemovalInFlightHoldsTheQuarantineBack) {
  damage("c/e/a.bin", "AAAB");
  constexpr pid_t kRemover = 4242;
  At e = at("c/e");
  auto removing = consequences().judge_removal(e.ctx, e.dir.get(), "a.bin", kRemover);
  ASSERT_TRUE(removing.ok()) << removing.error().message;
  EXPECT_EQ(removing->verdict, Verdict::invalid_entry);  // hidden by the damage, for the removal to take
  EXPECT_EQ(consequences().judge_removal(e.ctx, e.dir.get(), "absent", kRemover).code(), ENOENT);

  auto j = judge("c/e");
  ASSERT_TRUE(j.ok());
  ASSERT_EQ(j->verdict, Verdict::invalid_self);
  At c = at("c");
  EXPECT_TRUE(consequences().shown_to_remover(c.ctx, *j, kRemover));
  EXPECT_FALSE(consequences().shown_to_remover(c.ctx, *j, kRemover + 1));
  EXPECT_FALSE(consequences().shown_to_remover(c.ctx, *j, 0));
  const std::size_t told = invalidation_count();
  consequences().act_on_invalid(c.ctx, c.dir.get(), "e", *j);  // a reader's lookup
  EXPECT_EQ(slurp(B("c/e/a.bin")), "AAAB");
  EXPECT_EQ(quarantine_slots(), 0u);
  EXPECT_GT(invalidation_count(), told);  // hidden from what the kernel cached all the same

  // The removal's rmdir moves what is left, and then nothing is held back.
  EXPECT_TRUE(consequences().quarantine_object(c.dir.get(), "e", j->st, "c/e", j->cause, j->reason));
  EXPECT_FALSE(consequences().shown_to_remover(c.ctx, *j, kRemover));
  EXPECT_EQ(quarantine_slots(), 1u);
}

}  // namespace
}  // namespace sealfs::test
