// Pieces shared by the attention families (attention_mma.cuh, attention_wgmma.cuh): special
// registers, small math, the coordinates of a CTA's (batch, head, query block), the visible-key
// rules of the causal modes and kv_len, the per-block pointers into the quantize stage's buffers,
// and the output stores. Both families launch the same grid (x = query blocks of the chunk,
// y = (batch, head) pairs of the chunk), so one definition serves both.
#pragma once

#include "attention_params.cuh"
#include "attention_constants.cuh"
#include "mask.cuh"
#include "ptx.cuh"
#include "types.cuh"

namespace attn_common {

using sage2::dev::AttentionParams;

template <class T>
__device__ __forceinline__ T min_(T a, T b) { return a < b ? a : b; }
template <class T>
__device__ __forceinline__ T max_(T a, T b) { return a > b ? a : b; }
// A compile-time bool as a type (tag arguments of generic lambdas; no toolkit headers).
template <bool B>
struct bool_c {
  static constexpr bool value = B;
};
// A bool decided at run time, where a caller does not specialise: value_or(tag, v) is v.
struct runtime_c {};
template <bool B>
__device__ __forceinline__ bool value_or(bool_c<B>, bool) { return B; }
__device__ __forceinline__ bool value_or(runtime_c, bool v) { return v; }

__device__ __forceinline__ float neg_inf() { return ptx::bits_f32(0xff800000u); }
__device__ __forceinline__ float qnan() { return ptx::bits_f32(0x7fc00000u); }
__device__ __forceinline__ float lg2_approx(float x) {
  float r;
  asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// Four scores → four e4m3 bytes (a, b in the low half).
__device__ __forceinline__ u32 pack_e4m3x4(float a, float b, float c, float d) {
  return static_cast<u32>(ptx::f32x2_to_e4m3x2(a, b)) | (static_cast<u32>(ptx::f32x2_to_e4m3x2(c, d)) << 16);
}

// Special registers through volatile asm, so that a family can recompute the block coordinates
// instead of keeping ~20 registers of 64-bit indices alive across the KV loop (the compiler would
// otherwise CSE the two computations and spill).
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
  i64 bh, qb;            // absolute (varlen: qb within the sequence)
  i64 b, h, bhk;         // batch (varlen: sequence), q head, (batch, kv head) pair
  i64 q_blocks, k_blocks, q_len_pad, kv_len_pad;  // of the batch entry (varlen: unused)
  i64 i0;                // first query row of the block (within its sequence)
  // Where the block's data lie in the quantize stage's buffers (kernels::QuantBuffers):
  i64 q_row_base;        // Q̂ / q_bad / q_kbias row of query row 0 of (b, h)
  i64 q_blk_base;        // q_scale block of query block 0 of (b, h)
  i64 k_blk_base;        // k_scale block (× BK: K̂ row) of KV tile 0 of (b, kv head)
  i64 v_row0, v_col0, v_pitch;  // V̂ᵀ: channel-0 row, key-0 column, row pitch (codes)
  i64 q_len, kv_len;     // varlen: the sequence's lengths (dense: p.q_len, p.kv_len)
  i64 q_start;           // varlen: the sequence's first row in the output / LSE
};

// The row pitch of V̂ᵀ in codes (BlockCoords::v_pitch): every sequence's keys padded to whole
// tiles, from the launch's parameters alone (a family can keep a row address and add a tile's
// columns without keeping the pitch in registers).
__device__ __forceinline__ i64 v_pitch(const AttentionParams& p) {
  return VARLEN ? p.k_map_len * BK : (p.kv_len + BK - 1) / BK * BK;
}

// Varlen: the packed query block of this CTA (grid x); kNoSeq when past the last sequence's.
__device__ __forceinline__ i64 packed_qblock(const AttentionParams& p) {
  const i64 x = static_cast<i64>(ctaid_x());
  return CAUSAL ? p.q_map_len - 1 - x : x;  // causal: the later (longer) rows first
}
__device__ __forceinline__ bool block_exists(const AttentionParams& p) {
  if (static_cast<i64>(blockIdx.y) >= p.bh_count || static_cast<i64>(blockIdx.x) >= p.qb_count) return false;
  return !VARLEN || p.q_map[packed_qblock(p)] != sage2::dev::kNoSeq;
}

// The divisions by the head counts: the host's multipliers (DivU31: a multiply and a shift) for the
// mma family, which recomputes the coordinates for every KV tile (MUL_DIV); the u32 division (~15
// instructions) for the wgmma family, which computes them once a CTA — there the multiplier form
// made ptxas spill 8 bytes across setmaxnreg in the hd 184/192 producer kernels.
template <bool MUL_DIV>
__device__ __forceinline__ u32 head_div(u32 n, u32 d, DivU31 f) {
  return MUL_DIV ? div_u31(n, f) : n / d;
}

template <bool MUL_DIV = false>
__device__ __forceinline__ BlockCoords block_coords(const AttentionParams& p) {
  BlockCoords k;
  const u32 Hq = static_cast<u32>(p.q_heads);
  if (VARLEN) {
    // One launch covers every sequence: y = q head, x = packed query block (no chunks).
    // Volatile loads (L1 hits after the first), like the special registers: a family that
    // recomputes the coordinates in its loop must not get them hoisted and kept alive.
    const i64 X = packed_qblock(p);
    const i32 s = ptx::ld_nc_s32(p.q_map + X);
    const ptx::u32x4 lo = ptx::ld_nc_v4(p.seqs + s);
    const ptx::u32x4 hi = ptx::ld_nc_v4(reinterpret_cast<const char*>(p.seqs + s) + 16);
    sage2::dev::SeqEntry e;
    e.q_start = static_cast<i32>(lo.x);
    e.q_len = static_cast<i32>(lo.y);
    e.k_start = static_cast<i32>(lo.z);
    e.k_len = static_cast<i32>(lo.w);
    e.q_blk = static_cast<i32>(hi.x);
    e.k_blk = static_cast<i32>(hi.y);
    k.bhl = k.h = static_cast<i64>(ctaid_y());
    k.b = s;
    k.qbl = k.qb = X - e.q_blk;
    k.bh = k.b * p.q_heads + k.h;
    const i64 hk = static_cast<i64>(head_div<MUL_DIV>(static_cast<u32>(k.h), Hq / static_cast<u32>(p.kv_heads), p.group_div));
    k.bhk = k.b * p.kv_heads + hk;
    k.q_len = e.q_len;
    k.kv_len = e.k_len;
    k.q_start = e.q_start;
    k.q_blocks = (k.q_len + BQ - 1) / BQ;
    k.k_blocks = (k.kv_len + BK - 1) / BK;
    k.q_len_pad = k.q_blocks * BQ;
    k.kv_len_pad = k.k_blocks * BK;
    k.i0 = k.qb * BQ;
    k.q_blk_base = k.h * p.q_map_len + e.q_blk;
    k.q_row_base = k.q_blk_base * BQ;
    k.k_blk_base = hk * p.k_map_len + e.k_blk;
    k.v_pitch = v_pitch(p);
    k.v_row0 = hk * D_V;
    k.v_col0 = static_cast<i64>(e.k_blk) * BK;
    return k;
  }
  k.bhl = static_cast<i64>(ctaid_y());
  const i64 x = static_cast<i64>(ctaid_x());
  k.qbl = CAUSAL ? p.qb_count - 1 - x : x;  // causal: the longest rows first
  // (kernels::causal_band_pairs: not in masked kernels, no registers to spare; not where the
  // coordinates are recomputed for every KV tile, MUL_DIV: the mma family's loop, +4 % instructions)
  if (CAUSAL && !MASK && !MUL_DIV && p.band_pairs != 0u) {
    // CTAs start in linear block order: band by band, each band's longest query blocks (of all
    // its pairs) first, so that the last CTAs to start are the shortest (a long block starting
    // last would run alone at the end) and a band's K̂ / V̂ stay in the L2 while its CTAs run.
    const u32 nb = static_cast<u32>(p.qb_count), G = p.band_pairs;
    const u32 lin = static_cast<u32>(x) + static_cast<u32>(k.bhl) * nb;  // < 2^31 (kernels::causal_band_pairs)
    const u32 band = lin / (G * nb);
    const u32 r = lin - band * G * nb;
    const u32 rest = static_cast<u32>(p.bh_count) - band * G;  // pairs from this band on
    const bool last = rest <= G;
    const u32 here = last ? rest : G;
    const u32 xq = r / here;
    k.bhl = static_cast<i64>(band * G + (r - xq * here));
    k.qbl = p.qb_count - 1 - static_cast<i64>(xq);
  }
  k.bh = p.bh_offset + k.bhl;
  k.qb = p.qb_offset + k.qbl;
  // 32-bit divisions (pairs < 2^31: make_attention_params checks it): an i64 divide is a
  // ~100-instruction subroutine call
  const u32 b = head_div<MUL_DIV>(static_cast<u32>(k.bh), Hq, p.q_heads_div);
  k.b = static_cast<i64>(b);
  k.h = static_cast<i64>(static_cast<u32>(k.bh) - b * Hq);
  const i64 hk = static_cast<i64>(head_div<MUL_DIV>(static_cast<u32>(k.h), Hq / static_cast<u32>(p.kv_heads), p.group_div));
  k.bhk = k.b * p.kv_heads + hk;
  k.q_len = p.q_len;
  k.kv_len = p.kv_len;
  k.q_start = 0;
  k.q_blocks = (p.q_len + BQ - 1) / BQ;
  k.k_blocks = (p.kv_len + BK - 1) / BK;
  k.q_len_pad = k.q_blocks * BQ;
  k.kv_len_pad = k.k_blocks * BK;
  k.i0 = k.qb * BQ;
  k.q_row_base = k.bh * k.q_len_pad;
  k.q_blk_base = k.bh * k.q_blocks;
  k.k_blk_base = k.bhk * k.k_blocks;
  k.v_pitch = v_pitch(p);  // = kv_len_pad
  k.v_row0 = k.bhk * D_V;
  k.v_col0 = 0;
  return k;
}

// The lengths of the block's sequence: the launch's in a dense call (kept in the parameter space,
// not in registers), the table's in a varlen call.
__device__ __forceinline__ i64 seq_q_len(const AttentionParams& p, const BlockCoords& c) { return VARLEN ? c.q_len : p.q_len; }
__device__ __forceinline__ i64 seq_kv_len(const AttentionParams& p, const BlockCoords& c) { return VARLEN ? c.kv_len : p.kv_len; }

// ---- visible keys (reference.hpp "Causal masks"): key j is visible to query row i iff
// j < kv_len and, causal, j <= i + off (off = kv_len - q_len bottom-right, 0 top-left).
__device__ __forceinline__ i64 causal_offset(const AttentionParams& p, const BlockCoords& c) {
  return CAUSAL == 2 ? seq_kv_len(p, c) - seq_q_len(p, c) : 0;
}
// Keys visible to row `row`: [0, n_vis).
__device__ __forceinline__ i64 visible_keys(const AttentionParams& p, const BlockCoords& c, i64 row) {
  return CAUSAL ? max_<i64>(0, min_<i64>(seq_kv_len(p, c), row + causal_offset(p, c) + 1)) : seq_kv_len(p, c);
}
// KV tiles the block visits: up to its last row's last visible key.
__device__ __forceinline__ int tile_count(const AttentionParams& p, const BlockCoords& c) {
  i64 n_keys = seq_kv_len(p, c);
  if (CAUSAL) {
    const i64 last_row = min_<i64>(c.i0 + BQ, seq_q_len(p, c)) - 1;
    n_keys = visible_keys(p, c, last_row);
  }
  return static_cast<int>((n_keys + BK - 1) / BK);
}
// First tile that needs the element mask: tiles that reach past kv_len or, causal, past the
// block's first row's limit i0 + off (off = causal_offset(), the caller's copy).
__device__ __forceinline__ i64 mask_from(const AttentionParams& p, const BlockCoords& c, i64 off) {
  i64 from = seq_kv_len(p, c) / BK;
  if (CAUSAL) from = min_<i64>(from, max_<i64>(0, c.i0 + off + 1) / BK);
  return from;
}
// Last key visible to a row whose causal limit is `diag` (its row + off); I: the integer type the
// family keeps it in.
template <class I>
__device__ __forceinline__ I last_visible(I kv_last, I diag) {
  return CAUSAL ? min_<I>(kv_last, diag) : kv_last;
}
// The same relative to the tile starting at key `kbase`, clamped to [-1, BK]: key kbase + k of
// the tile is visible iff k <= the result.
template <class I>
__device__ __forceinline__ int tile_last_visible(I last, I kbase) {
  return static_cast<int>(max_<I>(-1, min_<I>(BK, last - kbase)));
}

// ---- Tensor masks (MASK != 0): a bool mask (nonzero: the key takes part) or an additive one
// (added to the scaled score; -inf: masked out), element (b, h, i, j) at strided offsets. The
// mask_tiles kernel (quantize_mask_tiles.cuh) classifies every (query block, KV tile): the block's loop runs
// from its first to its last tile of class != 0 (so leading and trailing fully masked tiles are
// never loaded nor computed), class 1 tiles take the unmasked path, the others read the elements.
constexpr int MASK_CLASS_NONE = mask_elem::CLASS_NONE, MASK_CLASS_ALL = mask_elem::CLASS_ALL,
              MASK_CLASS_SOME = mask_elem::CLASS_SOME, MASK_CLASS_CONST = mask_elem::CLASS_CONST,
              MASK_CLASS_PREFIX = mask_elem::CLASS_PREFIX;

// The class table row of the block: [k_blocks] bytes.
__device__ __forceinline__ const u8* mask_class_row(const AttentionParams& p, const BlockCoords& c) {
  return p.mask_tiles + c.b * p.mask_tiles_stride_batch + c.h * p.mask_tiles_stride_head + c.qb * c.k_blocks;
}
// The additive term of a CLASS_CONST tile, `cls` pointing at its class byte (log2 units).
__device__ __forceinline__ float mask_const(const AttentionParams& p, const u8* cls) {
  return p.mask_bias[cls - p.mask_tiles];
}
// Tiles [t0, t1) of [0, n_tiles) from the first to the last of class != 0 (t0 = t1 = 0 if none).
// Every lane of a warp computes the same range (no shared memory, no block barrier).
__device__ __forceinline__ void mask_tile_range(const AttentionParams& p, const BlockCoords& c, int n_tiles, int& t0,
                                                int& t1) {
  const u8* cls = mask_class_row(p, c);
  const int lane = static_cast<int>(tid_x() & 31u);
  int lo = n_tiles, hi = -1;
  for (int t = lane; t < n_tiles; t += 32)
    if (cls[t] != MASK_CLASS_NONE) {
      lo = min_(lo, t);
      hi = max_(hi, t);
    }
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) {
    lo = min_(lo, static_cast<int>(ptx::shfl_xor(static_cast<u32>(lo), d)));
    hi = max_(hi, static_cast<int>(ptx::shfl_xor(static_cast<u32>(hi), d)));
  }
  t0 = hi < 0 ? 0 : lo;
  t1 = hi < 0 ? 0 : hi + 1;
}
// Row `row` of the block's mask (byte pointer); the element of key j is at + j·stride_k·size.
__device__ __forceinline__ const char* mask_row(const AttentionParams& p, const BlockCoords& c, i64 row) {
  return static_cast<const char*>(p.mask) +
         (c.b * p.mask_stride_batch + c.h * p.mask_stride_head + row * p.mask_stride_q) * mask_elem::size<MASK>();
}
__device__ __forceinline__ float mask_term(const char* row, i64 j, i64 stride_k) {
  return mask_elem::term<MASK>(row, j, stride_k);
}

