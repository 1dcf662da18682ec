// Specification of the NaN / Inf policy on the GPU (include/sage2/reference.hpp, issue #4):
//  - the quantize stage with planted NaN/±Inf writes the CPU reference's flags exactly
//    (q_bad, k_first_bad, v_first_bad), code 0 for the bad elements, and finite statistics and
//    scales equal to the reference's;
//  - through the public Context::attention (with LSE), for planted NaN / +Inf / -Inf in Q rows, K
//    rows and single V elements — both dtypes, the three causal modes, GQA 4, head dims 64..256,
//    q_len != kv_len, 8-bit and 4-bit (smooth Q: ΔS reads the raw K), smooth V, a poisoned key that
//    causal masking hides from the early rows — the non-finite pattern of O and LSE equals the
//    policy's rule and exact_attention's pattern element for element (except the documented
//    -Inf rows, where exact gives the key weight 0 and sage2 NaN); every finite output is
//    bit-identical to the GPU output for the same inputs with the bad elements set to 0 and close
//    to the CPU emulation;
//  - all-NaN inputs at 4096 tokens finish in bounded time (no hang) with every row NaN.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "device_tensor.hpp"
#include "gpu_env.hpp"
#include "kernels/attention_family.hpp"
#include "kernels/quant_buffers.hpp"
#include "runtime/attention_plan.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/quantize_stage.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"
#include "stage_download.hpp"

using namespace sage2;
namespace ref = sage2::reference;
using test::DeviceTensor;
using test::download_out;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Plant {
  char t;   // 'q', 'k', 'v'
  std::int64_t b, h, n;
  int c;    // -1: the whole row
  float value;
};

void apply(ref::AttentionInputs& in, const std::vector<Plant>& plants, bool zero) {
  for (const Plant& p : plants) {
    ref::HostTensor& t = p.t == 'q' ? in.q : p.t == 'k' ? in.k : in.v;
    if (p.b >= t.batch()) continue;
    const int c0 = p.c < 0 ? 0 : p.c, c1 = p.c < 0 ? static_cast<int>(t.dim()) : p.c + 1;
    for (int c = c0; c < c1; ++c) t.set(p.b, p.h, p.n, c, zero ? 0.f : p.value);
  }
}

bool row_nonfinite(const TensorRef& t, std::int64_t b, std::int64_t h, std::int64_t n) {
  for (std::int64_t c = 0; c < t.dim; ++c)
    if (!std::isfinite(ref::load(t, b, h, n, c))) return true;
  return false;
}

// The policy's pattern from the raw inputs, and the rows where exact attention differs by design
// (every visible bad key scores -Inf in IEEE double and a good visible key exists).
struct Pattern {
  std::int64_t B = 0, H = 0, N = 0, D = 0;
  std::vector<std::uint8_t> o_nan, v_nan, lse_nan, no_key, divergent;
  std::int64_t nan_elems = 0, finite_elems = 0, divergent_rows = 0;
  std::size_t o(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) const {
    return static_cast<std::size_t>(((b * H + h) * N + i) * D + c);
  }
  std::size_t r(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return static_cast<std::size_t>((b * H + h) * N + i);
  }
};

