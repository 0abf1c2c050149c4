// Issue 26 point 6, on a real mount: how many times a request judges a name
// (the daemon's judgements counter, beside its lookups). A warm LOOKUP judges
// its name once, and so does a listing with attributes (READDIRPLUS): the
// listing judges each name, and the attributes of the names it shows go out
// on that verdict (Store::lookup_listed) instead of a second judgement
// (before: twice per name). Both with and without OPENDIR.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr int kKeys = 8;

class Judgements : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    // cache_timeout=0: the kernel keeps no name, so every path component of
    // every stat is a LOOKUP that reaches the daemon.
    mount_ = std::make_unique<Mount>(
        MountConfig::with({std::string("profile=tilelang,cache_timeout=0") + GetParam()}));
    ASSERT_TRUE(mount_->ok()) << mount_->error();
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "k" + std::to_string(i);
      ProcessResult saved = tilelang("save", mount_->mountpoint(), key);
      ASSERT_EQ(saved.status, 0) << saved.err;
      ASSERT_EQ(tilelang("load", mount_->mountpoint(), key).status, kHit);  // warm: verified once
    }
    // Warm means settled too: a verdict whose stamps are under a second old
    // answers a listing at stat level only (R8), and readdirplus asks again.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }

  std::string kernels() const { return mount_->mountpoint() + "/ns/kernels"; }
  long judgements() const { return daemon_counter(*mount_, "judgements"); }
  long lookups() const { return daemon_counter(*mount_, "lookups"); }

  std::unique_ptr<Mount> mount_;
};

TEST_P(Judgements, AWarmLookupJudgesItsNameOnce) {
  const long j0 = judgements(), l0 = lookups();
  ASSERT_GE(j0, 0);
  int stats = 0;
  for (int i = 0; i < kKeys; ++i) {
    const std::string entry = kernels() + "/k" + std::to_string(i);
    for (const std::string& name : list_dir(entry)) {
      if (name == "." || name == "..") continue;
      struct stat st {};
      ASSERT_EQ(::lstat((entry + "/" + name).c_str(), &st), 0) << entry << "/" << name;
      ++stats;
    }
  }
  const long judged = judgements() - j0, looked_up = lookups() - l0;
  std::printf("judgements: %ld for %ld lookups (%d stats, listings included)\n", judged, looked_up, stats);
  ASSERT_GE(looked_up, stats) << "every leaf name was looked up";
  // The listings above judged their names too: count only what lookups add.
  const long j1 = judgements(), l1 = lookups();
  for (int i = 0; i < kKeys; ++i) {
    struct stat st {};
    ASSERT_EQ(::lstat((kernels() + "/k" + std::to_string(i) + "/kernel_lib.so").c_str(), &st), 0);
  }
  EXPECT_EQ(judgements() - j1, lookups() - l1) << "one judgement per LOOKUP";
  EXPECT_GE(lookups() - l1, kKeys);
}

TEST_P(Judgements, AListingWithAttributesJudgesEachNameOnce) {
  // The path's own LOOKUPs (ns, kernels), judged once each, are taken off.
  long j0 = judgements();
  ASSERT_GE(j0, 0);
  struct stat st {};
  ASSERT_EQ(::stat(kernels().c_str(), &st), 0);
  const long path_judgements = judgements() - j0;
  std::vector<std::string> names;
  j0 = judgements();
  DIR* d = ::opendir(kernels().c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.emplace_back(e->d_name);
  ::closedir(d);
  ASSERT_EQ(names.size(), static_cast<size_t>(kKeys));
  const long judged = judgements() - j0 - path_judgements;
  std::printf("judgements: %ld for a listing of %d names (%ld for its path)\n", judged, kKeys,
              path_judgements);
  EXPECT_EQ(judged, kKeys) << "each name judged once: by the listing, not again for its attributes";
}

INSTANTIATE_TEST_SUITE_P(OpendirModes, Judgements, ::testing::Values("", ",keep_opendir"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return std::string(param.param).empty() ? "NoOpendir" : "KeepOpendir";
                         });

}  // namespace
}  // namespace sealfs::test
