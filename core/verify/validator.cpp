#include "core/verify/validator.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/cuda/cuda.hpp"

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

void ValidatorRegistry::add(std::string name, ValidatorFn fn) {
  fns_.insert_or_assign(std::move(name), std::move(fn));
}

const ValidatorFn* ValidatorRegistry::find(std::string_view name) const {
  auto it = fns_.find(name);
  return it == fns_.end() ? nullptr : &it->second;
}

ValidatorRegistry default_validators(std::string_view cuda_mode) {
  ValidatorRegistry registry;
  registry.add("test-reject", test_reject);

  // ---- "cuda" registration goes here (core/cuda.{hpp,cpp}, CUDA teammate) ----
  registry.add("cuda", make_cuda_validator(cuda_mode));
  // ---- end of "cuda" registration ----

  return registry;
}

}  // namespace sealfs
