#include "runtime/side_streams.hpp"

#include "base/config.hpp"
#include "base/log.hpp"

namespace sage2::runtime {

SideStreams::~SideStreams() {
  if (!base::driver::available()) return;
  const auto& a = base::driver::api();
  for (auto& [stream, lane] : lanes_) {
    for (CUevent e : lane.events) a.cuEventDestroy_v2(e);
    if (lane.side) a.cuStreamDestroy_v2(lane.side);
  }
}

std::size_t SideStreams::lanes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lanes_.size();
}

SideStreams::Lane* SideStreams::get(CUstream stream, std::size_t events) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(stream);
  const bool fits = it != lanes_.end() && it->second.events.size() >= events;
  if (fits) return &it->second;
  const auto& a = base::driver::api();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  base::driver::check(a.cuStreamIsCapturing(stream, &capture), "cuStreamIsCapturing");
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return nullptr;
  if (it == lanes_.end()) {
    if (lanes_.size() >= kMaxStreams) return nullptr;
    Lane lane;
    // The quantize stage of the next chunk gets the scheduler's preference over the attention
    // kernel it runs beside (SAGE2_PIPELINE_PRIORITY=same turns that off), so that the last
    // chunk's codes are ready early and the call ends on attention alone.
    int least = 0, greatest = 0;
    base::driver::check(a.cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
    const int priority = base::config::process_config().pipeline_high_priority ? greatest : 0;
    base::driver::check(a.cuStreamCreateWithPriority(&lane.side, CU_STREAM_NON_BLOCKING, priority),
                        "cuStreamCreateWithPriority (pipeline side stream)");
    it = lanes_.emplace(stream, std::move(lane)).first;
    base::log::debug("pipeline: side stream created (priority " + std::to_string(priority) + ")");
  }
  Lane& lane = it->second;
  while (lane.events.size() < events) {
    CUevent e = nullptr;
    base::driver::check(a.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate (pipeline)");
    lane.events.push_back(e);
  }
  return &lane;
}

}  // namespace sage2::runtime
