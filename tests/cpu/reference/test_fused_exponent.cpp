// Specification: the fused exponent, the mma family's contract since session 27 (issue 41;
// EmulationOptions::exponent_form: P̃·p_scale = exp2(fma(float(dot), (δq·δk)·c2, −m_sh)), one
// rounding, instead of rounding the score s = dot·(δq·δk)·c2 first; the row max is the same):
//  - the contract is the fused form for the mma family's 16-row warps, bit for bit Fused; with
//    32-row warps (two m tiles a warp) and in the wgmma family it is the unfused form;
//  - with smooth Q (ΔS added to the score) the unfused form stays whatever is asked: bit for bit;
//  - only P̃ moves between the forms (by one rounding of the exponent's argument): the LSE within
//    1e-5, O within a few P̂ code steps;
//  - the fused form's O error against fp64 is at most 2 % above the unfused form's on gaussian,
//    activation-like and heavy-tailed data, FP16 and FP8 P̃V, alone and with the row-sum
//    amendment (test_rowsum.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "amendment_data.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::reference;

using sage2::test::mma_amendment_spec;
using sage2::test::wgmma_amendment_spec;

namespace {

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  return worst;
}

}  // namespace

TEST_CASE("fused exponent: the mma family's contract; with smooth Q both forms are the unfused one; only P~ moves") {
  const AttentionInputs in = make_activation_like(7, DType::F16, 1, 2, 1, 100, 300, 64);
  for (const char* arch : {"sm_80", "sm_89"}) {
    CAPTURE(arch);
    KernelConfig spec = mma_amendment_spec(arch, 64, CausalMode::TopLeft);
    spec.tile = KernelTile{64, 64, 4, 2};  // 16 rows a warp: the default tiles
    EmulationOptions o;
    // the fp32 row sum of P̃, which sees P̃ move (with FP16 P̃V the contract sums P̂, whose fp16
    // rounding mostly absorbs the one rounding between the forms: test_rowsum.cpp)
    o.row_sum = RowSumForm::OfPTilde;
    o.exponent_form = ExponentForm::Unfused;
    const EmulationResult base = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    o.exponent_form = ExponentForm::Fused;
    const EmulationResult fused = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    o.exponent_form = ExponentForm::Contract;
    CHECK(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o).o == fused.o);  // the mma contract
    CHECK(fused.o != base.o);   // it does something
    KernelConfig rows32 = spec;
    rows32.tile = KernelTile{128, 64, 4, 2};  // 32 rows a warp: the unfused form
    EmulationOptions u32;
    u32.exponent_form = ExponentForm::Unfused;
    CHECK(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), rows32, EmulationOptions{}).o ==
          emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), rows32, u32).o);
    double lse = 0;
    for (std::size_t i = 0; i < base.lse.size(); ++i) lse = std::max(lse, static_cast<double>(std::fabs(fused.lse[i] - base.lse[i])));
    CHECK(lse <= 1e-5);
    double scale = 0;
    for (float x : base.o) scale = std::max(scale, static_cast<double>(std::fabs(x)));
    CHECK(max_abs_diff(fused.o, base.o) <= 0.02 * scale);   // a few P̂ code steps at most

    const KernelConfig sq = mma_amendment_spec(arch, 64, CausalMode::None, 4, true);
    EmulationOptions a, b;
    a.exponent_form = ExponentForm::Unfused;
    b.exponent_form = ExponentForm::Fused;
    CHECK(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), sq, a).o ==
          emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), sq, b).o);
  }
  // the wgmma family's contract is the unfused form
  const KernelConfig wg = wgmma_amendment_spec(64, CausalMode::TopLeft);
  EmulationOptions c, u;
  u.exponent_form = ExponentForm::Unfused;
  CHECK(emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), wg, c).o == emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), wg, u).o);
}

TEST_CASE("fused exponent: rel-L1 within 2 % of the contract's on three data kinds, FP16 and FP8 P~V, with and "
          "without the row sum of P^") {
  const std::int64_t n = 512;
  const int d = 64;
  const auto kinds = sage2::test::data_kinds(41, n, d);
  for (const sage2::test::DataKind& k : kinds)
    for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft}) {
      AttentionOptions ao;
      ao.causal = cm;
      const ExactResult e = exact_attention(k.in.q.ref(), k.in.k.ref(), k.in.v.ref(), ao);
      for (const char* arch : {"sm_80", "sm_89"})
        for (bool rowsum : {false, true}) {
          const KernelConfig spec = mma_amendment_spec(arch, d, cm);
          EmulationOptions o;
          o.accum_mantissa_bits = std::string(arch) == "sm_89" ? 13 : 23;   // the tensor cores' accumulators
          o.row_sum = rowsum ? RowSumForm::OfPHat : RowSumForm::OfPTilde;
          o.exponent_form = ExponentForm::Unfused;
          const EmulationResult today_r = emulate_attention(k.in.q.ref(), k.in.k.ref(), k.in.v.ref(), spec, o);
          o.exponent_form = ExponentForm::Fused;
          const EmulationResult fused_r = emulate_attention(k.in.q.ref(), k.in.k.ref(), k.in.v.ref(), spec, o);
          const Metrics today = compare(e.o, today_r.o), fused = compare(e.o, fused_r.o);
          double lse_today = 0, lse_fused = 0;
          for (std::size_t i = 0; i < e.lse.size(); ++i) {
            if (!std::isfinite(e.lse[i])) continue;
            lse_today = std::max(lse_today, std::fabs(today_r.lse[i] - e.lse[i]));
            lse_fused = std::max(lse_fused, std::fabs(fused_r.lse[i] - e.lse[i]));
          }
          std::printf("fused exponent %-16s %-6s %-9s rowsum %-3s rel-L1 %.5f -> %.5f (x%.4f), LSE err %.2e -> %.2e\n",
                      k.name, arch, causal_mode_name(cm), rowsum ? "P^" : "P~", today.rel_l1, fused.rel_l1,
                      fused.rel_l1 / today.rel_l1, lse_today, lse_fused);
          CAPTURE(k.name);
          CAPTURE(arch);
          CAPTURE(rowsum);
          CAPTURE(std::string(causal_mode_name(cm)));
          CHECK(fused.nonfinite == 0);
          CHECK(fused.rel_l1 <= 1.02 * today.rel_l1);
          CHECK(lse_fused <= lse_today + 1e-5);
        }
    }
}
