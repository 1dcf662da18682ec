// The sizes of one attention call: the part every problem description shares. The validated call
// (plan::AttentionProblem), the quantize buffers' problem (QuantProblem), the direct path's
// (DirectProblem), the tuner's timing problem and the reference's each extend it, so a conversion
// between them copies this part whole, here in one definition, instead of field by field.
#pragma once

#include <cstdint>

namespace sage2::kernels {

struct ProblemShape {
  std::int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 1, kv_len = 1;
  int head_dim = 128;
  std::int64_t group() const { return q_heads / kv_heads; }  // query heads per kv head (GQA)
  const ProblemShape& shape() const { return *this; }
  // The five sizes onto a struct that names them alike but is no ProblemShape (the device
  // parameter structs, which NVRTC compiles; the reference's public StageLayout). head_dim is left
  // out: not every such struct has it.
  template <class To>
  void copy_sizes_to(To& to) const {
    to.batch = batch;
    to.q_heads = q_heads;
    to.kv_heads = kv_heads;
    to.q_len = q_len;
    to.kv_len = kv_len;
  }
};

}  // namespace sage2::kernels
