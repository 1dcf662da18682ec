// Specification: the row-sum amendment under study for issue 31 (EmulationOptions::rowsum_of_phat:
// l adds the P̂ the P̂·V̂ product reads, 16 keys a step, as a tensor-core row sum against ones
// would, instead of the fp32 P̃):
//  - off (the default) nothing changes: the contract's results, bit for bit;
//  - with P̃ unrounded (PvFormat::F32) P̂ = P̃, so it only reorders the sum: O within 1e-6;
//  - with the kernels' own P̃ formats its O error against fp64 is at most 2 % above the
//    contract's, on gaussian, activation-like and heavy-tailed data, for FP16 and FP8 P̃V
//    (the full study: `sage2-accuracy --only rowsum`, bench/results/2026-11-28-session10/).
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

TEST_CASE("rowsum: off changes nothing; with unrounded P it only reorders the sum") {
  const AttentionInputs in = make_activation_like(5, DType::F16, 1, 2, 1, 100, 300, 64);
  for (const char* arch : {"sm_80", "sm_89"}) {
    CAPTURE(arch);
    const KernelConfig spec = mma_amendment_spec(arch, 64, CausalMode::TopLeft);
    EmulationOptions o;
    const EmulationResult base = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    const EmulationResult again = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    CHECK(base.o == again.o);
    o.pv_format = PvFormat::F32;
    const EmulationResult f32 = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    o.rowsum_of_phat = true;
    const EmulationResult hat = emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), spec, o);
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < f32.o.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(f32.o[i] - hat.o[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(f32.o[i])));
    }
    CHECK(worst <= 1e-6 * std::max(1.0, scale));
  }
}

TEST_CASE("rowsum: the sum of P^ keeps rel-L1 within 2 % of the contract's on three data kinds, FP16 and FP8 P~V") {
  const std::int64_t n = 512;
  const int d = 64;
  const auto kinds = sage2::test::data_kinds(31, n, d);
  for (const sage2::test::DataKind& k : kinds)
    for (CausalMode cm : {CausalMode::None, CausalMode::TopLeft}) {
      AttentionOptions ao;
      ao.causal = cm;
      const ExactResult e = exact_attention(k.in.q.ref(), k.in.k.ref(), k.in.v.ref(), ao);
      for (const char* arch : {"sm_80", "sm_89"}) {
        const KernelConfig spec = mma_amendment_spec(arch, d, cm);
        EmulationOptions o;
        o.accum_mantissa_bits = std::string(arch) == "sm_89" ? 13 : 23;   // the tensor cores' accumulators
        const Metrics today = compare(e.o, emulate_attention(k.in.q.ref(), k.in.k.ref(), k.in.v.ref(), spec, o).o);
        o.rowsum_of_phat = true;
        const Metrics hat = compare(e.o, emulate_attention(k.in.q.ref(), k.in.k.ref(), k.in.v.ref(), spec, o).o);
        std::printf("rowsum bar %-16s %-6s %-9s rel-L1 sum P~ %.5f sum P^ %.5f (x%.4f)\n", k.name, arch,
                    causal_mode_name(cm), today.rel_l1, hat.rel_l1, hat.rel_l1 / today.rel_l1);
        CAPTURE(k.name);
        CAPTURE(arch);
        CAPTURE(std::string(causal_mode_name(cm)));
        CHECK(hat.nonfinite == 0);
        CHECK(hat.rel_l1 <= 1.02 * today.rel_l1);
      }
    }
}
