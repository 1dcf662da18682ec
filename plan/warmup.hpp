// What a warm-up compiles: every kernel that any call inside a selection can load, on one
// Context's settings (plan/call_kernels.hpp). sage2-autotune (tuning and --compile-only),
// sage2::warmup / sage2_warmup and Python's sage2.warmup all compile this set, so that after a
// warm-up — or after importing its cache bundle on another machine — such calls compile nothing.
//
// How it is complete: a call's kernels are call_kernel_specs(its validated problem, settings).
// They depend on the call's options (the selection's lists) and, through the sizes, only on
//  - the path: the direct path for few query rows (plan/direct_rule.hpp) or the quantized path;
//  - the direct path's tile (query rows per kv head: 16 / 32 / 64 / 128 per CTA) and whether its
//    splits are merged (long key sequences);
//  - the quantized path's tile: the heuristic default (size-independent) or the tuning
//    database's entry for the size buckets (Planner::tuned_tiles lists every one it can give).
// So the warm-up validates, through the same validation as a call, one representative call per
// case above and takes the union of their kernels, adding each tuned tile. The CPU test
// tests/cpu/plan/test_warmup.cpp checks the claim with random calls on every arch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "plan/call_kernels.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

// The head dims, dtypes and causal modes a selection covers, every combination: the warm-up's
// (WarmupSelection) and tuning's (autotune::SpecialisationGrid). The defaults are those of the
// public TuneOptions and WarmupOptions.
struct ShapeSelection {
  std::vector<int> head_dims = {64, 96, 128};
  std::vector<DType> dtypes = {DType::F16, DType::BF16};
  std::vector<CausalMode> causal = {CausalMode::None, CausalMode::TopLeft};
};

// The calls a warm-up covers: every combination of the lists, at any batch, head count, GQA group
// and sequence lengths, in any tensor layout.
struct WarmupSelection : ShapeSelection {
  std::vector<QkBits> qk_bits = {QkBits::Auto};
  std::vector<PvPrecision> pv = {PvPrecision::Auto};
  std::vector<PvAccum> pv_accum = {PvAccum::Auto};
  std::vector<Toggle> smooth_q = {Toggle::Auto};
  bool smooth_k = true;
  std::vector<bool> smooth_v = {false};
  std::vector<bool> lse = {false};                 // calls without / with an LSE output
  std::vector<MaskType> masks = {MaskType::None};  // tensor masks (None: unmasked calls)
  bool varlen = false;                             // also the variable-length calls (unmasked)
  std::vector<SmallQPath> small_q = {SmallQPath::Auto};
  // Attention families the calls' Contexts force (ContextOptions::family); nullopt: the settings'.
  std::vector<std::optional<kernels::KernelFamily>> families = {std::nullopt};
  // "hd 64,96,128 · f16,bf16 · causal none,top-left · ..." for reports.
  std::string describe() const;
};

struct WarmupSet {
  std::vector<kernels::KernelSpec> specs;  // unique by key, in a fixed order
  std::vector<std::string> left_out;       // why a combination runs nowhere here (once each)
  std::size_t combinations = 0;            // option combinations that run here
};

// The set for `selection` on settings `s` (planner: its tuning database's tiles are added).
// Combinations the arch cannot run (validation refuses them: INT4 on Blackwell, FP8 P̃V on Ampere,
// a forced family's limits) are left out with the reason.
WarmupSet warmup_kernel_specs(const WarmupSelection& selection, const CallSettings& s);

}  // namespace sage2::plan
