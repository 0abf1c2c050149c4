// Store::list (issue 14): entries judged by verdicts kept by their stamps,
// damage seen by a listing without a lookup, and the epoch that tells the
// daemon when a copy of a listing (the kernel's) is stale.
#include "core/store/listing.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

void let_stamps_settle() { std::this_thread::sleep_for(std::chrono::milliseconds(1100)); }

class ListingTest : public StoreTest {
 public:
  Listing list(std::string_view rel) {
    UniqueFd d = dir(rel);
    auto listing = store().list(d.get());
    EXPECT_TRUE(listing.ok()) << (listing.ok() ? "" : listing.error().message);
    return listing ? std::move(*listing) : Listing{};
  }
};

std::uint64_t judgements_of(Store& store) { return store.status().judgements; }

// Issue 26 point 6: readdirplus (Store::lookup_listed) answers a name the
// listing just judged on that verdict, with no second judgement. A name the
// listing saw at stat level only is lookup_verified's question (here never
// hashed: EAGAIN, no attributes, R8); a file changed since the listing is
// judged again.
TEST_F(ListingTest, AttributesForANameJustListedTakeNoSecondJudgement) {
  for (const char* k : {"k1", "k2"}) publish_entry(k, {{"lib.so", k}, {"a.cu", "src"}});
  open_store();                         // no verdict cached
  ASSERT_TRUE(visible("c/k1/lib.so"));  // k1 hashed; k2 never
  let_stamps_settle();
  UniqueFd c = dir("c");
  Listing listing = list("c");
  ASSERT_EQ(listing.items.size(), 2u);
  ASSERT_EQ(listing.judged.size(), 2u);
  for (std::size_t i = 0; i < listing.items.size(); ++i) {
    const DirItem& item = listing.items[i];
    SCOPED_TRACE(item.name);
    const auto before = judgements_of(store());
    auto found = store().lookup_listed(c.get(), item.name, &listing.judged[i]);
    if (item.name == "k1") {
      EXPECT_EQ(judgements_of(store()) - before, 0u);
      ASSERT_TRUE(found.ok()) << found.error().message;
      EXPECT_EQ(found->kind, ObjectKind::entry_root);
      EXPECT_EQ(found->st.st_ino, item.ino);
    } else {
      EXPECT_EQ(judgements_of(store()) - before, 1u);
      EXPECT_EQ(found.code(), EAGAIN) << "never hashed: no attributes (R8)";
    }
  }
  ASSERT_TRUE(visible("c/k1/a.cu"));  // hashes k1's files: its listing may reuse the verdict
  let_stamps_settle();
  UniqueFd k1 = dir("c/k1");
  Listing files = list("c/k1");
  ASSERT_EQ(files.judged.size(), files.items.size());
  write_file(B("c/k1/lib.so"), "K1");  // same size, other bytes, a new stamp
  bool checked = false;
  for (std::size_t i = 0; i < files.items.size(); ++i) {
    if (files.items[i].name != "lib.so") continue;
    const auto before = judgements_of(store());
    // Judged again, at readdirplus depth: the verdict's stamp no longer
    // holds and nothing is hashed there, so no attributes (the LOOKUP that
    // follows finds the damage).
    EXPECT_EQ(store().lookup_listed(k1.get(), "lib.so", &files.judged[i]).code(), EAGAIN);
    EXPECT_EQ(judgements_of(store()) - before, 1u) << "changed since listed: judged again";
    checked = true;
  }
  EXPECT_TRUE(checked);
}

