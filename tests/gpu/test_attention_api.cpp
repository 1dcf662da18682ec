// Specification of Context::attention on the GPU, through the public API:
//  - for a deterministic sample of the full matrix {4, 8 bit} × {causal none, top-left,
//    bottom-right} × {f16, bf16} × {HND, NHD} × head dims × (q_len, kv_len) × GQA {1, 4} that
//    covers every value of every axis, the output equals the CPU emulation of the same spec to a
//    tight tolerance (same algorithm), and meets the accuracy targets against fp64 attention;
//  - the LSE is the log-sum-exp of the un-smoothed scores;
//  - every output element is written (outputs are poisoned with NaN first);
//  - head dim 512 and a 32K-token sequence work;
//  - a call captured in a CUDA graph and replayed on new input values is still correct, and
//    capture does not allocate;
//  - later calls of a cached call plan (other outputs, caller workspaces) give the same bits.
#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "accuracy_targets.hpp"
#include "device_tensor.hpp"
#include "gpu_env.hpp"
#include "kernels/quant_buffers.hpp"
#include "runtime/attention_plan.hpp"
#include "plan/attention_validate.hpp"
#include "sage2/reference.hpp"
#include "stage_download.hpp"

using namespace sage2;
namespace ref = sage2::reference;
using test::DeviceTensor;
using test::download_out;
using test::Accuracy;
using test::make_inputs;
using test::model_name;
using test::target;

namespace {

// A fresh base seed, printed so that a failure can be replayed (SAGE2_TEST_SEED).
std::uint64_t fresh_seed() {
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed << " (SAGE2_TEST_SEED=" << seed << " replays it)");
  return seed;
}

struct Case {
  int bits;
  CausalMode causal;
  DType dtype;
  bool nhd;
  int head_dim;
  std::int64_t q_len, kv_len;
  int gqa;
  int model;  // 0 diffuse, 1 sharp, 2 gaussian (see make_inputs)
};

std::string describe(const Case& c) {
  char b[200];
  std::snprintf(b, sizeof b, "int%d %s %s %s d=%d q=%lld kv=%lld gqa=%d %s", c.bits, causal_mode_name(c.causal),
                dtype_name(c.dtype), c.nhd ? "NHD" : "HND", c.head_dim, (long long)c.q_len, (long long)c.kv_len, c.gqa,
                model_name(c.model));
  return b;
}

std::vector<Case> case_matrix() {
  const int dims[] = {32, 64, 80, 96, 128, 160, 256};
  const std::int64_t pairs[][2] = {{1, 1}, {17, 17}, {127, 127}, {1000, 1000}, {4096, 4096}, {128, 3000}, {3000, 128}};
  const CausalMode modes[] = {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight};
  std::vector<Case> cases;
  for (int i = 0; i < 28; ++i) {
    Case c;
    c.bits = i % 2 ? 8 : 4;
    c.causal = modes[i % 3];
    c.dtype = (i / 2) % 2 ? DType::BF16 : DType::F16;
    c.nhd = (i / 3) % 2;
    c.head_dim = dims[i % 7];
    c.q_len = pairs[(i * 3) % 7][0];
    c.kv_len = pairs[(i * 3) % 7][1];
    c.gqa = (i / 4) % 2 ? 4 : 1;
    c.model = (i / 5) % 3;
    cases.push_back(c);
  }
  // Reduced suite (compute-sanitizer): the first 14 cases (both bit widths, the three causal modes,
  // both dtypes and layouts, GQA 1/4, every head dim remain), at most 200 tokens.
  if (test::reduced()) {
    std::vector<Case> few;
    for (std::size_t i = 0; i < 14; ++i) {
      Case c = cases[i];
      c.q_len = std::min<std::int64_t>(c.q_len, 200);
      c.kv_len = std::min<std::int64_t>(c.kv_len, 200);
      few.push_back(c);
    }
    cases = few;
  }
  return cases;
}

struct Outcome {
  ref::Metrics vs_exact, vs_emul;
  double lse_err_exact = 0, lse_err_emul = 0;
  double lse_err_algo = 0;  // the emulation (the algorithm itself) vs fp64
  std::array<double, 4> lse_worst{};  // entry, gpu, emulation, exact of the largest LSE vs emulation
};

