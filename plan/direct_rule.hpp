// Which path computes an attention call: the quantized SageAttention2 path or the direct
// (unquantized, split-KV) path for few query rows (kernels/direct.hpp). Pure host logic: the CPU suite
// specifies it.
#pragma once

#include <cstdint>

#include "kernels/kernel_spec.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

struct AttentionProblem;  // plan/attention_problem.hpp

// SmallQPath::Auto takes the direct path for dense calls (no mask, no varlen) with head dim <= 256
// whose query rows per kv head, R = q_len · q_heads / kv_heads, are at most direct_max_rows(arch).
// First guesses, not measurements (bench/decode_bench.py times both paths to set them): the
// quantize stage re-reads and rewrites all of K and V on every call, which pays only when many
// query rows use them; on sm_90 its f16 mma.sync runs at about half the INT8 rate, so up to 512
// rows the saved prologue outweighs the slower math; on the other archs (f16 with fp32
// accumulation is a quarter of the INT8/INT4 rate on GeForce parts) only decode-sized R.
constexpr std::int64_t kDirectMaxRowsSm90 = 512;
constexpr std::int64_t kDirectMaxRowsOther = 64;
std::int64_t direct_max_rows(kernels::Arch arch) noexcept;

// Whether a validated dense problem (mask, head dim, shapes and dtype set) runs on the direct path
// under `path`. Throws InvalidArgument for Direct with a mask, Unsupported for Direct with a head
// dim above 256. (Varlen calls never take it: validate_attention_varlen refuses Direct.)
bool choose_direct_path(const AttentionProblem& p, SmallQPath path, kernels::Arch arch);

}  // namespace sage2::plan
