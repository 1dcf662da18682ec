// The problem one attention call describes, after validation and defaulting
// (plan/attention_validate.hpp makes it); the planner, the direct-path rule, the tuning key and
// the stages read it. Its sizes are a kernels::ProblemShape, shared with every other problem
// description.
#pragma once

#include <cstdint>

#include "kernels/direct.hpp"
#include "kernels/problem.hpp"
#include "kernels/quant_buffers.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

// The problem an attention call describes, after validation and defaulting.
struct AttentionProblem : kernels::ProblemShape {
  DType dtype = DType::F16;
  CausalMode causal = CausalMode::None;
  int qk_bits = 8;
  bool smooth_q = false, smooth_k = true, smooth_v = false;
  bool pv_fp16 = false;  // P̃V in FP16 (params.pv_precision, Auto: the arch's default)
  bool pv_acc16 = false; // P̃V accumulated in fp16 inside a tile (params.pv_accum, Auto: the arch's default)
  float sm_scale = 0;
  bool return_lse = false;
  // Varlen calls (sage2::SeqLens): batch = sequences; q_len / kv_len plan the tile (the bounds
  // given, else the tensors' rows); kernels::QuantProblem documents packed and total_*.
  bool varlen = false, packed = false;
  std::int64_t total_q = 0, total_k = 0;
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
