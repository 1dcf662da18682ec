// Shared by the sage2-bench-* programs: list parsing, CUDA-event timing, and device inputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "base/driver.hpp"
#include "sage2/reference.hpp"

namespace sage2::bench {

inline std::vector<long> parse_list(const std::string& s) {
  std::vector<long> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stol(item));
  return v;
}

// Median of `reps` timed calls of fn on `stream` (CUDA events around each), after 3 warm-up calls
// (compile, load, size workspaces). `before` runs ahead of each timed call, outside the events
// (e.g. an L2 flush); the stream is synchronised after it so its work never hides fn's host time.
template <class F, class B>
double median_ms(F&& fn, int reps, CUstream stream, B&& before) {
  const auto& a = base::driver::api();
  struct Events {
    CUevent a, b;
    Events() {
      base::driver::check(base::driver::api().cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
      base::driver::check(base::driver::api().cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
    }
    ~Events() {
      base::driver::api().cuEventDestroy_v2(a);
      base::driver::api().cuEventDestroy_v2(b);
    }
  } ev;
  for (int i = 0; i < 3; ++i) fn();
  base::driver::check(a.cuStreamSynchronize(stream), "sync");
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    before();
    base::driver::check(a.cuStreamSynchronize(stream), "sync");
    base::driver::check(a.cuEventRecord(ev.a, stream), "record");
    fn();
    base::driver::check(a.cuEventRecord(ev.b, stream), "record");
    base::driver::check(a.cuEventSynchronize(ev.b), "sync");
    float ms = 0;
    base::driver::check(a.cuEventElapsedTime(&ms, ev.a, ev.b), "elapsed");
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class F>
double median_ms(F&& fn, int reps, CUstream stream) {
  return median_ms(fn, reps, stream, [] {});
}

// `count` device buffers of `elems` fp16 values each, all filled with the same pattern: a sum of 4
// uniforms (roughly N(0,1), never all zero) plus `ramp`·(position in a 2^24-value chunk), a
// channel-bias-like drift for the quantize benchmark (0 for attention). Freed by the destructor.
class DeviceInputs {
 public:
  DeviceInputs(int count, std::size_t elems, double ramp = 0.0) : buf_(static_cast<std::size_t>(count)) {
    const auto& a = base::driver::api();
    std::vector<std::uint16_t> chunk(std::min<std::size_t>(elems, 1u << 24));
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      double u = 0;
      for (int k = 0; k < 4; ++k) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        u += static_cast<double>(s >> 11) / 9007199254740992.0;
      }
      chunk[i] = reference::float_to_half(
          static_cast<float>((u - 2.0) * 1.732 + ramp * double(i) / double(chunk.size())));
    }
    for (auto& b : buf_) {
      base::driver::check(a.cuMemAlloc_v2(&b, elems * 2), "cuMemAlloc");
      for (std::size_t off = 0; off < elems; off += chunk.size()) {
        const std::size_t n = std::min(chunk.size(), elems - off);
        base::driver::check(a.cuMemcpyHtoD_v2(b + off * 2, chunk.data(), n * 2), "HtoD");
      }
    }
  }
  ~DeviceInputs() {
    for (auto b : buf_)
      if (b) base::driver::api().cuMemFree_v2(b);
  }
  DeviceInputs(const DeviceInputs&) = delete;
  DeviceInputs& operator=(const DeviceInputs&) = delete;
  void* operator[](int i) const { return reinterpret_cast<void*>(buf_[static_cast<std::size_t>(i)]); }

 private:
  std::vector<CUdeviceptr> buf_;
};

}  // namespace sage2::bench
