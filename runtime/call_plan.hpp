// A cached attention call plan (issue 15 item 2): everything Context::attention derives from a
// call's shapes, strides, dtypes and options, resolved once per CallSignature — the validated
// problem, the kernel specs, the workspace layout, the loaded kernels (no spec.key() string and
// no loader map lookup per call), the launch shapes and the chunking. Per call only the
// pointer-dependent work remains: the parameter structs (built by the same functions as the
// stages, so new fields follow automatically), the family's tensor maps (memoised per workspace
// base pointer), the launches. The attention part is the generic stage's plan
// (runtime/attention_stage.hpp): the family's descriptor and kernel config, computed once here.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/quantize_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/attention_stage.hpp"
#include "runtime/call_cache.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/direct_stage.hpp"
#include "runtime/kernel_loader.hpp"

namespace sage2::runtime {

struct CallPlan {
  plan::AttentionProblem problem;
  kernels::KernelSpec spec;  // the attention spec (arch = the Context's)
  kernels::QuantBuffers buffers;
  std::size_t quant_bytes = 0, delta_s_bytes = 0;
  // problem.direct: the direct small-Nq path (runtime/direct_stage.hpp) instead of everything
  // below — no quantize stage, no ΔS, its workspace the splits' partials (direct_bytes).
  std::size_t direct_bytes = 0;
  DirectStagePlan direct_stage;
  // A quick direct-path plan standing in for a quantized one (call_plan's first tier) reports at
  // least the quantized plan's workspace (a caller's buffer sized before the first call fits both).
  std::size_t reserve_bytes = 0;
  std::size_t total() const {
    const std::size_t used = quant_bytes + delta_s_bytes + direct_bytes;
    return used > reserve_bytes ? used : reserve_bytes;
  }

  using Launch = KernelLaunch;
  bool fused_quantize = false;
  bool clear_sync = false;                      // kernels::quantize_clears_sync(quantize_ops)
  std::size_t sync_offset = 0, sync_bytes = 0;  // cleared before the stage when clear_sync
  std::vector<Launch> quantize;                 // 1 (fused, cluster) or 3-4 (split) launches
  std::vector<kernels::QuantOp> quantize_ops;       // their ops
  bool quantize_l2_hints = false;                   // kernels::quantize_l2_hints on this device

  // ΔS + attention: the spec's family descriptor, its kernel config, chunks, launches, tensor maps.
  AttentionStagePlan attention;
  // The kernels' build tier (ContextOptions::tiered_compile): Quick until the optimized plan
  // replaces this one in the Context's call cache.
  BuildTier tier = BuildTier::Optimized;
};

// The layout part of a plan for a planned spec (arch set): problem, spec, buffers, workspace
// sizes, family, kernel config, chunks. Pure host (no driver); kernels and shapes are left empty.
void layout_call_plan(const plan::AttentionProblem& problem, const kernels::KernelSpec& spec, CallPlan& plan);
// The same for a problem on the direct path (problem.direct): the direct stage's layout for this
// device; no quantize or attention stage.
void layout_direct_call_plan(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DirectDevice& device,
                             CallPlan& plan);

// Sets LaunchShape::overlap_previous on every launch of the plan after the first whose kernel
// waits for its predecessor (kernels::waits_for_previous_kernel), when `allowed` (the process switch
// SAGE2_DISABLE_LAUNCH_OVERLAP clears it); clears it everywhere else.
void mark_overlapping_launches(CallPlan& plan, bool allowed);

// Builds the plan of a validated problem: plans the spec, lays out the workspace, loads (or
// compiles) every kernel the call launches, computes shapes and chunks. Throws like the stages.
// tier Quick (the tiered compile): the quick builds of the call's kernels, unless every optimized
// one is already loaded or in the disk cache (then those: CallPlan::tier says which); for a
// problem on the direct path, the quick builds of its kernels.
std::shared_ptr<const CallPlan> build_call_plan(Context::Impl& ctx, const plan::AttentionProblem& problem,
                                                BuildTier tier = BuildTier::Optimized);

// The Context's plan for these arguments: validates them (every call: the checks that depend on
// pointers must run each time), then finds the plan by signature or builds and caches it. With
// ContextOptions::tiered_compile a new plan may run quick kernels; the optimized plan is built on a
// background thread (Context::Impl::background), started before the quick builds so that both
// compile at once, and replaces it in the cache. The quick plan
// of a dense, unmasked call at head dim <= 512 (kernels::kDirectMaxHeadDim) that Auto sends to the
// quantized path is the direct path's (one or two kernels, nothing to quantize: the fastest first
// tier to build; its workspace the larger of the two paths'); otherwise the quick builds of the
// call's own kernels.
// `lens`: a varlen call's (validate_attention_varlen), null for a dense call.
std::shared_ptr<const CallPlan> call_plan(Context::Impl& ctx, const TensorRef& q, const TensorRef& k,
                                          const TensorRef& v, const TensorRef& out, const AttentionParams& params,
                                          const SeqLens* lens = nullptr);

// workspace_size(): the plan's total when cached, else the layout alone (no kernel is loaded); for a
// call the direct path's quick plan may start (tiered compile), the larger of both paths' layouts.
std::size_t call_workspace_bytes(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                 const TensorRef& out, const AttentionParams& params, const SeqLens* lens = nullptr);

// The parameter structs of one call (tensor maps not included: run_call_plan adds them).
struct CallParams {
  dev::QuantizeParams quantize{};
  AttentionStageParams attention;  // per chunk: the family's struct, and ΔS's with smooth-Q
  dev::DirectParams direct{};      // the direct path's (quantize and attention stay empty then)
};
// Pure host (no driver): the same structs the stages build for these pointers. Reuses `cp`'s
// capacity. Throws InvalidArgument like the stages.
void build_call_params(const CallPlan& plan, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                       const TensorRef& out, float* lse, char* workspace, CallParams& cp,
                       const SeqLens* lens = nullptr, const MaskRef* mask = nullptr);

// Enqueues the plan's launches on `stream` for these pointers (workspace: quant buffers, then
// ΔS). Builds every parameter struct first so argument errors surface before the first launch;
// allocates nothing on the host after a thread's first call.
void run_call_plan(Context::Impl& ctx, const CallPlan& plan, const TensorRef& q, const TensorRef& k,
                   const TensorRef& v, const TensorRef& out, float* lse, char* workspace, CUstream stream,
                   const SeqLens* lens = nullptr, const MaskRef* mask = nullptr);

}  // namespace sage2::runtime
