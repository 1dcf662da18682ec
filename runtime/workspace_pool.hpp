// Workspace of attention calls: one device buffer per stream, grown on demand and reused.
// Calls on one stream run in stream order, so they can share that stream's buffer; calls on
// different streams get different buffers. After the first call of the largest shape no call
// allocates, so calls can be captured in CUDA graphs.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "base/driver.hpp"

namespace sage2::runtime {

class WorkspacePool {
 public:
  explicit WorkspacePool(CUcontext ctx) : ctx_(ctx) {}
  ~WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // A device buffer of at least `bytes` (256-byte aligned) for work enqueued on `stream`.
  // Growing synchronises the stream once (the old buffer may still be in use) — never during
  // graph capture: then it throws InvalidArgument explaining how to avoid it.
  void* get(CUstream stream, std::size_t bytes);
  std::size_t bytes_held() const;

 private:
  struct Buffer {
    CUdeviceptr ptr = 0;
    std::size_t bytes = 0;
  };
  CUcontext ctx_;
  mutable std::mutex mu_;
  std::map<CUstream, Buffer> buffers_;
};

}  // namespace sage2::runtime
