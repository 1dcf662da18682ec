// The direct small-Nq path's stage (kernels/direct.hpp): planned once per call plan, run per call with
// the call's pointers. No quantize stage runs before it; its workspace holds the splits' partials.
#pragma once

#include "kernels/direct.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/attention_stage.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_loader.hpp"

namespace sage2::runtime {

struct DirectStagePlan {
  kernels::DirectProblem problem;
  kernels::DirectLayout layout;
  KernelLaunch split, merge;  // merge.kernel stays null without a merge
};

// The pure-host part: tile, splits, workspace, launch shapes for this device. Throws like
// kernels::direct_layout.
void layout_direct_stage(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DirectDevice& device,
                         DirectStagePlan& plan);
// The device facts a layout depends on (of a Context's device, or of given facts).
kernels::DirectDevice direct_device(const DeviceFacts& facts);
kernels::DirectDevice direct_device(const Context::Impl& ctx);

// Loads (or compiles) the kernels of a laid-out plan.
void load_direct_stage(Context::Impl& ctx, DirectStagePlan& plan, BuildTier tier = BuildTier::Optimized);

// The call's parameter struct (pure host). Throws InvalidArgument like kernels::make_direct_params.
dev::DirectParams build_direct_params(const DirectStagePlan& plan, const TensorRef& q, const TensorRef& k,
                                      const TensorRef& v, const TensorRef& out, float* lse, void* workspace);

// Enqueues the split kernel and (with partials) the merge kernel, under the Context's driver scope.
void enqueue_direct_stage(const DirectStagePlan& plan, dev::DirectParams& params, CUstream stream);

}  // namespace sage2::runtime
