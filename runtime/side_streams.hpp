// Side streams of pipelined attention calls (runtime/call_plan.hpp, CallPlan::chunk): the
// quantize stage of chunk i+1 runs on a side stream while the attention of chunk i runs on the
// caller's stream, joined by events. One side stream (and its events) per caller stream, so that
// a stream being captured into a CUDA graph pulls in only its own side stream: calls on other
// streams never enqueue work into that capture.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "base/driver.hpp"

namespace sage2::runtime {

class SideStreams {
 public:
  // At most this many caller streams get a side stream; calls on further streams run unpipelined.
  static constexpr std::size_t kMaxStreams = 32;
  struct Lane {
    CUstream side = nullptr;
    std::vector<CUevent> events;  // [0]: the caller's stream reached the call; [1 + i]: chunk i quantized
  };
  explicit SideStreams(CUcontext ctx) : ctx_(ctx) {}
  ~SideStreams();
  SideStreams(const SideStreams&) = delete;
  SideStreams& operator=(const SideStreams&) = delete;

  // The lane of `stream` with at least `events` events, created on first use; null when none can
  // be had without risk: the stream is being captured and has no lane yet (creating streams and
  // events is not a capturable operation), or kMaxStreams lanes exist. Call under the Context's
  // driver scope. A lane is used by calls on its caller stream only, in that stream's order.
  Lane* get(CUstream stream, std::size_t events);
  // Caller streams with a lane.
  std::size_t lanes() const;

 private:
  CUcontext ctx_;
  mutable std::mutex mu_;
  std::map<CUstream, Lane> lanes_;
};

}  // namespace sage2::runtime
