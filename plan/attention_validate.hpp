// Validation of one attention call's arguments, before anything is launched. Pure host logic
// (no driver calls) so that the CPU suite can specify it exhaustively.
#pragma once

#include <cstdint>

#include "kernels/arch.hpp"
#include "plan/attention_problem.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

// Throws Error(InvalidArgument, "<argument>: <what> (<value>)") for: null pointers, dtypes other
// than f16/bf16 or differing between q/k/v/out, non-positive sizes, mismatched batch / heads /
// lengths / head dims, q heads not a multiple of kv heads, head dim > 512, stride_dim != 1,
// negative strides or zero strides on a dim of size > 1, sizes whose element offsets overflow
// 64 bits, pointers not aligned to their element size, out overlapping q/k/v, lse misaligned,
// non-finite or non-positive sm_scale, enum values out of range, a workspace smaller than it
// says or misaligned, small_q_path Direct with a mask. Throws Error(Unsupported) for 4-bit
// requested on an arch without INT4 mma (Blackwell), FP8 P̃V requested on one without FP8
// (Ampere), small_q_path Direct with a head dim above 256.
AttentionProblem validate_attention(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                    const TensorRef& out, const AttentionParams& params, kernels::Arch arch);

// A variable-length call: the checks of validate_attention on the tensors as given (packed:
// views with batch 1), then those of `lens` (include/sage2/sage2.hpp SeqLens): exactly one form,
// B >= 1 (key padding: B = q batch), int32 arrays 4-byte aligned, bounds >= 0, totals < 2^31 -
// 1024, smooth_q not On (Auto is off for varlen), small_q_path not Direct. The arrays' values are
// checked on the device.
AttentionProblem validate_attention_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                           const TensorRef& out, const SeqLens& lens, const AttentionParams& params,
                                           kernels::Arch arch);

// Byte range [first, last] a tensor view touches (first element to last element end).
struct ByteRange {
  std::uintptr_t first = 0, last = 0;
};
ByteRange byte_range(const TensorRef& t);

}  // namespace sage2::plan
