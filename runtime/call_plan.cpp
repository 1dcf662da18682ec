#include "runtime/call_plan.hpp"

#include <cstdint>

#include "base/config.hpp"
#include "kernels/attention_family.hpp"
#include "runtime/attention_plan.hpp"
#include "runtime/quantize_stage.hpp"
#include "runtime/side_streams.hpp"

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

void layout_direct_call_plan(const plan::AttentionProblem& problem, kernels::Arch arch, const kernels::DecodeDevice& device,
                             CallPlan& p) {
  p.problem = problem;
  p.spec = kernels::KernelSpec{};
  p.buffers = kernels::QuantBuffers{};
  p.quant_bytes = p.delta_s_bytes = 0;
  p.quantize.clear();
  p.fused_quantize = false;
  layout_decode_stage(problem, arch, device, p.decode);
  p.spec = p.decode.layout.split_spec;
  p.decode_bytes = p.decode.layout.workspace_bytes;
}

namespace {

// The plan's layout part for a Context (no kernel loaded).
void layout_plan(Context::Impl& ctx, const plan::AttentionProblem& problem, CallPlan* p) {
  if (problem.direct) return layout_direct_call_plan(problem, ctx.arch(), decode_device(ctx), *p);
  layout_call_plan(problem, plan_attention(problem, ctx), *p);
}

}  // namespace

namespace {

// The plan of the whole call, without pipelining.
std::shared_ptr<CallPlan> build_whole_call_plan(Context::Impl& ctx, const plan::AttentionProblem& problem) {
  auto p = std::make_shared<CallPlan>();
  layout_plan(ctx, problem, p.get());
  if (problem.direct) {  // the direct path: its two kernels, nothing else
    load_decode_stage(ctx, p->decode);
    return p;
  }
  const kernels::QuantBuffers& b = p->buffers;
  // The attention config first: a problem it refuses loads and launches nothing.
  check_attention_stage(ctx, p->attention);

  // Quantize stage (runtime/quantize_stage.cpp).
  const std::vector<kernels::QuantOp> ops = quantize_ops(ctx.config().quant_path, p->spec);
  p->quantize_ops = ops;
  p->fused_quantize = ops.front() == kernels::QuantOp::Fused;
  if (p->fused_quantize) {
    const kernels::QuantBuffers::Offsets o = b.offsets();
    p->sync_offset = o.sync;
    p->sync_bytes = o.sync_bytes;
  }
  for (kernels::QuantOp op : ops) {
    const kernels::KernelSpec s = kernels::quantize_spec_for(p->spec, op);
    p->quantize.push_back({&ctx.kernels().get(s), kernels::quantize_launch_shape(s, b)});
  }

  // Attention stage (runtime/attention_stage.cpp).
  load_attention_stage(ctx, b, p->attention);
  mark_overlapping_launches(*p, base::config::process_config().overlap_launches);
  return p;
}

}  // namespace

std::shared_ptr<const CallPlan> build_call_plan(Context::Impl& ctx, const plan::AttentionProblem& problem) {
  std::shared_ptr<CallPlan> p = build_whole_call_plan(ctx, problem);
  const plan::PipelineCut cut = plan::pipeline_cut(problem, base::config::process_config().pipeline_chunks);
  if (cut.chunks > 1) {
    std::shared_ptr<CallPlan> c = build_whole_call_plan(ctx, cut.chunk_problem(problem));
    // A chunk's first kernel on the caller's stream follows an event wait: it must not start
    // early beside the previous chunk's attention kernel (programmatic launch orders kernels,
    // not events), so it waits for the stream as a plain launch does.
    KernelLaunch& first = c->attention.delta_s.empty() ? c->attention.attention.front() : c->attention.delta_s.front();
    first.shape.overlap_previous = false;
    p->pipeline = cut;
    p->chunk = std::move(c);
  }
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

}  // namespace

std::shared_ptr<const CallPlan> call_plan(Context::Impl& ctx, const TensorRef& q, const TensorRef& k,
                                          const TensorRef& v, const TensorRef& out, const AttentionParams& params,
                                          const SeqLens* lens) {
  const plan::AttentionProblem problem = validate_call(ctx, q, k, v, out, params, lens);
  const CallSignature sig = call_signature(q, k, v, out, params, lens);
  if (auto hit = ctx.call_cache().find(sig)) return hit;
  return ctx.call_cache().insert(sig, build_call_plan(ctx, problem));
}