// ---- the block's inputs from the quantize stage (kernels::QuantBuffers layout)
// Q scale of a thread's rows: group warp·8 + g of the block (the quantize stage's per-thread
// layout, the same for both families).
__device__ __forceinline__ float q_scale(const AttentionParams& p, const BlockCoords& c, int warp, int g) {
  return p.q_scale[(c.q_blk_base + c.qb) * (WARPS * 8) + warp * 8 + g];
}
// K scales of the block's kv head, KG groups per KV tile.
template <int KG>
__device__ __forceinline__ const float* k_scales(const AttentionParams& p, const BlockCoords& c) {
  return p.k_scale + c.k_blk_base * KG;
}
// Smooth-Q: the ΔS row of this (pair, query block) of the chunk, key 0. Callers test SMOOTH_Q
// themselves: a call that returns a constant null still changed ptxas's register allocation of
// the wgmma kernel (+48 instructions at head dim 128, causal, two consumer warpgroups).
__device__ __forceinline__ const float* delta_s_row(const AttentionParams& p, const BlockCoords& c) {
  return p.delta_s + (c.bhl * p.qb_count + c.qbl) * c.kv_len_pad;
}

// ---- output
// Row `row` of the output, byte pointer.
__device__ __forceinline__ char* out_row(const AttentionParams& p, const BlockCoords& c, i64 row) {
  if (VARLEN) row += c.q_start;
  return static_cast<char*>(p.out) +
         (c.b * p.o_stride_batch + c.h * p.o_stride_head + row * p.o_stride_seq) * static_cast<i64>(OUT_F32 ? 4 : 2);
}
// True when every even channel pair of the output is aligned for one 4/8-byte store.
__device__ __forceinline__ bool out_pairs_aligned(const AttentionParams& p) {
  return OUT_F32 ? ((reinterpret_cast<u64>(p.out) & 7u) == 0 && p.o_stride_batch % 2 == 0 &&
                    p.o_stride_head % 2 == 0 && p.o_stride_seq % 2 == 0)
                 : ((reinterpret_cast<u64>(p.out) & 3u) == 0 && p.o_stride_batch % 2 == 0 &&
                    p.o_stride_head % 2 == 0 && p.o_stride_seq % 2 == 0);
}
// Stores two adjacent channels (ch, ch+1) of one output row in the output dtype; `vec` when the
// pair is aligned for one 4/8-byte store, `second` when channel ch+1 exists.
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
