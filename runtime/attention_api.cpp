// Context::attention: validate → plan (kernel specs) → workspace → quantize → ΔS → attention,
// all enqueued on the caller's stream without host synchronisation.
#include "jit/attention_shape.hpp"
#include "jit/quant_buffers.hpp"
#include "runtime/attention_stage.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/attention_plan.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/quantize_stage.hpp"

namespace sage2 {
namespace {

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

struct CallLayout {
  runtime::AttentionProblem problem;
  jit::KernelSpec spec;
  jit::QuantBuffers buffers;
  std::size_t quant_bytes = 0, delta_s_bytes = 0;
  std::size_t total() const { return quant_bytes + delta_s_bytes; }
};

CallLayout layout_call(const Context::Impl& impl, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                       const TensorRef& out, const AttentionParams& params) {
  CallLayout c;
  c.problem = runtime::validate_attention(q, k, v, out, params, impl.arch());
  c.spec = runtime::plan_attention(c.problem, impl);
  jit::QuantProblem qp;
  qp.batch = c.problem.batch;
  qp.q_heads = c.problem.q_heads;
  qp.kv_heads = c.problem.kv_heads;
  qp.q_len = c.problem.q_len;
  qp.kv_len = c.problem.kv_len;
  qp.head_dim = c.problem.head_dim;
  c.buffers = jit::quant_buffers(qp, c.spec);
  c.quant_bytes = align256(c.buffers.offsets().total);
  c.delta_s_bytes = align256(runtime::delta_s_workspace_bytes(c.buffers));
  return c;
}

}  // namespace

std::size_t Context::workspace_size(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                                    const AttentionParams& params) const {
  return layout_call(*impl_, q, k, v, out, params).total();
}

void Context::attention(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& out,
                        const AttentionParams& params, CUstream_st* stream) {
  Impl& impl = *impl_;
  const CallLayout c = layout_call(impl, q, k, v, out, params);
  runtime::check_pointers_on_device(impl, q, k, v, out, params.lse);
  char* ws;
  if (params.workspace) {
    if (params.workspace_bytes < c.total())
      throw Error(ErrorCode::InvalidArgument, "params.workspace_bytes=" + std::to_string(params.workspace_bytes) +
                                                  " is smaller than workspace_size()=" + std::to_string(c.total()));
    ws = static_cast<char*>(params.workspace);
  } else {
    ws = static_cast<char*>(impl.workspace().get(stream, c.total()));
  }
  runtime::launch_quantize_stage(impl, c.spec, c.buffers, q, k, v, ws, stream);
  runtime::launch_attention_stage(impl, c.spec, c.buffers, k, ws, out, params.lse, c.problem.sm_scale,
                                  ws + c.quant_bytes, c.delta_s_bytes, stream);
}

}  // namespace sage2
