// Specification (CPU / CI) of fp16 accumulation of P̃V (SageAttention2++, issue 31;
// KernelSpec::pv_acc16, KernelConfig::pv_accum, include/sage2/reference.hpp "fp16 accumulation"):
//  - the spec: part of the key ("|acc16") of the attention kernel and of the quantize ops that
//    write V̂, dropped from the others; refused on sm_90a and by the wgmma family, and without
//    two-level accumulation; the arch table says where it runs and where it is the default;
//  - the quantize stage bounds V̂ for an fp16 accumulator of 64 keys: e4m3 δV = amax/2.25 (the
//    reference's bound), FP16 δV = 2^max(0, e-9);
//  - the emulation rounds the accumulator to fp16 per mma step within 64-key segments, so the
//    worst case (every P̂ = 448, every V̂ at its bound, 64 keys) stays finite, also with bk 128
//    (with V̂ scaled to 448, or FP16 V̂ unscaled, 64 such products overflow fp16);
//  - its accuracy against fp64 next to the fp32-accumulation variant on gaussian and
//    channel-biased inputs at head dims 64 and 128 (printed: the numbers of the bar).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/arch.hpp"
#include "kernels/attention_family.hpp"
#include "kernels/kernel_spec.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

namespace {

KernelConfig config(const char* arch, PvPrecision pv, PvAccum acc, int head_dim, int bk = 64) {
  KernelConfig c;
  c.family = AttentionFamily::Mma;
  c.arch = arch;
  c.head_dim = head_dim;
  c.tile = KernelTile{64, bk, 4, 2};
  c.pv_precision = pv;
  c.pv_accum = acc;
  return c;
}

kernels::KernelSpec attn_spec(kernels::Arch arch, bool pv_fp16, bool acc16) {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionMma;
  s.consumer = s.family;
  s.arch = arch;
  s.head_dim = 128;
  s.tile = kernels::TileConfig{64, 64, 4, 2};
  s.pv_fp16 = pv_fp16;
  s.pv_acc16 = acc16;
  return s;
}

}  // namespace

