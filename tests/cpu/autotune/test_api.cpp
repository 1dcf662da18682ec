// Specification of tuning as a library call (autotune/tune.hpp) and of its public entry points
// (sage2::tune, sage2_tune) as far as they run without a GPU: the specialisation grid, the C
// options' defaults (those of sage2::TuneOptions) and the C boundary's refusals. Timing itself
// runs in the GPU suite and through sage2-autotune (tests/cpu/autotune/test_fake_driver.cpp).
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autotune/tune.hpp"
#include "kernels/attention_family.hpp"
#include "sage2/sage2.h"
#include "sage2/sage2.hpp"

using namespace sage2;

TEST_CASE("tune: the specialisation grid leaves out what no family runs, and duplicates") {
  autotune::SpecialisationGrid g;
  g.head_dims = {64, 128};
  g.causal = {CausalMode::None};
  g.dtypes = {DType::F16};
  g.pv = {PvPrecision::Auto, PvPrecision::Fp8};
  // Ampere has no FP8 P̃V: only the Auto (FP16) ones remain.
  const auto ampere = autotune::specialisations(g, kernels::Arch::Sm80);
  CHECK(ampere.size() == 2);
  for (const auto& s : ampere) CHECK(s.pv_fp16);
  // Ada: Auto is FP8 there, so Auto and Fp8 are the same specialisation, listed once.
  CHECK(autotune::specialisations(g, kernels::Arch::Sm89).size() == 2);
  g.with_lse = true;
  const auto lse = autotune::specialisations(g, kernels::Arch::Sm89);
  REQUIRE(lse.size() == 4);
  CHECK(!lse[0].return_lse);
  CHECK(lse[1].return_lse);
  // 4-bit turns smooth-Q on unless told
  g.with_lse = false;
  g.bits = {4};
  for (const auto& s : autotune::specialisations(g, kernels::Arch::Sm89)) CHECK(s.smooth_q);
  g.smooth_q = false;
  for (const auto& s : autotune::specialisations(g, kernels::Arch::Sm89)) CHECK(!s.smooth_q);
}

TEST_CASE("tune: the grid says why it left combinations out (sage2-autotune's refusal, issue 32)") {
  autotune::SpecialisationGrid g;
  g.head_dims = {64, 512};
  g.causal = {CausalMode::None};
  g.dtypes = {DType::F16};
  g.pv = {PvPrecision::Fp8};
  std::vector<std::string> why;
  CHECK(autotune::specialisations(g, kernels::Arch::Sm80, &why).empty());
  // Once, though both head dims were left out for it; the arch's lack named, not a family's rule.
  REQUIRE(why.size() == 1);
  CHECK(why[0].find("sm_80 has no FP8") == 0);
  why.clear();
  g.bits = {4};
  CHECK(autotune::specialisations(g, kernels::Arch::Sm100, &why).empty());
  REQUIRE(why.size() == 1);
  CHECK(why[0].find("sm_100 has no INT4") == 0);
  // A forced family: its own requirement; the head dim it runs is kept.
  why.clear();
  g.bits = {8};
  g.families = {kernels::KernelFamily::AttentionWgmma};
  const auto wg = autotune::specialisations(g, kernels::Arch::Sm90a, &why);
  REQUIRE(wg.size() == 1);
  CHECK(wg[0].head_dim == 64);
  REQUIRE(why.size() == 1);
  CHECK(why[0] == std::string("the wgmma family ") +
                      kernels::attention_family(kernels::KernelFamily::AttentionWgmma).requirement);
  // The reason is given exactly when family_runs() says no, for every arch of the table.
  for (const auto& a : kernels::arch_table())
    for (const kernels::AttentionFamilyDesc* d : kernels::attention_families())
      for (int bits : {4, 8})
        for (int hd : {64, 512})
          for (bool pv16 : {false, true})
            CHECK(kernels::family_runs(*d, a.arch, bits, hd, pv16) ==
                  !kernels::family_runs_why_not(*d, a.arch, bits, hd, pv16).has_value());
}

TEST_CASE("tune: the default batch is 16K tokens, 1 to 4 sequences") {
  CHECK(autotune::default_batch(1024) == 4);
  CHECK(autotune::default_batch(8192) == 2);
  CHECK(autotune::default_batch(16384) == 1);
  CHECK(autotune::default_batch(65536) == 1);
}

TEST_CASE("tune: sage2_tune_options_init gives sage2::TuneOptions' defaults") {
  sage2_tune_options o;
  std::memset(&o, 0x5a, sizeof o);
  sage2_tune_options_init(&o);
  const TuneOptions d;
  CHECK(o.head_dims == nullptr);
  CHECK(o.n_head_dims == 0);
  CHECK(o.seq_lens == nullptr);
  CHECK(o.n_seq_lens == 0);
  CHECK(o.dtype == -1);
  CHECK(o.causal == -1);
  CHECK(o.qk_bits == d.qk_bits);
  CHECK(o.pv_precision == SAGE2_PV_AUTO);
  CHECK(o.heads == d.heads);
  CHECK(o.kv_heads == d.kv_heads);
  CHECK(o.batch == d.batch);
  CHECK(o.reps == d.reps);
  CHECK(o.warmup == d.warmup);
  CHECK(o.budget_seconds == d.budget_seconds);
  CHECK(o.min_gain == d.min_gain);
  CHECK(o.write_db == 1);
  CHECK(o.jobs == 0);
  sage2_tune_options_init(nullptr);  // no crash
}

TEST_CASE("tune: sage2_tune refuses a NULL context with a status and a message") {
  sage2_tune_summary s{};
  char db[16] = "untouched";
  CHECK(sage2_tune(nullptr, nullptr, &s, db, sizeof db) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  CHECK(std::string(db) == "untouched");
}

TEST_CASE("warmup: sage2_warmup_options_init gives sage2::WarmupOptions' defaults; a NULL context is refused") {
  sage2_warmup_options o;
  std::memset(&o, 0x5a, sizeof o);
  sage2_warmup_options_init(&o);
  const WarmupOptions d;
  CHECK(o.head_dims == nullptr);
  CHECK(o.n_head_dims == 0);  // the default list
  CHECK(d.head_dims == std::vector<int>{64, 96, 128});
  CHECK(o.dtype == -1);       // f16 and bf16, as d.dtypes
  CHECK(d.dtypes.size() == 2);
  CHECK(o.causal == -1);      // none and top-left
  CHECK(d.causal == std::vector<CausalMode>{CausalMode::None, CausalMode::TopLeft});
  CHECK(o.qk_bits == 0);
  CHECK(o.pv_precision == 0);
  CHECK(o.return_lse == 0);
  CHECK(d.return_lse == std::vector<bool>{false});
  CHECK(o.masks == 1u);       // unmasked calls only
  CHECK(o.varlen == 0);
  CHECK(o.smooth_k == 1);
  CHECK(o.smooth_v == 0);
  CHECK(o.small_q_path == 0);
  CHECK(o.pv_accum == 0);
  CHECK(o.smooth_q == 0);
  CHECK(o.jobs == 0);
  sage2_warmup_options_init(nullptr);  // no crash

  sage2_warmup_summary s{};
  s.kernels = 7;
  CHECK(sage2_warmup(nullptr, &o, &s) == SAGE2_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(sage2_last_error()).find("ctx is NULL") != std::string::npos);
  CHECK(s.kernels == 7);  // untouched
}