TEST_F(ListingTest, AListedFileThatShrankIsNoticedByTheListingItself) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}, {"params.pkl", "p"}});
  publish_entry("other", {{"kernel_lib.so", "fedcba9876543210"}});
  ASSERT_TRUE(visible("c/k"));  // hashed: a verdict that a listing may reuse
  let_stamps_settle();
  EXPECT_EQ(listed("c"), (std::set<std::string>{"k", "other"}));
  ASSERT_EQ(::truncate(B("c/k/kernel_lib.so").c_str(), 3), 0);
  EXPECT_EQ(listed("c"), (std::set<std::string>{"other"}));
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{}));  // a directory of an invalid entry shows nothing
  EXPECT_EQ(quarantine_slots(), 0u);                    // listings never act on verdicts
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);               // the next lookup does
  EXPECT_EQ(quarantine_slots(), 1u);
}

TEST_F(ListingTest, AnEntryHashedInvalidStaysOutOfListings) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}});
  write_file(B("c/k/kernel_lib.so"), std::string(16, '\0'));  // same size: only a hash can tell
  EXPECT_EQ(listed("c"), (std::set<std::string>{"k"}));       // a listing never hashes (R8)
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
  EXPECT_EQ(listed("c"), (std::set<std::string>{}));
}

TEST_F(ListingTest, TheEpochChangesWithTheListingOnly) {
  publish_entry("k", {{"a", "a"}});
  const Listing first = list("c");
  EXPECT_TRUE(first.settled);  // nothing listed before: no copy can be older
  const Listing same = list("c");
  EXPECT_EQ(same.epoch, first.epoch);
  EXPECT_TRUE(same.settled);
  publish_entry("l", {{"a", "a"}});
  const Listing changed = list("c");
  EXPECT_NE(changed.epoch, first.epoch);
  EXPECT_FALSE(changed.settled);
  EXPECT_EQ(changed.items.size(), 2u);
  const Listing soon = list("c");
  EXPECT_EQ(soon.epoch, changed.epoch);
  EXPECT_FALSE(soon.settled);  // a second must pass after a change
  let_stamps_settle();
  const Listing later = list("c");
  EXPECT_EQ(later.epoch, changed.epoch);
  EXPECT_TRUE(later.settled);
}

TEST_F(ListingTest, AChangedVerdictChangesTheEpoch) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}});
  const Listing before = list("c");
  ASSERT_EQ(before.items.size(), 1u);
  ASSERT_EQ(::truncate(B("c/k/kernel_lib.so").c_str(), 1), 0);  // no name in c changes
  const Listing after = list("c");
  EXPECT_TRUE(after.items.empty());
  EXPECT_NE(after.epoch, before.epoch);
  EXPECT_FALSE(after.settled);
}

// A directory inside an entry is listed again from what the previous listing
// saw while its own stamp and the entry's verdict stand; each of them
// changing is seen.
TEST_F(ListingTest, ARepeatedListingInsideAnEntrySeesEveryChange) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}, {"params.pkl", "p"}, {"b.src", "b"}});
  ASSERT_TRUE(visible("c/k"));
  let_stamps_settle();
  const Listing first = list("c/k");
  EXPECT_EQ(first.items.size(), 3u);
  EXPECT_EQ(list("c/k").items, first.items);  // repeated
  UniqueFd k = dir("c/k");
  ASSERT_TRUE(store().unlink(k.get(), "b.src").ok());  // the manifest first, then the name
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"kernel_lib.so", "params.pkl"}));
  write_file(B("c/k/extra"), "not listed");  // a name behind the store's back: hidden (R2)
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"kernel_lib.so", "params.pkl"}));
  let_stamps_settle();
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"kernel_lib.so", "params.pkl"}));
  ASSERT_EQ(::truncate(B("c/k/params.pkl").c_str(), 0), 0);  // no name changes: the verdict does
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{}));
}

// An entry's root is repeated without finding its context again; when its
// parent moves behind the store's back (here into a volatile area, where
// everything is shown) its own stamp stays as it was, and it is listed anew.
TEST_F(ListingTest, AnEntryRootMovedBehindTheStoreIsListedAnew) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}});
  write_file(B("c/k/unlisted"), "hidden in an entry");
  let_stamps_settle();
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"kernel_lib.so"}));
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"kernel_lib.so"}));
  UniqueFd k = dir("c/k");  // the same directory, wherever it goes
  ASSERT_EQ(::rename(B("c").c_str(), B("tmp/c").c_str()), 0);
  auto moved = store().list(k.get());
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  std::set<std::string> names;
  for (const auto& item : moved->items) names.insert(item.name);
  EXPECT_EQ(names, (std::set<std::string>{"kernel_lib.so", "unlisted"}));
}

