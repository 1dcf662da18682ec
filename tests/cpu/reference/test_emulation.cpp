// Specification: the attention emulation (reference::emulate_attention).
//  - With every approximation switched off (exact Q·K, f32 P̃/V, 23-bit accumulator) it is exact
//    attention up to fp32 rounding (1e-6); with FP16 P̃/V up to FP16 rounding.
//  - Each approximation switched on alone moves the error in the direction the paper describes.
//  - It reads the quantize stage's own buffers in the per-thread configuration.
//  - Returned LSE is the one of the un-smoothed scores; rows without keys give O = 0, LSE = -inf.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

KernelConfig make_spec(AttentionFamily fam, int bits, int d, int bq, int bk, int warps, bool sq, bool sk, bool sv,
                       CausalMode causal = CausalMode::None) {
  KernelConfig s;
  s.family = fam;
  s.arch = fam == AttentionFamily::Wgmma ? "sm_90a" : "sm_89";
  // fp32 accumulation of P̃V, said explicitly: Auto on sm_89 is fp16 inside a tile (the
  // reference's default there), which these studies do not vary
  s.pv_accum = PvAccum::Fp32;
  s.qk_bits = bits;
  s.head_dim = d;
  s.tile = {bq, bk, warps, 1};
  s.smooth_q = sq;
  s.smooth_k = sk;
  s.smooth_v = sv;
  s.causal = causal;
  return s;
}

EmulationOptions exact_options() {
  EmulationOptions o;
  o.exact_qk = true;
  o.pv_format = PvFormat::F32;
  o.accum_mantissa_bits = 23;
  return o;
}

struct Err {
  double o_abs = 0, o_scale = 0, lse_abs = 0;
};

Err max_err(const ExactResult& e, const EmulationResult& r) {
  Err x;
  for (std::size_t i = 0; i < e.o.size(); ++i) {
    x.o_abs = std::max(x.o_abs, std::fabs(e.o[i] - r.o[i]));
    x.o_scale = std::max(x.o_scale, std::fabs(e.o[i]));
  }
  for (std::size_t i = 0; i < e.lse.size(); ++i) {
    if (std::isinf(e.lse[i])) {
      x.lse_abs = std::max(x.lse_abs, e.lse[i] == r.lse[i] ? 0.0 : std::numeric_limits<double>::infinity());
      continue;
    }
    x.lse_abs = std::max(x.lse_abs, std::fabs(e.lse[i] - r.lse[i]) / std::max(1.0, std::fabs(e.lse[i])));
  }
  return x;
}

double rel_l1(const ExactResult& e, const EmulationResult& r) { return compare(e.o, r.o).rel_l1; }

}  // namespace

TEST_CASE("emulation: with every approximation off it is exact attention to 1e-6") {
  struct In {
    AttentionInputs in;
    const char* name;
  };
  In inputs[] = {{make_gaussian(1, DType::F16, 2, 4, 2, 77, 131, 64), "gaussian f16 GQA"},
                 {make_activation_like(2, DType::BF16, 1, 2, 1, 100, 200, 40), "activation bf16 MQA d40"},
                 {make_activation_like(3, DType::F32, 1, 1, 1, 130, 70, 128), "activation f32 q>kv"}};
  for (auto& x : inputs) {
    const int d = static_cast<int>(x.in.q.dim());
    const KernelConfig specs[] = {
        make_spec(AttentionFamily::Mma, 4, d, 128, 64, 4, true, true, false),
        make_spec(AttentionFamily::Mma, 8, d, 64, 32, 2, false, true, true),
        make_spec(AttentionFamily::Wgmma, 8, d, 128, 128, 8, true, false, true),
    };
    for (KernelConfig spec : specs)
      for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight})
        for (bool two : {true, false}) {
          spec.causal = cm;
          spec.two_level_accum = two;
          AttentionOptions ao;
          ao.causal = cm;
          const ExactResult e = exact_attention(x.in.q.ref(), x.in.k.ref(), x.in.v.ref(), ao);
          const EmulationResult r = emulate_attention(x.in.q.ref(), x.in.k.ref(), x.in.v.ref(), spec, exact_options());
          const Err err = max_err(e, r);
          CAPTURE(x.name);
          CAPTURE(attention_family_name(spec.family));
          CAPTURE(spec.qk_bits);
          CHECK(err.o_abs <= 1e-6 * std::max(1.0, err.o_scale));
          CHECK(err.lse_abs <= 1e-6);
        }
  }
}

