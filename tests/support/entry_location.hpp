// Where a directory entry's manifest is, for tests that drive EntryVerifier
// directly: the directory dir_fd, its .sealfs-manifest, its own (dev, ino).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

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

}  // namespace sealfs::test