Outcome run_case(const Case& c, std::uint64_t seed) {
  Context& ctx = test::gpu_context();
  const std::int64_t batch = c.q_len * c.kv_len > 1000000 ? 1 : 2, kv_heads = 1, q_heads = c.gqa;
  ref::AttentionInputs in =
      make_inputs(c.model, seed, c.dtype, batch, q_heads, kv_heads, c.q_len, c.kv_len, c.head_dim, c.nhd);
  DeviceTensor q(in.q), k(in.k), v(in.v);
  DeviceTensor out(ref::HostTensor(c.dtype, batch, q_heads, c.q_len, c.head_dim, c.nhd));
  out.dev->poison(0xFF);  // NaN in f16 and bf16
  test::DeviceBuffer lse(static_cast<std::size_t>(batch * q_heads * c.q_len) * 4);
  lse.poison(0xFF);

  AttentionParams p;
  p.causal = c.causal;
  p.qk_bits = static_cast<QkBits>(c.bits);
  p.small_q_path = SmallQPath::Quantized;  // this suite specifies the quantized path (few rows: test_direct.cpp)
  p.lse = static_cast<float*>(lse.get());
  // A caller workspace, so that the quantize stage's buffers (at its start) can be read back.
  const std::size_t ws_bytes = ctx.workspace_size(q.ref(), k.ref(), v.ref(), out.ref(), p);
  test::DeviceBuffer ws(ws_bytes);
  p.workspace = ws.get();
  p.workspace_bytes = ws_bytes;
  ctx.attention(q.ref(), k.ref(), v.ref(), out.ref(), p);
  test::synchronize();

  const std::vector<float> got = download_out(out);
  std::vector<float> got_lse(static_cast<std::size_t>(batch * q_heads * c.q_len));
  lse.download(got_lse.data(), got_lse.size() * 4);

  ref::AttentionOptions eo;
  eo.causal = c.causal;
  const ref::ExactResult exact = ref::exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), eo);
  // The spec the API planned, fed to the emulation: same algorithm, same tiles.
  const plan::AttentionProblem prob =
      plan::validate_attention(q.ref(), k.ref(), v.ref(), out.ref(), p, runtime::context_impl(ctx).arch());
  const kernels::KernelSpec spec = runtime::plan_attention(prob, runtime::context_impl(ctx).arch(), runtime::context_impl(ctx).facts());
  ref::EmulationOptions mo;
  mo.round_output = true;
  // the wgmma FP8 accumulator keeps 13 mantissa bits (tests/gpu/test_probe_wgmma.cpp)
  mo.accum_mantissa_bits = spec.family == kernels::KernelFamily::AttentionWgmma ? 13 : 23;
  // On the codes the kernels read: a code the GPU stage rounded the other way at a boundary
  // (q̄ summed in another fp32 order, accepted; checked in `gpu quantize`) moved one row's LSE by
  // 0.025 at INT4 (seed 18048165131708100579: head 0, row 1785, channel 48 sits exactly on a
  // rounding boundary in the reference).
  // (a kernel that quantized Q itself left no Q̂ behind: the reference's Q part stands in for it)
  std::optional<ref::QuantizedHost> q_part;
  if (spec.q_in_kernel) q_part = ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec),
                                                   test::stage_options(spec));
  const ref::QuantizedHost stage = test::download_stage(
      ws, kernels::quant_buffers(kernels::QuantProblem{{batch, q_heads, kv_heads, c.q_len, c.kv_len, c.head_dim}}, spec), spec,
      q_part ? &*q_part : nullptr);
  mo.stage = &stage;
  mo.sample_statistics = stage.sample_statistics;
  const ref::EmulationResult emul = ref::emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), mo);

  Outcome r;
  r.vs_exact = ref::compare(exact.o, got);
  std::vector<double> emul_d(emul.o.begin(), emul.o.end());
  r.vs_emul = ref::compare(emul_d, got);
  for (std::size_t i = 0; i < got_lse.size(); ++i) {
    const double e = exact.lse[i], m = emul.lse[i], g = got_lse[i];
    if (std::isinf(e) && e < 0) {
      if (!(std::isinf(g) && g < 0)) r.lse_err_exact = INFINITY;
      continue;
    }
    r.lse_err_exact = std::max(r.lse_err_exact, std::fabs(g - e));
    r.lse_err_algo = std::max(r.lse_err_algo, std::fabs(m - e));
    if (std::fabs(g - m) > r.lse_err_emul) {
      r.lse_err_emul = std::fabs(g - m);
      r.lse_worst = {static_cast<double>(i), g, m, e};
    }
  }
  if (r.lse_err_emul > 1e-3)  // which entry (flat [b][h][row]) and its three values
    std::printf("  worst LSE entry %.0f: gpu %.7g emulation %.7g exact %.7g\n", r.lse_worst[0], r.lse_worst[1],
                r.lse_worst[2], r.lse_worst[3]);
  return r;
}

}  // namespace