TEST_CASE("emulation: FP16 P̃/V alone is exact attention up to FP16 rounding") {
  auto in = make_gaussian(4, DType::F16, 1, 2, 2, 96, 300, 64);
  const auto spec = make_spec(AttentionFamily::Mma, 8, 64, 64, 64, 4, false, true, false);
  const ExactResult e = exact_attention(in.q.ref(), in.k.ref(), in.v.ref());
  EmulationOptions o = exact_options();
  o.pv_format = PvFormat::FP16;
  const Err err = max_err(e, emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o));
  // P̂ = half(P̃) has relative error ≤ 2^-11 per weight; V is already f16 (exact): |ΔO| ≤ 2^-11·max|v|
  double vmax = 0;
  for (int n = 0; n < 300; ++n)
    for (int c = 0; c < 64; ++c) vmax = std::max(vmax, std::fabs(double(in.v.get(0, 0, n, c))));
  CHECK(err.o_abs <= std::ldexp(1.0, -11) * vmax);
  CHECK(err.o_abs > 1e-6);   // and FP16 rounding is visible (the knob does something)
  CHECK(err.lse_abs <= 1e-6);   // l uses the unquantized P̃
}

TEST_CASE("emulation: each approximation alone moves the error the expected way") {
  // activation-like data: channel bias, outlier channels, similar tokens
  auto in = make_activation_like(7, DType::F16, 1, 2, 2, 256, 512, 64);
  const ExactResult e = exact_attention(in.q.ref(), in.k.ref(), in.v.ref());
  auto err = [&](KernelConfig s, EmulationOptions o) {
    return rel_l1(e, emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), s, o));
  };
  const auto s4 = make_spec(AttentionFamily::Mma, 4, 64, 128, 64, 4, true, true, false);
  auto s8 = s4;
  s8.qk_bits = 8;
  const double e0 = err(s4, exact_options());
  CHECK(e0 < 1e-6);
  EmulationOptions q = exact_options();
  q.exact_qk = false;
  const double e_int8 = err(s8, q), e_int4 = err(s4, q);
  CHECK(e_int8 > e0);
  CHECK(e_int4 > 2 * e_int8);   // 4 bits are much worse than 8
  // P̃/V formats: more mantissa bits, less error
  EmulationOptions p = exact_options();
  p.pv_format = PvFormat::FP16;
  const double e_fp16 = err(s4, p);
  p.pv_format = PvFormat::E4M3;
  const double e_e4m3 = err(s4, p);
  p.pv_format = PvFormat::E5M2;
  const double e_e5m2 = err(s4, p);
  CHECK(e0 < e_fp16);
  CHECK(e_fp16 < e_e4m3);
  CHECK(e_e4m3 < e_e5m2);
  // granularity with INT4 (smooth Q+K): coarser groups, more error
  auto g = [&](Granularity gr) {
    EmulationOptions o = q;
    o.granularity = gr;
    return err(s4, o);
  };
  const double e_tok = g(Granularity::PerToken), e_thr = g(Granularity::PerThread), e_blk = g(Granularity::PerBlock),
               e_ten = g(Granularity::PerTensor);
  CHECK(e_thr == e_int4);   // per-thread is the kernel's configuration
  CHECK(e_thr < e_blk);
  CHECK(e_blk < e_ten);
  CHECK(e_tok < e_blk);
  // smoothing with INT4 per-thread
  auto sm = [&](bool sq, bool sk) {
    auto s = s4;
    s.smooth_q = sq;
    s.smooth_k = sk;
    return err(s, q);
  };
  const double none = sm(false, false), only_k = sm(false, true), only_q = sm(true, false), both = sm(true, true);
  CHECK(both < only_k);
  CHECK(both < only_q);
  CHECK(only_k < none);
  CHECK(only_q < none);
  MESSAGE("rel-L1: exact " << e0 << ", int8 " << e_int8 << ", int4 " << e_int4 << ", fp16 " << e_fp16 << ", e4m3 " << e_e4m3
                           << ", e5m2 " << e_e5m2 << ", token " << e_tok << ", thread " << e_thr << ", block " << e_blk
                           << ", tensor " << e_ten << ", smooth none " << none << ", K " << only_k << ", Q " << only_q
                           << ", Q+K " << both);
}

