// A cached attention call plan (issue 15 item 2): everything Context::attention derives from a
// call's shapes, strides, dtypes and options, resolved once per CallSignature — the validated
// problem, the kernel specs, the workspace layout, the loaded kernels (no spec.key() string and
// no loader map lookup per call), the launch shapes and the chunking. Per call only the
// pointer-dependent work remains: the parameter structs (built by the same jit::make_*_params
// as the stages, so new fields follow automatically), the wgmma tensor maps (memoised per
// workspace base pointer), the launches.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "jit/attention_shape.hpp"
#include "jit/launch_shape.hpp"
#include "jit/quant_buffers.hpp"
#include "jit/wgmma_shape.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/call_cache.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_loader.hpp"

namespace sage2::runtime {

struct CallPlan {
  AttentionProblem problem;
  jit::KernelSpec spec;  // the attention spec (arch = the Context's)
  jit::QuantBuffers buffers;
  std::size_t quant_bytes = 0, delta_s_bytes = 0;
  std::size_t total() const { return quant_bytes + delta_s_bytes; }

  struct Launch {
    LoadedKernel* kernel = nullptr;
    jit::LaunchShape shape;
  };
  bool fused_quantize = false;
  std::size_t sync_offset = 0, sync_bytes = 0;  // fused: cleared before the launch
  std::vector<Launch> quantize;                 // 1 (fused, cluster) or 4 (split) launches

  bool wgmma = false;
  std::vector<jit::AttentionChunk> chunks;
  std::vector<Launch> attention, delta_s;  // per chunk; delta_s empty without smooth-Q

  // wgmma tensor maps of the last few workspace base pointers (the maps depend on nothing else).
  struct TmaMaps {
    const void* workspace = nullptr;
    dev::TmaDesc q, k, v;
  };
  static constexpr int kTmaSlots = 4;
  mutable std::mutex tma_mu;
  mutable TmaMaps tma[kTmaSlots];
  mutable int tma_used = 0, tma_next = 0;
};

// The layout part of a plan for a planned spec (arch set): problem, spec, buffers, workspace
// sizes, family, chunks. Pure host (tests build plans with it); kernels and shapes are left empty.
void layout_call_plan(const AttentionProblem& problem, const jit::KernelSpec& spec, CallPlan& plan);

// Builds the plan of a validated problem: plans the spec, lays out the workspace, loads (or
// compiles) every kernel the call launches, computes shapes and chunks. Throws like the stages.
std::shared_ptr<const CallPlan> build_call_plan(Context::Impl& ctx, const AttentionProblem& problem);

// The Context's plan for these arguments: validates them (every call: the checks that depend on
// pointers must run each time), then finds the plan by signature or builds and caches it.
std::shared_ptr<const CallPlan> call_plan(Context::Impl& ctx, const TensorRef& q, const TensorRef& k,
                                          const TensorRef& v, const TensorRef& out, const AttentionParams& params);

// workspace_size(): the plan's total when cached, else the layout alone (no kernel is loaded).
std::size_t call_workspace_bytes(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                 const TensorRef& out, const AttentionParams& params);

// The parameter structs of one call (tensor maps not included: run_call_plan adds them).
struct CallParams {
  dev::QuantizeParams quantize{};
  std::vector<dev::AttentionParams> attention;  // per chunk (mma family)
  std::vector<dev::WgmmaAttentionParams> wgmma;  // per chunk (wgmma family; tm_* left zero)
  std::vector<dev::DeltaSParams> delta_s;        // per chunk with smooth-Q
};
// Pure host (no driver): the same structs the stages build with jit::make_*_params for these
// pointers. Reuses `cp`'s capacity. Throws InvalidArgument like the stages.
void build_call_params(const CallPlan& plan, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                       const TensorRef& out, float* lse, char* workspace, CallParams& cp);

// Enqueues the plan's launches on `stream` for these pointers (workspace: quant buffers, then
// ΔS). Builds every parameter struct first so argument errors surface before the first launch;
// allocates nothing on the host after a thread's first call.
void run_call_plan(Context::Impl& ctx, const CallPlan& plan, const TensorRef& q, const TensorRef& k,
                   const TensorRef& v, const TensorRef& out, float* lse, char* workspace, CUstream stream);

}  // namespace sage2::runtime
