// For tests that drive EntryVerifier directly: where a directory entry's
// manifest is (the directory dir_fd, its .sealfs-manifest, its own (dev,
// ino)), and a fixture with one such directory "e" in a temporary directory.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "core/base/metrics.hpp"
#include "core/base/unique_fd.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

inline EntryLocation dir_entry_at(int dir_fd, std::string rel = {}) {
  struct stat st {};
  EXPECT_EQ(::fstat(dir_fd, &st), 0);
  EntryLocation w;
  w.base_fd = dir_fd;
  w.manifest_name = std::string(kDirManifest);
  w.dev = st.st_dev;
  w.ino = st.st_ino;
  w.rel = std::move(rel);
  return w;
}

// The directory "e" under a temporary directory, held O_PATH, and a
// Verifier; the test adds its EntryVerifier (with the TTL it needs).
class EntryDirTest : public ::testing::Test {
 protected:
  explicit EntryDirTest(std::string_view temp_prefix) : tmp_(temp_prefix) {}
  void SetUp() override {
    make_dirs(tmp_ / "e");
    int raw = ::open((tmp_ / "e").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(raw, 0);
    dir_.reset(raw);
  }
  EntryLocation where() const { return dir_entry_at(dir_.get()); }
  std::string path(const std::string& name) const { return tmp_ / ("e/" + name); }
  void put(const std::string& name, const std::string& content) const { write_file(path(name), content); }

  TempDir tmp_;
  UniqueFd dir_;
  Metrics metrics_;
  Verifier verifier_{metrics_};
};

}  // namespace sealfs::test
