// A backing root with an empty B/.sealfs/quarantine and an O_PATH fd of it:
// what the quarantine's unit tests (and its report's) start from.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "core/base/metrics.hpp"
#include "core/base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

class QuarantineRootTest : public ::testing::Test {
 protected:
  explicit QuarantineRootTest(const std::string& prefix) : tmp_(prefix) {}
  void SetUp() override {
    make_dirs(tmp_ / ".sealfs/quarantine");
    int raw = ::open(tmp_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(raw, 0);
    root_.reset(raw);
  }

  TempDir tmp_;
  UniqueFd root_;
  Metrics metrics_;
};

}  // namespace sealfs::test
