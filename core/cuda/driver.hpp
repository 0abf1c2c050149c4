// The CUDA driver, loaded at run time with dlopen("libcuda.so.1"): sealfs
// never links against libcuda, so it builds and runs where there is no driver
// and then validates structurally only.
#pragma once

#include <memory>
#include <string>

#include "core/cuda/cuda.hpp"

namespace sealfs::cuda::detail {

// CUresult values sealfs acts on (from the driver API; cuda.h is not needed).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorNoDevice = 100;
inline constexpr int kCudaErrorInvalidImage = 200;
inline constexpr int kCudaErrorNoBinaryForGpu = 209;
inline constexpr int kCudaErrorInvalidPtx = 218;
inline constexpr int kCudaErrorUnsupportedPtxVersion = 222;

enum class DriverVerdict {
  loaded,             // cuModuleLoadData succeeded
  no_binary_for_gpu,  // sound as far as we know; not for this device
  invalid,            // CUDA_ERROR_INVALID_IMAGE / INVALID_PTX: damaged
  unavailable,        // no driver, no device, or another driver error: not validated
};

struct DriverLoad {
  DriverVerdict verdict = DriverVerdict::unavailable;
  int cu_result = 0;    // the CUresult returned
  std::string message;  // "CUDA_ERROR_INVALID_IMAGE (200)"
};

class Driver {
 public:
  // The process-wide driver, initialised once (thread-safe). When there is
  // no driver or no device, that is said once on stderr and available() is false.
  static Driver& instance();

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }

  // Load one image as a module on the first device, then unload it. Safe to
  // call from any thread.
  DriverLoad load(const Loadable& image);

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

 private:
  Driver();
  ~Driver();
  struct Api;
  std::unique_ptr<Api> api_;
  bool available_ = false;
  std::string reason_;
};

}  // namespace sealfs::cuda::detail
