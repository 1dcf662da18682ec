// A host tensor of the CPU reference with its copy in device memory, and the output read back in
// logical order: what the API-level GPU suites pass to Context::attention and compare.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "gpu_env.hpp"
#include "sage2/reference.hpp"

namespace sage2::test {

struct DeviceTensor {
  reference::HostTensor host;
  std::unique_ptr<DeviceBuffer> dev;
  explicit DeviceTensor(reference::HostTensor h) : host(std::move(h)) {
    dev = std::make_unique<DeviceBuffer>(bytes());
    dev->upload(host.ref().data, bytes());
  }
  std::size_t bytes() const { return static_cast<std::size_t>(host.ref().numel()) * 2; }
  TensorRef ref() const {
    TensorRef r = host.ref();
    r.data = dev->get();
    return r;
  }
  void reupload() { dev->upload(host.ref().data, bytes()); }
};

// The device tensor's values as float [B][H][N][d] (logical order, whatever the layout).
inline std::vector<float> download_out(const DeviceTensor& out) {
  reference::HostTensor h = out.host;
  out.dev->download(h.bits().data(), h.bits().size() * 2);
  std::vector<float> o;
  o.reserve(static_cast<std::size_t>(h.ref().numel()));
  for (std::int64_t b = 0; b < h.batch(); ++b)
    for (std::int64_t hh = 0; hh < h.heads(); ++hh)
      for (std::int64_t n = 0; n < h.seq(); ++n)
        for (std::int64_t c = 0; c < h.dim(); ++c) o.push_back(h.get(b, hh, n, c));
  return o;
}

}  // namespace sage2::test
