// Which path computes an attention call: the quantized SageAttention2 path or the direct
// (unquantized, split-KV) path for few query rows (kernels/direct.hpp). Pure host logic: the CPU suite
// specifies it.
#pragma once

#include <cstdint>

#include "kernels/kernel_spec.hpp"
#include "sage2/sage2.hpp"

namespace sage2::plan {

struct AttentionProblem;  // plan/attention_problem.hpp

// SmallQPath::Auto takes the direct path for dense calls (no mask, no varlen) with head dim <=
// kDirectAutoMaxHeadDim whose query rows per kv head, R = q_len · q_heads / kv_heads, are at most
// direct_max_rows(arch),
// and on sm_90 only where it measured faster (bench/path_crossover.py, H200, 74 shapes:
// bench/results/2026-11-29-session16/x1-path-crossover-h200). The direct path does unquantized
// math at about a third of the quantized path's rate but skips the quantize stage, which reads and
// rewrites all of K and V and adds ~20 µs of fixed cost: so it wins when R is small (few rows
// share each key), when the keys are long against R (decode: the stage's cost grows with Nk, the
// saved math with R·Nk), and when the whole call is small (fixed costs decide). On sm_90:
//   R <= 160, or R <= 256 with Nk >= 2 R, or W = B·Hq·Nq·Nk·d <= 2e9 over at most 65536 query
//   rows B·Hq·Nq (and always R <= 512).
// Measured there: direct/quantized time 0.35-0.95 where this picks direct, 1.02-2.09 where it
// picks quantized, except GQA R 512 over 1K keys (quantized, 0.95). The row bound (session 27,
// bench/results/2026-11-30-session27/a3-path-crossover-h200): encoder self-attention at N 197 and
// head dim 64 quantizes faster from 384 heads (75.6K rows: 1.08x; 512-768 heads 1.20-1.26x, where
// W alone had sent them direct), the direct path stays faster up to 192 heads (37.8K rows: 0.73).
// On the other archs (no measurements: f16 with fp32 accumulation is a quarter of the INT8/INT4
// rate on GeForce parts) only decode-sized R.
// Head dims Auto considers: those measured (the direct path itself runs up to
// kernels::kDirectMaxHeadDim, splitting O's channels over CTAs above 256; explicit
// small_q_path=direct and the tiered compile's first tier use it there).
constexpr int kDirectAutoMaxHeadDim = 256;
constexpr std::int64_t kDirectMaxRowsSm90 = 512;
constexpr std::int64_t kDirectMaxRowsOther = 64;
constexpr std::int64_t kDirectAnyKeysRowsSm90 = 160;   // R up to this: direct whatever the keys
constexpr std::int64_t kDirectLongKeysRowsSm90 = 256;  // R up to this: direct when Nk >= 2 R
constexpr double kDirectSmallWorkSm90 = 2e9;           // W up to this: direct (R <= 512) ...
constexpr std::int64_t kDirectSmallWorkQRowsSm90 = 65536;  // ... over at most this many rows B·Hq·Nq
std::int64_t direct_max_rows(kernels::Arch arch) noexcept;
// The Auto rule on its own numbers (for tests that know a call's shape): rows R, keys Nk, work W,
// query rows B·Hq·Nq.
bool auto_prefers_direct(std::int64_t rows, std::int64_t kv_len, double work, std::int64_t q_rows,
                         kernels::Arch arch) noexcept;

// Whether a validated dense problem (mask, head dim, shapes and dtype set) runs on the direct path
// under `path`. Throws InvalidArgument for Direct with a mask, Unsupported for Direct with a head
// dim above kernels::kDirectMaxHeadDim. (Varlen calls never take it: validate_attention_varlen
// refuses Direct.)
bool choose_direct_path(const AttentionProblem& p, SmallQPath path, kernels::Arch arch);

}  // namespace sage2::plan