TEST_CASE("pv acc16: the spec field, its key, its arch rules") {
  using kernels::Arch;
  const kernels::KernelSpec a = attn_spec(Arch::Sm89, false, true);
  CHECK_NOTHROW(a.validate());
  CHECK(a.key().find("|acc16") != std::string::npos);
  CHECK(attn_spec(Arch::Sm89, false, false).key().find("acc16") == std::string::npos);  // old keys unchanged
  CHECK(a.key() != attn_spec(Arch::Sm89, false, false).key());
  // the quantize op writing V̂ depends on it, the others do not
  CHECK(kernels::quantize_spec_for(a, kernels::QuantOp::QuantizeV).key().find("|acc16") != std::string::npos);
  CHECK(kernels::quantize_spec_for(a, kernels::QuantOp::Fused).pv_acc16);
  CHECK_FALSE(kernels::quantize_spec_for(a, kernels::QuantOp::QuantizeK).pv_acc16);
  CHECK_FALSE(kernels::quantize_spec_for(a, kernels::QuantOp::QuantizeQ).pv_acc16);
  // every mma.sync arch but sm_90a, FP8 and FP16 P̃V
  for (Arch arch : {Arch::Sm80, Arch::Sm86, Arch::Sm87})
    CHECK_NOTHROW(attn_spec(arch, true, true).validate());
  for (Arch arch : {Arch::Sm89, Arch::Sm100, Arch::Sm103, Arch::Sm120, Arch::Sm121}) {
    CHECK_NOTHROW(attn_spec(arch, false, true).validate());
    CHECK_NOTHROW(attn_spec(arch, true, true).validate());
  }
  CHECK_THROWS_WITH_AS(attn_spec(Arch::Sm90a, false, true).validate(), doctest::Contains("sm_90a"), Error);
  CHECK_THROWS_WITH_AS(attn_spec(Arch::Sm90a, true, true).validate(), doctest::Contains("pv_acc16"), Error);
  kernels::KernelSpec w = attn_spec(Arch::Sm90a, false, true);
  w.family = w.consumer = kernels::KernelFamily::AttentionWgmma;
  CHECK_THROWS_AS(w.validate(), Error);
  kernels::KernelSpec one = attn_spec(Arch::Sm89, false, true);
  one.two_level_accum = false;
  CHECK_THROWS_WITH_AS(one.validate(), doctest::Contains("two_level_accum"), Error);
  // defaults: fp16 accumulation on the GeForce-class FP8 archs, as the reference's "fp32+fp16"
  // (sm_89, sm_120, sm_121); fp32 on every other arch; never on the FP16 path
  for (Arch arch : {Arch::Sm89, Arch::Sm120, Arch::Sm121}) CHECK(kernels::default_pv_acc16(arch, false));
  for (Arch arch : {Arch::Sm80, Arch::Sm86, Arch::Sm87, Arch::Sm90a, Arch::Sm100, Arch::Sm103})
    CHECK_FALSE(kernels::default_pv_acc16(arch, false));
  CHECK(kernel_spec(config("sm_89", PvPrecision::Auto, PvAccum::Auto, 64)).pv_acc16);
  CHECK_FALSE(kernel_spec(config("sm_89", PvPrecision::Fp16, PvAccum::Auto, 64)).pv_acc16);
  for (const kernels::ArchInfo& i : kernels::arch_table()) {
    CAPTURE(i.name);
    CHECK_FALSE(kernels::default_pv_acc16(i.arch, true));
    CHECK(kernels::default_pv_acc16(i.arch, false) == (i.pv_acc16 && i.pv_acc16_default && i.fp8_pv));
    CHECK(i.pv_acc16 == !i.arch_specific);
  }
  // KernelConfig: Auto resolves per arch, kernel_config() writes it back
  CHECK(kernel_spec(config("sm_89", PvPrecision::Auto, PvAccum::Fp16, 64)).pv_acc16);
  CHECK_FALSE(kernel_spec(config("sm_89", PvPrecision::Auto, PvAccum::Fp32, 64)).pv_acc16);
  CHECK(kernel_config(kernel_spec(config("sm_80", PvPrecision::Auto, PvAccum::Fp16, 64))).pv_accum == PvAccum::Fp16);
  CHECK(kernel_config(kernel_spec(config("sm_80", PvPrecision::Auto, PvAccum::Auto, 64))).pv_accum == PvAccum::Fp32);
  CHECK(std::string(pv_accum_name(PvAccum::Fp16)) == "fp16");
}

TEST_CASE("pv acc16: the quantize stage bounds V̂ for a 64-key fp16 accumulator") {
  const std::int64_t nk = 100;
  const int d = 32;
  AttentionInputs in = make_activation_like(5, DType::F16, 1, 1, 1, 16, nk, d);
  {  // e4m3: δV = amax / 2.25, codes within ±2.25
    const QuantizedHost s8 = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_89", PvPrecision::Fp8, PvAccum::Fp32, d));
    const QuantizedHost s = quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), config("sm_89", PvPrecision::Fp8, PvAccum::Fp16, d));
    for (int c = 0; c < d; ++c) {
      float amax = 0;
      for (std::int64_t n = 0; n < nk; ++n) amax = std::max(amax, std::fabs(in.v.get(0, 0, n, c)));
      CHECK(s8.v_scale[static_cast<std::size_t>(c)] == amax / 448.f);
      CHECK(s.v_scale[static_cast<std::size_t>(c)] == amax / 2.25f);
      float vmax = 0;
      for (std::int64_t n = 0; n < nk; ++n) {
        const float v = s.v_value(0, 0, n, c);
        vmax = std::max(vmax, std::fabs(v));
        CHECK(v == fp8_round(in.v.get(0, 0, n, c) * (2.25f / amax), Fp8Format::E4M3));
      }
      CHECK(vmax == 2.25f);  // the channel's largest |V| lands on the bound (2.25 is an e4m3 value)
    }
  }
  {  // FP16: |V̂| < 2^9 by a power-of-two δV (values up to 6e4 in fp16)
    AttentionInputs big = in;
    for (std::int64_t n = 0; n < nk; ++n)
      for (int c = 0; c < d; ++c) big.v.set(0, 0, n, c, big.v.get(0, 0, n, c) * (c % 2 ? 1000.f : 1.f));
    const QuantizedHost s = quantize_stage(big.q.ref(), big.k.ref(), big.v.ref(), config("sm_80", PvPrecision::Fp16, PvAccum::Fp16, d));
    const QuantizedHost s32 = quantize_stage(big.q.ref(), big.k.ref(), big.v.ref(), config("sm_80", PvPrecision::Fp16, PvAccum::Fp32, d));
    for (int c = 0; c < d; ++c) {
      const float delta = s.v_scale[static_cast<std::size_t>(c)];
      int e = 0;
      CHECK(std::frexp(delta, &e) == 0.5f);
      CHECK(s32.v_scale[static_cast<std::size_t>(c)] == 1.f);  // fp32 accumulation: V itself
      if (c % 2 == 1) CHECK(delta > 1.f);
      for (std::int64_t n = 0; n < nk; ++n) {
        const float v = s.v_value(0, 0, n, c);
        CHECK(std::fabs(v) < 512.f);
        CHECK(v == half_to_float(float_to_half(big.v.get(0, 0, n, c) / delta)));  // exact scaling
      }
    }
  }
}

