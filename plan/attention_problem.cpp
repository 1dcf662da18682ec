#include "plan/attention_problem.hpp"

namespace sage2::plan {

kernels::QuantProblem AttentionProblem::quant_problem() const {
  kernels::QuantProblem qp;
  static_cast<kernels::ProblemShape&>(qp) = shape();
  qp.seq_layout() = seq_layout();
  qp.mask = mask;
  qp.mask_batch = mask_per_batch ? batch : 1;  // the class table's extents: 1 where the mask broadcasts
  qp.mask_heads = mask_per_head ? q_heads : 1;
  return qp;
}

kernels::DirectProblem AttentionProblem::direct_problem() const {
  kernels::DirectProblem d;
  static_cast<kernels::ProblemShape&>(d) = shape();
  d.dtype = dtype;
  d.causal = causal;
  d.return_lse = return_lse;
  d.sm_scale = sm_scale;
  return d;
}

}  // namespace sage2::plan