TEST_CASE("gpu attention: matrix vs emulation (same spec) and vs fp64 attention") {
  const std::uint64_t seed = fresh_seed();
  int n = 0;
  for (const Case& c : case_matrix()) {
    const std::string name = describe(c);
    CAPTURE(name);
    const Outcome r = run_case(c, seed + static_cast<std::uint64_t>(++n));
    // Attention over fewer than ~1000 keys cannot be diffuse: such cases get the sharp bounds.
    const Accuracy t = target(c.bits, c.model == 0 && c.kv_len < 1000 ? 1 : c.model);
    std::printf("attention %-58s exact: cos %.6f relL1 %.5f | emul: cos %.8f relL1 %.2e | lse err %.2e / %.2e\n",
                name.c_str(), r.vs_exact.cos_sim, r.vs_exact.rel_l1, r.vs_emul.cos_sim, r.vs_emul.rel_l1,
                r.lse_err_exact, r.lse_err_emul);
    CHECK(r.vs_exact.nonfinite == 0);
    CHECK(r.vs_exact.cos_sim >= t.cos_min);
    CHECK(r.vs_exact.rel_l1 <= t.rel_l1_max);
    CHECK(r.vs_emul.rel_l1 <= 5e-3);  // same algorithm: only exp2/rounding-order differences
    CHECK(r.lse_err_emul <= 1e-3);
    // The kernel's LSE is as close to fp64 as the algorithm's (the emulation's) or within the model's
    // bound; the algorithm's own worst row stays within 2.5x that bound. (Seed 2685996093354129061:
    // int8, d 64, 1000 diffuse keys, the algorithm's worst LSE row 0.136 from fp64 and the GPU within
    // 2e-6 of it — a property of 8-bit scores on that input; the build before session 4's last
    // kernel change gives the same numbers for that seed.)
    CHECK(r.lse_err_exact <= std::max(t.lse_max, r.lse_err_algo + 1e-3));
    CHECK(r.lse_err_algo <= 2.5 * t.lse_max);
  }
}

TEST_CASE("gpu attention: head dim 512 works") {
  const std::int64_t n = test::reduced() ? 200 : 1000;
  const Case c{8, CausalMode::TopLeft, DType::BF16, false, 512, n, n, 4, 0};
  const Outcome r = run_case(c, fresh_seed());
  std::printf("attention %-58s exact: cos %.6f relL1 %.5f | emul relL1 %.2e\n", describe(c).c_str(),
              r.vs_exact.cos_sim, r.vs_exact.rel_l1, r.vs_emul.rel_l1);
  CHECK(r.vs_exact.nonfinite == 0);
  // Fewer than ~1000 keys (reduced suite) cannot be diffuse: the sharp bound of target().
  CHECK(r.vs_exact.cos_sim >= (test::reduced() ? target(8, 1).cos_min : 0.9999));
  CHECK(r.vs_emul.rel_l1 <= 5e-3);
}