Pattern predict(const TensorRef& q, const TensorRef& k, const TensorRef& v, CausalMode mode, double sm) {
  Pattern P;
  P.B = q.batch;
  P.H = q.heads;
  P.N = q.seq;
  P.D = v.dim;
  const std::int64_t nk = k.seq, group = q.heads / k.heads;
  P.o_nan.assign(static_cast<std::size_t>(P.B * P.H * P.N * P.D), 0);
  P.v_nan = P.o_nan;
  P.lse_nan.assign(static_cast<std::size_t>(P.B * P.H * P.N), 0);
  P.no_key = P.divergent = P.lse_nan;
  for (std::int64_t b = 0; b < P.B; ++b)
    for (std::int64_t h = 0; h < P.H; ++h) {
      const std::int64_t hk = h / group;
      std::vector<std::uint8_t> kbad(static_cast<std::size_t>(nk));
      for (std::int64_t j = 0; j < nk; ++j) kbad[static_cast<std::size_t>(j)] = row_nonfinite(k, b, hk, j);
      std::vector<std::int64_t> vfb(static_cast<std::size_t>(P.D), nk);
      for (std::int64_t c = 0; c < P.D; ++c)
        for (std::int64_t j = 0; j < nk; ++j)
          if (!std::isfinite(ref::load(v, b, hk, j, c))) {
            vfb[static_cast<std::size_t>(c)] = j;
            break;
          }
      for (std::int64_t i = 0; i < P.N; ++i) {
        std::int64_t n_vis = 0;
        while (n_vis < nk && ref::key_visible(mode, i, n_vis, P.N, nk)) ++n_vis;
        if (n_vis == 0) {
          P.no_key[P.r(b, h, i)] = 1;
          continue;
        }
        const bool qbad = row_nonfinite(q, b, h, i);
        bool any_bad = false, all_minus_inf = true, any_good = false;
        for (std::int64_t j = 0; j < n_vis; ++j) {
          if (!kbad[static_cast<std::size_t>(j)]) {
            any_good = true;
            continue;
          }
          any_bad = true;
          if (qbad) continue;
          double s = 0;
          for (std::int64_t c = 0; c < q.dim; ++c) s += double(ref::load(q, b, h, i, c)) * double(ref::load(k, b, hk, j, c));
          s *= sm;
          if (!(std::isinf(s) && s < 0)) all_minus_inf = false;
        }
        const bool row_bad = qbad || any_bad;
        P.lse_nan[P.r(b, h, i)] = row_bad;
        if (!qbad && any_bad && all_minus_inf && any_good) {
          P.divergent[P.r(b, h, i)] = 1;
          ++P.divergent_rows;
        }
        for (std::int64_t c = 0; c < P.D; ++c) {
          P.v_nan[P.o(b, h, i, c)] = vfb[static_cast<std::size_t>(c)] < n_vis;
          const bool bad = row_bad || P.v_nan[P.o(b, h, i, c)];
          P.o_nan[P.o(b, h, i, c)] = bad;
          (bad ? P.nan_elems : P.finite_elems) += 1;
        }
      }
    }
  return P;
}

struct Run {
  std::vector<float> o, lse;
  double seconds = 0;
};

Run run_api(const ref::AttentionInputs& in, const AttentionParams& p0, bool nhd) {
  Context& ctx = test::gpu_context();
  DeviceTensor q(in.q), k(in.k), v(in.v);
  const std::int64_t B = in.q.batch(), H = in.q.heads(), N = in.q.seq(), D = in.q.dim();
  DeviceTensor out(ref::HostTensor(in.q.dtype(), B, H, N, D, nhd));
  out.dev->poison(0x5A);  // finite garbage: a missing write shows up as a wrong value
  test::DeviceBuffer lse(static_cast<std::size_t>(B * H * N) * 4);
  lse.poison(0x5A);
  AttentionParams p = p0;
  p.lse = static_cast<float*>(lse.get());
  // This suite specifies the quantized path's policy (the direct path's: test_direct.cpp).
  if (p.small_q_path == SmallQPath::Auto) p.small_q_path = SmallQPath::Quantized;
  const auto t0 = std::chrono::steady_clock::now();
  ctx.attention(q.ref(), k.ref(), v.ref(), out.ref(), p);
  test::synchronize();
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.o = download_out(out);
  r.lse.resize(static_cast<std::size_t>(B * H * N));
  lse.download(r.lse.data(), r.lse.size() * 4);
  return r;
}

struct ApiCase {
  const char* name;
  DType dt;
  CausalMode mode;
  int d, bits;
  bool sv, nhd;
  std::int64_t batch, hq, hkv, nq, nk;
  std::vector<Plant> plants;
};