std::size_t call_workspace_bytes(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                 const TensorRef& out, const AttentionParams& params, const SeqLens* lens) {
  const plan::AttentionProblem problem = validate_call(ctx, q, k, v, out, params, lens);
  if (auto hit = ctx.call_cache().find(call_signature(q, k, v, out, params, lens))) return hit->total();
  CallPlan p;
  layout_plan(ctx, problem, &p);
  return p.total();
}

void build_call_params(const CallPlan& plan, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                       const TensorRef& out, float* lse, char* workspace, CallParams& cp, const SeqLens* lens,
                       const MaskRef* mask) {
  if (plan.problem.direct) {
    if (lens || (mask && mask->type != MaskType::None))
      throw Error(ErrorCode::InvalidArgument, "call plan: a direct-path plan run with sequence lengths or a mask");
    cp.decode = build_decode_params(plan.decode, q, k, v, out, lse, workspace);
    return;
  }
  const kernels::QuantBuffers& b = plan.buffers;
  if (b.p.varlen != (lens != nullptr))
    throw Error(ErrorCode::InvalidArgument, std::string("call plan: a ") + (b.p.varlen ? "varlen" : "dense") +
                                                " plan run " + (lens ? "with" : "without") + " sequence lengths");
  cp.quantize = kernels::make_quantize_params(b, q, k, v, workspace);
  if (lens) kernels::add_varlen_quantize_params(b, *lens, out, lse, cp.quantize);
  if (b.p.mask) {
    if (!mask) throw Error(ErrorCode::InvalidArgument, "call plan: a masked plan run without its mask");
    kernels::add_mask_quantize_params(b, *mask, cp.quantize);
  }
  build_attention_stage_params(plan.attention, b, k, workspace, out, lse, plan.problem.sm_scale,
                               workspace + plan.quant_bytes, cp.attention, mask, &q);
}

