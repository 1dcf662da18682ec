// Specification (CPU / CI) of the FP16 P̃V contract in the reference (include/sage2/reference.hpp):
//  - the quantize stage's FP16 V̂: δV = 1 and V̂ = fp16(V) bit for bit for an unsmoothed fp16
//    input; fp16(V − μ) when smoothed; a power-of-two δV for bf16 values beyond 2^15 (every code
//    finite, |V̂| < 2^15); codes stored little-endian in the FP16 slot order; non-finite inputs
//    give code 0 and are flagged like the FP8 path's;
//  - the emulation of an FP16 config reads those codes (PvFormat::Kernel), rounds P̃ (no 448) to
//    fp16, and is markedly more accurate against fp64 than the FP8 config on channel-biased
//    inputs (the reason the option exists);
//  - KernelConfig's P̃V precision: Auto follows the arch (FP16 on sm_80/86/87), kernel_config()
//    writes it back resolved.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention_family.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

KernelConfig config(const char* arch, PvPrecision pv, int head_dim, bool smooth_v = false) {
  KernelConfig c;
  c.family = AttentionFamily::Mma;
  c.arch = arch;
  c.head_dim = head_dim;
  c.tile = KernelTile{64, 64, 4, 2};
  c.pv_precision = pv;
  c.smooth_v = smooth_v;
  return c;
}

}  // namespace

TEST_CASE("reference pv16: KernelConfig's P̃V precision resolves per arch") {
  CHECK(kernel_spec(config("sm_80", PvPrecision::Auto, 64)).pv_fp16);
  CHECK(kernel_spec(config("sm_86", PvPrecision::Auto, 64)).pv_fp16);
  CHECK_FALSE(kernel_spec(config("sm_89", PvPrecision::Auto, 64)).pv_fp16);
  CHECK_FALSE(kernel_spec(config("sm_120", PvPrecision::Auto, 64)).pv_fp16);
  CHECK(kernel_spec(config("sm_90a", PvPrecision::Fp16, 64)).pv_fp16);
  CHECK(kernel_config(kernel_spec(config("sm_80", PvPrecision::Auto, 64))).pv_precision == PvPrecision::Fp16);
  CHECK(kernel_config(kernel_spec(config("sm_89", PvPrecision::Auto, 64))).pv_precision == PvPrecision::Fp8);
  KernelConfig a = config("sm_90a", PvPrecision::Fp16, 64);
  a.family = AttentionFamily::Auto;  // FP16 P̃V: the mma family, on sm_90a too
  CHECK(kernel_spec(a).family == kernels::KernelFamily::AttentionMma);
  a.pv_precision = PvPrecision::Fp8;
  CHECK(kernel_spec(a).family == kernels::KernelFamily::AttentionWgmma);
  CHECK_THROWS_AS(quantize_stage(make_gaussian(1, DType::F16, 1, 1, 1, 8, 8, 64).q.ref(),
                                 make_gaussian(1, DType::F16, 1, 1, 1, 8, 8, 64).k.ref(),
                                 make_gaussian(1, DType::F16, 1, 1, 1, 8, 8, 64).v.ref(), config("sm_80", PvPrecision::Fp8, 64)),
                  Error);  // no FP8 on Ampere
}