std::vector<ApiCase> api_cases() {
  std::vector<ApiCase> v;
  v.push_back({"f16 none d64: q NaN row, k NaN key 150, v +Inf", DType::F16, CausalMode::None, 64, 8, false, false,
               1, 4, 1, 300, 300,
               {{'q', 0, 2, 17, 5, kNaN}, {'k', 0, 0, 150, 63, kNaN}, {'v', 0, 0, 299, 8, kInf}}});
  v.push_back({"bf16 top-left d128: k NaN key 100 (masked for rows < 100), v NaN, q -Inf", DType::BF16,
               CausalMode::TopLeft, 128, 8, false, true, 2, 8, 2, 257, 257,
               {{'k', 0, 1, 100, 0, kNaN}, {'v', 1, 0, 200, 5, kNaN}, {'q', 1, 7, 64, 127, -kInf},
                {'k', 1, 0, 256, 9, kInf}}});
  v.push_back({"f16 bottom-right d80 q<kv: k +Inf element, v -Inf", DType::F16, CausalMode::BottomRight, 80, 8, false,
               false, 1, 4, 1, 100, 333, {{'k', 0, 0, 250, 3, kInf}, {'v', 0, 0, 240, 79, -kInf}}});
  v.push_back({"bf16 bottom-right d96 q>kv: rows without keys, q NaN there and later", DType::BF16,
               CausalMode::BottomRight, 96, 8, false, false, 1, 4, 1, 400, 130,
               {{'q', 0, 1, 5, 0, kNaN}, {'q', 0, 3, 350, 95, kInf}, {'k', 0, 0, 60, 40, -kInf},
                {'v', 0, 0, 10, 11, kNaN}}});
  v.push_back({"f16 top-left d256 smooth V: k row -Inf, v NaN", DType::F16, CausalMode::TopLeft, 256, 8, true, false, 1,
               4, 1, 200, 200, {{'k', 0, 0, 120, -1, -kInf}, {'v', 0, 0, 30, 200, kNaN}}});
  v.push_back({"f16 none d64 int4 (smooth Q, ΔS from raw K): k NaN, q +Inf", DType::F16, CausalMode::None, 64, 4,
               false, false, 1, 4, 1, 256, 256, {{'k', 0, 0, 77, 12, kNaN}, {'q', 0, 0, 3, 3, kInf}}});
  v.push_back({"bf16 top-left d64 int4: k NaN key 40 (rows < 40 clean), v -Inf", DType::BF16, CausalMode::TopLeft, 64,
               4, false, true, 1, 4, 1, 160, 160, {{'k', 0, 0, 40, 1, kNaN}, {'v', 0, 0, 100, 0, -kInf}}});
  return v;
}

}  // namespace

