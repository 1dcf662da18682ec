#include "runtime/call_plan.hpp"

#include <cstdint>

#include "runtime/attention_plan.hpp"
#include "runtime/attention_stage.hpp"
#include "runtime/quantize_stage.hpp"
#include "runtime/wgmma_stage.hpp"

namespace sage2::runtime {
namespace {

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void layout_call_plan(const AttentionProblem& problem, const jit::KernelSpec& spec, CallPlan& p) {
  p.problem = problem;
  p.spec = spec;
  jit::QuantProblem qp;
  qp.batch = problem.batch;
  qp.q_heads = problem.q_heads;
  qp.kv_heads = problem.kv_heads;
  qp.q_len = problem.q_len;
  qp.kv_len = problem.kv_len;
  qp.head_dim = problem.head_dim;
  p.buffers = jit::quant_buffers(qp, p.spec);
  p.quant_bytes = align256(p.buffers.offsets().total);
  p.delta_s_bytes = align256(runtime::delta_s_workspace_bytes(p.buffers));
  p.wgmma = spec.family == jit::KernelFamily::AttentionWgmma;
  p.chunks = jit::attention_chunks(p.buffers, spec.smooth_q ? p.delta_s_bytes : 0);
}

namespace {

// The plan's layout part for a Context (no kernel loaded).
void layout_plan(Context::Impl& ctx, const AttentionProblem& problem, CallPlan* p) {
  jit::KernelSpec spec = plan_attention(problem, ctx);
  spec.arch = ctx.arch();
  layout_call_plan(problem, spec, *p);
}

}  // namespace

std::shared_ptr<const CallPlan> build_call_plan(Context::Impl& ctx, const AttentionProblem& problem) {
  auto p = std::make_shared<CallPlan>();
  layout_plan(ctx, problem, p.get());
  const jit::QuantBuffers& b = p->buffers;
  const jit::KernelSpec& spec = p->spec;
  // The attention config first: a problem it refuses loads and launches nothing.
  if (p->wgmma)
    jit::check_wgmma_config(spec, ctx.facts().max_shared_per_block_optin);
  else
    jit::check_attention_config(spec, ctx.facts().max_shared_per_block_optin);

  // Quantize stage (runtime/quantize_stage.cpp).
  const std::vector<jit::QuantOp> ops = quantize_ops(ctx.config().quant_path, spec);
  p->fused_quantize = ops.front() == jit::QuantOp::Fused;
  if (p->fused_quantize) {
    const jit::QuantBuffers::Offsets o = b.offsets();
    p->sync_offset = o.sync;
    p->sync_bytes = o.sync_bytes;
  }
  for (jit::QuantOp op : ops) {
    const jit::KernelSpec s = jit::quantize_spec_for(p->spec, op);
    p->quantize.push_back({&ctx.kernels().get(s), jit::quantize_launch_shape(s, b)});
  }

  // Attention stage (runtime/attention_stage.cpp, runtime/wgmma_stage.cpp).
  LoadedKernel& attn = ctx.kernels().get(spec);
  const DeltaSKernel dsk = delta_s_kernel(ctx, spec);
  LoadedKernel* ds = dsk.kernel;
  const jit::KernelSpec& ds_spec = dsk.spec;
  for (const auto& c : p->chunks) {
    p->attention.push_back(
        {&attn, p->wgmma ? jit::wgmma_launch_shape(spec, b, c) : jit::attention_launch_shape(spec, b, c)});
    if (ds) p->delta_s.push_back({ds, jit::delta_s_launch_shape(ds_spec, b, c)});
  }
  return p;
}

std::shared_ptr<const CallPlan> call_plan(Context::Impl& ctx, const TensorRef& q, const TensorRef& k,
                                          const TensorRef& v, const TensorRef& out, const AttentionParams& params) {
  const AttentionProblem problem = validate_attention(q, k, v, out, params, ctx.arch());
  const CallSignature sig = call_signature(q, k, v, out, params);
  if (auto hit = ctx.call_cache().find(sig)) return hit;
  return ctx.call_cache().insert(sig, build_call_plan(ctx, problem));
}

std::size_t call_workspace_bytes(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                 const TensorRef& out, const AttentionParams& params) {
  const AttentionProblem problem = validate_attention(q, k, v, out, params, ctx.arch());
  if (auto hit = ctx.call_cache().find(call_signature(q, k, v, out, params))) return hit->total();
  CallPlan p;
  layout_plan(ctx, problem, &p);
  return p.total();
}

namespace {

// The wgmma tensor maps for this workspace: memoised per plan (encoded under the caller's scope).
void tma_maps(const CallPlan& plan, const void* workspace, dev::TmaDesc& q, dev::TmaDesc& k, dev::TmaDesc& v) {
  std::lock_guard<std::mutex> lock(plan.tma_mu);
  for (int i = 0; i < plan.tma_used; ++i) {
    const CallPlan::TmaMaps& m = plan.tma[i];
    if (m.workspace == workspace) {
      q = m.q;
      k = m.k;
      v = m.v;
      return;
    }
  }
  const jit::WgmmaTmaSpecs t = jit::wgmma_tma_specs(plan.spec, plan.buffers, workspace);
  CallPlan::TmaMaps m;
  m.workspace = workspace;
  encode_tma_map(t.q, m.q);
  encode_tma_map(t.k, m.k);
  encode_tma_map(t.v, m.v);
  const int slot = plan.tma_used < CallPlan::kTmaSlots ? plan.tma_used++ : plan.tma_next;
  plan.tma_next = (slot + 1) % CallPlan::kTmaSlots;
  plan.tma[slot] = m;
  q = m.q;
  k = m.k;
  v = m.v;
}

}  // namespace

void build_call_params(const CallPlan& plan, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                       const TensorRef& out, float* lse, char* workspace, CallParams& cp) {
  const jit::QuantBuffers& b = plan.buffers;
  const jit::KernelSpec& spec = plan.spec;
  const float sm_scale = plan.problem.sm_scale;
  void* ds_ws = workspace + plan.quant_bytes;
  if (spec.smooth_q && (reinterpret_cast<std::uintptr_t>(ds_ws) & 15u) != 0)
    throw Error(ErrorCode::InvalidArgument, "attention stage: the ΔS workspace must be 16-byte aligned");
  cp.quantize = jit::make_quantize_params(b, q, k, v, workspace);
  cp.attention.clear();
  cp.wgmma.clear();
  cp.delta_s.clear();
  for (const auto& c : plan.chunks) {
    if (plan.wgmma)
      cp.wgmma.push_back(jit::make_wgmma_params(spec, b, workspace, out, lse, sm_scale, ds_ws, c));
    else
      cp.attention.push_back(jit::make_attention_params(spec, b, workspace, out, lse, sm_scale, ds_ws, c));
    if (spec.smooth_q) cp.delta_s.push_back(jit::make_delta_s_params(b, workspace, k, ds_ws, c));
  }
}

void run_call_plan(Context::Impl& ctx, const CallPlan& plan, const TensorRef& q, const TensorRef& k,
                   const TensorRef& v, const TensorRef& out, float* lse, char* workspace, CUstream stream) {
  // Every parameter struct first: argument errors surface before the first launch. Thread-local
  // storage: no allocation once a thread has seen its largest chunk count.
  thread_local CallParams cp;
  build_call_params(plan, q, k, v, out, lse, workspace, cp);
  driver::ScopedContext scope(ctx.cu_context());
  if (plan.wgmma) {
    dev::TmaDesc tq, tk, tv;
    tma_maps(plan, workspace, tq, tk, tv);
    for (auto& p : cp.wgmma) {
      p.tm_q = tq;
      p.tm_k = tk;
      p.tm_v = tv;
    }
  }
  // Quantize stage.
  if (plan.fused_quantize) {
    const auto sync = reinterpret_cast<CUdeviceptr>(workspace + plan.sync_offset);
    driver::check(driver::api().cuMemsetD8Async(sync, 0, plan.sync_bytes, stream), "cuMemsetD8Async (quantize sync)");
  }
  for (const CallPlan::Launch& l : plan.quantize) launch(*l.kernel, l.shape, &cp.quantize, stream);
  // ΔS and attention, per chunk.
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    if (!plan.delta_s.empty()) launch(*plan.delta_s[i].kernel, plan.delta_s[i].shape, &cp.delta_s[i], stream);
    void* params = plan.wgmma ? static_cast<void*>(&cp.wgmma[i]) : static_cast<void*>(&cp.attention[i]);
    launch(*plan.attention[i].kernel, plan.attention[i].shape, params, stream);
  }
}

}  // namespace sage2::runtime
