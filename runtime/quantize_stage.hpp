// The quantize stage of one attention call: channel statistics of K and V, then Q, K and V
// quantized into the workspace laid out by kernels::QuantBuffers, on the caller's stream.
#pragma once

#include <vector>

#include "kernels/quant_buffers.hpp"
#include "plan/call_kernels.hpp"
#include "runtime/context_impl.hpp"

namespace sage2::runtime {

// The paths (ContextOptions::quant_path, default SAGE2_QUANT_PATH; a Context resolves Auto):
//  Split: a memset of the stage's sync region (channel_stats' arrival counters), then the four
//    launches channel_stats (one CTA per statistics chunk; the last chunk of a (batch, kv head)
//    writes its statistics) → quantize_k → quantize_v → quantize_q.
//  Fused: a memset of the stage's small sync region (work ticket, arrival counters, ready flags:
//    QuantBuffers::Offsets::sync / sync_bytes) and ONE launch of sage2_quantize_fused (measured
//    11–35% slower than split on the H100: bench/NOTES.md, "Fused quantize stage").
//  Cluster: ONE launch of sage2_quantize_cluster, thread-block clusters (sm_90a, head dims up to
//    kernels::kClusterMaxHeadDim: wider rows do not fit its static shared memory).
//  Auto (the default): Split, and where the attention family can (KernelSpec::q_in_kernel, set by
//    the plan for Auto only) without quantize_q: the attention kernel quantizes Q itself. Dense
//    calls take sampled statistics (KernelSpec::sampled_stats): channel_stats reads 4 units of 64
//    keys per (batch, kv head), then quantize_v (codes with V's headroom; keys above it recorded), then
//    quantize_k, whose block 0 of each head rewrites the V channels a key exceeded.
// All write the same buffers; their channel sums differ in float rounding only (another order,
// which the CPU reference follows), everything else follows from them.
using QuantPath = sage2::QuantPath;  // public: a Context option

// The quantize kernels `path` launches for `attention_spec`, in order: plan/call_kernels.hpp.
using plan::quantize_ops;

// `workspace` is a device pointer with at least b.offsets().total bytes, 256-byte aligned. Inputs
// are device tensors matching b.p. No host synchronisation. `sm_count`: the SMs the launches plan
// for (kernels::quantize_launch_shape), -1 for the device's (0: channel_stats never in clusters,
// which lets the GPU tests run both of its forms).
void launch_quantize_stage(Context::Impl& ctx, const kernels::KernelSpec& attention_spec, const kernels::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream, QuantPath path, int sm_count = -1);
inline void launch_quantize_stage(Context::Impl& ctx, const kernels::KernelSpec& attention_spec,
                                  const kernels::QuantBuffers& b, const TensorRef& q, const TensorRef& k,
                                  const TensorRef& v, void* workspace, CUstream stream) {
  launch_quantize_stage(ctx, attention_spec, b, q, k, v, workspace, stream, ctx.config().quant_path);
}

}  // namespace sage2::runtime
