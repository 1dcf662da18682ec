// Internal helpers of the CPU reference (not installed).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/problem_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference::detail {

[[noreturn]] void bad_arg(const std::string& message);

// Runs fn(i) for i in [0, n) on up to `threads` std::threads (0: hardware concurrency).
// Exceptions thrown by fn are rethrown (the first one) after all workers stopped.
void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& fn);

// Shapes shared by exact attention, the quantize stage and the emulation: the sizes of q/k/v
// (head_dim: q's and k's; dv: v's), a kernels::ProblemShape like every problem description of the
// library.
struct Problem : kernels::ProblemShape {
  int dv = 0;
  // The sizes as the kernels' buffer layout takes them (dense: no varlen, no mask).
  kernels::QuantProblem quant_problem() const {
    kernels::QuantProblem qp;
    static_cast<kernels::ProblemShape&>(qp) = shape();
    return qp;
  }
};
// Validates q/k/v (names them in messages) and returns the shapes.
Problem check_qkv(const TensorRef& q, const TensorRef& k, const TensorRef& v);

// Copies one (b, h) head of t into a dense float matrix [seq][dim].
void load_head(const TensorRef& t, std::int64_t b, std::int64_t h, std::vector<float>& out);

// max that propagates NaN (ptx max_nan; the stage's inputs are sanitized first, see below).
inline float nan_max(float acc, float a) { return (std::isnan(a) || a > acc) ? a : acc; }

// The quantize stage's non-finite rule: every non-finite element of x is replaced by 0 (for the
// statistics); bad[i] = 1 marks it (bad is resized to x's size). Returns how many there were.
std::int64_t sanitize(std::vector<float>& x, std::vector<std::uint8_t>& bad);

constexpr std::int32_t kNoBad = 0x7fffffff;   // "no non-finite element" (INT32_MAX)

// The quantize stage's scale/inv of one group.
inline float group_scale(float amax, int R) { return amax / static_cast<float>(R); }
inline float group_inv(float amax, int R) {
  return (amax > 0.f && std::isfinite(amax)) ? static_cast<float>(R) / amax : 0.f;
}

// Quantize `rows` rows of x ([rows][ld_x], first d channels real) into codes ([rows][d_pad]
// int8, padded channels 0) with one scale per group: group_of_row[r] in [0, n_groups).
// scales[g] = amax_g / R; groups without rows get amax 0. margins (optional, [rows][d_pad]).
void quantize_grouped(const float* x, std::int64_t rows, int d, std::int64_t ld_x, int d_pad,
                      const int* group_of_row, int n_groups, int R, std::int8_t* codes,
                      float* scales, float* margins);

// Channel statistics of a dense [n][d] matrix: sum (double, rounded once), min, max. (The
// quantize stage then replaces the sum by its fixed fp32 order: reference/quantize.cpp stage_sums.)
void channel_stats(const std::vector<float>& x, std::int64_t n, int d, float* sum, float* mn, float* mx);

// Smoothed inputs as the quantize stage sees them, from the statistics stored in `qs`
// (a non-finite input element reads as 0, as in every statistic of the stage):
//   γK[n][c] = float(K[n,c]) - k_mean[c]                       [kv_len][d]
//   γQ[i][c] = float(Q[i,c]) - q_mean[block(i)][c]  (smooth_q) [q_len][d]
void smoothed_k(const TensorRef& k, const QuantizedHost& qs, std::int64_t b, std::int64_t h, std::vector<float>& out);
void smoothed_q(const TensorRef& q, const QuantizedHost& qs, std::int64_t b, std::int64_t h, std::vector<float>& out);

// Whether two stage layouts place every buffer element alike: the sizes, groups and V order, and
// the config fields they derive from (family, tile bq/bk/warps, code width, smoothing) — not the
// causal mode, dtypes, stages or LSE, which the quantize stage does not see.
bool same_layout(const StageLayout& a, const StageLayout& b);

// Absolute maximum of V after the optional mean subtraction, from a channel's min and max (the
// stage's formula, one source for the per-channel and the per-tile scales).
inline float v_amax_of(float mn, float mx, float mu, bool smooth) {
  return smooth ? nan_max(mx - mu, mu - mn) : nan_max(std::fabs(mx), std::fabs(mn));
}
// ... of channel c over all keys, from the stage's v_stats (today's contract) ...
float v_amax(const QuantizedHost& qs, std::int64_t b, std::int64_t h, int c);
// The amax of V channel c of (batch·kv head) bh from v_stats and v_mean alone (the statistics'
// keys; v_amax adds sample_statistics' headroom rule).
float v_amax_of_stats(const QuantizedHost& qs, std::int64_t bh, int c);
// ... and of channel c over keys [n0, n1) of a sanitized head x [kv_len][d] (one KV tile:
// QuantizeOptions::kv_tile_statistics).
float v_amax_of_keys(const std::vector<float>& x, int d, std::int64_t n0, std::int64_t n1, int c, float mu, bool smooth);
// FP16 V̂'s per-channel scale for a finite positive amax: 2^max(0, e - max_exp), amax = f·2^e, f in
// [0.5, 1): max_exp 15 (kernels::kV16Exp), 9 with fp16 accumulation (kV16Acc16Exp).
float v16_scale(float amax, int max_exp);

}  // namespace sage2::reference::detail
