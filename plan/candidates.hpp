// Candidate tile configurations, the checks that filter them before any timing, and the
// heuristic default (plan/attention_spec.hpp heuristic_tile) used whenever the tuning database has no entry.
//
// The candidates and the heuristic are the family descriptor's (kernels/attention_family.hpp).
// Filtering, in order (a rejected candidate is never compiled further, never timed):
//  1. static: the spec validates and its family can run it — the descriptor's check();
//  2. shared memory: the descriptor's kernel_config(spec).smem <= the device's opt-in limit per
//     block (default_max_smem_optin(arch) when there is no device, e.g. --compile-only);
//  3. ptxas facts of the compiled cubin: no spill stores/loads, no stack frame (local memory),
//     registers × threads within the 64 K registers of a block.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/tuning_key.hpp"
#include "jit/compiler.hpp"
#include "kernels/kernel_spec.hpp"

namespace sage2::plan {

// Opt-in shared memory per block of the archs' reference devices (the arch table's, kernels/attention_family.hpp:
// e.g. sm_86/89/120 99 KiB, sm_80 163 KiB, sm_90a/100 227 KiB). Used only when no device is present
// (compile-only mode).
int default_max_smem_optin(kernels::Arch arch);
inline constexpr int kRegistersPerBlock = 65536;

// Every tile the tuner considers for `family` on `arch`, before filtering, in a fixed order (the
// descriptor's candidates(); empty for a family that is not an attention family).
const std::vector<kernels::TileConfig>& tile_candidates(kernels::KernelFamily family, kernels::Arch arch);

// Why `spec` (an attention spec) cannot run on a device with `max_smem_optin` bytes of opt-in
// shared memory per block; nullopt when it can. Never compiles, never throws.
std::optional<std::string> static_reject_reason(const kernels::KernelSpec& spec, int max_smem_optin);
// Why the compiled kernel of `spec` is not acceptable (spills, stack, registers); nullopt when it
// is. Unknown facts (registers == -1: ptxas did not report) are accepted.
std::optional<std::string> ptxas_reject_reason(const kernels::KernelSpec& spec, const jit::PtxasFacts& facts);

// "bq64.bk64.w4.s2"; parse_tile() also accepts "64x64x4x2" (bq x bk x warps x stages).
std::string tile_str(const kernels::TileConfig& t);
std::optional<kernels::TileConfig> parse_tile(const std::string& s);

// One specialisation the tool compiles and tunes: everything that selects kernel code except the
// tile. Size buckets are added per measured problem (key()).
struct Specialisation : kernels::QuantOptions, kernels::PvOptions {
  int head_dim = 128;
  CausalMode causal = CausalMode::None;
  DType dtype = DType::F16;
  bool return_lse = false;
  // nullopt: the family a Context uses by default (kernels::default_attention_family).
  std::optional<kernels::KernelFamily> family;

  // The library's defaults for `arch` (what AttentionParams{} resolves to): 8-bit QK, smooth K on,
  // smooth Q and V off, the arch's P̃V precision (FP16 on Ampere, FP8 elsewhere).
  static Specialisation defaults(kernels::Arch arch, int head_dim, CausalMode causal, DType dtype);
  // The validated problem of a call of this specialisation at these sizes (dense, unmasked).
  AttentionProblem problem(std::int64_t q_len = 4096, std::int64_t kv_len = 4096, std::int64_t q_heads = 1,
                           std::int64_t kv_heads = 1) const;
  // The attention spec with `tile` (plan::attention_spec_for of problem()); without the quantize
  // path's q_in_kernel, which a call's settings add (plan::attention_call_spec).
  kernels::KernelSpec attention_spec(kernels::Arch arch, const kernels::TileConfig& tile) const;
  TuningKey key(kernels::Arch arch, std::int64_t q_len, std::int64_t kv_len, std::int64_t q_heads,
                std::int64_t kv_heads) const;  // the family is attention_spec(arch, ...)'s
  std::string str() const;  // "d128 causal f16 int8 sk" (causal-br: bottom-right mask; " pv16": FP16 P̃V)
  bool operator==(const Specialisation&) const = default;
};

}  // namespace sage2::plan
