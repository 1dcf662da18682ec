// Pieces shared by the attention families (attention_mma.cuh, attention_wgmma.cuh): special
// registers, min/max, and the coordinates of a CTA's (batch, head, query block). Both families
// launch the same grid (x = query blocks of the chunk, y = (batch, head) pairs of the chunk), so
// one definition serves both.
#pragma once

#include "attention_params.cuh"
#include "ptx.cuh"
#include "types.cuh"

namespace attn_common {

using sage2::dev::AttentionParams;

template <class T>
__device__ __forceinline__ T min_(T a, T b) { return a < b ? a : b; }
// A compile-time bool as a type (tag arguments of generic lambdas; no toolkit headers).
template <bool B>
struct bool_c {
  static constexpr bool value = B;
};
template <class T>
__device__ __forceinline__ T max_(T a, T b) { return a > b ? a : b; }

__device__ __forceinline__ u32 ctaid_x() {
  u32 r;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ u32 ctaid_y() {
  u32 r;
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(r));
  return r;
}
__device__ __forceinline__ u32 tid_x() {
  u32 r;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(r));
  return r;
}

struct BlockCoords {
  i64 bhl, qbl;          // pair and query block relative to the chunk
  i64 bh, qb;            // absolute
  i64 b, h, bhk;
  i64 q_blocks, k_blocks, q_len_pad, kv_len_pad;
  i64 i0;                // first query row of the block
};

template <int BQ, int BK, int CAUSAL>
__device__ __forceinline__ BlockCoords block_coords(const AttentionParams& p) {
  BlockCoords k;
  k.bhl = static_cast<i64>(ctaid_y());
  const i64 x = static_cast<i64>(ctaid_x());
  k.qbl = CAUSAL ? p.qb_count - 1 - x : x;  // causal: the longest rows first
  k.bh = p.bh_offset + k.bhl;
  k.qb = p.qb_offset + k.qbl;
  const u32 Hq = static_cast<u32>(p.q_heads);
  k.b = static_cast<i64>(static_cast<u32>(k.bh) / Hq);
  k.h = static_cast<i64>(static_cast<u32>(k.bh) % Hq);
  // 32-bit divisions (head counts < 2^31): an i64 divide is a ~100-instruction subroutine call
  const i64 hk = static_cast<i64>(static_cast<u32>(k.h) / (Hq / static_cast<u32>(p.kv_heads)));
  k.bhk = k.b * p.kv_heads + hk;
  k.q_blocks = (p.q_len + BQ - 1) / BQ;
  k.k_blocks = (p.kv_len + BK - 1) / BK;
  k.q_len_pad = k.q_blocks * BQ;
  k.kv_len_pad = k.k_blocks * BK;
  k.i0 = k.qb * BQ;
  return k;
}

// Stores two adjacent channels (ch, ch+1) of one output row in the output dtype; `vec` when the
// pair is aligned for one 4/8-byte store, `second` when channel ch+1 exists.
template <bool OUT_F32, bool OUT_BF16>
__device__ __forceinline__ void store_pair(void* row, int ch, float y0, float y1, bool vec, bool second) {
  if (OUT_F32) {
    float* o = static_cast<float*>(row) + ch;
    if (vec && second) {
      *reinterpret_cast<float2*>(o) = make_float2(y0, y1);
    } else {
      o[0] = y0;
      if (second) o[1] = y1;
    }
  } else {
    u16* o = static_cast<u16*>(row) + ch;
    if (vec && second) {
      *reinterpret_cast<u32*>(o) = OUT_BF16 ? ptx::pack_bf16x2(y0, y1) : ptx::pack_f16x2(y0, y1);
    } else {
      o[0] = OUT_BF16 ? ptx::f32_to_bf16(y0) : ptx::f32_to_f16(y0);
      if (second) o[1] = OUT_BF16 ? ptx::f32_to_bf16(y1) : ptx::f32_to_f16(y1);
    }
  }
}

// Traps when launched with another CTA shape than the one the kernel was specialised for.
template <int THREADS>
__device__ __forceinline__ void check_block_dim() {
  if (blockDim.x != THREADS || blockDim.y != 1 || blockDim.z != 1) asm volatile("trap;");
}

}  // namespace attn_common
