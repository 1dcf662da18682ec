// The direct small-Nq path's stage (kernels/decode.hpp): planned once per call plan, run per call with
// the call's pointers. No quantize stage runs before it; its workspace holds the splits' partials.
#pragma once

#include "kernels/decode.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/attention_stage.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_loader.hpp"

namespace sage2::runtime {

struct DecodeStagePlan {
  kernels::DecodeProblem problem;
  kernels::DecodeLayout layout;
  KernelLaunch split, merge;  // merge.kernel stays null without a merge
};

// The pure-host part: tile, splits, workspace, launch shapes for this device. Throws like
// kernels::decode_layout.
void layout_decode_stage(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DecodeDevice& device,
                         DecodeStagePlan& plan);
// The device facts of a Context the layout depends on.
kernels::DecodeDevice decode_device(const Context::Impl& ctx);

// Loads (or compiles) the kernels of a laid-out plan.
void load_decode_stage(Context::Impl& ctx, DecodeStagePlan& plan);

// The call's parameter struct (pure host). Throws InvalidArgument like kernels::make_decode_params.
dev::DecodeParams build_decode_params(const DecodeStagePlan& plan, const TensorRef& q, const TensorRef& k,
                                      const TensorRef& v, const TensorRef& out, float* lse, void* workspace);

// Enqueues the split kernel and (with partials) the merge kernel, under the Context's driver scope.
void enqueue_decode_stage(const DecodeStagePlan& plan, dev::DecodeParams& params, CUstream stream);

}  // namespace sage2::runtime
