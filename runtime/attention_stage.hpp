// The attention stage of one call: per chunk (jit::attention_chunks), ΔS (smooth-Q only) then the
// mma.sync attention kernel, on the caller's stream, reading the quantize stage's workspace.
#pragma once

#include <cstddef>

#include "jit/attention_shape.hpp"
#include "jit/quant_buffers.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::runtime {

// Bytes of ΔS workspace the stage needs for `b` (0 without smooth-Q), bounded by `cap` (see
// jit::delta_s_workspace_bytes).
std::size_t delta_s_workspace_bytes(const jit::QuantBuffers& b, std::size_t cap = jit::kDeltaSWorkspaceCap);

// The ΔS kernel an attention spec needs (smooth-Q), loaded; {nullptr, {}} without smooth-Q. Both
// attention stages and the cached call plan use it.
struct DeltaSKernel {
  LoadedKernel* kernel = nullptr;
  jit::KernelSpec spec;
};
DeltaSKernel delta_s_kernel(Context::Impl& ctx, const jit::KernelSpec& attention_spec);

// Launches ΔS (if attention_spec.smooth_q) and attention for every chunk. `workspace` holds the
// quantize-stage buffers (b.offsets()); `k_input` is the device K the quantize stage read (ΔS is
// computed from the un-quantised γK); `out` [B, Hq, q_len, head_dim] in attention_spec.out_dtype
// (HND/NHD strides, stride_dim 1); `lse` [B][Hq][q_len] fp32 when attention_spec.return_lse
// (else ignored); `delta_s_workspace` holds `delta_s_bytes` bytes (>= one chunk row; 16-byte
// aligned) when smooth-Q. Throws InvalidArgument / Unsupported (tile too big for this device's
// shared memory) before launching anything. No host synchronisation, no allocation.
void launch_attention_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                            const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                            float sm_scale, void* delta_s_workspace, std::size_t delta_s_bytes, CUstream stream);

}  // namespace sage2::runtime
