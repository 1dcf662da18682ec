#include "runtime/decode_stage.hpp"

namespace sage2::runtime {

kernels::DecodeProblem decode_problem(const plan::AttentionProblem& p) {
  kernels::DecodeProblem d;
  d.batch = p.batch;
  d.q_heads = p.q_heads;
  d.kv_heads = p.kv_heads;
  d.q_len = p.q_len;
  d.kv_len = p.kv_len;
  d.head_dim = p.head_dim;
  d.dtype = p.dtype;
  d.causal = p.causal;
  d.return_lse = p.return_lse;
  d.sm_scale = p.sm_scale;
  return d;
}

void layout_decode_stage(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DecodeDevice& device,
                         DecodeStagePlan& plan) {
  plan.problem = decode_problem(problem);
  plan.layout = kernels::decode_layout(plan.problem, arch, device);
  plan.split = {};
  plan.merge = {};
}

kernels::DecodeDevice decode_device(const Context::Impl& ctx) {
  kernels::DecodeDevice d;
  const DeviceFacts& f = ctx.facts();
  if (f.sm_count > 0) d.sm_count = f.sm_count;
  if (f.max_shared_per_block_optin > 0) d.max_smem_optin = f.max_shared_per_block_optin;
  if (f.max_shared_per_sm > 0) d.max_smem_per_sm = f.max_shared_per_sm;
  return d;
}

void load_decode_stage(Context::Impl& ctx, DecodeStagePlan& plan) {
  const kernels::DecodeLayout& l = plan.layout;
  plan.split = {&ctx.kernels().get(l.split_spec), l.split_shape};
  if (l.merge()) plan.merge = {&ctx.kernels().get(l.merge_spec), l.merge_shape};
}

dev::DecodeParams build_decode_params(const DecodeStagePlan& plan, const TensorRef& q, const TensorRef& k,
                                      const TensorRef& v, const TensorRef& out, float* lse, void* workspace) {
  return kernels::make_decode_params(plan.problem, plan.layout, q, k, v, out, lse, workspace);
}

void enqueue_decode_stage(const DecodeStagePlan& plan, dev::DecodeParams& params, CUstream stream) {
  launch(*plan.split.kernel, plan.split.shape, &params, stream);
  if (plan.merge.kernel) launch(*plan.merge.kernel, plan.merge.shape, &params, stream);
}

}  // namespace sage2::runtime
