#include "runtime/quantize_stage.hpp"

#include "jit/launch_shape.hpp"

namespace sage2::runtime {

void launch_quantize_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                           const TensorRef& q, const TensorRef& k, const TensorRef& v, void* workspace,
                           CUstream stream) {
  dev::QuantizeParams params = jit::make_quantize_params(b, q, k, v, workspace);
  driver::ScopedContext scope(ctx.cu_context());
  for (jit::QuantOp op : {jit::QuantOp::ChannelStats, jit::QuantOp::QuantizeK, jit::QuantOp::QuantizeV,
                          jit::QuantOp::QuantizeQ}) {
    const jit::KernelSpec spec = jit::quantize_spec_for(attention_spec, op);
    LoadedKernel& kernel = ctx.kernels().get(spec);
    launch(kernel, jit::quantize_launch_shape(spec, b), &params, stream);
  }
}

}  // namespace sage2::runtime