TEST_CASE("reference pv16: the quantize stage's FP16 V̂") {
  const std::int64_t nk = 77;
  const int d = 40;
  AttentionInputs in = make_activation_like(7, DType::F16, 1, 2, 1, 33, nk, d);
  {
    const QuantizedHost s = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_80", PvPrecision::Auto, d));
    const StageLayout& L = s.layout;
    CHECK(L.v_code_bytes == 2);
    CHECK(s.v_codes.size() == static_cast<std::size_t>(2 * L.d_v * L.kv_len_pad));
    for (int j = 0; j < 16; ++j) CHECK(L.v_slot_in_16[static_cast<std::size_t>(j)] == 2 * (j >> 2) + (j & 1) + 8 * ((j >> 1) & 1));
    std::int64_t checked = 0;
    for (int c = 0; c < d; ++c) {
      CHECK(s.v_scale[static_cast<std::size_t>(c)] == 1.f);  // δV = 1: V itself
      CHECK(s.v_mean[static_cast<std::size_t>(c)] == 0.f);
      for (std::int64_t n = 0; n < nk; ++n, ++checked) {
        const std::uint16_t want = in.v.bits()[in.v.offset(0, 0, n, c)];
        CHECK(s.v_code16(0, 0, n, c) == want);  // an unsmoothed fp16 V is stored exactly
        CHECK(s.v_value(0, 0, n, c) == in.v.get(0, 0, n, c));
        // the stored byte pair: little-endian at the slot's column
        const std::size_t at = 2 * static_cast<std::size_t>(c * L.kv_len_pad + L.v_slot(n));
        CHECK(static_cast<std::uint16_t>(s.v_codes[at] | (s.v_codes[at + 1] << 8)) == want);
      }
      for (std::int64_t n = nk; n < L.kv_len_pad; ++n) CHECK(s.v_code16(0, 0, n, c) == 0);  // padding
    }
    CHECK(checked == d * nk);
  }
  {  // smoothed: fp16(V − μ)
    const QuantizedHost s = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_86", PvPrecision::Auto, d, true));
    for (int c = 0; c < d; ++c) {
      const float mu = s.v_mean[static_cast<std::size_t>(c)];
      CHECK(mu != 0.f);
      for (std::int64_t n = 0; n < nk; ++n)
        CHECK(s.v_code16(0, 0, n, c) == float_to_half(in.v.get(0, 0, n, c) - mu));
    }
  }
  {  // bf16 beyond fp16's range: a power-of-two δV, codes finite and below 2^15
    AttentionInputs big = make_activation_like(8, DType::BF16, 1, 1, 1, 16, nk, d);
    for (std::int64_t n = 0; n < nk; ++n)
      for (int c = 0; c < d; ++c) big.v.set(0, 0, n, c, big.v.get(0, 0, n, c) * (c % 2 ? 1.0e6f : 1.f));
    big.v.set(0, 0, 5, 3, std::numeric_limits<float>::quiet_NaN());  // non-finite: code 0, flagged
    const QuantizedHost s = quantize_stage(big.q.ref(), big.k.ref(), big.v.ref(), config("sm_90a", PvPrecision::Fp16, d));
    for (int c = 0; c < d; ++c) {
      const float delta = s.v_scale[static_cast<std::size_t>(c)];
      int e = 0;
      CHECK(std::frexp(delta, &e) == 0.5f);  // a power of two
      if (c % 2 == 0) CHECK(delta == 1.f);
      if (c % 2 == 1) CHECK(delta > 1.f);
      for (std::int64_t n = 0; n < nk; ++n) {
        const float v = s.v_value(0, 0, n, c);
        CHECK(std::isfinite(v));
        CHECK(std::fabs(v) < 32768.f);
        if (c == 3 && n == 5) {
          CHECK(s.v_code16(0, 0, n, c) == 0);
          continue;
        }
        CHECK(v == half_to_float(float_to_half(big.v.get(0, 0, n, c) / delta)));  // exact scaling, one rounding
      }
    }
    CHECK(s.v_first_bad[3] == 5);
  }
}

TEST_CASE("reference pv16: the emulation follows the FP16 contract and beats FP8 on channel-biased inputs") {
  const int d = 64;
  const std::int64_t n = 512;
  ActivationModel diffuse;  // accuracy_targets.hpp's "diffuse" model
  diffuse.latent_scale = 0.5;
  diffuse.qk_noise = 0.3;
  const AttentionInputs in = make_activation_like(11, DType::F16, 1, 2, 1, n, n, d, diffuse);
  AttentionOptions xo;
  const ExactResult ex = exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), xo);
  const EmulationResult e16 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_80", PvPrecision::Auto, d));
  const EmulationResult e8 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_89", PvPrecision::Auto, d));
  const EmulationResult e16a = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_89", PvPrecision::Fp16, d));
  const Metrics m16 = compare(ex.o, e16.o), m8 = compare(ex.o, e8.o), m16a = compare(ex.o, e16a.o);
  MESSAGE("emulation rel-L1 vs fp64 (diffuse, d 64, N 512): FP16 P̃V " << m16.rel_l1 << ", FP8 " << m8.rel_l1
                                                                       << ", ratio " << m8.rel_l1 / m16.rel_l1);
  CHECK(m16.rel_l1 < 0.75 * m8.rel_l1);
  CHECK(m16.cos_sim > m8.cos_sim);
  // the same contract on sm_89 (the option) as on sm_80 (the default): the same numbers
  CHECK(m16a.rel_l1 == m16.rel_l1);
  CHECK(e16a.o == e16.o);
  // LSE: p_scale 1 (no log2 448 to subtract) gives the true LSE as the FP8 path does
  double lse16 = 0, lse8 = 0;
  for (std::size_t i = 0; i < ex.lse.size(); ++i) {
    lse16 = std::max(lse16, std::fabs(e16.lse[i] - ex.lse[i]));
    lse8 = std::max(lse8, std::fabs(e8.lse[i] - ex.lse[i]));
  }
  CHECK(lse16 < 0.1);
  CHECK(lse8 < 0.1);
  // the ablation FP16 format on an FP8 config (re-quantized V, k-chunks of 32) is the same contract
  EmulationOptions ab;
  ab.pv_format = PvFormat::FP16;
  const EmulationResult eab = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_89", PvPrecision::Fp8, d), ab);
  const Metrics mab = compare(ex.o, eab.o);
  CHECK(std::fabs(mab.rel_l1 - m16.rel_l1) <= 0.02 * m16.rel_l1);
}
