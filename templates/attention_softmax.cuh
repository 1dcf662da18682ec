// The online softmax of both attention families, on the scores of one KV tile held in the
// m16n8 accumulator layout both tensor-core paths give a thread: NT n8 tiles × 4 values, value
// [j][e] in row g + 8·(e>>1) ("row half" e>>1) — which key it is, is the family's business. The
// float ops and their order are the contract's (include/sage2/reference.hpp, "Online softmax").
#pragma once

#include "attention_blocks.cuh"
#include "ptx.cuh"
#include "types.cuh"

namespace attn_common {

// The contract's per-score scale (δq·δk)·c2 (the sm_scale·log2 e folded into the dequantisation).
__device__ __forceinline__ float score_scale(float qs, float ks, float c2) { return (qs * ks) * c2; }

// One row half's step: `mx` is the thread's max over its scores of the tile; the quad's max
// (max.f32 ignores NaN) updates m, alpha = exp2(m_old − m_use) rescales O and l. Returns the
// exponent's shift m_use − log2 p_scale: p_scale·P̃ = exp2(s − shift), l carries p_scale (the
// epilogue divides by it and subtracts log2 p_scale from the LSE; p_scale is 448 for E4M3, 1 for
// FP16 P̃V). ninf: the caller's -inf (neg_inf() is an
// asm the compilers do not merge).
__device__ __forceinline__ float update_max(float mx, float& m, float& alpha, float ninf) {
  mx = ptx::max_f32(mx, ptx::shfl_xor(mx, 1));
  mx = ptx::max_f32(mx, ptx::shfl_xor(mx, 2));
  const float m_new = ptx::max_f32(m, mx);
  const float m_use = (m_new == ninf) ? 0.f : m_new;  // the guard against -inf - -inf
  alpha = ptx::exp2_approx(m - m_use);
  m = m_new;
  return m_use - LOG2_P_SCALE;
}

// x[j][e] = exp2(arg(j, e)) alone: the row sum is taken from P̂ afterwards (rowsum_of_phat).
template <int NT, class Arg>
__device__ __forceinline__ void exp2_only(float (&x)[NT][4], Arg arg) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[j][e] = ptx::exp2_approx(arg(j, e));
}

// x[j][e] = 448·P̃ = exp2(arg(j, e)) (the family's exponent: s − shift of the row half), and
// l = l·alpha + the thread's row sums of the unquantised 448·P̃, in key order. l is kept per thread
// (its own keys); the quad's partial sums are added in the epilogue.
template <int NT, class Arg>
__device__ __forceinline__ void exp2_rowsum(float (&x)[NT][4], const float (&alpha)[2], float (&l)[2], Arg arg) {
  float rs[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[j][e] = ptx::exp2_approx(arg(j, e));
      rs[e >> 1] += x[j][e];
    }
  l[0] = l[0] * alpha[0] + rs[0];
  l[1] = l[1] * alpha[1] + rs[1];
}

// P̂ = e4m3(448·P̃) as the A fragments of the k32 chunks of P̂·V̂: register i of chunk kc holds
// row half i%2 of n8 tiles 4kc + 2(i/2) and the next one (both families store V̂ so that these are
// the keys the fragment wants: attention_mma.cuh permutes K, attention_wgmma.cuh V̂'s key order).
template <int KC>
__device__ __forceinline__ void pack_p(const float (&x)[4 * KC][4], u32 (&pa)[KC][4]) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * kc + 2 * (i >> 1), e = 2 * (i & 1);
      pa[kc][i] = pack_e4m3x4(x[j][e], x[j][e + 1], x[j + 1][e], x[j + 1][e + 1]);
    }
}

// FP16 P̃V (the overload for 8 registers a chunk): P̂ = fp16(P̃) as the A fragments of the two m16n8k16 steps of each k32 chunk (mma
// family's accumulator order). Step s of chunk kc reads n8 tiles j = 4kc + 2s and j + 1: registers
// {row g: tile j, row g+8: tile j, row g: tile j+1, row g+8: tile j+1}, each the pair of the tile's
// columns 2t, 2t+1 — so k slots 2t, 2t+1 hold keys 4t, 4t+1 and slots 8+2t, 9+2t keys 4t+2, 4t+3
// of the step's 16 keys, the order FP16 V̂ is stored in (kernels::QuantLayout::v_fp16).
template <int KC>
__device__ __forceinline__ void pack_p(const float (&x)[4 * KC][4], u32 (&pa)[KC][8]) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int j = 4 * kc + 2 * s;
      pa[kc][4 * s + 0] = ptx::pack_f16x2(x[j][0], x[j][1]);
      pa[kc][4 * s + 1] = ptx::pack_f16x2(x[j][2], x[j][3]);
      pa[kc][4 * s + 2] = ptx::pack_f16x2(x[j + 1][0], x[j + 1][1]);
      pa[kc][4 * s + 3] = ptx::pack_f16x2(x[j + 1][2], x[j + 1][3]);
    }
}

}  // namespace attn_common