TEST_CASE("emulation: FP22 accumulator, two-level accumulation and smooth V") {
  // few queries, long KV, fairly diffuse attention over biased V: the regime of paper Sec. 3.4
  ActivationModel m;
  m.latent_scale = 0.5;
  auto in = make_activation_like(8, DType::F16, 1, 1, 1, 32, 4096, 64, m);
  const ExactResult e = exact_attention(in.q.ref(), in.k.ref(), in.v.ref());
  auto run = [&](int bits, bool two, bool sv) {
    auto s = make_spec(AttentionFamily::Mma, 8, 64, 64, 64, 4, false, true, sv);
    s.two_level_accum = two;
    EmulationOptions o = exact_options();
    o.accum_mantissa_bits = bits;
    return rel_l1(e, emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), s, o));
  };
  const double fp32_1 = run(23, false, false), fp32_2 = run(23, true, false);
  const double fp22_1 = run(13, false, false), fp22_2 = run(13, true, false);
  const double fp22_1_sv = run(13, false, true);
  CHECK(fp32_1 < 1e-6);
  CHECK(fp32_2 < 1e-6);
  CHECK(fp22_1 > 10 * fp22_2);     // one-level FP22 accumulation loses most
  CHECK(fp22_2 > fp32_2);          // two-level still pays for FP22 within a tile
  CHECK(fp22_1_sv < fp22_1 / 3);   // smoothing V helps the one-level accumulator
  MESSAGE("rel-L1: fp32 " << fp32_1 << "/" << fp32_2 << ", fp22 one-level " << fp22_1 << ", two-level " << fp22_2
                          << ", one-level + smooth V " << fp22_1_sv);
}

TEST_CASE("emulation: INT8 P̃ loses the many small probabilities that E4M3 keeps") {
  // One key with score 0 and 3000 keys with scores near -6.5: each P̃ ≈ 1.5e-3 is below INT8's
  // half step (1/254) but their sum (≈ 4.5) outweighs the top key — the paper's Sec. 3.3 case.
  const int nk = 3001, d = 16;
  HostTensor q(DType::F32, 1, 1, 4, d), k(DType::F32, 1, 1, nk, d), v(DType::F32, 1, 1, nk, d);
  for (int i = 0; i < 4; ++i) q.set(0, 0, i, 0, 1.f);
  for (int j = 0; j < nk; ++j) {
    k.set(0, 0, j, 0, j == 0 ? 0.f : -6.5f + 0.3f * std::sin(0.7f * static_cast<float>(j)));
    // the many small keys carry a common signal (+1 per channel), the top key another (-2)
    for (int c = 0; c < d; ++c)
      v.set(0, 0, j, c, j == 0 ? -2.f : 1.f + 0.5f * std::cos(0.37f * static_cast<float>(j * (c + 1))));
  }
  auto s = make_spec(AttentionFamily::Mma, 8, d, 64, 64, 4, false, false, false);
  AttentionOptions ao;
  ao.sm_scale = 1.0;
  const ExactResult e = exact_attention(q.ref(), k.ref(), v.ref(), ao);
  EmulationOptions o = exact_options();
  o.sm_scale = 1.0;
  o.pv_format = PvFormat::E4M3;
  const double e4m3 = rel_l1(e, emulate_attention(q.ref(), k.ref(), v.ref(), s, o));
  o.pv_format = PvFormat::E5M2;
  const double e5m2 = rel_l1(e, emulate_attention(q.ref(), k.ref(), v.ref(), s, o));
  o.pv_format = PvFormat::Int8;
  const double int8 = rel_l1(e, emulate_attention(q.ref(), k.ref(), v.ref(), s, o));
  CHECK(int8 > 0.5);        // the small probabilities are rounded to zero
  CHECK(e4m3 < 0.05);
  CHECK(e4m3 < e5m2);
  CHECK(e5m2 < int8);
  MESSAGE("rel-L1: e4m3 " << e4m3 << ", e5m2 " << e5m2 << ", int8 " << int8);
}

