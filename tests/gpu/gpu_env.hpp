// Shared helpers of the GPU suite: one Context for the process, device buffers, poison fills.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/context_impl.hpp"
#include "runtime/device.hpp"
#include "base/driver.hpp"

namespace sage2::test {

// Empty when the GPU suite can run; otherwise why not.
inline std::string gpu_unavailable_reason() {
  if (!base::driver::available()) return base::driver::unavailable_reason();
  const int n = runtime::device_count();
  if (n == 0) return "no CUDA device visible";
  const auto f = runtime::device_facts(0);
  if (!f.arch) return "device 0 (" + f.name + ", " + f.cc_string() + ") is not supported: " + f.target_note;
  return {};
}

inline Context& gpu_context() {
  static Context ctx(0);
  return ctx;
}

// Device allocation owned by the test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    base::driver::ScopedContext s(runtime::context_impl(gpu_context()).cu_context());
    base::driver::check(base::driver::api().cuMemAlloc_v2(&ptr_, bytes ? bytes : 1), "cuMemAlloc");
  }
  ~DeviceBuffer() {
    if (ptr_) base::driver::api().cuMemFree_v2(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr ptr() const { return ptr_; }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n, std::size_t offset = 0) {
    base::driver::ScopedContext s(runtime::context_impl(gpu_context()).cu_context());
    base::driver::check(base::driver::api().cuMemcpyHtoD_v2(ptr_ + offset, src, n), "cuMemcpyHtoD");
  }
  void download(void* dst, std::size_t n, std::size_t offset = 0) const {
    base::driver::ScopedContext s(runtime::context_impl(gpu_context()).cu_context());
    base::driver::check(base::driver::api().cuMemcpyDtoH_v2(dst, ptr_ + offset, n), "cuMemcpyDtoH");
  }
  void poison(unsigned char byte = 0xA5) {
    base::driver::ScopedContext s(runtime::context_impl(gpu_context()).cu_context());
    base::driver::check(base::driver::api().cuMemsetD8_v2(ptr_, byte, bytes_), "cuMemsetD8");
  }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_;
};

inline void synchronize() {
  base::driver::ScopedContext s(runtime::context_impl(gpu_context()).cu_context());
  base::driver::check(base::driver::api().cuCtxSynchronize(), "cuCtxSynchronize");
}

// SAGE2_GPU_TESTS_REDUCED=1 (any value but empty or "0"): test cases that honour it shrink their
// sizes and case lists so that the suite runs under compute-sanitizer in minutes
// (scripts/sanitize_gpu.sh); wall-clock assertions are dropped then (the sanitizer slows kernels).
inline bool reduced() {
  const char* e = std::getenv("SAGE2_GPU_TESTS_REDUCED");
  return e && *e && std::strcmp(e, "0") != 0;
}

// Base seed of a randomised test case: SAGE2_TEST_SEED (decimal) reproduces a logged run, else a
// fresh one; the cases print it ("base seed N") so that any failure can be replayed.
inline std::uint64_t base_seed() {
  if (const char* e = std::getenv("SAGE2_TEST_SEED"); e && *e) return std::strtoull(e, nullptr, 10);
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// Median of `reps` runs of f() timed with CUDA events on the default stream, in ms (the timed
// perf cases; the caller's context must be current).
template <class F>
float median_event_ms(F&& f, int reps = 7) {
  const auto& a = base::driver::api();
  CUevent e0, e1;
  base::driver::check(a.cuEventCreate(&e0, 0), "cuEventCreate");
  base::driver::check(a.cuEventCreate(&e1, 0), "cuEventCreate");
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    a.cuEventRecord(e0, nullptr);
    f();
    a.cuEventRecord(e1, nullptr);
    a.cuEventSynchronize(e1);
    float t = 0;
    a.cuEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  a.cuEventDestroy_v2(e0);
  a.cuEventDestroy_v2(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Device allocation owned by the test in a given CUDA context (e.g. another device's primary
// context, from a Context on that device: runtime::context_impl(ctx).cu_context()).
class ContextBuffer {
 public:
  ContextBuffer(CUcontext ctx, std::size_t bytes) : ctx_(ctx), bytes_(bytes) {
    base::driver::ScopedContext s(ctx_);
    base::driver::check(base::driver::api().cuMemAlloc_v2(&ptr_, bytes ? bytes : 1), "cuMemAlloc");
  }
  ~ContextBuffer() {
    if (ptr_) {
      base::driver::ScopedContext s(ctx_);
      base::driver::api().cuMemFree_v2(ptr_);
    }
  }
  ContextBuffer(const ContextBuffer&) = delete;
  ContextBuffer& operator=(const ContextBuffer&) = delete;
  CUdeviceptr ptr() const { return ptr_; }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n, std::size_t offset = 0) {
    base::driver::ScopedContext s(ctx_);
    base::driver::check(base::driver::api().cuMemcpyHtoD_v2(ptr_ + offset, src, n), "cuMemcpyHtoD");
  }
  void download(void* dst, std::size_t n, std::size_t offset = 0) const {
    base::driver::ScopedContext s(ctx_);
    base::driver::check(base::driver::api().cuMemcpyDtoH_v2(dst, ptr_ + offset, n), "cuMemcpyDtoH");
  }
  void poison(unsigned char byte = 0xA5) {
    base::driver::ScopedContext s(ctx_);
    base::driver::check(base::driver::api().cuMemsetD8_v2(ptr_, byte, bytes_), "cuMemsetD8");
  }

 private:
  CUcontext ctx_;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_;
};

inline void synchronize(CUcontext ctx) {
  base::driver::ScopedContext s(ctx);
  base::driver::check(base::driver::api().cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace sage2::test
