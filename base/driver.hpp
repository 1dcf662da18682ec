// The CUDA Driver API, loaded with dlopen (libcuda is never linked): the library and every tool
// start on a machine without a driver and say plainly that none was found.
#pragma once

#include <cuda.h>  // types and prototypes only (build-time header); nothing is linked

#include <string>

namespace sage2::base::driver {

// X-macro of every driver entry point sage2 uses. Versioned names are spelled out so dlsym finds
// the same symbols the header's macros would select.
#define SAGE2_DRIVER_FUNCTIONS(X) \
  X(cuInit)                       \
  X(cuDriverGetVersion)           \
  X(cuGetErrorName)               \
  X(cuGetErrorString)             \
  X(cuDeviceGetCount)             \
  X(cuDeviceGet)                  \
  X(cuDeviceGetName)              \
  X(cuDeviceGetAttribute)         \
  X(cuDeviceTotalMem_v2)          \
  X(cuDevicePrimaryCtxRetain)     \
  X(cuDevicePrimaryCtxRelease_v2) \
  X(cuCtxGetCurrent)              \
  X(cuCtxSetCurrent)              \
  X(cuCtxPushCurrent_v2)          \
  X(cuCtxPopCurrent_v2)           \
  X(cuCtxGetDevice)               \
  X(cuCtxSynchronize)             \
  X(cuModuleLoadData)             \
  X(cuModuleUnload)               \
  X(cuModuleGetFunction)          \
  X(cuFuncSetAttribute)           \
  X(cuFuncGetAttribute)           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuLaunchKernel)               \
  X(cuLaunchKernelEx)             \
  X(cuMemAlloc_v2)                \
  X(cuMemFree_v2)                 \
  X(cuMemGetInfo_v2)              \
  X(cuMemcpyHtoD_v2)              \
  X(cuMemcpyDtoH_v2)              \
  X(cuMemcpyDtoD_v2)              \
  X(cuMemcpyHtoDAsync_v2)         \
  X(cuMemcpyDtoHAsync_v2)         \
  X(cuMemsetD8_v2)                \
  X(cuMemsetD8Async)              \
  X(cuStreamCreate)               \
  X(cuStreamDestroy_v2)           \
  X(cuStreamSynchronize)          \
  X(cuStreamIsCapturing)          \
  X(cuStreamGetCtx)               \
  X(cuEventCreate)                \
  X(cuEventRecord)                \
  X(cuEventSynchronize)           \
  X(cuEventElapsedTime)           \
  X(cuEventDestroy_v2)            \
  X(cuPointerGetAttribute)         \
  X(cuPointerGetAttributes)        \
  X(cuStreamBeginCapture_v2)      \
  X(cuStreamEndCapture)           \
  X(cuGraphInstantiateWithFlags)  \
  X(cuGraphLaunch)                \
  X(cuGraphExecDestroy)           \
  X(cuGraphDestroy)                \
  X(cuTensorMapEncodeTiled)

struct Api {
#define SAGE2_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  SAGE2_DRIVER_FUNCTIONS(SAGE2_DRIVER_MEMBER)
#undef SAGE2_DRIVER_MEMBER
};

// The loaded driver, initialised once (dlopen + cuInit). Throws Error(NoDriver) naming the
// library tried when it is absent, Error(DriverError) when cuInit fails (e.g. no device).
const Api& api();
// True when api() would succeed; never throws.
bool available() noexcept;
// Why api() fails (empty when it does not).
std::string unavailable_reason();

// Throws Error(DriverError, "<what>: <CUDA_ERROR_NAME> (<text>)") when r != CUDA_SUCCESS.
void check(CUresult r, const char* what);
std::string error_text(CUresult r);

// Pushes `ctx` as current for the scope (no-op when it already is current).
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace sage2::base::driver
