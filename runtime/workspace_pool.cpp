#include "runtime/workspace_pool.hpp"

#include "base/log.hpp"
#include "sage2/sage2.hpp"

namespace sage2::runtime {

WorkspacePool::~WorkspacePool() {
  if (!base::driver::available()) return;
  const auto& a = base::driver::api();
  for (auto& [stream, b] : buffers_)
    if (b.ptr) a.cuMemFree_v2(b.ptr);
}

std::size_t WorkspacePool::bytes_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& [s, b] : buffers_) n += b.bytes;
  return n;
}

void* WorkspacePool::get(CUstream stream, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer& b = buffers_[stream];
  if (b.bytes >= bytes && b.ptr) return reinterpret_cast<void*>(b.ptr);
  if (bytes == 0) return nullptr;  // a plan without workspace (the direct path without a merge)
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(ctx_);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  base::driver::check(a.cuStreamIsCapturing(stream, &capture), "cuStreamIsCapturing");
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
    throw Error(ErrorCode::InvalidArgument,
                "workspace: this call needs " + std::to_string(bytes) + " bytes but the stream is being captured "
                "into a CUDA graph and its workspace holds " + std::to_string(b.bytes) +
                "; run the call once before capturing, or pass params.workspace");
  if (b.ptr) {
    base::driver::check(a.cuStreamSynchronize(stream), "cuStreamSynchronize (workspace growth)");
    a.cuMemFree_v2(b.ptr);
    b = Buffer{};
  }
  // Grow geometrically so a slowly growing sequence length does not reallocate every call.
  const std::size_t want = bytes + bytes / 4;
  CUdeviceptr p = 0;
  const CUresult r = a.cuMemAlloc_v2(&p, want);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::OutOfMemory, "workspace: allocating " + std::to_string(want) + " bytes failed: " +
                                            base::driver::error_text(r));
  b.ptr = p;
  b.bytes = want;
  base::log::debug("workspace for stream grown to " + std::to_string(want) + " bytes");
  return reinterpret_cast<void*>(p);
}

}  // namespace sage2::runtime
