// The problem one attention call describes, after validation and defaulting
// (plan/attention_validate.hpp makes it); the planner, the direct-path rule, the tuning key and
// the stages read it. Its sizes are a kernels::ProblemShape, shared with every other problem
// description.
#pragma once

#include <cstdint>

#include "kernels/direct.hpp"
#include "kernels/problem_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

// The problem an attention call describes, after validation and defaulting.
struct AttentionProblem : kernels::ProblemShape, kernels::SeqLayout, kernels::QuantOptions, kernels::PvOptions {
  DType dtype = DType::F16;
  CausalMode causal = CausalMode::None;
  // (QuantOptions; PvOptions from params.pv_precision / pv_accum, Auto: the arch's defaults)
  float sm_scale = 0;
  bool return_lse = false;
  // (SeqLayout: varlen calls plan the tile from q_len / kv_len, the bounds given, else the
  // tensors' rows)
  // Tensor mask (params.mask): its type as KernelSpec::mask, and whether it varies over batch /
  // heads (a nonzero stride) — the class table's extents.
  int mask = 0;
  bool mask_per_batch = false, mask_per_head = false;
  // The direct (unquantized) small-Nq path computes the call (plan/direct_rule.hpp: the rule and
  // AttentionParams::small_q_path); the quantize options above then do not apply.
  bool direct = false;

  // The same call as the quantize buffers and the direct path describe it (the one place these
  // conversions live).
  kernels::QuantProblem quant_problem() const;
  kernels::DirectProblem direct_problem() const;
};

}  // namespace sage2::plan
