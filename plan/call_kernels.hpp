// The kernels one attention call launches: the single source of truth that a call's plan
// (runtime/call_plan.cpp loads exactly this list), the tuner's candidates (autotune/prepare.cpp)
// and every warm-up (plan/warmup.hpp: sage2-autotune, sage2::warmup, sage2_warmup, sage2.warmup)
// go through, so what a warm-up compiles and what the tuner times is what calls run.
//
// A call's kernels depend on its validated problem (plan/attention_problem.hpp) and on what its Context
// contributes (CallSettings: arch, code form, device limits, quantize path, forced family, tuning
// database). Pure host logic: no driver, no compile.
#pragma once

#include <optional>
#include <vector>

#include "kernels/direct.hpp"
#include "kernels/kernel_spec.hpp"
#include "plan/attention_problem.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

class Planner;  // plan/planner.hpp

// What a Context contributes to the kernels of its calls (Context::Impl::call_settings()).
struct CallSettings {
  kernels::Arch arch = kernels::Arch::Sm90a;
  bool ptx = false;                          // every kernel as PTX (KernelSpec::ptx)
  kernels::DirectDevice device;              // SMs and shared memory (max_smem_optin bounds every tile)
  QuantPath quant_path = QuantPath::Auto;    // ContextOptions::quant_path, as configured (Auto unresolved)
  std::optional<kernels::KernelFamily> family;  // a forced attention family; nullopt: the arch's default
  const Planner* planner = nullptr;          // the tuning database's tiles; null: the heuristic default
};

// The quantize kernels `path` launches before `attention_spec`, in launch order (Auto resolved
// here: split, without quantize_q where the attention kernel quantizes Q itself). Throws
// Unsupported for Cluster where it cannot run (sm_89, head dims above kernels::kClusterMaxHeadDim)
// and for Fused / Cluster with varlen; InvalidArgument for a one-launch path with q_in_kernel.
std::vector<kernels::QuantOp> quantize_ops(QuantPath path, const kernels::KernelSpec& attention_spec);

// The attention spec a quantized-path call of `p` runs with tile `tile`: the family (forced or the
// arch's default), every field from the problem, the quantize path's q_in_kernel, arch and ptx.
// Throws Unsupported when a forced family cannot run the problem.
kernels::KernelSpec attention_call_spec(const AttentionProblem& p, const CallSettings& s,
                                        const kernels::TileConfig& tile);

// The same with the tile the settings choose: the tuning database's entry (settings.planner), else
// the heuristic default. Throws Unsupported when no tile fits the device's shared memory.
kernels::KernelSpec planned_attention_spec(const AttentionProblem& p, const CallSettings& s);

// The kernels of the quantized path around attention spec `a` (planned: tile and q_in_kernel set),
// in launch order: the quantize ops, then ΔS (smooth-Q) and the attention kernel.
struct QuantizedCallKernels {
  std::vector<kernels::QuantOp> ops;       // quantize_ops(path, a)
  std::vector<kernels::KernelSpec> quantize;  // their specs, one per op (channel_stats: the walk)
  std::optional<kernels::KernelSpec> delta_s;
  kernels::KernelSpec attention;
  // channel_stats' at-once form where the spec admits one (kernels::stats_at_once_spec): a call
  // launches it instead of the walk by its head count (choose_stats_form), so warm-ups compile both.
  std::optional<kernels::KernelSpec> stats_at_once;
  std::vector<kernels::KernelSpec> all() const;  // quantize..., attention, ΔS
  std::vector<kernels::KernelSpec> with_alternatives() const;  // all(), then stats_at_once
  // The channel_stats form the call over buffers `b` launches on a device of `sm_count` SMs
  // (kernels::stats_spec_for) in place of the walk.
  void choose_stats_form(const kernels::QuantBuffers& b, int sm_count);
};
QuantizedCallKernels quantized_call_kernels(const kernels::KernelSpec& a, QuantPath path);

// The direct path's kernels for problem `p` (p.direct): the split kernel, and the merge kernel when
// the layout merges partials (kernels::direct_layout on the settings' device).
std::vector<kernels::KernelSpec> direct_call_kernels(const kernels::DirectLayout& layout);

// The kernels one attention call with `attention_spec` (tile and q_in_kernel set) launches
// besides the attention kernel itself under quantize path `path`: the quantize kernels, and ΔS
// with smooth Q (what the tuner prepares beside a candidate), channel_stats in both forms.
std::vector<kernels::KernelSpec> companion_specs(const kernels::KernelSpec& attention_spec,
                                                 QuantPath path = QuantPath::Auto);

// Every kernel a call of validated problem `p` loads with these settings, in launch order.
std::vector<kernels::KernelSpec> call_kernel_specs(const AttentionProblem& p, const CallSettings& s);

}  // namespace sage2::plan
