// Specification: pipelined calls (runtime/call_plan.hpp, CallPlan::chunk). A dense call cut into
// chunks of batch entries or kv heads, each chunk's quantize stage on a side stream beside the
// previous chunk's attention, gives the whole call's outputs and LSE bit for bit:
//  - cut by batch and by kv heads (GQA), with and without LSE, the three causal modes, f16/bf16,
//    HND/NHD, 8-bit and 4-bit with smooth Q (ΔS);
//  - where the cut cannot divide the call (or an LSE of several batch entries would be cut by
//    heads), the call runs whole;
//  - captured into a CUDA graph and replayed with new input values (the side stream joins the
//    capture and is joined back); a stream captured before its first pipelined call runs the
//    chunks on the caller's stream alone, with the same bits;
//  - outputs are poisoned before every call, so every chunk must write its part.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_env.hpp"
#include "runtime/call_plan.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

struct Case {
  const char* name;
  DType dtype;
  bool nhd;
  int head_dim;
  std::int64_t batch, q_heads, kv_heads, n;
  CausalMode causal;
  QkBits bits;
  bool lse;
  int chunks;        // SAGE2_PIPELINE_CHUNKS for the pipelined Context
  bool pipelined;    // whether the plan must take it
};

std::vector<Case> cases() {
  const std::int64_t n = test::reduced() ? 200 : 1000;
  return {
      {"f16 HND d128 B4 H8 none, 4 chunks of batch", DType::F16, false, 128, 4, 8, 8, n, CausalMode::None,
       QkBits::Auto, false, 4, true},
      {"bf16 NHD d64 B1 H8/2 bottom-right gqa4 LSE, 2 chunks of kv heads", DType::BF16, true, 64, 1, 8, 2, n + 77,
       CausalMode::BottomRight, QkBits::Auto, true, 2, true},
      {"f16 HND d96 B3 H4 top-left LSE, 3 chunks of batch", DType::F16, false, 96, 3, 4, 4, n - 87,
       CausalMode::TopLeft, QkBits::Auto, true, 3, true},
      {"f16 HND d128 B2 H4 none int4 (smooth Q, ΔS), 2 chunks of batch", DType::F16, false, 128, 2, 4, 4, n,
       CausalMode::None, QkBits::Int4, false, 2, true},
      {"f16 HND d64 B2 H6/3 LSE, 3 chunks: no batch cut, heads would split the LSE -> whole", DType::F16, false,
       64, 2, 6, 3, n, CausalMode::None, QkBits::Auto, true, 3, false},
      {"f16 HND d64 B5 H3 none, 2 chunks divide neither -> whole", DType::F16, false, 64, 5, 3, 3, n,
       CausalMode::None, QkBits::Auto, false, 2, false},
  };
}

// SAGE2_PIPELINE_CHUNKS for the scope (read when a plan is built).
struct ScopedChunks {
  explicit ScopedChunks(int n) { ::setenv("SAGE2_PIPELINE_CHUNKS", std::to_string(n).c_str(), 1); }
  ~ScopedChunks() { ::unsetenv("SAGE2_PIPELINE_CHUNKS"); }
};

TensorRef view(const Case& c, const void* data, std::int64_t heads) {
  return c.nhd ? TensorRef::nhd(data, c.dtype, c.batch, heads, c.n, c.head_dim)
               : TensorRef::hnd(data, c.dtype, c.batch, heads, c.n, c.head_dim);
}

struct Buffers {
  std::unique_ptr<test::DeviceBuffer> q, k, v, out, lse;
  std::size_t out_bytes = 0, lse_bytes = 0;
};

void upload_inputs(const Case& c, std::uint64_t seed, Buffers& b) {
  const ref::AttentionInputs in =
      ref::make_activation_like(seed, c.dtype, c.batch, c.q_heads, c.kv_heads, c.n, c.n, c.head_dim, {}, c.nhd);
  auto up = [](const ref::HostTensor& t, std::unique_ptr<test::DeviceBuffer>& d) {
    const std::size_t bytes = static_cast<std::size_t>(t.ref().numel()) * 2;
    if (!d) d = std::make_unique<test::DeviceBuffer>(bytes);
    d->upload(t.ref().data, bytes);
  };
  up(in.q, b.q);
  up(in.k, b.k);
  up(in.v, b.v);
  b.out_bytes = static_cast<std::size_t>(c.batch * c.q_heads * c.n * c.head_dim) * 2;
  b.lse_bytes = static_cast<std::size_t>(c.batch * c.q_heads * c.n) * 4;
  if (!b.out) b.out = std::make_unique<test::DeviceBuffer>(b.out_bytes);
  if (!b.lse) b.lse = std::make_unique<test::DeviceBuffer>(b.lse_bytes);
}

AttentionParams params(const Case& c, const Buffers& b, test::DeviceBuffer* workspace = nullptr) {
  AttentionParams p;
  if (workspace) {
    p.workspace = workspace->get();
    p.workspace_bytes = workspace->bytes();
  }
  p.causal = c.causal;
  p.qk_bits = c.bits;
  p.small_q_path = SmallQPath::Quantized;
  if (c.lse) p.lse = static_cast<float*>(b.lse->get());
  return p;
}

