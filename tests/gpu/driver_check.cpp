// GPU check of the CUDA driver path (run by run_gpu_check.sh on a machine
// with an NVIDIA driver and GPU). Each argument is EXPECT:FILE:
//   raw-loads:F      F handed straight to cuModuleLoadData loads (or is
//                    "no binary for this GPU": not damage)
//   raw-invalid:F    F handed straight to the driver is refused with
//                    CUDA_ERROR_INVALID_IMAGE (200) or INVALID_PTX (218)
//   raw-probe:F      report what the driver says about F, judge nothing
//   sound:F          the "cuda" validator in driver mode accepts F and the
//                    driver loaded every image ("driver":"loaded")
//   broken:F         the validator in driver mode rejects F
// Prints one PASS/FAIL/INFO line per argument; exit 0 when all pass, 1 when
// any fails, 77 when there is no usable driver or device.
#include <fcntl.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/cuda/cuda.hpp"
#include "core/cuda/driver.hpp"

namespace {

std::vector<std::byte> read_all(const std::string& path) {
  std::vector<std::byte> out;
  sealfs::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return out;
  std::byte buf[65536];
  for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;) out.insert(out.end(), buf, buf + n);
  return out;
}

sealfs::cuda::Loadable::Form form_of(const std::string& path) {
  auto ends = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
  };
  if (ends(".ptx")) return sealfs::cuda::Loadable::Form::ptx;
  if (ends(".fatbin")) return sealfs::cuda::Loadable::Form::fatbin;
  return sealfs::cuda::Loadable::Form::cubin;
}

}  // namespace

int main(int argc, char** argv) {
  sealfs::cuda::detail::Driver& driver = sealfs::cuda::detail::Driver::instance();
  if (!driver.available()) {
    std::cout << "SKIP: " << driver.unavailable_reason() << '\n';
    return 77;
  }
  std::cout << "INFO: CUDA driver and device available\n";
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto colon = arg.find(':');
    if (colon == std::string::npos) {
      std::cout << "FAIL: bad argument " << arg << '\n';
      ++failures;
      continue;
    }
    const std::string expect = arg.substr(0, colon);
    const std::string path = arg.substr(colon + 1);
    bool ok = false;
    std::string said;
    if (expect.rfind("raw-", 0) == 0) {
      const auto bytes = read_all(path);
      if (bytes.empty()) {
        said = "cannot read";
      } else {
        // Raw means unchecked: only hand the driver files whose headers are
        // intact enough not to send it past the buffer (see the script).
        const auto load = driver.load(sealfs::cuda::Loadable{form_of(path), bytes, path});
        said = load.message;
        if (expect == "raw-probe") {
          std::cout << "INFO: " << path << ": driver says " << said << '\n';
          continue;
        }
        ok = expect == "raw-invalid"
                 ? load.verdict == sealfs::cuda::detail::DriverVerdict::invalid
                 : load.verdict == sealfs::cuda::detail::DriverVerdict::loaded ||
                       load.verdict == sealfs::cuda::detail::DriverVerdict::no_binary_for_gpu;
      }
    } else {
      sealfs::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      auto check = fd ? sealfs::cuda::check_file(fd.get(), sealfs::cuda::Mode::driver, path)
                      : sealfs::Result<sealfs::cuda::FileCheck>(sealfs::errno_error("open " + path));
      if (!check) {
        said = check.error().message;
      } else {
        said = check->sound ? "sound, driver " + check->driver : "rejected: " + check->reason;
        ok = expect == "sound" ? check->sound && check->driver == "loaded" : !check->sound;
      }
    }
    std::cout << (ok ? "PASS: " : "FAIL: ") << expect << ' ' << path << ": " << said << '\n';
    failures += ok ? 0 : 1;
  }
  return failures == 0 ? 0 : 1;
}