TEST_CASE("emulation: the per-thread configuration computes from the quantize stage's buffers") {
  auto in = make_activation_like(10, DType::F16, 1, 2, 1, 150, 90, 48);
  const auto spec = make_spec(AttentionFamily::Mma, 4, 48, 64, 32, 2, true, true, false);
  const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
  const auto& L = qs.layout;
  EmulationOptions o = exact_options();
  o.exact_qk = false;   // only Q·K quantized
  const EmulationResult r = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
  // Scores by hand from the buffers: S = float(dot)·(δq·δk) + ΔS, then softmax in double.
  const double sm = 1 / std::sqrt(48.0);
  double worst = 0;
  for (int h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 150; i += 7) {
      const std::int64_t blk = i / 64;
      const float dq = qs.q_scale[static_cast<std::size_t>((h * L.q_blocks + blk) * L.q_groups_per_block + L.q_group(static_cast<int>(i % 64)))];
      std::vector<double> s(90);
      double mx = -1e300;
      for (std::int64_t j = 0; j < 90; ++j) {
        int dot = 0;
        for (int c = 0; c < L.d_qk; ++c) dot += qs.q_code(0, h, i, c) * qs.k_code(0, 0, j, c);
        const float dk = qs.k_scale[static_cast<std::size_t>((j / 32) * 4 + L.k_group(static_cast<int>(j % 32)))];
        double ds = 0;
        for (int c = 0; c < 48; ++c)
          ds += double(qs.q_mean[static_cast<std::size_t>((h * L.q_blocks + blk) * L.d_qk + c)]) * (in.k.get(0, 0, j, c) - qs.k_mean[static_cast<std::size_t>(c)]);
        s[static_cast<std::size_t>(j)] = (double(dot) * double(dq * dk) + ds) * sm;
        mx = std::max(mx, s[static_cast<std::size_t>(j)]);
      }
      double l = 0;
      std::vector<double> o_ref(48, 0.0);
      for (std::int64_t j = 0; j < 90; ++j) {
        const double p = std::exp(s[static_cast<std::size_t>(j)] - mx);
        l += p;
        for (int c = 0; c < 48; ++c) o_ref[static_cast<std::size_t>(c)] += p * in.v.get(0, 0, j, c);
      }
      for (int c = 0; c < 48; ++c) worst = std::max(worst, std::fabs(o_ref[static_cast<std::size_t>(c)] / l - r.o[r.index(0, h, i, c)]));
    }
  CHECK(worst < 1e-4);   // fp32 scores vs double: agreement to fp32 level, not to the INT4 error (~1e-1)
  const ExactResult e = exact_attention(in.q.ref(), in.k.ref(), in.v.ref());
  CHECK(compare(e.o, r.o).max_abs > 100 * worst);   // the quantization error itself is far larger
}

TEST_CASE("emulation: options.stage — the caller's quantize buffers are the ones read") {
  auto in = make_activation_like(12, DType::F16, 1, 4, 2, 150, 190, 64);
  const auto spec = make_spec(AttentionFamily::Wgmma, 8, 64, 128, 128, 8, true, true, false);
  const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
  EmulationOptions o;
  const EmulationResult own = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
  o.stage = &qs;
  const EmulationResult given = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
  CHECK(given.o == own.o);  // the same buffers give the same bits
  CHECK(given.lse == own.lse);
  QuantizedHost flipped = qs;  // one Q code moved by a step: only its row (query 5, head 1) changes
  const std::size_t at = static_cast<std::size_t>((1 * qs.layout.q_len_pad + 5) * qs.layout.row_bytes + 3);
  flipped.q_codes[at] = static_cast<std::int8_t>(flipped.q_codes[at] > 0 ? flipped.q_codes[at] - 1 : flipped.q_codes[at] + 1);
  o.stage = &flipped;
  const EmulationResult moved = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
  int rows_changed = 0;
  for (int h = 0; h < 4; ++h)
    for (std::int64_t i = 0; i < 150; ++i) {
      bool changed = false;
      for (int c = 0; c < 64; ++c) changed |= moved.o[moved.index(0, h, i, c)] != own.o[own.index(0, h, i, c)];
      if (changed) {
        ++rows_changed;
        CHECK((h == 1 && i == 5));
      }
    }
  CHECK(rows_changed == 1);
  QuantizedHost wrong = qs;  // a buffer of the wrong size is rejected, not read out of bounds
  wrong.k_scale.pop_back();
  o.stage = &wrong;
  CHECK_THROWS_AS(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o), Error);
  const auto other = make_spec(AttentionFamily::Wgmma, 8, 64, 128, 64, 8, true, true, false);
  o.stage = &qs;  // the buffers of another tile's layout
  CHECK_THROWS_AS(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), other, o), Error);
}