TEST_CASE("gpu nonfinite: quantize stage flags and statistics equal the CPU reference on planted inputs") {
  Context& ctx = test::gpu_context();
  struct QCase {
    int d, bits;
    bool sq, sk, sv, nhd;
    DType dt;
    std::int64_t nq, nk;
    std::vector<Plant> plants;
  };
  const std::vector<QCase> qcases = {
      {64, 8, false, true, false, false, DType::F16, 300, 300,
       {{'q', 0, 1, 17, 5, kNaN}, {'k', 0, 0, 150, 63, kNaN}, {'k', 0, 1, 7, 2, -kInf}, {'v', 0, 1, 299, 8, kInf}}},
      {36, 4, true, true, true, true, DType::BF16, 129, 77,   // d % 8 != 0: scalar loads
       {{'q', 0, 5, 128, 35, kInf}, {'k', 0, 1, 76, -1, kNaN}, {'v', 0, 0, 0, 0, -kInf}, {'v', 0, 0, 50, 0, kNaN}}},
      {256, 8, true, false, true, false, DType::F16, 64, 1000,
       {{'q', 0, 0, 0, -1, kNaN}, {'k', 0, 0, 999, 255, kInf}, {'v', 0, 1, 500, 128, kNaN}}},
  };
  // Every key's statistics (the split path) and the sampled ones (Auto's: the planted keys outside
  // the sampled units reach the flags through quantize_k / quantize_v).
  // On Hopper the 8-bit cases also run the wgmma family's layout (its split K kernel's warp-group
  // form at head dim 64: its per-group fall-back to the per-row maxima).
  const bool hopper = runtime::context_impl(ctx).arch() == kernels::Arch::Sm90a;
  for (const bool wg : {false, true})
  for (const bool sampled : {false, true})
  for (const QCase& c : qcases) {
    if (wg && (!hopper || c.bits != 8)) continue;
    CAPTURE(c.d);
    CAPTURE(c.bits);
    CAPTURE(sampled);
    CAPTURE(wg);
    ref::AttentionInputs in = ref::make_activation_like(7, c.dt, 1, 8, 2, c.nq, c.nk, c.d, {}, c.nhd);
    apply(in, c.plants, false);
    kernels::KernelSpec spec;
    spec.family = wg ? kernels::KernelFamily::AttentionWgmma : kernels::KernelFamily::AttentionMma;
    spec.arch = runtime::context_impl(ctx).arch();
    spec.pv_fp16 = !wg && kernels::default_pv_fp16(spec.arch);  // the Context's path (SAGE2_TARGET_ARCH=sm_80: FP16)
    spec.head_dim = c.d;
    spec.qk_bits = c.bits;
    spec.smooth_q = c.sq;
    spec.smooth_k = c.sk;
    spec.smooth_v = c.sv;
    spec.in_dtype = spec.out_dtype = c.dt;
    spec.tile = wg ? kernels::TileConfig{128, 128, 8, 2} : kernels::TileConfig{64, 64, 4, 2};
    spec.sampled_stats = sampled;
    ref::QuantizeOptions qo = test::stage_options(spec);
    qo.margins = true;
    const ref::QuantizedHost cpu = ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), qo);
    const kernels::QuantBuffers b = kernels::quant_buffers(kernels::QuantProblem{{1, 8, 2, c.nq, c.nk, c.d}}, spec);
    const auto off = b.offsets();
    DeviceTensor q(in.q), k(in.k), v(in.v);
    test::DeviceBuffer ws(off.total);
    ws.poison();
    runtime::launch_quantize_stage(runtime::context_impl(ctx), spec, b, q.ref(), k.ref(), v.ref(), ws.get(), nullptr);
    test::synchronize();
    auto dl = [&](std::size_t o, std::size_t bytes, void* dst) { ws.download(dst, bytes, o); };
    std::vector<std::uint8_t> q_bad(cpu.q_bad.size());
    std::vector<std::int32_t> kfb(cpu.k_first_bad.size()), vfb(cpu.v_first_bad.size());
    dl(off.q_bad, q_bad.size(), q_bad.data());
    dl(off.k_first_bad, kfb.size() * 4, kfb.data());
    dl(off.v_first_bad, vfb.size() * 4, vfb.data());
    CHECK(q_bad == cpu.q_bad);
    CHECK(kfb == cpu.k_first_bad);
    CHECK(vfb == cpu.v_first_bad);
    std::int64_t flags = 0;
    for (auto f : cpu.q_bad) flags += f;
    for (auto f : cpu.k_first_bad) flags += f != 0x7fffffff;
    for (auto f : cpu.v_first_bad) flags += f != 0x7fffffff;
    CHECK(flags >= 3);
    auto floats = [&](std::size_t o, std::int64_t n, const std::vector<float>& want, const char* what) {
      std::vector<float> g(static_cast<std::size_t>(n));
      if (n) dl(o, g.size() * 4, g.data());
      std::int64_t bad = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        const bool ok = std::isfinite(g[i]) &&
                        std::fabs(g[i] - want[i]) <= 1e-5 * std::fabs(want[i]) + 1e-3;
        if (!ok && bad++ < 3) MESSAGE(what << "[" << i << "]: gpu " << g[i] << " cpu " << want[i]);
      }
      CHECK_MESSAGE(bad == 0, what);
    };
    floats(off.k_stats, b.k_stats(), cpu.k_stats, "k_stats");
    floats(off.v_stats, b.v_stats(), cpu.v_stats, "v_stats");
    floats(off.k_mean, b.k_mean(), cpu.k_mean, "k_mean");
    floats(off.v_mean, b.v_mean(), cpu.v_mean, "v_mean");
    floats(off.q_mean, b.q_mean(), cpu.q_mean, "q_mean");
    floats(off.q_scale, b.q_scale(), cpu.q_scale, "q_scale");
    floats(off.k_scale, b.k_scale(), cpu.k_scale, "k_scale");
    floats(off.v_scale, b.v_scale(), cpu.v_scale, "v_scale");
    if (sampled) floats(off.v_amax, b.v_amax(), cpu.v_amax, "v_amax");
    // codes of the bad elements are 0
    std::vector<std::int8_t> qc(static_cast<std::size_t>(b.q_codes())), kc(static_cast<std::size_t>(b.k_codes()));
    std::vector<std::uint8_t> vc(static_cast<std::size_t>(b.v_codes()));
    dl(off.q_codes, qc.size(), qc.data());
    dl(off.k_codes, kc.size(), kc.data());
    dl(off.v_codes, vc.size(), vc.data());
    ref::QuantizedHost g = cpu;   // reuse the accessors on the GPU's bytes
    g.q_codes = qc;
    g.k_codes = kc;
    g.v_codes = vc;
    std::int64_t zero_bad = 0, checked = 0;
    for (const Plant& p : c.plants) {
      const int c0 = p.c < 0 ? 0 : p.c, c1 = p.c < 0 ? c.d : p.c + 1;
      for (int ch = c0; ch < c1; ++ch) {
        ++checked;
        const int code = p.t == 'q' ? g.q_code(p.b, p.h, p.n, ch) : p.t == 'k' ? g.k_code(p.b, p.h, p.n, ch)
                                                                                : int(g.v_code(p.b, p.h, p.n, ch));
        zero_bad += code != 0;
      }
    }
    CHECK(checked > 0);
    CHECK(zero_bad == 0);
    // every code equals the reference's, except ±1 where the unrounded value sits on a rounding
    // boundary (fp32 reduction order; margin < 0.02 code steps)
    std::int64_t mismatches = 0, near = 0, codes = 0;
    for (std::int64_t hh = 0; hh < 8; ++hh)
      for (std::int64_t n = 0; n < b.q_len_pad; ++n)
        for (int ch = 0; ch < b.d_qk; ++ch) {
          ++codes;
          const int a = g.q_code(0, hh, n, ch), w = cpu.q_code(0, hh, n, ch);
          if (a == w) continue;
          const float mg = cpu.q_margin[static_cast<std::size_t>((hh * b.q_len_pad + n) * b.d_qk + ch)];
          (mg < 0.02f && std::abs(a - w) == 1 ? near : mismatches) += 1;
        }
    for (std::int64_t hh = 0; hh < 2; ++hh)
      for (std::int64_t n = 0; n < b.kv_len_pad; ++n) {
        for (int ch = 0; ch < b.d_qk; ++ch) {
          ++codes;
          const int a = g.k_code(0, hh, n, ch), w = cpu.k_code(0, hh, n, ch);
          if (a == w) continue;
          const float mg = cpu.k_margin[static_cast<std::size_t>((hh * b.kv_len_pad + n) * b.d_qk + ch)];
          (mg < 0.02f && std::abs(a - w) == 1 ? near : mismatches) += 1;
        }
        for (int ch = 0; ch < b.d_v; ++ch) {
          ++codes;
          if (g.v_code(0, hh, n, ch) == cpu.v_code(0, hh, n, ch)) continue;
          const float mg = cpu.v_margin[static_cast<std::size_t>((hh * b.d_v + ch) * b.kv_len_pad + cpu.layout.v_slot(n))];
          (mg < 0.02f ? near : mismatches) += 1;
        }
      }
    std::printf("gpu nonfinite quantize d=%d int%d sampled=%d %s: %lld codes, %lld near-boundary, %lld mismatches\n", c.d,
                c.bits, int(sampled), wg ? "wgmma" : "mma", (long long)codes, (long long)near, (long long)mismatches);
    CHECK(mismatches == 0);
    if (wg) {
      // The same K from a base 2 bytes off 16-byte alignment (rows read element by element): the
      // same bytes in every K output as the aligned run's.
      test::DeviceBuffer k_odd(k.bytes() + 16);
      k_odd.upload(in.k.ref().data, k.bytes(), 2);
      TensorRef kr = k.ref();
      kr.data = static_cast<const char*>(k_odd.get()) + 2;
      test::DeviceBuffer ws2(off.total);
      ws2.poison();
      runtime::launch_quantize_stage(runtime::context_impl(ctx), spec, b, q.ref(), kr, v.ref(), ws2.get(), nullptr);
      test::synchronize();
      auto same = [&](std::size_t o, std::size_t bytes, const char* what) {
        std::vector<std::uint8_t> x(bytes), y(bytes);
        if (bytes) ws.download(x.data(), bytes, o), ws2.download(y.data(), bytes, o);
        CHECK_MESSAGE(x == y, what << " (K at a misaligned base)");
      };
      same(off.k_codes, static_cast<std::size_t>(b.k_codes()), "k_codes");
      same(off.k_scale, static_cast<std::size_t>(b.k_scale()) * 4, "k_scale");
      same(off.k_mean, static_cast<std::size_t>(b.k_mean()) * 4, "k_mean");
      same(off.k_first_bad, cpu.k_first_bad.size() * 4, "k_first_bad");
    }
  }
}