TEST_CASE("gpu attention: 32K tokens, causal, checked on the last query rows") {
  if (test::reduced()) {
    MESSAGE("skipped: SAGE2_GPU_TESTS_REDUCED is set (32K tokens)");
    return;
  }
  Context& ctx = test::gpu_context();
  const std::int64_t n = 32768, d = 128, rows = 128;
  const std::uint64_t seed = fresh_seed();
  ref::AttentionInputs in = make_inputs(0, seed, DType::F16, 1, 2, 1, n, n, d, false);
  DeviceTensor q(in.q), k(in.k), v(in.v);
  DeviceTensor out(ref::HostTensor(DType::F16, 1, 2, n, d));
  out.dev->poison(0xFF);
  AttentionParams p;
  p.causal = CausalMode::TopLeft;
  p.small_q_path = SmallQPath::Quantized;  // this suite specifies the quantized path (few rows: test_direct.cpp)
  ctx.attention(q.ref(), k.ref(), v.ref(), out.ref(), p);
  test::synchronize();
  const std::vector<float> got = download_out(out);
  // The last `rows` queries alone, bottom-right aligned, see exactly what they see in the full
  // top-left causal problem (q_len == kv_len).
  std::vector<double> want_all;
  std::vector<float> got_rows;
  for (std::int64_t h = 0; h < 2; ++h) {
    TensorRef qs = in.q.ref();
    qs.data = static_cast<const std::uint16_t*>(qs.data) + h * qs.stride_head + (n - rows) * qs.stride_seq;
    qs.heads = 1;
    qs.seq = rows;
    ref::AttentionOptions eo;
    eo.causal = CausalMode::BottomRight;
    const auto e = ref::exact_attention(qs, in.k.ref(), in.v.ref(), eo);
    want_all.insert(want_all.end(), e.o.begin(), e.o.end());
    for (std::int64_t i = n - rows; i < n; ++i)
      for (std::int64_t c = 0; c < d; ++c) got_rows.push_back(got[static_cast<std::size_t>((h * n + i) * d + c)]);
  }
  const ref::Metrics m = ref::compare(want_all, got_rows);
  std::int64_t nonfinite = 0;
  for (float x : got) nonfinite += std::isfinite(x) ? 0 : 1;
  std::printf("attention 32K causal (last %lld rows of 2 heads): cos %.6f relL1 %.5f, non-finite outputs %lld\n",
              (long long)rows, m.cos_sim, m.rel_l1, (long long)nonfinite);
  CHECK(nonfinite == 0);
  CHECK(m.cos_sim >= 0.9999);
  CHECK(m.rel_l1 <= 0.011);
}

