// Mount tests find the daemon and the TileLang protocol script through the
// environment (as the shared mount fixture does); defaults come from the build.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

int main(int argc, char** argv) {
  // A write to a pipe whose reader died fails the assertion that checks it
  // (EPIPE) instead of killing the whole test binary without a word.
  std::signal(SIGPIPE, SIG_IGN);
  ::setenv("SEALFS_BINARY", SEALFS_BINARY_PATH, /*overwrite=*/0);
  ::setenv("SEALFS_PYTHON", SEALFS_PYTHON, 0);
  ::setenv("SEALFS_TILELANG_PROTOCOL", SEALFS_TILELANG_PROTOCOL, 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
