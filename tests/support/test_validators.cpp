// Validators that exist only for tests. Compiled into sealfs_core in test
// builds (SEALFS_FAULT_INJECTION=ON, see core/CMakeLists.txt), so that the
// daemon the scenario tests run knows them; the installed daemon does not.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "core/store/validators.hpp"
#include "core/verify/validator.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kTestRejectMagic = "SEALFS-TEST-REJECT";

// "test-reject": lets tests make a publish fail with EBADMSG through a
// profile, without real CUDA images. Reads only the first bytes, with pread
// so the caller's file offset is untouched.
ValidationOutcome test_reject(int fd, std::string_view rel) {
  char head[kTestRejectMagic.size()];
  std::size_t got = 0;
  while (got < sizeof head) {
    ssize_t n = ::pread(fd, head + got, sizeof head - got, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      // A file that cannot be read cannot be vouched for.
      return {false, std::string(rel) + ": cannot read: " + std::strerror(errno), {}};
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (std::string_view(head, got) == kTestRejectMagic)
    return {false, std::string(rel) + ": content starts with " + std::string(kTestRejectMagic), {}};
  return {};
}

}  // namespace

void add_test_validators(ValidatorRegistry& registry) { registry.add("test-reject", test_reject); }

}  // namespace sealfs