TEST(ListingMemoryTest, RepeatsOnlyOnTheSameSettledBasis) {
  ListingMemory memory;
  auto verdict = std::make_shared<const EntryVerdict>();
  ListingBasis basis{Stamp{}, "c/k", verdict};
  basis.dir.ctime.tv_sec = 1;  // long settled
  Listing seen;
  seen.items = {DirItem{"x", 1, DT_REG}};
  memory.note(1, 10, seen, basis);
  Listing again;
  ASSERT_TRUE(memory.repeat(1, 10, basis, again));
  EXPECT_EQ(again.items, seen.items);
  EXPECT_EQ(again.epoch, seen.epoch);
  ListingBasis other = basis;
  other.dir.mtime.tv_nsec = 1;  // a name changed in the directory
  EXPECT_FALSE(memory.repeat(1, 10, other, again));
  other = basis;
  other.entry = std::make_shared<const EntryVerdict>();  // the entry was checked again
  EXPECT_FALSE(memory.repeat(1, 10, other, again));
  other = basis;
  other.rel = "d/k";  // moved
  EXPECT_FALSE(memory.repeat(1, 10, other, again));
  other = basis;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  other.dir.ctime = now;  // changed within the last second: the stamp may hide another change
  memory.note(1, 10, seen, other);
  EXPECT_FALSE(memory.repeat(1, 10, other, again));
  memory.note(1, 10, seen);  // no basis: always listed anew
  EXPECT_FALSE(memory.repeat(1, 10, basis, again));
}

// The memory of a listing holds its entry's verdict weakly: once the
// verifier lets go of it, a verdict made later (perhaps at the same address)
// is never taken for it.
TEST(ListingMemoryTest, AVerdictLetGoOfIsNoBasis) {
  ListingMemory memory;
  ListingBasis basis{Stamp{}, "c/k", std::make_shared<const EntryVerdict>(), true};
  basis.dir.ctime.tv_sec = 1;
  Listing seen;
  seen.items = {DirItem{"x", 1, DT_REG}};
  memory.note(1, 10, seen, basis);
  EXPECT_EQ(memory.entry_root_at(1, 10), std::optional<std::string>("c/k"));
  basis.entry.reset();  // the verifier's copy was the last
  for (int i = 0; i < 16; ++i) {
    basis.entry = std::make_shared<const EntryVerdict>();
    Listing again;
    EXPECT_FALSE(memory.repeat(1, 10, basis, again));
  }
}

TEST(ListingMemoryTest, EpochsAreUniqueAcrossDirectoriesAndNeverReused) {
  ListingMemory memory(2);
  Listing a;
  a.items = {DirItem{"x", 1, DT_REG}};
  Listing b = a;
  memory.note(1, 10, a);
  memory.note(1, 11, b);
  EXPECT_NE(a.epoch, b.epoch);
  Listing c = a;
  memory.note(1, 12, c);  // a third directory: one of the first two is forgotten
  EXPECT_NE(c.epoch, a.epoch);
  EXPECT_NE(c.epoch, b.epoch);
  // The forgotten directory comes back with a new epoch, never an old one.
  Listing again_a = a;
  memory.note(1, 10, again_a);
  EXPECT_GT(again_a.epoch, c.epoch);
  EXPECT_TRUE(again_a.settled);
  Listing again_c = c;
  memory.note(1, 12, again_c);
  EXPECT_EQ(again_c.epoch, c.epoch);  // still remembered, unchanged
}

}  // namespace
}  // namespace sealfs::test
