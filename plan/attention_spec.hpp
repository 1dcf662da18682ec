// The attention KernelSpec of a validated problem: its family, fields, quantize path and the
// heuristic tile. Pure host logic (no Context, no driver): the runtime's planner adds the tuned
// tile and the Context's options on top (runtime/attention_plan.hpp).
#pragma once

#include <optional>

#include "kernels/kernel_spec.hpp"
#include "plan/attention_validate.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

// The attention KernelSpec of a validated problem with every field set except the tile. The
// family is `family` when given (Unsupported when its descriptor does not run the problem: wgmma
// needs 8-bit and head dim <= 256), else kernels::default_attention_family().
kernels::KernelSpec attention_spec_for(const AttentionProblem& p, kernels::Arch arch,
                                       std::optional<kernels::KernelFamily> family = std::nullopt);

// Sets s.q_in_kernel for a Context's quantize path: on for Auto where the family's kernel can
// quantize Q itself, off otherwise (kernels::AttentionFamilyDesc::q_in_kernel_ok).
void apply_quant_path(kernels::KernelSpec& s, QuantPath path);

// The heuristic default: the descriptor's default_tile(), which passes plan::static_reject_reason().
// Instant (no compile, no file). Throws Unsupported naming the head dim when none fits.
kernels::TileConfig heuristic_tile(const kernels::KernelSpec& attention_spec, int max_smem_optin);

// The heuristic default alone (no database): the first tile of the heuristic preference list that
// fits `max_smem_optin`. Throws Unsupported when none does.
kernels::KernelSpec plan_attention_heuristic(const AttentionProblem& p, kernels::Arch arch, int max_smem_optin);

}  // namespace sage2::plan
