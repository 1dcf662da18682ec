// The quantize stage's buffers, downloaded from a workspace into the reference's QuantizedHost
// (same layout: kernels/quant_buffers.hpp), so that tests can compare them with the CPU reference or
// run the emulation on exactly the codes a kernel read (reference::EmulationOptions::stage).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu_env.hpp"
#include "kernels/quant_buffers.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

namespace sage2::test {

template <class T>
std::vector<T> download(const DeviceBuffer& ws, std::size_t offset, std::int64_t count) {
  std::vector<T> v(static_cast<std::size_t>(count));
  if (count) ws.download(v.data(), v.size() * sizeof(T), offset);
  return v;
}

// Every buffer but the margins (a reference-only diagnostic) and the statistics partials, of
// the buffers `b` laid out for the attention spec `spec`. A spec whose attention kernel quantized
// Q itself (spec.q_in_kernel) leaves no Q̂ in the workspace: its Q parts (codes, scales, q·k̄,
// flags) come from `q_part`, the CPU reference's stage of the same inputs — the kernel applies
// the same float ops to the same groups (GPU suite: `gpu attention api*` compares the results).
inline reference::QuantizedHost download_stage(const DeviceBuffer& ws, const kernels::QuantBuffers& b,
                                               const kernels::KernelSpec& spec,
                                               const reference::QuantizedHost* q_part = nullptr) {
  const kernels::QuantBuffers::Offsets o = b.offsets();
  reference::QuantizedHost s;
  s.layout = reference::stage_layout(b, reference::kernel_config(spec));
  s.q_codes = download<std::int8_t>(ws, o.q_codes, b.q_codes());
  s.q_scale = download<float>(ws, o.q_scale, b.q_scale());
  s.q_mean = download<float>(ws, o.q_mean, b.q_mean());
  s.q_kbias = download<float>(ws, o.q_kbias, b.q_kbias());
  s.k_codes = download<std::int8_t>(ws, o.k_codes, b.k_codes());
  s.k_scale = download<float>(ws, o.k_scale, b.k_scale());
  s.k_mean = download<float>(ws, o.k_mean, b.k_mean());
  s.k_stats = download<float>(ws, o.k_stats, b.k_stats());
  s.v_codes = download<std::uint8_t>(ws, o.v_codes, b.v_codes());
  s.v_scale = download<float>(ws, o.v_scale, b.v_scale());
  s.v_mean = download<float>(ws, o.v_mean, b.v_mean());
  s.v_stats = download<float>(ws, o.v_stats, b.v_stats());
  s.q_bad = download<std::uint8_t>(ws, o.q_bad, b.q_bad());
  s.k_first_bad = download<std::int32_t>(ws, o.k_first_bad, b.k_first_bad());
  s.v_first_bad = download<std::int32_t>(ws, o.v_first_bad, b.v_first_bad());
  s.sample_statistics = b.sampled_stats;  // (the split path's sampled stage: V's scales from v_amax)
  if (b.sampled_stats) s.v_amax = download<float>(ws, o.v_amax, b.v_amax());
  if (b.q_in_kernel) {
    if (!q_part) throw Error(ErrorCode::InvalidArgument, "download_stage: a q_in_kernel stage needs the reference's Q part");
    s.q_codes = q_part->q_codes;
    s.q_scale = q_part->q_scale;
    s.q_kbias = q_part->q_kbias;
    s.q_bad = q_part->q_bad;
  }
  return s;
}

// The reference's stage options for the quantize stage of attention spec `spec` (its sampled
// statistics, kernels::KernelSpec::sampled_stats): the CPU stage, or the Q part of a spec that
// quantized Q in the attention kernel, must take k̄ from the same keys as the GPU's.
inline reference::QuantizeOptions stage_options(const kernels::KernelSpec& spec) {
  reference::QuantizeOptions o;
  o.sample_statistics = spec.sampled_stats;
  return o;
}

}  // namespace sage2::test
