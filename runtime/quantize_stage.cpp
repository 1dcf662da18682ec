#include "runtime/quantize_stage.hpp"

#include <cstdint>

#include "kernels/quantize_shape.hpp"

namespace sage2::runtime {

// Context::attention runs the same steps from a cached plan (runtime/call_plan.cpp run_call_plan):
// a change here belongs there too.
void launch_quantize_stage(Context::Impl& ctx, const kernels::KernelSpec& attention_spec, const kernels::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream, QuantPath path, int sm_count) {
  if (b.p.varlen || b.p.mask)
    throw Error(ErrorCode::InvalidArgument,
                "launch_quantize_stage: varlen or masked buffers need the call's lengths or mask (run_call_plan)");
  const std::vector<kernels::QuantOp> ops = quantize_ops(path, attention_spec);
  dev::QuantizeParams params = kernels::make_quantize_params(b, q, k, v, workspace);
  params.l2_hints = kernels::quantize_l2_hints(b, ctx.facts().l2_bytes) ? 1u : 0u;
  base::driver::ScopedContext scope(ctx.cu_context());
  if (kernels::quantize_clears_sync(ops, attention_spec, b)) {
    // The counters must start at zero: a memset node on the same stream (graph-capturable) is
    // robust against any workspace content — a caller's fresh buffer, a call that trapped —
    // where self-resetting counters would trust the previous call.
    const kernels::QuantBuffers::Offsets o = b.offsets();
    const auto sync = reinterpret_cast<CUdeviceptr>(static_cast<char*>(workspace) + o.sync);
    base::driver::check(base::driver::api().cuMemsetD8Async(sync, 0, o.sync_bytes, stream), "cuMemsetD8Async (quantize sync)");
  }
  const int sms = sm_count < 0 ? ctx.facts().sm_count : sm_count;
  for (kernels::QuantOp op : ops) {
    const kernels::KernelSpec spec = op == kernels::QuantOp::ChannelStats ? kernels::stats_spec_for(attention_spec, b, sms)
                                                                          : kernels::quantize_spec_for(attention_spec, op);
    LoadedKernel& kernel = ctx.kernels().get(spec);
    launch(kernel, kernels::quantize_launch_shape(spec, b, sms), &params, stream);
  }
}

}  // namespace sage2::runtime
