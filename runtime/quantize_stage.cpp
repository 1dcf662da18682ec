#include "runtime/quantize_stage.hpp"

#include <cstdint>

#include "kernels/quantize_shape.hpp"

namespace sage2::runtime {

std::vector<kernels::QuantOp> quantize_ops(QuantPath path, const kernels::KernelSpec& attention_spec) {
  const bool cluster_ok = kernels::cluster_quantize_supported(attention_spec);
  // Auto is split everywhere for now: on the H100 the cluster stage measured 2.0x (1K) to 1.9x
  // (32K) the split stage's time (bench/NOTES.md, "Cluster quantize stage").
  if (path == QuantPath::Auto) path = QuantPath::Split;
  if (attention_spec.q_in_kernel) {
    // The attention kernel quantizes Q: the split path without quantize_q (the one-launch stages
    // write Q̂ buffers such a plan does not have).
    if (path != QuantPath::Split)
      throw Error(ErrorCode::InvalidArgument, std::string("quantize path ") + quant_path_name(path) +
                                                  " with an attention spec that quantizes Q itself (" +
                                                  attention_spec.key() + ")");
    std::vector<kernels::QuantOp> ops{kernels::QuantOp::ChannelStats, kernels::QuantOp::QuantizeK, kernels::QuantOp::QuantizeV};
    if (attention_spec.mask) ops.insert(ops.begin(), kernels::QuantOp::MaskTiles);
    return ops;
  }
  if (attention_spec.varlen) {
    // Varlen: the split kernels over packed blocks, channel_stats's first CTA building the table of
    // the caller's lengths (the one-launch stages schedule uniform (batch, kv head) groups).
    if (path != QuantPath::Split)
      throw Error(ErrorCode::Unsupported, std::string("quantize path ") + quant_path_name(path) +
                                              " (ContextOptions::quant_path or SAGE2_QUANT_PATH) does not run varlen "
                                              "calls; use auto or split");
    return {kernels::QuantOp::ChannelStats, kernels::QuantOp::QuantizeK, kernels::QuantOp::QuantizeV, kernels::QuantOp::QuantizeQ};
  }
  if (path == QuantPath::Cluster && !cluster_ok)
    throw Error(ErrorCode::Unsupported,
                "quantize path cluster (ContextOptions::quant_path or SAGE2_QUANT_PATH) runs on sm_90a up to head dim " +
                    std::to_string(kernels::kClusterMaxHeadDim) + "; this call has head_dim=" +
                    std::to_string(attention_spec.head_dim) + " on " + kernels::arch_name(attention_spec.arch) +
                    " (use auto or split)");
  if (attention_spec.mask) {
    // The mask's tile classes first (read by the attention kernel only), then the path's kernels.
    std::vector<kernels::QuantOp> ops = quantize_ops(path, [&] {
      kernels::KernelSpec s = attention_spec;
      s.mask = 0;
      return s;
    }());
    ops.insert(ops.begin(), kernels::QuantOp::MaskTiles);
    return ops;
  }
  switch (path) {
    case QuantPath::Split:
      return {kernels::QuantOp::ChannelStats, kernels::QuantOp::QuantizeK, kernels::QuantOp::QuantizeV, kernels::QuantOp::QuantizeQ};
    case QuantPath::Fused: return {kernels::QuantOp::Fused};
    case QuantPath::Cluster: return {kernels::QuantOp::Cluster};
    case QuantPath::Auto: break;
  }
  throw Error(ErrorCode::Internal, std::string("quantize stage: path ") + quant_path_name(path));
}

// Context::attention runs the same steps from a cached plan (runtime/call_plan.cpp run_call_plan):
// a change here belongs there too.
void launch_quantize_stage(Context::Impl& ctx, const kernels::KernelSpec& attention_spec, const kernels::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream, QuantPath path) {
  if (b.p.varlen || b.p.mask)
    throw Error(ErrorCode::InvalidArgument,
                "launch_quantize_stage: varlen or masked buffers need the call's lengths or mask (run_call_plan)");
  const std::vector<kernels::QuantOp> ops = quantize_ops(path, attention_spec);
  dev::QuantizeParams params = kernels::make_quantize_params(b, q, k, v, workspace);
  base::driver::ScopedContext scope(ctx.cu_context());
  if (ops.front() == kernels::QuantOp::Fused) {
    // The counters must start at zero: a memset node on the same stream (graph-capturable) is
    // robust against any workspace content — a caller's fresh buffer, a call that trapped —
    // where self-resetting counters would trust the previous call.
    const kernels::QuantBuffers::Offsets o = b.offsets();
    const auto sync = reinterpret_cast<CUdeviceptr>(static_cast<char*>(workspace) + o.sync);
    base::driver::check(base::driver::api().cuMemsetD8Async(sync, 0, o.sync_bytes, stream), "cuMemsetD8Async (quantize sync)");
  }
  for (kernels::QuantOp op : ops) {
    const kernels::KernelSpec spec = kernels::quantize_spec_for(attention_spec, op);
    LoadedKernel& kernel = ctx.kernels().get(spec);
    launch(kernel, kernels::quantize_launch_shape(spec, b), &params, stream);
  }
}

}  // namespace sage2::runtime
