#include "runtime/direct_stage.hpp"

#include "plan/call_kernels.hpp"

namespace sage2::runtime {

void layout_direct_stage(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DirectDevice& device,
                         DirectStagePlan& plan) {
  plan.problem = problem.direct_problem();
  plan.layout = kernels::direct_layout(plan.problem, arch, device);
  plan.split = {};
  plan.merge = {};
}

kernels::DirectDevice direct_device(const Context::Impl& ctx) { return direct_device(ctx.facts()); }

kernels::DirectDevice direct_device(const DeviceFacts& f) {
  kernels::DirectDevice d;
  if (f.sm_count > 0) d.sm_count = f.sm_count;
  if (f.max_shared_per_block_optin > 0) d.max_smem_optin = f.max_shared_per_block_optin;
  if (f.max_shared_per_sm > 0) d.max_smem_per_sm = f.max_shared_per_sm;
  return d;
}

void load_direct_stage(Context::Impl& ctx, DirectStagePlan& plan, BuildTier tier) {
  const kernels::DirectLayout& l = plan.layout;
  const std::vector<LoadedKernel*> k = ctx.kernels().load_all(plan::direct_call_kernels(l), tier);  // at once when cold
  plan.split = {k[0], l.split_shape};
  if (l.merge()) plan.merge = {k[1], l.merge_shape};
}

dev::DirectParams build_direct_params(const DirectStagePlan& plan, const TensorRef& q, const TensorRef& k,
                                      const TensorRef& v, const TensorRef& out, float* lse, void* workspace) {
  return kernels::make_direct_params(plan.problem, plan.layout, q, k, v, out, lse, workspace);
}

void enqueue_direct_stage(const DirectStagePlan& plan, dev::DirectParams& params, CUstream stream) {
  launch(*plan.split.kernel, plan.split.shape, &params, stream);
  if (plan.merge.kernel) launch(*plan.merge.kernel, plan.merge.shape, &params, stream);
}

}  // namespace sage2::runtime
