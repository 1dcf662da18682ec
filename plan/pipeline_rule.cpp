#include "plan/pipeline_rule.hpp"

namespace sage2::plan {

AttentionProblem PipelineCut::chunk_problem(const AttentionProblem& p) const {
  AttentionProblem c = p;
  if (axis == PipelineAxis::Batch) c.batch = p.batch / chunks;
  if (axis == PipelineAxis::KvHeads) {
    c.kv_heads = p.kv_heads / chunks;
    c.q_heads = p.q_heads / chunks;
  }
  return c;
}

PipelineCut pipeline_cut(const AttentionProblem& p, int requested) {
  PipelineCut cut;
  if (p.direct || p.varlen || p.mask != 0) return cut;
  const int want = requested;  // the rule's default is measured before it is turned on
  if (want <= 1) return cut;
  if (p.batch % want == 0) {
    cut.chunks = want;
    cut.axis = PipelineAxis::Batch;
  } else if (p.kv_heads % want == 0 && (!p.return_lse || p.batch == 1)) {
    cut.chunks = want;
    cut.axis = PipelineAxis::KvHeads;
  }
  return cut;
}

}  // namespace sage2::plan