TEST_CASE("gpu nonfinite: Context::attention pattern equals exact attention's; finite outputs unaffected") {
  Context& ctx = test::gpu_context();
  std::int64_t total_nan = 0, total_finite = 0, total_div = 0;
  for (const ApiCase& cs : api_cases()) {
    CAPTURE(cs.name);
    ref::AttentionInputs bad =
        ref::make_activation_like(101, cs.dt, cs.batch, cs.hq, cs.hkv, cs.nq, cs.nk, cs.d, {}, cs.nhd);
    ref::AttentionInputs zero = bad;
    apply(bad, cs.plants, false);
    apply(zero, cs.plants, true);
    AttentionParams p;
    p.causal = cs.mode;
    p.qk_bits = static_cast<QkBits>(cs.bits);
    p.smooth_v = cs.sv;
    const Run rz = run_api(zero, p, cs.nhd);   // compiles the kernels
    const Run rb = run_api(bad, p, cs.nhd);
    if (!test::reduced()) CHECK(rb.seconds < 5.0);  // no wall-clock bound under a sanitizer

    const double sm = 1.0 / std::sqrt(double(cs.d));
    const Pattern P = predict(bad.q.ref(), bad.k.ref(), bad.v.ref(), cs.mode, sm);
    ref::AttentionOptions xo;
    xo.causal = cs.mode;
    const ref::ExactResult x = ref::exact_attention(bad.q.ref(), bad.k.ref(), bad.v.ref(), xo);
    DeviceTensor dq(bad.q), dk(bad.k), dv(bad.v);
    DeviceTensor dout(ref::HostTensor(cs.dt, cs.batch, cs.hq, cs.nq, cs.d, cs.nhd));
    const plan::AttentionProblem prob =
        plan::validate_attention(dq.ref(), dk.ref(), dv.ref(), dout.ref(), p, runtime::context_impl(ctx).arch());
    const kernels::KernelSpec spec = runtime::plan_attention(prob, runtime::context_impl(ctx).arch(), runtime::context_impl(ctx).facts());
    ref::EmulationOptions eo;
    eo.round_output = true;
    eo.accum_mantissa_bits = spec.family == kernels::KernelFamily::AttentionWgmma ? 13 : 23;  // wgmma FP8: 13 bits
    eo.sample_statistics = spec.sampled_stats;  // the statistics the call's stage took
    const ref::EmulationResult e = ref::emulate_attention(bad.q.ref(), bad.k.ref(), bad.v.ref(), ref::kernel_config(spec), eo);

    std::int64_t pat_bad = 0, exact_bad = 0, div_bad = 0, same_bad = 0, emul_pat_bad = 0;
    std::vector<double> emul_fin;
    std::vector<float> gpu_fin;
    for (std::int64_t b = 0; b < cs.batch; ++b)
      for (std::int64_t h = 0; h < cs.hq; ++h)
        for (std::int64_t i = 0; i < cs.nq; ++i) {
          const std::size_t r = P.r(b, h, i);
          const float gl = rb.lse[r];
          const double xl = x.lse[r];
          if (P.no_key[r]) {
            if (!(gl == -kInf && xl == -INFINITY)) ++pat_bad;
          } else {
            if (bool(std::isnan(gl)) != bool(P.lse_nan[r]) || (!P.lse_nan[r] && !std::isfinite(gl))) ++pat_bad;
            if (bool(std::isnan(e.lse[r])) != bool(std::isnan(gl))) ++emul_pat_bad;
            if (P.divergent[r]) {
              if (!std::isfinite(xl)) ++div_bad;
            } else if (bool(std::isfinite(xl)) == bool(P.lse_nan[r])) {
              ++exact_bad;
            }
            if (!P.lse_nan[r] && !(gl == rz.lse[r])) ++same_bad;
          }
          for (std::int64_t c = 0; c < cs.d; ++c) {
            const std::size_t o = P.o(b, h, i, c);
            const float g = rb.o[o];
            const double xv = x.o[o];
            if (P.no_key[r]) {
              if (!(g == 0.f && xv == 0.0)) ++pat_bad;
              continue;
            }
            if (bool(std::isnan(g)) != bool(P.o_nan[o]) || (!P.o_nan[o] && !std::isfinite(g))) {
              if (pat_bad < 3) MESSAGE("b " << b << " h " << h << " row " << i << " ch " << c << ": gpu " << g);
              ++pat_bad;
            }
            if (bool(std::isnan(e.o[o])) != bool(std::isnan(g))) ++emul_pat_bad;
            if (P.divergent[r]) {
              if (bool(std::isfinite(xv)) == bool(P.v_nan[o])) ++div_bad;
            } else if (bool(std::isfinite(xv)) == bool(P.o_nan[o])) {
              if (exact_bad < 3) MESSAGE("b " << b << " h " << h << " row " << i << " ch " << c << ": exact " << xv);
              ++exact_bad;
            }
            if (!P.o_nan[o]) {
              if (!(g == rz.o[o])) ++same_bad;
              emul_fin.push_back(e.o[o]);
              gpu_fin.push_back(g);
            }
          }
        }
    const ref::Metrics m = ref::compare(emul_fin, gpu_fin);
    std::printf("gpu nonfinite %-82s nan %6lld finite %7lld divergent rows %3lld | %.3f ms | finite vs emul relL1 %.2e\n",
                cs.name, (long long)P.nan_elems, (long long)P.finite_elems, (long long)P.divergent_rows, 1e3 * rb.seconds,
                m.rel_l1);
    CHECK(pat_bad == 0);       // GPU == the policy's rule
    CHECK(emul_pat_bad == 0);  // GPU == the emulation's pattern
    CHECK(exact_bad == 0);     // rule == exact attention's pattern (outside the -Inf rows)
    CHECK(div_bad == 0);       // the -Inf rows: exact finite there (weight 0), as documented
    CHECK(same_bad == 0);      // finite outputs: the same bits as with the bad elements zeroed
    CHECK(m.nonfinite == 0);
    CHECK(m.rel_l1 <= 5e-3);   // same algorithm as the emulation
    total_nan += P.nan_elems;
    total_finite += P.finite_elems;
    total_div += P.divergent_rows;
  }
  CHECK(total_nan > 0);
  CHECK(total_finite > 0);
  MESSAGE("divergent (-Inf score) rows exercised: " << total_div);
}

TEST_CASE("gpu nonfinite: all-NaN inputs at 4096 tokens finish in bounded time, every row NaN") {
  const std::int64_t n = test::reduced() ? 256 : 4096, d = 128;
  ref::AttentionInputs in = ref::make_gaussian(3, DType::F16, 1, 4, 1, n, n, d);
  for (ref::HostTensor* t : {&in.q, &in.k, &in.v})
    for (auto& bits : t->bits()) bits = 0x7e00;   // f16 quiet NaN
  for (CausalMode mode : {CausalMode::None, CausalMode::TopLeft}) {
    AttentionParams p;
    p.causal = mode;
    run_api(in, p, false);   // compile
    const Run r = run_api(in, p, false);
    std::int64_t finite = 0;
    for (float x : r.o) finite += !std::isnan(x);
    for (float x : r.lse) finite += !std::isnan(x);
    std::printf("gpu nonfinite all-NaN N=%lld %s: %.3f ms, non-NaN outputs %lld\n", (long long)n,
                causal_mode_name(mode), 1e3 * r.seconds, (long long)finite);
    CHECK(finite == 0);
    if (!test::reduced()) CHECK(r.seconds < 2.0);  // no wall-clock bound under a sanitizer
  }
}
