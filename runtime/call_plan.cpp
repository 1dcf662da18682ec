#include "runtime/call_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "base/config.hpp"
#include "base/log.hpp"
#include "kernels/attention_family.hpp"
#include "runtime/attention_plan.hpp"
#include "runtime/jit_worker.hpp"
#include "runtime/quantize_stage.hpp"

namespace sage2::runtime {
namespace {

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void layout_call_plan(const plan::AttentionProblem& problem, const kernels::KernelSpec& spec, CallPlan& p) {
  p.problem = problem;
  p.spec = spec;
  p.buffers = kernels::quant_buffers(problem.quant_problem(), p.spec);
  p.quant_bytes = align256(p.buffers.offsets().total);
  p.delta_s_bytes = align256(runtime::delta_s_workspace_bytes(p.buffers));
  layout_attention_stage(spec, p.buffers, p.delta_s_bytes, p.attention);
}

void layout_direct_call_plan(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DirectDevice& device,
                             CallPlan& p) {
  p.problem = problem;
  p.spec = kernels::KernelSpec{};
  p.buffers = kernels::QuantBuffers{};
  p.quant_bytes = p.delta_s_bytes = 0;
  p.quantize.clear();
  p.fused_quantize = false;
  p.clear_sync = false;
  layout_direct_stage(problem, arch, device, p.direct_stage);
  p.spec = p.direct_stage.layout.split_spec;
  p.direct_bytes = p.direct_stage.layout.workspace_bytes;
}

namespace {

// The plan's layout part for a Context (no kernel loaded).
void layout_plan(Context::Impl& ctx, const plan::AttentionProblem& problem, CallPlan* p) {
  if (problem.direct) return layout_direct_call_plan(problem, ctx.arch(), direct_device(ctx), *p);
  layout_call_plan(problem, plan_attention(problem, ctx), *p);
}

}  // namespace

namespace {
// Every optimized kernel of `specs` is loaded or in the disk cache: a call needs no quick tier.
bool optimized_at_hand(Context::Impl& ctx, const std::vector<kernels::KernelSpec>& specs) {
  return std::all_of(specs.begin(), specs.end(), [&](const kernels::KernelSpec& s) { return ctx.kernels().optimized_available(s); });
}
}  // namespace

std::shared_ptr<const CallPlan> build_call_plan(Context::Impl& ctx, const plan::AttentionProblem& problem,
                                                BuildTier tier) {
  auto p = std::make_shared<CallPlan>();
  layout_plan(ctx, problem, p.get());
  if (problem.direct) {  // the direct path: its two kernels, nothing else
    const std::vector<kernels::KernelSpec> specs = plan::direct_call_kernels(p->direct_stage.layout);
    if (tier == BuildTier::Quick &&
        optimized_at_hand(ctx, specs))
      tier = BuildTier::Optimized;
    load_direct_stage(ctx, p->direct_stage, tier);
    p->tier = tier;
    return p;
  }
  const kernels::QuantBuffers& b = p->buffers;
  // The attention config first: a problem it refuses loads and launches nothing.
  check_attention_stage(ctx, p->attention);

  // Every kernel of the call (plan/call_kernels.hpp: the list warm-ups compile), compiled at
  // once (a cold call waits for the slowest, not the sum).
  plan::QuantizedCallKernels call = plan::quantized_call_kernels(p->spec, ctx.config().quant_path);
  call.choose_stats_form(b, ctx.facts().sm_count);
  const std::vector<kernels::KernelSpec> specs = call.all();
  if (tier == BuildTier::Quick &&
      optimized_at_hand(ctx, specs))
    tier = BuildTier::Optimized;  // nothing to wait for: no quick tier
  std::vector<LoadedKernel*> loaded;
  if (tier == BuildTier::Quick) {
    try {
      loaded = ctx.kernels().load_all(specs, tier);
    } catch (const Error& e) {
      // The quick tier is an optimisation: a worker that cannot build (its NVRTC, its process)
      // must not fail the call, which then waits for the optimized kernels as without tiers.
      base::log::warn_once("quick-tier-failed", std::string("tiered compile: a quick build failed; this call waits for "
                                                            "the optimized kernels: ") + e.what());
      tier = BuildTier::Optimized;
    }
  }
  if (tier == BuildTier::Optimized) loaded = ctx.kernels().load_all(specs, tier);
  p->tier = tier;
  p->quantize_ops = call.ops;
  p->fused_quantize = call.ops.front() == kernels::QuantOp::Fused;
  p->clear_sync = kernels::quantize_clears_sync(call.ops, p->spec, b);
  p->quantize_l2_hints = kernels::quantize_l2_hints(b, ctx.facts().l2_bytes);
  if (p->clear_sync) {
    const kernels::QuantBuffers::Offsets o = b.offsets();
    p->sync_offset = o.sync;
    p->sync_bytes = o.sync_bytes;
  }
  for (std::size_t i = 0; i < call.quantize.size(); ++i)
    p->quantize.push_back({loaded[i], kernels::quantize_launch_shape(call.quantize[i], b, ctx.facts().sm_count)});

  // Attention stage (runtime/attention_stage.cpp).
  load_attention_stage(ctx, b, p->attention, loaded[call.quantize.size()],
                       call.delta_s ? loaded[call.quantize.size() + 1] : nullptr);
  mark_overlapping_launches(*p, base::config::process_config().overlap_launches);
  return p;
}

void mark_overlapping_launches(CallPlan& p, bool allowed) {
  // In launch order: the quantize kernels, then ΔS and attention per chunk. The first kernel of a
  // call waits for whatever the stream ran before (the caller's kernels that wrote Q, K, V).
  bool first = true;
  auto mark = [&](KernelLaunch& l, const kernels::KernelSpec& spec) {
    l.shape.overlap_previous = allowed && !first && kernels::waits_for_previous_kernel(spec);
    first = false;
  };
  for (std::size_t i = 0; i < p.quantize.size(); ++i)
    mark(p.quantize[i], kernels::quantize_spec_for(p.spec, p.quantize_ops.at(i)));
  for (std::size_t i = 0; i < p.attention.attention.size(); ++i) {
    if (!p.attention.delta_s.empty()) mark(p.attention.delta_s[i], kernels::delta_s_spec_for(p.spec));
    mark(p.attention.attention[i], p.spec);
  }
}

namespace {

plan::AttentionProblem validate_call(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                               const TensorRef& out, const AttentionParams& params, const SeqLens* lens) {
  return lens ? plan::validate_attention_varlen(q, k, v, out, *lens, params, ctx.arch())
              : plan::validate_attention(q, k, v, out, params, ctx.arch());
}

// Whether a quantized call may take the direct path's quick plan as its first tier (call_plan,
// header comment): the Context compiles in tiers and Auto sent a dense, unmasked call at a head dim
// the direct path runs to the quantized path. `direct`: that problem on the direct path.
bool direct_tier_eligible(Context::Impl& ctx, const plan::AttentionProblem& problem, const AttentionParams& params,
                          plan::AttentionProblem& direct) {
  if (!ctx.config().tiered_compile || problem.direct || problem.varlen || problem.mask != 0 ||
      problem.head_dim > kernels::kDirectMaxHeadDim || params.small_q_path != SmallQPath::Auto)
    return false;
  direct = problem;
  direct.direct = true;
  return true;
}

// The direct path's quick plan for a call direct_tier_eligible admits; null when the direct path
// cannot run it or its quick build fails (then the caller takes the quantized path's own tiers).
// Its workspace is the larger of the two paths' (as call_workspace_bytes reports for such a call):
// `final_bytes`, the quantized plan's.
std::shared_ptr<const CallPlan> quick_direct_plan(Context::Impl& ctx, const plan::AttentionProblem& direct,
                                                  std::size_t final_bytes) {
  try {
    auto p = std::const_pointer_cast<CallPlan>(build_call_plan(ctx, direct, BuildTier::Quick));
    if (p->tier != BuildTier::Quick) return nullptr;  // (its optimized kernels were at hand: not a tier)
    p->reserve_bytes = final_bytes;
    return p;
  } catch (const Error& e) {
    base::log::warn_once("quick-direct-tier-failed", std::string("tiered compile: the direct path's quick plan failed; "
                                                                 "the call takes the quantized path's tiers: ") + e.what());
    return nullptr;
  }
}

}  // namespace

std::shared_ptr<const CallPlan> call_plan(Context::Impl& ctx, const TensorRef& q, const TensorRef& k,
                                          const TensorRef& v, const TensorRef& out, const AttentionParams& params,
                                          const SeqLens* lens) {
  const plan::AttentionProblem problem = validate_call(ctx, q, k, v, out, params, lens);
  const CallSignature sig = call_signature(q, k, v, out, params, lens);
  if (auto hit = ctx.call_cache().find(sig)) return hit;
  bool tiered = ctx.config().tiered_compile && !problem.direct;
  if (tiered && jit_worker_path().empty()) {
    base::log::warn_once("tiered-compile-no-worker",
                         "ContextOptions::tiered_compile: no sage2-jit-worker beside the library and SAGE2_JIT_WORKER "
                         "unset; calls wait for the optimized kernels");
    tiered = false;
  }
  CallPlan final_layout;  // the call's own plan, without kernels (tiered only)
  if (tiered) {
    layout_plan(ctx, problem, &final_layout);
    check_attention_stage(ctx, final_layout.attention);  // a refused call fails before anything compiles
    plan::QuantizedCallKernels call = plan::quantized_call_kernels(final_layout.spec, ctx.config().quant_path);
    call.choose_stats_form(final_layout.buffers, ctx.facts().sm_count);
    tiered = !optimized_at_hand(ctx, call.all());
  }
  if (tiered) {
    // The optimized kernels compile on a background thread from now on, beside the quick ones
    // (one task per signature; no call waits for it): the optimized plan is ready a quick build
    // sooner than if it started after the first call. Whichever plan reaches the cache last
    // stays, unless it is the quick one: insert() keeps an optimized plan already there.
    Context::Impl* c = &ctx;
    ctx.background().start(sig, [c, problem, sig] {
      try {
        c->call_cache().replace(sig, build_call_plan(*c, problem, BuildTier::Optimized));
      } catch (const std::exception& e) {
        base::log::warn(std::string("the optimized kernels of a call did not build in the background; its calls keep "
                                    "the quick kernels: ") + e.what());
      }
    });
  }
  std::shared_ptr<const CallPlan> built;
  plan::AttentionProblem direct;
  if (tiered && direct_tier_eligible(ctx, problem, params, direct)) built = quick_direct_plan(ctx, direct, final_layout.total());
  if (!built) built = build_call_plan(ctx, problem, tiered ? BuildTier::Quick : BuildTier::Optimized);
  return ctx.call_cache().insert(sig, built);
}

std::size_t call_workspace_bytes(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                 const TensorRef& out, const AttentionParams& params, const SeqLens* lens) {
  const plan::AttentionProblem problem = validate_call(ctx, q, k, v, out, params, lens);
  if (auto hit = ctx.call_cache().find(call_signature(q, k, v, out, params, lens))) return hit->total();
  CallPlan p;
  layout_plan(ctx, problem, &p);
  // A call that may start on the direct path's quick plan needs room for either path.
  plan::AttentionProblem direct;
  if (direct_tier_eligible(ctx, problem, params, direct)) {
    try {
      CallPlan d;
      layout_plan(ctx, direct, &d);
      return std::max(p.total(), d.total());
    } catch (const Error&) {  // a call the direct path cannot run takes no such tier
    }
  }
  return p.total();
}

void build_call_params(const CallPlan& plan, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                       const TensorRef& out, float* lse, char* workspace, CallParams& cp, const SeqLens* lens,
                       const MaskRef* mask) {
  if (plan.problem.direct) {
    if (lens || (mask && mask->type != MaskType::None))
      throw Error(ErrorCode::InvalidArgument, "call plan: a direct-path plan run with sequence lengths or a mask");
    cp.direct = build_direct_params(plan.direct_stage, q, k, v, out, lse, workspace);
    return;
  }
  const kernels::QuantBuffers& b = plan.buffers;
  if (b.p.varlen != (lens != nullptr))
    throw Error(ErrorCode::InvalidArgument, std::string("call plan: a ") + (b.p.varlen ? "varlen" : "dense") +
                                                " plan run " + (lens ? "with" : "without") + " sequence lengths");
  cp.quantize = kernels::make_quantize_params(b, q, k, v, workspace);
  cp.quantize.l2_hints = plan.quantize_l2_hints ? 1u : 0u;
  if (lens) kernels::add_varlen_quantize_params(b, *lens, out, lse, cp.quantize);
  if (b.p.mask) {
    if (!mask) throw Error(ErrorCode::InvalidArgument, "call plan: a masked plan run without its mask");
    kernels::add_mask_quantize_params(b, *mask, cp.quantize);
  }
  build_attention_stage_params(plan.attention, b, k, workspace, out, lse, plan.problem.sm_scale,
                               workspace + plan.quant_bytes, cp.attention, mask, &q);
}

void run_call_plan(Context::Impl& ctx, const CallPlan& plan, const TensorRef& q, const TensorRef& k,
                   const TensorRef& v, const TensorRef& out, float* lse, char* workspace, CUstream stream,
                   const SeqLens* lens, const MaskRef* mask) {
  // Every parameter struct first: argument errors surface before the first launch. Thread-local
  // storage: no allocation once a thread has seen its largest chunk count.
  thread_local CallParams cp;
  build_call_params(plan, q, k, v, out, lse, workspace, cp, lens, mask);
  base::driver::ScopedContext scope(ctx.cu_context());
  if (plan.problem.direct) return enqueue_direct_stage(plan.direct_stage, cp.direct, stream);
  add_tensor_maps(plan.attention, plan.buffers, workspace, cp.attention);
  // Quantize stage.
  if (plan.clear_sync) {
    const auto sync = reinterpret_cast<CUdeviceptr>(workspace + plan.sync_offset);
    base::driver::check(base::driver::api().cuMemsetD8Async(sync, 0, plan.sync_bytes, stream), "cuMemsetD8Async (quantize sync)");
  }
  for (const CallPlan::Launch& l : plan.quantize) launch(*l.kernel, l.shape, &cp.quantize, stream);
  // ΔS and attention, per chunk.
  enqueue_attention_stage(plan.attention, cp.attention, stream);
}

}  // namespace sage2::runtime