TEST_CASE("emulation: LSE is the un-smoothed one; rows without keys give O = 0 and LSE = -inf") {
  auto in = make_activation_like(11, DType::F16, 1, 2, 2, 200, 120, 64);
  for (auto spec : {make_spec(AttentionFamily::Mma, 8, 64, 64, 64, 4, true, true, true, CausalMode::BottomRight),
                    make_spec(AttentionFamily::Wgmma, 8, 64, 128, 64, 4, false, true, false, CausalMode::BottomRight)}) {
    AttentionOptions ao;
    ao.causal = CausalMode::BottomRight;   // rows i < 80 see no key
    const ExactResult e = exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), ao);
    EmulationOptions o;   // the real kernel configuration (per-thread INT8, E4M3)
    const EmulationResult r = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    int empty_rows = 0;
    double lse_err = 0;
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 200; ++i) {
        const float lse = r.lse[static_cast<std::size_t>(h * 200 + i)];
        if (i < 80) {
          ++empty_rows;
          CHECK(lse == -std::numeric_limits<float>::infinity());
          for (int c = 0; c < 64; ++c) CHECK(r.o[r.index(0, h, i, c)] == 0.f);
        } else {
          lse_err = std::max(lse_err, std::fabs(double(lse) - e.lse[static_cast<std::size_t>(h * 200 + i)]));
        }
      }
    CHECK(empty_rows == 160);
    // INT8 scores move the LSE a little; a missing q·k̄ term would move it by |q·k̄|·sm_scale ≫ 1
    CHECK(lse_err < 0.5);
    double kbias = 0;   // largest |q·k̄|·sm_scale (sm_scale = 1/8 at d = 64)
    const QuantizedHost qs = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), spec);
    for (float b : qs.q_kbias) kbias = std::max(kbias, std::fabs(double(b)) / 8.0);
    CHECK(kbias > 2.0);   // the correction being tested is large on this data
    MESSAGE("LSE max error " << lse_err << ", max |q·k̄|·sm_scale " << kbias);
  }
}

TEST_CASE("emulation: 23-bit two-level and one-level accumulation agree; output rounding") {
  auto in = make_activation_like(12, DType::F16, 1, 1, 1, 64, 700, 32);
  auto spec = make_spec(AttentionFamily::Mma, 8, 32, 64, 64, 4, false, true, false);
  const EmulationResult a = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec);
  spec.two_level_accum = false;
  const EmulationResult b = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec);
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.o.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a.o[i] - b.o[i])));
    scale = std::max(scale, double(std::fabs(a.o[i])));
  }
  CHECK(diff <= 1e-5 * scale);
  CHECK(a.lse == b.lse);
  EmulationOptions o;
  o.round_output = true;
  spec.out_dtype = DType::BF16;
  const EmulationResult c = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
  for (std::size_t i = 0; i < c.o.size(); ++i) REQUIRE(c.o[i] == round_to_dtype(b.o[i], DType::BF16));
}

TEST_CASE("emulation: the P̂ boundary slack bounds how far a P̂ code rounded the other way moves O") {
  // The same inputs at sm_scale and sm_scale·(1 + 2^-18): every exp2 argument moves by a relative
  // 2^-18, every P̃ by less than 2^-12 of itself (|argument| < 2^6 where a code is not 0), so a
  // P̂ code can change only where the slack at p_boundary_rel = 2^-12 counted it. Away from code
  // changes O moves by less than ~2^-12 of max |O| (P̃ and l alike).
  auto in = make_activation_like(31, DType::F16, 1, 2, 2, 192, 600, 64);
  for (bool two_level : {true, false}) {
    CAPTURE(two_level);
    auto spec = make_spec(AttentionFamily::Mma, 8, 64, 64, 64, 4, false, true, false, CausalMode::BottomRight);
    spec.two_level_accum = two_level;
    EmulationOptions o;
    o.sm_scale = 0.125;
    CHECK(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o).o_slack.empty());
    o.p_boundary_rel = 1.f / 4096;
    const EmulationResult a = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    o.sm_scale = 0.125 * (1 + std::ldexp(1.0, -18));
    const EmulationResult b = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    REQUIRE(a.o_slack.size() == a.o.size());
    double o_max = 0;
    for (float x : a.o) o_max = std::max(o_max, double(std::fabs(x)));
    const double tiny = std::ldexp(o_max, -12);
    std::size_t moved = 0;
    double slack_sum = 0, slack_max = 0;
    for (std::size_t i = 0; i < a.o.size(); ++i) {
      const double d = std::fabs(double(a.o[i]) - b.o[i]);
      REQUIRE(a.o_slack[i] >= 0.f);
      CHECK(d <= a.o_slack[i] + tiny);
      moved += d > tiny;
      slack_sum += a.o_slack[i];
      slack_max = std::max(slack_max, double(a.o_slack[i]));
    }
    const double slack_mean = slack_sum / a.o.size();
    MESSAGE(moved << " outputs moved by a code change; slack mean " << slack_mean / o_max << ", max " << slack_max / o_max
                  << " of max |O|");
    CHECK(moved > 0);                      // (the perturbation does flip codes: the bound is exercised)
    CHECK(slack_mean <= 1e-3 * o_max);     // and the slack stays far below O
  }
}

