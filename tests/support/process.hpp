// Child processes for tests: run a command to completion with its output
// captured, or start one in the background and reap it later.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/base/unique_fd.hpp"

namespace sealfs::test {

struct ProcessResult {
  // The exit code, or 128 + signal number when killed by a signal, or -1
  // when it could not be started or ran past its time limit.
  int status = -1;
  std::string out;
  std::string err;
};

// Run argv[0] (searched in PATH) with extra "NAME=value" environment entries.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env = {},
                          std::chrono::milliseconds limit = std::chrono::seconds(60));

// Start argv in the background with stdout and stderr going to log_path.
// Returns the pid, or -1 with errno set.
pid_t spawn_process(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::vector<std::string>& extra_env = {});

// Wait for pid up to limit; the status as in ProcessResult, -1 on timeout
// (the process is then still running).
int wait_process(pid_t pid, std::chrono::milliseconds limit);

// Decode a waitpid() status the same way.
int decode_wait_status(int wstatus);

// A writer in another process (R4's tests of a writer's death): it creates
// path, writes data at offset and keeps the file open until end() says how
// it ends. A step that fails in the child is reported by error() (with its
// errno), never by the child dying unnoticed.
class HeldWriter {
 public:
  HeldWriter(const std::string& path, const std::string& data, off_t offset = 0);
  ~HeldWriter();
  HeldWriter(const HeldWriter&) = delete;
  HeldWriter& operator=(const HeldWriter&) = delete;

  // Empty while the child holds the file written; else what failed.
  const std::string& error() const { return error_; }
  // SIGKILL: dies with the file open. A code in 0..127: exits with it, the
  // kernel closing the file. Returns the status as in ProcessResult.
  static constexpr int kKilled = -1;
  int end(int how);

 private:
  pid_t pid_ = -1;
  UniqueFd go_;  // the parent's end of the pipe that tells the child how to end
  std::string error_;
};

}  // namespace sealfs::test