namespace {

// Chunk i of `t` along the cut's axis: `per` batch entries or heads of it.
TensorRef slice(const TensorRef& t, plan::PipelineAxis axis, std::int64_t i, std::int64_t per) {
  TensorRef s = t;
  const std::int64_t stride = axis == plan::PipelineAxis::Batch ? t.stride_batch : t.stride_head;
  s.data = static_cast<const char*>(t.data) + i * per * stride * static_cast<std::int64_t>(dtype_size(t.dtype));
  (axis == plan::PipelineAxis::Batch ? s.batch : s.heads) = per;
  return s;
}

struct ChunkArgs {
  TensorRef q, k, v, out;
  float* lse = nullptr;
  char* workspace = nullptr;
};

ChunkArgs chunk_args(const CallPlan& plan, std::int64_t i, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                     const TensorRef& out, float* lse, char* workspace) {
  const plan::AttentionProblem& c = plan.chunk->problem;
  const plan::PipelineAxis axis = plan.pipeline.axis;
  const bool by_batch = axis == plan::PipelineAxis::Batch;
  ChunkArgs a;
  a.q = slice(q, axis, i, by_batch ? c.batch : c.q_heads);
  a.out = slice(out, axis, i, by_batch ? c.batch : c.q_heads);
  a.k = slice(k, axis, i, by_batch ? c.batch : c.kv_heads);
  a.v = slice(v, axis, i, by_batch ? c.batch : c.kv_heads);
  // LSE [B][Hq][q_len]: a chunk of batch entries, or of heads of the one batch entry, is contiguous.
  if (lse) a.lse = lse + i * (by_batch ? c.batch * c.q_heads : c.q_heads) * c.q_len;
  a.workspace = workspace + static_cast<std::size_t>(i) * plan.chunk->total();
  return a;
}

void launch_quantize(const CallPlan& plan, CallParams& cp, char* workspace, CUstream stream) {
  if (plan.fused_quantize) {
    const auto sync = reinterpret_cast<CUdeviceptr>(workspace + plan.sync_offset);
    base::driver::check(base::driver::api().cuMemsetD8Async(sync, 0, plan.sync_bytes, stream), "cuMemsetD8Async (quantize sync)");
  }
  for (const CallPlan::Launch& l : plan.quantize) launch(*l.kernel, l.shape, &cp.quantize, stream);
}

// A pipelined call: every chunk's parameters first (errors before any launch), then per chunk its
// quantize stage on the side stream and its attention on the caller's stream after an event.
// Without a side stream (a stream being captured before its first pipelined call, or too many
// streams) the chunks run one after the other on the caller's stream: the same results.
void run_pipelined(Context::Impl& ctx, const CallPlan& plan, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                   const TensorRef& out, float* lse, char* workspace, CUstream stream) {
  const CallPlan& sub = *plan.chunk;
  const int n = plan.pipeline.chunks;
  thread_local std::vector<CallParams> cps;
  if (cps.size() < static_cast<std::size_t>(n)) cps.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const ChunkArgs a = chunk_args(plan, i, q, k, v, out, lse, workspace);
    build_call_params(sub, a.q, a.k, a.v, a.out, a.lse, a.workspace, cps[i]);
  }
  base::driver::ScopedContext scope(ctx.cu_context());
  for (int i = 0; i < n; ++i)
    add_tensor_maps(sub.attention, sub.buffers, workspace + static_cast<std::size_t>(i) * sub.total(), cps[i].attention);
  const auto& api = base::driver::api();
  SideStreams::Lane* lane = ctx.side_streams().get(stream, static_cast<std::size_t>(n) + 1);
  if (!lane) {
    for (int i = 0; i < n; ++i) {
      launch_quantize(sub, cps[i], workspace + static_cast<std::size_t>(i) * sub.total(), stream);
      enqueue_attention_stage(sub.attention, cps[i].attention, stream);
    }
    return;
  }
  // The side stream starts where the caller's stream is (Q, K, V written); every side-stream
  // launch is joined back before the call returns: the caller's stream waits for the last chunk's
  // codes, and the side stream runs its chunks in order.
  base::driver::check(api.cuEventRecord(lane->events[0], stream), "cuEventRecord (pipeline fork)");
  base::driver::check(api.cuStreamWaitEvent(lane->side, lane->events[0], 0), "cuStreamWaitEvent (pipeline fork)");
  for (int i = 0; i < n; ++i) {
    launch_quantize(sub, cps[i], workspace + static_cast<std::size_t>(i) * sub.total(), lane->side);
    CUevent ready = lane->events[static_cast<std::size_t>(i) + 1];
    base::driver::check(api.cuEventRecord(ready, lane->side), "cuEventRecord (pipeline chunk)");
    base::driver::check(api.cuStreamWaitEvent(stream, ready, 0), "cuStreamWaitEvent (pipeline chunk)");
    enqueue_attention_stage(sub.attention, cps[i].attention, stream);
  }
}

}  // namespace

void run_call_plan(Context::Impl& ctx, const CallPlan& plan, const TensorRef& q, const TensorRef& k,
                   const TensorRef& v, const TensorRef& out, float* lse, char* workspace, CUstream stream,
                   const SeqLens* lens, const MaskRef* mask) {
  if (plan.chunk) {
    if (lens || (mask && mask->type != MaskType::None))
      throw Error(ErrorCode::InvalidArgument, "call plan: a pipelined plan run with sequence lengths or a mask");
    return run_pipelined(ctx, plan, q, k, v, out, lse, workspace, stream);
  }
  // Every parameter struct first: argument errors surface before the first launch. Thread-local
  // storage: no allocation once a thread has seen its largest chunk count.
  thread_local CallParams cp;
  build_call_params(plan, q, k, v, out, lse, workspace, cp, lens, mask);
  base::driver::ScopedContext scope(ctx.cu_context());
  if (plan.problem.direct) return enqueue_decode_stage(plan.decode, cp.decode, stream);
  add_tensor_maps(plan.attention, plan.buffers, workspace, cp.attention);
  launch_quantize(plan, cp, workspace, stream);
  // ΔS and attention, per chunk.
  enqueue_attention_stage(plan.attention, cp.attention, stream);
}

}  // namespace sage2::runtime
