// Whether a dense attention call is cut into chunks whose quantize stage runs beside the previous
// chunk's attention (runtime/call_plan.hpp, CallPlan::chunk), and how. Pure host.
#pragma once

#include "plan/problem.hpp"

namespace sage2::plan {

enum class PipelineAxis { None, Batch, KvHeads };

struct PipelineCut {
  int chunks = 1;  // 1: the call runs whole
  PipelineAxis axis = PipelineAxis::None;
  // The problem of one chunk (batch or heads divided by chunks); the call itself when chunks == 1.
  AttentionProblem chunk_problem(const AttentionProblem& p) const;
};

// `requested`: SAGE2_PIPELINE_CHUNKS (0: the rule decides, 1: never). A chunk count is used only
// where it divides the batch (preferred: every tensor and the LSE stay contiguous per chunk) or
// the kv heads (query heads follow their kv head; not with an LSE of several batch entries, whose
// rows per chunk would not be contiguous). Never for the direct path, varlen or masked calls.
PipelineCut pipeline_cut(const AttentionProblem& p, int requested);

}  // namespace sage2::plan
