#include "runtime/quantize_stage.hpp"

#include <cstdint>

#include "jit/launch_shape.hpp"

namespace sage2::runtime {

// Context::attention runs the same steps from a cached plan (runtime/call_plan.cpp run_call_plan):
// a change here belongs there too.
void launch_quantize_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream, QuantPath path) {
  dev::QuantizeParams params = jit::make_quantize_params(b, q, k, v, workspace);
  driver::ScopedContext scope(ctx.cu_context());
  if (path == QuantPath::Fused) {
    // The counters must start at zero: a memset node on the same stream (graph-capturable) is
    // robust against any workspace content — a caller's fresh buffer, a call that trapped —
    // where self-resetting counters would trust the previous call.
    const jit::QuantBuffers::Offsets o = b.offsets();
    const auto sync = reinterpret_cast<CUdeviceptr>(static_cast<char*>(workspace) + o.sync);
    driver::check(driver::api().cuMemsetD8Async(sync, 0, o.sync_bytes, stream), "cuMemsetD8Async (quantize sync)");
    const jit::KernelSpec spec = jit::quantize_spec_for(attention_spec, jit::QuantOp::Fused);
    LoadedKernel& kernel = ctx.kernels().get(spec);
    launch(kernel, jit::quantize_launch_shape(spec, b), &params, stream);
    return;
  }
  for (jit::QuantOp op : {jit::QuantOp::ChannelStats, jit::QuantOp::QuantizeK, jit::QuantOp::QuantizeV,
                          jit::QuantOp::QuantizeQ}) {
    const jit::KernelSpec spec = jit::quantize_spec_for(attention_spec, op);
    LoadedKernel& kernel = ctx.kernels().get(spec);
    launch(kernel, jit::quantize_launch_shape(spec, b), &params, stream);
  }
}

}  // namespace sage2::runtime
