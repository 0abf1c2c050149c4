// KnownNames (core/layout/known_names.hpp), driven without a mount: the
// names of hard-linked files as the adapter hands them in (seen, removed,
// renamed, forget), and the bounds that keep it small.
#include "core/layout/known_names.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sealfs {
namespace {

constexpr ObjectId kFile{1, 100};
constexpr ObjectId kOther{1, 101};
constexpr ObjectId kA{1, 10};
constexpr ObjectId kB{1, 11};

std::vector<std::string> names(const KnownNames& k, ObjectId obj) {
  std::vector<std::string> out;
  for (const auto& n : k.names_of(obj)) out.push_back(std::to_string(n.dir.ino) + "/" + n.name);
  return out;
}

TEST(KnownNames, AFileWithOneLinkCostsNothing) {
  KnownNames k;
  k.seen(kFile, 1, kA, "f");
  EXPECT_EQ(k.objects(), 0u);
  EXPECT_EQ(k.names(), 0u);
}

TEST(KnownNames, EveryNameOfAHardLinkedFileIsKnownNewestFirst) {
  KnownNames k;
  k.seen(kFile, 2, kA, "f");
  k.seen(kFile, 2, kB, "g");
  k.seen(kFile, 3, kA, "h");
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"10/h", "11/g", "10/f"}));
  // Seen again: it becomes the newest, and nothing is duplicated.
  k.seen(kFile, 3, kA, "f");
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"10/f", "10/h", "11/g"}));
  // Once known, its names count whatever link count a later look says.
  k.seen(kFile, 1, kB, "i");
  EXPECT_EQ(names(k, kFile).front(), "11/i");
}

TEST(KnownNames, AnUnlinkedNameGoesAndTheOthersStay) {
  KnownNames k;
  k.seen(kFile, 3, kA, "f");
  k.seen(kFile, 3, kB, "g");
  k.seen(kFile, 3, kA, "h");
  k.removed(kA, "h");
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"11/g", "10/f"}));
  k.removed(kA, "f");
  k.removed(kB, "g");
  EXPECT_EQ(k.objects(), 0u);
  EXPECT_EQ(k.names(), 0u);
}

TEST(KnownNames, ARenameMovesTheNameAndDropsWhatItReplaced) {
  KnownNames k;
  k.seen(kFile, 2, kA, "f");
  k.seen(kFile, 2, kB, "g");
  k.seen(kOther, 2, kB, "victim");
  k.renamed(kFile, kA, "f", kB, "victim");
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"11/victim", "11/g"}));
  EXPECT_TRUE(k.names_of(kOther).empty());
  // An object not known stays unknown; the name it replaced goes.
  k.seen(kOther, 2, kA, "o");
  k.renamed(ObjectId{1, 999}, kA, "x", kA, "o");
  EXPECT_TRUE(k.names_of(kOther).empty());
}

TEST(KnownNames, AnExchangeSwapsTheNames) {
  KnownNames k;
  k.seen(kFile, 2, kA, "f");
  k.seen(kOther, 2, kB, "o");
  k.renamed(kFile, kA, "f", kB, "o", kOther);
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"11/o"}));
  EXPECT_EQ(names(k, kOther), (std::vector<std::string>{"10/f"}));
}

TEST(KnownNames, ANameTakenByAnotherObjectLeavesTheFirst) {
  KnownNames k;
  k.seen(kFile, 2, kA, "f");
  k.seen(kFile, 2, kA, "g");
  k.seen(kOther, 2, kA, "f");  // replaced behind the mount, seen again
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"10/g"}));
  EXPECT_EQ(names(k, kOther), (std::vector<std::string>{"10/f"}));
  // And by a file with one link: the old meaning goes all the same.
  k.seen(ObjectId{1, 7}, 1, kA, "g");
  EXPECT_TRUE(k.names_of(kFile).empty());
}

TEST(KnownNames, ForgetDropsEveryName) {
  KnownNames k;
  k.seen(kFile, 2, kA, "f");
  k.seen(kFile, 2, kB, "g");
  k.forget(kFile);
  EXPECT_TRUE(k.names_of(kFile).empty());
  EXPECT_EQ(k.names(), 0u);
  k.removed(kA, "f");  // harmless
}

// 100,000 rather than a million: the bound shows as well, and the million
// took 26 s under ASan (the sanitizer stage of .ci/run) on 2 cores.
TEST(KnownNames, AHundredThousandNamesOfOneFileKeepOnlyTheNewest) {
  KnownNames k(4);
  for (int i = 0; i < 100'000; ++i) k.seen(kFile, 2, kA, "n" + std::to_string(i));
  EXPECT_EQ(names(k, kFile), (std::vector<std::string>{"10/n99999", "10/n99998", "10/n99997", "10/n99996"}));
  EXPECT_EQ(k.names(), 4u);
  // The dropped names no longer map to it either.
  k.seen(kOther, 2, kA, "n0");
  EXPECT_EQ(k.names_of(kFile).size(), 4u);
}

TEST(KnownNames, BeyondItsObjectBoundNewObjectsAreNotRecorded) {
  KnownNames k(4, 2);
  k.seen(ObjectId{1, 1}, 2, kA, "a");
  k.seen(ObjectId{1, 2}, 2, kA, "b");
  k.seen(ObjectId{1, 3}, 2, kA, "c");
  EXPECT_EQ(k.objects(), 2u);
  EXPECT_EQ(k.refused(), 1u);
  EXPECT_TRUE(k.names_of(ObjectId{1, 3}).empty());
  k.forget(ObjectId{1, 1});
  k.seen(ObjectId{1, 3}, 2, kA, "c");
  EXPECT_EQ(k.names_of(ObjectId{1, 3}).size(), 1u);
}

}  // namespace
}  // namespace sealfs
