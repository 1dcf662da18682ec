#include "runtime/attention_stage.hpp"

#include <string>

#include "runtime/wgmma_stage.hpp"

namespace sage2::runtime {

std::size_t delta_s_workspace_bytes(const jit::QuantBuffers& b, std::size_t cap) {
  return jit::delta_s_workspace_bytes(b, cap);
}

// Context::attention runs the same steps from a cached plan (runtime/call_plan.cpp run_call_plan):
// a change here belongs there too.
DeltaSKernel delta_s_kernel(Context::Impl& ctx, const jit::KernelSpec& attention_spec) {
  DeltaSKernel d;
  if (!attention_spec.smooth_q) return d;
  d.spec = jit::delta_s_spec_for(attention_spec);
  d.kernel = &ctx.kernels().get(d.spec);
  return d;
}

void launch_attention_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                            const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                            float sm_scale, void* delta_s_workspace, std::size_t delta_s_bytes, CUstream stream) {
  if (attention_spec.family == jit::KernelFamily::AttentionWgmma)
    return launch_wgmma_attention_stage(ctx, attention_spec, b, k_input, workspace, out, lse, sm_scale,
                                        delta_s_workspace, delta_s_bytes, stream);
  jit::KernelSpec spec = attention_spec;
  spec.arch = ctx.arch();
  jit::check_attention_config(spec, ctx.facts().max_shared_per_block_optin);
  if (spec.smooth_q && (reinterpret_cast<std::uintptr_t>(delta_s_workspace) & 15u) != 0)
    throw Error(ErrorCode::InvalidArgument, "attention stage: the ΔS workspace must be 16-byte aligned");
  const std::vector<jit::AttentionChunk> chunks = jit::attention_chunks(b, spec.smooth_q ? delta_s_bytes : 0);
  // Build every parameter struct first: argument errors surface before the first launch.
  std::vector<dev::AttentionParams> ap;
  std::vector<dev::DeltaSParams> dp;
  for (const auto& c : chunks) {
    ap.push_back(jit::make_attention_params(spec, b, workspace, out, lse, sm_scale, delta_s_workspace, c));
    if (spec.smooth_q) dp.push_back(jit::make_delta_s_params(b, workspace, k_input, delta_s_workspace, c));
  }
  driver::ScopedContext scope(ctx.cu_context());
  LoadedKernel& attn = ctx.kernels().get(spec);
  const DeltaSKernel dsk = delta_s_kernel(ctx, spec);
  LoadedKernel* ds = dsk.kernel;
  const jit::KernelSpec& ds_spec = dsk.spec;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (ds) launch(*ds, jit::delta_s_launch_shape(ds_spec, b, chunks[i]), &dp[i], stream);
    launch(attn, jit::attention_launch_shape(spec, b, chunks[i]), &ap[i], stream);
  }
}

}  // namespace sage2::runtime