TEST_CASE("pv acc16: the worst case of a 64-key segment stays finite") {
  // One query, keys with equal scores (every P̂ = 448 in FP8, 1 in FP16) and a V channel constant
  // at its largest value: each segment's fp16 sum is 64·448·2.25 = 64512 (FP8).
  for (int bk : {64, 128}) {
    for (bool fp16 : {false, true}) {
      CAPTURE(bk);
      CAPTURE(fp16);
      const int d = 32;
      const std::int64_t nk = 256;
      AttentionInputs in = make_gaussian(3, DType::F16, 1, 1, 1, 4, nk, d);
      const float big = fp16 ? 60000.f : 3.f;
      for (std::int64_t n = 0; n < nk; ++n)
        for (int c = 0; c < d; ++c) {
          in.k.set(0, 0, n, c, 0.f);  // every score 0: P̃ = 1
          in.v.set(0, 0, n, c, c == 0 ? big : (c == 1 ? -big : in.v.get(0, 0, n, c)));
        }
      const KernelConfig cfg = config(fp16 ? "sm_80" : "sm_89", fp16 ? PvPrecision::Fp16 : PvPrecision::Fp8, PvAccum::Fp16, d, bk);
      const EmulationResult e = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), cfg);
      for (std::int64_t i = 0; i < 4; ++i) {
        CHECK(e.o[e.index(0, 0, i, 0)] == doctest::Approx(big).epsilon(1e-3));
        CHECK(e.o[e.index(0, 0, i, 1)] == doctest::Approx(-big).epsilon(1e-3));
      }
    }
  }
}