TEST_CASE("emulation: NaN policy — poison reaches exactly the rows / channels that read it") {
  // (tests/cpu/reference/test_nonfinite.cpp specifies the policy in full.)
  auto in = make_gaussian(13, DType::F32, 1, 1, 1, 128, 128, 32);
  const auto spec = make_spec(AttentionFamily::Mma, 8, 32, 64, 64, 4, false, false, false, CausalMode::TopLeft);
  {
    auto x = in;
    x.v.set(0, 0, 5, 3, std::numeric_limits<float>::quiet_NaN());   // channel 3 of the rows seeing key 5
    const EmulationResult r = emulate_attention(x.q.ref(), x.k.ref(), x.v.ref(), spec);
    for (int i = 0; i < 128; ++i)
      for (int c = 0; c < 32; ++c) REQUIRE(std::isnan(r.o[r.index(0, 0, i, c)]) == (c == 3 && i >= 5));
  }
  {
    auto x = in;
    // key 70: every row that sees it (top-left: i >= 70), nothing else
    x.k.set(0, 0, 70, 0, std::numeric_limits<float>::quiet_NaN());
    const EmulationResult r = emulate_attention(x.q.ref(), x.k.ref(), x.v.ref(), spec);
    for (int i = 0; i < 128; ++i) {
      CAPTURE(i);
      REQUIRE(std::isnan(r.o[r.index(0, 0, i, 0)]) == (i >= 70));
      REQUIRE(std::isnan(r.lse[static_cast<std::size_t>(i)]) == (i >= 70));
    }
  }
}

TEST_CASE("emulation: invalid arguments are rejected with names and values") {
  auto in = make_gaussian(1, DType::F16, 1, 1, 1, 16, 16, 32);
  auto spec = make_spec(AttentionFamily::Mma, 8, 32, 64, 64, 4, false, true, false);
  auto expect = [&](const KernelConfig& s, const EmulationOptions& o, const std::string& needle) {
    try {
      emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), s, o);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
      return;
    }
    FAIL("no exception for " << needle);
  };
  EmulationOptions o;
  o.accum_mantissa_bits = 0;
  expect(spec, o, "accum_mantissa_bits=0");
  o = {};
  o.sm_scale = 0.0;
  expect(spec, o, "sm_scale");
  o = {};
  o.p_boundary_rel = -1.f;
  expect(spec, o, "p_boundary_rel=-1");
  o = {};
  o.pv_format = static_cast<PvFormat>(7);
  expect(spec, o, "pv_format=7");
  auto s2 = spec;
  s2.family = static_cast<AttentionFamily>(7);
  expect(s2, {}, "config.family=7");
  s2 = spec;
  s2.arch = "sm_75";
  expect(s2, {}, "arch 'sm_75'");
  s2 = spec;
  s2.pv_precision = static_cast<PvPrecision>(3);
  expect(s2, {}, "config.pv_precision=3");
  s2 = spec;
  s2.arch = "sm_86";  // no FP8 on Ampere
  s2.pv_precision = PvPrecision::Fp8;
  expect(s2, {}, "FP8 P̃V needs e4m3");
  s2 = spec;
  s2.head_dim = 64;
  expect(s2, {}, "config.head_dim=64");
  s2 = spec;
  s2.qk_bits = 5;
  expect(s2, {}, "qk_bits=5");
}
