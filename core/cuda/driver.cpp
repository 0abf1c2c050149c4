// Driver: dlopen("libcuda.so.1") and our own function-pointer types, so
// neither the toolkit nor the driver is needed to build (see cuda_driver.hpp).
#include "core/cuda/driver.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda/cuda.hpp"

#if defined(SEALFS_WITH_CUDA_HEADERS) && __has_include(<cuda.h>)
#include <cuda.h>
// With the toolkit's header at hand, prove our constants are the driver's.
static_assert(sealfs::kCudaErrorInvalidImage == CUDA_ERROR_INVALID_IMAGE);
static_assert(sealfs::kCudaErrorNoBinaryForGpu == CUDA_ERROR_NO_BINARY_FOR_GPU);
static_assert(sealfs::kCudaErrorInvalidPtx == CUDA_ERROR_INVALID_PTX);
static_assert(sealfs::kCudaErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(sealfs::kCudaErrorUnsupportedPtxVersion == CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
#endif

namespace sealfs::cuda::detail {

struct Driver::Api {
  using CUresult = int;
  using CUdevice = int;
  using CUcontext = void*;
  using CUmodule = void*;

  void* handle = nullptr;  // never dlclose'd: the driver registers exit handlers
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUcontext context = nullptr;  // the first device's primary context, retained for good

  template <class Fn>
  bool bind(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(::dlsym(handle, name));
    return fn != nullptr;
  }

  std::string error_text(CUresult rc) const {
    const char* name = nullptr;
    if (cuGetErrorName == nullptr || cuGetErrorName(rc, &name) != kCudaSuccess || name == nullptr)
      name = "CUDA error";
    return std::string(name) + " (" + std::to_string(rc) + ")";
  }
};

Driver& Driver::instance() {
  // A function-local static is initialised exactly once, thread-safely (C++11).
  static Driver driver;
  return driver;
}

Driver::Driver() : api_(std::make_unique<Api>()) {
  Api& api = *api_;
  api.handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api.handle == nullptr) {
    const char* why = ::dlerror();
    reason_ = std::string("no CUDA driver (") + (why != nullptr ? why : "libcuda.so.1 not found") + ")";
  } else if (!api.bind(api.cuInit, "cuInit") || !api.bind(api.cuDeviceGet, "cuDeviceGet") ||
             !api.bind(api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") ||
             !api.bind(api.cuCtxSetCurrent, "cuCtxSetCurrent") ||
             !api.bind(api.cuModuleLoadData, "cuModuleLoadData") ||
             !api.bind(api.cuModuleUnload, "cuModuleUnload")) {
    reason_ = "CUDA driver lacks a needed entry point";
  } else {
    api.bind(api.cuGetErrorName, "cuGetErrorName");  // optional: only for messages
    int device = 0;
    if (const int rc = api.cuInit(0); rc != kCudaSuccess) {
      reason_ = "cuInit failed: " + api.error_text(rc);
    } else if (const int rc2 = api.cuDeviceGet(&device, 0); rc2 != kCudaSuccess) {
      reason_ = "no CUDA device: " + api.error_text(rc2);
    } else if (const int rc3 = api.cuDevicePrimaryCtxRetain(&api.context, device); rc3 != kCudaSuccess) {
      reason_ = "cannot create a CUDA context: " + api.error_text(rc3);
    } else {
      available_ = true;
    }
  }
  // Said once, for the whole process.
  if (!available_) std::cerr << "sealfs: " << reason_ << "; CUDA images are validated structurally only\n";
}

Driver::~Driver() = default;

DriverLoad Driver::load(const Loadable& image) {
  DriverLoad result;
  if (!available_) {
    result.message = reason_;
    return result;
  }
  const Api& api = *api_;
  // The driver reads images through aligned pointers: copy into 8-aligned
  // storage, NUL-terminated (PTX must be; the others ignore the extra bytes).
  std::vector<std::uint64_t> buffer(image.bytes.size() / sizeof(std::uint64_t) + 1, 0);
  std::memcpy(buffer.data(), image.bytes.data(), image.bytes.size());

  // The primary context must be current on the calling thread (any FUSE worker).
  if (const int rc = api.cuCtxSetCurrent(api.context); rc != kCudaSuccess) {
    result.cu_result = rc;
    result.message = "cuCtxSetCurrent: " + api.error_text(rc);
    return result;
  }
  Api::CUmodule module = nullptr;
  const int rc = api.cuModuleLoadData(&module, buffer.data());
  result.cu_result = rc;
  result.message = rc == kCudaSuccess ? "loaded" : api.error_text(rc);
  switch (rc) {
    case kCudaSuccess:
      result.verdict = DriverVerdict::loaded;
      api.cuModuleUnload(module);
      break;
    case kCudaErrorInvalidImage:
    case kCudaErrorInvalidPtx:
      result.verdict = DriverVerdict::invalid;
      break;
    case kCudaErrorNoBinaryForGpu:
    case kCudaErrorUnsupportedPtxVersion:  // newer PTX than this driver: not damage
      result.verdict = DriverVerdict::no_binary_for_gpu;
      break;
    default:
      result.verdict = DriverVerdict::unavailable;  // out of memory etc.: says nothing about the image
      break;
  }
  return result;
}

}  // namespace sealfs::cuda::detail