TEST_CASE("pv acc16: the emulation rounds an fp16 accumulator per k-step, close to fp32 accumulation") {
  const int d = 64;
  const std::int64_t n = 384;
  const AttentionInputs in = make_activation_like(21, DType::F16, 1, 2, 1, 128, n, d);
  for (bool fp16 : {false, true}) {
    CAPTURE(fp16);
    const char* arch = fp16 ? "sm_80" : "sm_89";
    const PvPrecision pv = fp16 ? PvPrecision::Fp16 : PvPrecision::Fp8;
    const EmulationResult e32 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config(arch, pv, PvAccum::Fp32, d));
    const EmulationResult e16 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config(arch, pv, PvAccum::Fp16, d));
    std::vector<double> r32(e32.o.begin(), e32.o.end());
    const Metrics diff = compare(r32, e16.o);
    CHECK(diff.nonfinite == 0);
    CHECK(diff.rel_l1 > 0);         // fp16 rounding shows
    CHECK(diff.rel_l1 < 0.02);      // ... at the size of fp16's and V̂'s resolution
    // the k-step matters (the rounding points are part of the contract) and 0 means the instruction's
    EmulationOptions o16, o32, o0;
    o16.pv_acc16_step = 16;
    o32.pv_acc16_step = 32;
    const auto cfg = config(arch, pv, PvAccum::Fp16, d);
    const EmulationResult s16 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), cfg, o16);
    const EmulationResult s32 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), cfg, o32);
    CHECK(s16.o != s32.o);
    CHECK(e16.o == (fp16 ? s16.o : s32.o));
    EmulationOptions bad;
    bad.pv_acc16_step = 8;
    CHECK_THROWS_AS(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), cfg, bad), Error);
    // the LSE does not depend on the accumulator
    CHECK(e16.lse == e32.lse);
  }
  // one hand-checked row: a single key (P̂ = 448) gives O = fp16(448·V̂)·(1/l)·δV with l ≈ 448
  {
    AttentionInputs one = make_gaussian(4, DType::F16, 1, 1, 1, 1, 1, 32);
    QuantizedHost s = quantize_stage(one.q.ref(), one.k.ref(), one.v.ref(), config("sm_89", PvPrecision::Fp8, PvAccum::Fp16, 32));
    const EmulationResult e = emulate_attention(one.q.ref(), one.k.ref(), one.v.ref(), config("sm_89", PvPrecision::Fp8, PvAccum::Fp16, 32));
    for (int c = 0; c < 32; ++c) {
      const float h = half_to_float(float_to_half(448.f * s.v_value(0, 0, 0, c)));  // exact: 448·V̂ has 4 bits
      const float want = (h * (1.f / 448.f)) * s.v_scale[static_cast<std::size_t>(c)];
      CHECK(e.o[e.index(0, 0, 0, c)] == doctest::Approx(want).epsilon(1e-6));  // l = 448 up to exp2's rounding
    }
  }
}

TEST_CASE("pv acc16: accuracy against fp64 next to fp32 accumulation (gaussian, channel-biased; hd 64, 128)") {
  // The bar is the reference's rel-L1 for the same numerics (its fp16-accumulated kernels
  // are less accurate than its fp32 ones); both variants are printed here for the report, and the
  // fp16 variant must stay within 10 % of the fp32 one (an accumulator error that grew with N or
  // an overflow would not).
  const std::int64_t n = 1024;
  for (int d : {64, 128}) {
    for (int kind : {0, 1}) {
      const AttentionInputs in = kind == 0 ? make_gaussian(40 + d, DType::F16, 1, 2, 2, n, n, d)
                                           : make_activation_like(50 + d, DType::F16, 1, 2, 2, n, n, d);
      AttentionOptions xo;
      const ExactResult ex = exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), xo);
      for (bool fp16 : {false, true}) {
        const char* arch = fp16 ? "sm_80" : "sm_89";
        const PvPrecision pv = fp16 ? PvPrecision::Fp16 : PvPrecision::Fp8;
        const EmulationResult e32 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config(arch, pv, PvAccum::Fp32, d));
        const EmulationResult e16 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config(arch, pv, PvAccum::Fp16, d));
        EmulationOptions h;  // the H100 proxy's rounding points (e4m3 lowered to k16 HMMAs)
        h.pv_acc16_step = 16;
        const EmulationResult e16h = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), config(arch, pv, PvAccum::Fp16, d), h);
        const Metrics m32 = compare(ex.o, e32.o), m16 = compare(ex.o, e16.o), m16h = compare(ex.o, e16h.o);
        char line[300];
        std::snprintf(line, sizeof line,
                      "pv acc16 accuracy: %-14s hd %3d N %lld, %s P̃V: rel-L1 vs fp64 fp32-acc %.5f, fp16-acc %.5f "
                      "(ratio %.3f; k16 steps %.5f), cos %.6f / %.6f",
                      kind == 0 ? "gaussian" : "channel-biased", d, static_cast<long long>(n), fp16 ? "FP16" : "FP8",
                      m32.rel_l1, m16.rel_l1, m16.rel_l1 / m32.rel_l1, m16h.rel_l1, m32.cos_sim, m16.cos_sim);
        MESSAGE(line);
        std::printf("%s\n", line);
        CHECK(m16.nonfinite == 0);
        CHECK(m16.rel_l1 <= 1.10 * m32.rel_l1);
        CHECK(m16h.rel_l1 <= 1.10 * m32.rel_l1);
      }
    }
  }
}
