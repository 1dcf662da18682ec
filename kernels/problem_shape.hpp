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

// How a call's sequences lie in its tensors (sage2::SeqLens), carried by the validated call and the
// quantize buffers' problem alike (`to.seq_layout() = from.seq_layout()`). Varlen: batch = the
// number of sequences. Packed: the tensors are views with batch 1 of total_q / total_k tokens and
// q_len / kv_len only plan the tile; key padding: the tensors are [batch, H, q_len | kv_len, d] and
// total_* = batch · q_len | kv_len.
struct SeqLayout {
  bool varlen = false, packed = false;
  std::int64_t total_q = 0, total_k = 0;
  SeqLayout& seq_layout() { return *this; }
  const SeqLayout& seq_layout() const { return *this; }
  bool operator==(const SeqLayout&) const = default;
};

}  // namespace sage2::kernels
