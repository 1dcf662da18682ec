#include "runtime/direct_stage.hpp"

namespace sage2::runtime {

void layout_direct_stage(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DirectDevice& device,
                         DirectStagePlan& plan) {
  plan.problem = problem.direct_problem();
  plan.layout = kernels::direct_layout(plan.problem, arch, device);
  plan.split = {};
  plan.merge = {};
}

kernels::DirectDevice direct_device(const Context::Impl& ctx) {
  kernels::DirectDevice d;
  const DeviceFacts& f = ctx.facts();
  if (f.sm_count > 0) d.sm_count = f.sm_count;
  if (f.max_shared_per_block_optin > 0) d.max_smem_optin = f.max_shared_per_block_optin;
  if (f.max_shared_per_sm > 0) d.max_smem_per_sm = f.max_shared_per_sm;
  return d;
}

void load_direct_stage(Context::Impl& ctx, DirectStagePlan& plan) {
  const kernels::DirectLayout& l = plan.layout;
  // Both compiled at once when cold.
  const std::vector<LoadedKernel*> k =
      ctx.kernels().load_all(l.merge() ? std::vector<kernels::KernelSpec>{l.split_spec, l.merge_spec}
                                       : std::vector<kernels::KernelSpec>{l.split_spec});
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