void enqueue(Context& ctx, const Case& c, const Buffers& b, CUstream s, test::DeviceBuffer* workspace = nullptr) {
  ctx.attention(view(c, b.q->get(), c.q_heads), view(c, b.k->get(), c.kv_heads), view(c, b.v->get(), c.kv_heads),
                view(c, b.out->get(), c.q_heads), params(c, b, workspace), s);
}

struct Bits {
  std::vector<unsigned char> out, lse;
};

Bits read_back(const Case& c, const Buffers& b) {
  test::synchronize();
  Bits r;
  r.out.resize(b.out_bytes);
  b.out->download(r.out.data(), r.out.size());
  if (c.lse) {
    r.lse.resize(b.lse_bytes);
    b.lse->download(r.lse.data(), r.lse.size());
  }
  return r;
}

Bits run(Context& ctx, const Case& c, Buffers& b, CUstream s) {
  b.out->poison(0xFF);
  b.lse->poison(0xFF);
  enqueue(ctx, c, b, s);
  return read_back(c, b);
}

bool plan_is_pipelined(Context& ctx, const Case& c, const Buffers& b) {
  auto plan = runtime::call_plan(runtime::context_impl(ctx), view(c, b.q->get(), c.q_heads),
                                 view(c, b.k->get(), c.kv_heads), view(c, b.v->get(), c.kv_heads),
                                 view(c, b.out->get(), c.q_heads), params(c, b));
  return plan->chunk != nullptr;
}

CUstream new_stream() {
  base::driver::ScopedContext scope(runtime::context_impl(test::gpu_context()).cu_context());
  CUstream s = nullptr;
  base::driver::check(base::driver::api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return s;
}

}  // namespace

TEST_CASE("gpu pipeline: chunked calls give the whole call's bits; cuts that do not divide run whole") {
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    Buffers b;
    upload_inputs(c, 0x5eed0000u + static_cast<std::uint64_t>(c.head_dim), b);
    CUstream s = new_stream();
    Bits whole, piped;
    {
      ScopedChunks off(1);
      Context ctx(0);
      CHECK_FALSE(plan_is_pipelined(ctx, c, b));
      whole = run(ctx, c, b, s);
    }
    {
      ScopedChunks on(c.chunks);
      Context ctx(0);
      CHECK(plan_is_pipelined(ctx, c, b) == c.pipelined);
      piped = run(ctx, c, b, s);
      // A second call reuses the plan, the side stream and the tensor maps of every chunk.
      const Bits again = run(ctx, c, b, s);
      CHECK(again.out == piped.out);
      CHECK(again.lse == piped.lse);
    }
    CHECK(piped.out == whole.out);
    CHECK(piped.lse == whole.lse);
    base::driver::api().cuStreamDestroy_v2(s);
  }
}

TEST_CASE("gpu pipeline: CUDA graph capture of pipelined calls, replayed with new inputs") {
  const Case c = cases().front();
  Buffers b;
  ScopedChunks on(c.chunks);
  Context ctx(0);
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  // Stream w: warmed up (its side stream exists before the capture); stream f: captured fresh.
  CUstream w = new_stream(), f = new_stream();
  upload_inputs(c, 41, b);
  REQUIRE(plan_is_pipelined(ctx, c, b));
  run(ctx, c, b, w);
  // Stream f has no workspace of the Context's pool either (it would be allocated during capture):
  // the caller passes one.
  test::DeviceBuffer f_workspace(ctx.workspace_size(view(c, b.q->get(), c.q_heads), view(c, b.k->get(), c.kv_heads),
                                                    view(c, b.v->get(), c.kv_heads), view(c, b.out->get(), c.q_heads),
                                                    params(c, b)));
  const std::size_t lanes = runtime::context_impl(ctx).side_streams().lanes();
  CUgraphExec exec[2];
  CUgraph graph[2];
  for (int g = 0; g < 2; ++g) {
    CUstream s = g == 0 ? w : f;
    base::driver::check(a.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin capture");
    enqueue(ctx, c, b, s, g == 0 ? nullptr : &f_workspace);
    base::driver::check(a.cuStreamEndCapture(s, &graph[g]), "end capture");
    base::driver::check(a.cuGraphInstantiateWithFlags(&exec[g], graph[g], 0), "instantiate");
  }
  CHECK(runtime::context_impl(ctx).side_streams().lanes() == lanes);  // none created while capturing
  for (int round = 0; round < 2; ++round) {
    upload_inputs(c, 100 + static_cast<std::uint64_t>(round), b);
    Bits expected;
    {
      ScopedChunks off(1);
      Context whole(0);
      expected = run(whole, c, b, w);
    }
    for (int g = 0; g < 2; ++g) {
      CAPTURE(round);
      CAPTURE(g);
      b.out->poison(0xFF);
      base::driver::check(a.cuGraphLaunch(exec[g], g == 0 ? w : f), "graph launch");
      const Bits got = read_back(c, b);
      CHECK(got.out == expected.out);
    }
  }
  for (int g = 0; g < 2; ++g) {
    a.cuGraphExecDestroy(exec[g]);
    a.cuGraphDestroy(graph[g]);
  }
  a.cuStreamDestroy_v2(w);
  a.cuStreamDestroy_v2(f);
}
