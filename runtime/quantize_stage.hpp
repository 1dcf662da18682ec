// The quantize stage of one attention call: channel statistics of K and V, then Q, K and V
// quantized into the workspace laid out by jit::QuantBuffers, on the caller's stream.
#pragma once

#include "jit/quant_buffers.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::runtime {

// Launch order: channel_stats (K and V) → quantize_k → quantize_v → quantize_q. `workspace` is a
// device pointer with at least b.offsets().total bytes, 256-byte aligned. Inputs are device
// tensors matching b.p. No host synchronisation.
void launch_quantize_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream);

}  // namespace sage2::runtime