TEST_CASE("gpu attention: CUDA graph capture, then replay with new input values") {
  Context& ctx = test::gpu_context();
  const auto& a = base::driver::api();
  base::driver::ScopedContext scope(runtime::context_impl(ctx).cu_context());
  CUstream stream;
  base::driver::check(a.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const std::int64_t n = test::reduced() ? 256 : 1000, d = 128;
  const std::uint64_t seed = fresh_seed();
  ref::AttentionInputs in = make_inputs(0, seed, DType::F16, 2, 4, 2, n, n, d, false);
  DeviceTensor q(in.q), k(in.k), v(in.v);
  DeviceTensor out(ref::HostTensor(DType::F16, 2, 4, n, d));
  AttentionParams p;
  p.causal = CausalMode::BottomRight;
  p.small_q_path = SmallQPath::Quantized;  // this suite specifies the quantized path (few rows: test_direct.cpp)
  // Warm-up outside capture: compiles kernels and sizes this stream's workspace.
  ctx.attention(q.ref(), k.ref(), v.ref(), out.ref(), p, stream);
  base::driver::check(a.cuStreamSynchronize(stream), "sync");
  const std::size_t held = runtime::context_impl(ctx).workspace().bytes_held();

  base::driver::check(a.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin capture");
  ctx.attention(q.ref(), k.ref(), v.ref(), out.ref(), p, stream);
  CUgraph graph;
  base::driver::check(a.cuStreamEndCapture(stream, &graph), "end capture");
  CUgraphExec exec;
  base::driver::check(a.cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
  CHECK(runtime::context_impl(ctx).workspace().bytes_held() == held);  // no allocation while capturing

  for (int round = 0; round < 2; ++round) {
    ref::AttentionInputs fresh = make_inputs(0, seed + 1 + round, DType::F16, 2, 4, 2, n, n, d, false);  // new data per replay
    q.host = fresh.q;
    k.host = fresh.k;
    v.host = fresh.v;
    q.reupload();
    k.reupload();
    v.reupload();
    out.dev->poison(0xFF);
    base::driver::check(a.cuGraphLaunch(exec, stream), "graph launch");
    base::driver::check(a.cuStreamSynchronize(stream), "sync");
    ref::AttentionOptions eo;
    eo.causal = CausalMode::BottomRight;
    const auto e = ref::exact_attention(fresh.q.ref(), fresh.k.ref(), fresh.v.ref(), eo);
    const ref::Metrics m = ref::compare(e.o, download_out(out));
    std::printf("graph replay %d: cos %.6f relL1 %.5f\n", round, m.cos_sim, m.rel_l1);
    CHECK(m.nonfinite == 0);
    // Fewer than ~1000 keys (reduced suite) cannot be diffuse: the sharp bounds of target().
    const Accuracy t = target(8, test::reduced() ? 1 : 0);
    CHECK(m.cos_sim >= t.cos_min);
    CHECK(m.rel_l1 <= t.rel_l1_max);
  }
  a.cuGraphExecDestroy(exec);
  a.cuGraphDestroy(graph);
  a.cuStreamDestroy_v2(stream);
}

TEST_CASE("gpu attention: a cached call plan with other pointers gives the same bits as its first call") {
  // The plan (kernels, shapes, chunks) is cached per shape signature; per call only the pointers
  // change: parameter structs are rebuilt and the wgmma tensor maps are memoised per workspace
  // pointer. Other outputs and caller workspaces (at other addresses) must give the same bits.
  Context& ctx = test::gpu_context();
  auto& cache = runtime::context_impl(ctx).call_cache();
  const std::int64_t n = 300, d = 128;
  ref::AttentionInputs in = make_inputs(0, fresh_seed(), DType::F16, 1, 4, 2, n, n, d, false);
  DeviceTensor q(in.q), k(in.k), v(in.v);
  for (Toggle sq : {Toggle::Off, Toggle::On}) {
    CAPTURE(static_cast<int>(sq));
    AttentionParams p;
    p.causal = CausalMode::TopLeft;
    p.smooth_q = sq;
    p.small_q_path = SmallQPath::Quantized;  // this suite specifies the quantized path (few rows: test_direct.cpp)
    DeviceTensor out0(ref::HostTensor(DType::F16, 1, 4, n, d));
    ctx.attention(q.ref(), k.ref(), v.ref(), out0.ref(), p);
    const std::vector<float> want = download_out(out0);
    const std::size_t hits0 = cache.hits();
    const std::size_t ws = ctx.workspace_size(q.ref(), k.ref(), v.ref(), out0.ref(), p);
    test::DeviceBuffer wsbuf(ws + 4 * 256);
    for (int i = 0; i < 4; ++i) {
      CAPTURE(i);
      DeviceTensor out(ref::HostTensor(DType::F16, 1, 4, n, d));
      out.dev->poison(0xFF);
      AttentionParams pi = p;
      if (i > 0) {  // caller workspaces at three addresses, then the pool again
        pi.workspace = static_cast<char*>(wsbuf.get()) + 256 * (i - 1);
        pi.workspace_bytes = ws;
      }
      ctx.attention(q.ref(), k.ref(), v.ref(), out.ref(), pi);
      const std::vector<float> got = download_out(out);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
    CHECK(cache.hits() >= hits0 + 4);  // every later call found the plan
  }
}

TEST_CASE("gpu attention: bad input is rejected before launch, naming the argument") {
  Context& ctx = test::gpu_context();
  test::DeviceBuffer buf(1 << 20);
  const TensorRef q = TensorRef::hnd(buf.get(), DType::F16, 1, 2, 16, 64);
  TensorRef k = q, v = q;
  std::vector<std::uint16_t> host(2 * 16 * 64);
  TensorRef out = TensorRef::hnd(host.data(), DType::F16, 1, 2, 16, 64);  // host memory
  try {
    ctx.attention(q, k, v, out);
    FAIL("host memory accepted as output");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("out:") != std::string::npos);
  }
  out.data = static_cast<char*>(buf.get()) + 64;  // overlaps q
  CHECK_THROWS_AS(ctx.attention(q, k, v, out), Error);
}
