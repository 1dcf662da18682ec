// The quantize stage of one attention call: channel statistics of K and V, then Q, K and V
// quantized into the workspace laid out by jit::QuantBuffers, on the caller's stream.
#pragma once

#include "jit/quant_buffers.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::runtime {

// Split (default): the four launches channel_stats → quantize_k → quantize_v → quantize_q.
// Fused (ContextOptions::quant_path, default SAGE2_QUANT_PATH): a memset of the stage's small sync region (work ticket, arrival
// counters, ready flags: QuantBuffers::Offsets::sync / sync_bytes) and ONE launch of
// sage2_quantize_fused. Both write the same buffers; their channel sums differ in float rounding
// only (another order), everything else follows from them. Split is the default on the evidence:
// on the H100 the fused stage measured 11–35% slower (bench/NOTES.md, "Fused quantize stage").
using QuantPath = sage2::QuantPath;  // public: a Context option

// `workspace` is a device pointer with at least b.offsets().total bytes, 256-byte aligned. Inputs
// are device tensors matching b.p. No host synchronisation.
void launch_quantize_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream, QuantPath path);
inline void launch_quantize_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec,
                                  const jit::QuantBuffers& b, const TensorRef& q, const TensorRef& k,
                                  const TensorRef& v, void* workspace, CUstream stream) {
  launch_quantize_stage(ctx, attention_spec, b, q, k, v, workspace, stream, ctx.config().quant_path);
}

}  // namespace sage2::runtime
