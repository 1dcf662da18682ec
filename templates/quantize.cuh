// Quantize family: smoothing statistics, per-thread INT8/INT4 Q and K, FP8 E4M3 V.
//
// One template, specialised by the generated preamble (jit/source_builder.cpp). The preamble's
// SAGE2_QUANT_OP selects the single entry this module defines:
//   1 sage2_channel_stats   per (batch, kv head, channel): sum, min, max of K and of V
//   2 sage2_quantize_q      per (batch, q head, BQ block)
//   3 sage2_quantize_k      per (batch, kv head, BK block)
//   4 sage2_quantize_v      per (batch, kv head, V tile of SAGE2_QZ_ROWS tokens)
//   (7 was the varlen table's own launch: the first CTA of channel_stats builds it now)
//   8 sage2_mask_tiles      tensor masks: the class of every (query block, KV tile)
// With SAGE2_VARLEN (ops 1-4) the grid of ops 2-4 covers packed blocks instead of (batch, block)
// pairs and every item takes its sequence's lengths and positions from the table (SeqItem below),
// which the first CTA of op 1 builds.
// The numerics are the contract written in kernels/quant_buffers.hpp; comments below say where the
// kernel fixes an order the contract leaves open (sums). Non-finite inputs: every statistic reads
// them as 0, their codes are 0, and the flags q_bad / k_first_bad / v_first_bad say where they
// were (the attention epilogue poisons exactly the outputs that read them).
//
// Thread mapping (SAGE2_QZ_*, from kernels::quantize_kernel_config; per item kind in the fused
// kernel, SAGE2_QZ_{S,Q,K,V}_*): a token row is covered by TPR
// consecutive threads (power of two <= 32: one warp holds a row's threads), thread `lane_r` of a
// row handles the 8-channel chunks j = lane_r + k*TPR (k < CPT, j < CHUNKS). Rows of a CTA are
// slot + i*RPP (RPP = THREADS / TPR). Inputs are read as 16-byte vectors when the head dim is a
// multiple of 8 and the base pointer and all strides allow it, element by element otherwise.
// All index arithmetic on tensors is 64-bit.
#pragma once

#include "hopper.cuh"
#include "mask.cuh"
#include "ptx.cuh"
#include "quant_math.cuh"
#include "quantize_params.cuh"
#include "types.cuh"

#ifndef SAGE2_QUANT_OP
#error "quantize.cuh is specialised by the preamble jit::generate_source() writes (SAGE2_QUANT_OP missing)"
#endif

namespace qz {

using sage2::dev::QuantizeParams;

constexpr int HD = SAGE2_HEAD_DIM;        // real channels
constexpr int D_QK = SAGE2_D_QK;          // padded Q/K channels
constexpr int ROW_BYTES = SAGE2_ROW_BYTES;
constexpr int D_V = SAGE2_D_V;            // padded V channels
constexpr int BQ = SAGE2_BQ;
constexpr int BK = SAGE2_BK;
constexpr int THREADS = SAGE2_QZ_THREADS;
constexpr int CH_IN = (HD + 7) / 8;            // chunks holding real channels
constexpr bool IN_BF16 = SAGE2_IN_BF16 != 0;
constexpr bool VEC_HD = (HD % 8) == 0;
using quant_math::FLT_MAX_;
using quant_math::finite_positive;
using quant_math::nonfinite;
using quant_math::quant_int;
constexpr i32 NO_BAD = 0x7fffffff;             // "no non-finite element" (INT32_MAX)

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "bad CTA size");
static_assert(SAGE2_QK_BITS == 8 || SAGE2_QK_BITS == 4, "qk bits");

// One item kind's thread mapping (the CTA size THREADS is shared by every kind).
template <int ROWS_, int TPR_, int CPT_, int CHUNKS_>
struct Map {
  static constexpr int ROWS = ROWS_, TPR = TPR_, CPT = CPT_, CHUNKS = CHUNKS_;
  static constexpr int RPP = THREADS / TPR;             // rows per pass
  static constexpr int ITEMS = (ROWS + RPP - 1) / RPP;  // rows per thread
  static_assert(TPR >= 1 && TPR <= 32 && (TPR & (TPR - 1)) == 0, "TPR must be a power of two <= 32");
  static_assert(THREADS % TPR == 0, "bad CTA size");
  static_assert(TPR * CPT >= CHUNKS, "the row mapping must cover every chunk");
};
#if (SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 6)
using MapS = Map<SAGE2_QZ_S_ROWS, SAGE2_QZ_S_TPR, SAGE2_QZ_S_CPT, SAGE2_QZ_S_CHUNKS>;
using MapQ = Map<SAGE2_QZ_Q_ROWS, SAGE2_QZ_Q_TPR, SAGE2_QZ_Q_CPT, SAGE2_QZ_Q_CHUNKS>;
using MapK = Map<SAGE2_QZ_K_ROWS, SAGE2_QZ_K_TPR, SAGE2_QZ_K_CPT, SAGE2_QZ_K_CHUNKS>;
using MapV = Map<SAGE2_QZ_V_ROWS, SAGE2_QZ_V_TPR, SAGE2_QZ_V_CPT, SAGE2_QZ_V_CHUNKS>;
#elif SAGE2_QUANT_OP == 7
using MapS = Map<SAGE2_QZ_S_ROWS, SAGE2_QZ_S_TPR, SAGE2_QZ_S_CPT, SAGE2_QZ_S_CHUNKS>;
using MapK = Map<SAGE2_QZ_K_ROWS, SAGE2_QZ_K_TPR, SAGE2_QZ_K_CPT, SAGE2_QZ_K_CHUNKS>;
using MapV = Map<SAGE2_QZ_V_ROWS, SAGE2_QZ_V_TPR, SAGE2_QZ_V_CPT, SAGE2_QZ_V_CHUNKS>;
using MapQ = MapK;  // (no Q items)
#else
using MapS = Map<SAGE2_QZ_ROWS, SAGE2_QZ_TPR, SAGE2_QZ_CPT, SAGE2_QZ_CHUNKS>;
using MapQ = MapS;
using MapK = MapS;
using MapV = MapS;
#endif

// Kernels whose register budget holds the item bodies' fast forms (rows loaded before the
// per-channel constants, one statistics walk per vector case, codes by cvt.rni alone): the split
// path's (ops 1-4) and the one-pass K/V kernel (7), as opposed to the one-launch stages (5, 6),
// which spilled with them under their 80-register bound.
constexpr bool ROOMY = SAGE2_QUANT_OP <= 4 || SAGE2_QUANT_OP == 7;
// The one-pass K/V kernel's bodies read their rows from shared memory (the unit's copy): every
// Input it hands them points there (smem_input), and load_chunk reads it with ld.shared.
constexpr bool SMEM_ROWS = SAGE2_QUANT_OP == 7;

// Statistics written in this launch by other CTAs (fused path): read at L2, never through the
// read-only path.
__device__ __forceinline__ float ld_stat(const float* p) { return ptx::ld_relaxed_gpu_f32(p); }

// ---------------------------------------------------------------------------------------------
// Input access

struct Input {
  const u16* base;
  i64 sb, sh, sn;  // element strides (batch, head, seq)
  bool vec;        // 16-byte vector loads are legal
};

__device__ __forceinline__ Input make_input(const void* p, i64 sb, i64 sh, i64 sn) {
  Input in;
  in.base = static_cast<const u16*>(p);
  in.sb = sb;
  in.sh = sh;
  in.sn = sn;
  in.vec = VEC_HD && ((reinterpret_cast<u64>(p) & 15u) == 0) && (sb % 8 == 0) && (sh % 8 == 0) &&
           (sn % 8 == 0);
  return in;
}

__device__ __forceinline__ const u16* row_ptr(const Input& in, i64 b, i64 h, i64 n) {
  return in.base + b * in.sb + h * in.sh + n * in.sn;
}

// Raw 16-bit values of channels 8j .. 8j+7 of a row in global memory (channels >= HD read as 0,
// nothing loaded for them).
__device__ __forceinline__ ptx::u32x4 load_chunk_global(const Input& in, const u16* row, int j) {
  ptx::u32x4 r = {0u, 0u, 0u, 0u};
  if (j >= CH_IN) return r;
  if (VEC_HD && in.vec) return ptx::ld_nc_v4(row + 8 * j);
  // Scalar fallback (unaligned base/strides or a head dim that is not a multiple of 8): a short
  // rolled loop keeps the code small; this path is not expected to be fast.
  u64 lo = 0, hi = 0;
#pragma unroll 1
  for (int e = 0; e < 8; ++e) {
    const int c = 8 * j + e;
    const u64 v = (c < HD) ? static_cast<u64>(ptx::ld_nc_u16(row + c)) : 0ull;
    if (e < 4)
      lo |= v << (16 * e);
    else
      hi |= v << (16 * (e - 4));
  }
  r.x = static_cast<u32>(lo);
  r.y = static_cast<u32>(lo >> 32);
  r.z = static_cast<u32>(hi);
  r.w = static_cast<u32>(hi >> 32);
  return r;
}

// The same from where the kernel's bodies read rows: global memory, or the one-pass kernel's
// shared copy (16-byte aligned rows of CH_IN chunks).
__device__ __forceinline__ ptx::u32x4 load_chunk(const Input& in, const u16* row, int j) {
  if (SMEM_ROWS) return j < CH_IN ? ptx::ld_shared_v4(ptx::smem_addr(row + 8 * j)) : ptx::u32x4{0u, 0u, 0u, 0u};
  return load_chunk_global(in, row, j);
}

// load_chunk for a caller that checked the vector case once (VEC: in.vec and VEC_HD hold).
template <bool VEC>
__device__ __forceinline__ ptx::u32x4 load_chunk_as(const Input& in, const u16* row, int j) {
  if (VEC && !SMEM_ROWS) return j < CH_IN ? ptx::ld_nc_v4(row + 8 * j) : ptx::u32x4{0u, 0u, 0u, 0u};
  return load_chunk(in, row, j);
}

__device__ __forceinline__ Input q_input(const QuantizeParams& p) {
  return make_input(p.q, p.q_stride_batch, p.q_stride_head, p.q_stride_seq);
}
__device__ __forceinline__ Input kv_input(const QuantizeParams& p, bool is_v) {
  return is_v ? make_input(p.v, p.v_stride_batch, p.v_stride_head, p.v_stride_seq)
              : make_input(p.k, p.k_stride_batch, p.k_stride_head, p.k_stride_seq);
}
template <bool B>
struct BoolC {
  static constexpr bool value = B;
};

__device__ __forceinline__ void to_f32x8(const ptx::u32x4& v, float (&x)[8]) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (IN_BF16)
      ptx::unpack_bf16x2(w[i], x[2 * i], x[2 * i + 1]);
    else
      ptx::unpack_f16x2(w[i], x[2 * i], x[2 * i + 1]);
  }
}

// Non-finite inputs: the value is replaced by 0 (for every statistic) and bit e of the result
// is set for each such element. Finite values pass unchanged (bit-identical numerics).
// Whether any of the 8 raw 16-bit values is a NaN/Inf, on the packed bits
// (quant_math::nonfinite_bits). Finite inputs, the common case, then skip the per-element checks.
__device__ __forceinline__ bool any_nonfinite(const ptx::u32x4& v) {
  using quant_math::nonfinite_bits;
  return (nonfinite_bits<IN_BF16>(v.x) | nonfinite_bits<IN_BF16>(v.y) | nonfinite_bits<IN_BF16>(v.z) |
          nonfinite_bits<IN_BF16>(v.w)) != 0u;
}
__device__ __forceinline__ u32 to_f32x8_sane(const ptx::u32x4& v, float (&x)[8]) {
  to_f32x8(v, x);
  if (!any_nonfinite(v)) return 0u;
  u32 bad = 0u;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (nonfinite(x[e])) {
      bad |= 1u << e;
      x[e] = 0.f;
    }
  }
  return bad;
}

__device__ __forceinline__ void red_min_shared_s32(u32 smem, i32 v) {
  asm volatile("red.shared.min.s32 [%0], %1;" ::"r"(smem), "r"(v) : "memory");
}

// Grid (kernels::quantize_launch_shape): blockIdx.x = block of tokens within one (batch, head)
// sequence (channel_stats: 0 = K, 1 = V); (batch, head) pairs are numbered
// bh = blockIdx.z * gridDim.y + blockIdx.y (folded into z when there are more than 65535), and
// surplus CTAs exit. bh < 2^32 by construction, so (b, h) come from 32-bit divisions (64-bit
// ones would be subroutine calls).
__device__ __forceinline__ bool block_bh(i64 batch, i64 heads, i64& b, i64& h, i64& bh) {
  const u32 id = blockIdx.z * gridDim.y + blockIdx.y;
  if (static_cast<i64>(id) >= batch * heads) return false;
  const u32 H = static_cast<u32>(heads);
  b = static_cast<i64>(id / H);
  h = static_cast<i64>(id % H);
  bh = static_cast<i64>(id);
  return true;
}

__device__ __forceinline__ void check_block_dim() {
  if (blockDim.x != THREADS || blockDim.y != 1 || blockDim.z != 1) asm volatile("trap;");
}

// Every entry starts here: the kernel may overlap the end of the previous one on the stream
// (ptx::pdl_wait: nothing is read or written before that kernel completed), and lets the next
// one's CTAs start as soon as all of its own are running.
__device__ __forceinline__ void enter() {
  check_block_dim();
  ptx::pdl_wait();
  ptx::pdl_launch_dependents();
}

// Where an item's sequence lies. Dense calls: the launch's lengths, token 0 of batch entry b,
// and block (b·H + h)·nblk + blk of the per-block buffers (dense_*_item); varlen calls: the
// sequence table's lengths and first token, and the packed block (varlen_*_item).
struct SeqItem {
  i64 len;      // tokens of the item's tensor in the sequence (Q: q_len; K, V: kv_len)
  i64 kv_len;   // keys of the sequence (k̄ = sum / kv_len)
  i64 n0;       // the sequence's first token in the input, within batch entry b
  i64 out_blk;  // Q/K: the block's index in the per-block buffers (rows: × ROWS); V: the tile's first column of V̂ᵀ
  i64 v_row0, v_pitch;  // V: the head's channel-0 row of V̂ᵀ and the row pitch
};
template <bool IS_Q, int ROWS>
__device__ __forceinline__ SeqItem dense_qk_item(const QuantizeParams& p, i64 b, i64 h, i64 blk) {
  SeqItem s;
  s.len = IS_Q ? p.q_len : p.kv_len;
  s.kv_len = p.kv_len;
  s.n0 = 0;
  s.out_blk = (b * (IS_Q ? p.q_heads : p.kv_heads) + h) * ((s.len + ROWS - 1) / ROWS) + blk;
  s.v_row0 = s.v_pitch = 0;
  return s;
}
template <int ROWS>
__device__ __forceinline__ SeqItem dense_v_item(const QuantizeParams& p, i64 b, i64 h, i64 tile) {
  SeqItem s;
  s.len = s.kv_len = p.kv_len;
  s.n0 = 0;
  s.v_pitch = (p.kv_len + BK - 1) / BK * BK;
  s.v_row0 = (b * p.kv_heads + h) * D_V;
  s.out_blk = tile * ROWS;
  return s;
}


// ---------------------------------------------------------------------------------------------
// Channel statistics of rows [n0, n1) of one (batch, kv head) of K or V, per channel:
// sum, min, max and the first non-finite row. Each thread walks its rows n = n0 + slot + i*RPP in
// increasing n and keeps per-channel sums from 0.f; the RPP slot values are then combined left to
// right from slot 0's (kernels/quant_buffers.hpp: the sum-order formula, with P = RPP). Non-finite
// inputs count as 0 (min/max then never see NaN). Used by sage2_channel_stats (one range = the
// whole sequence) and by the fused kernel's statistics chunks (T tokens each).

template <class M>
constexpr int stats_red_floats() { return M::RPP * M::TPR * M::CPT * 8; }  // one statistic's slots
// Sum, min and max of the slots go through one barrier when their slots fit 24 KiB, else one at
// a time (wide heads: the static shared memory of the fused and cluster stages is shared).
// (The one-pass K/V kernel: one at a time, so that its scratch leaves room for three CTAs per SM
// beside their rows.)
template <class M>
constexpr int stats_per_round() { return !SMEM_ROWS && 3 * stats_red_floats<M>() * 4 <= 24 * 1024 ? 3 : 1; }
constexpr int STATS_D_MAX = D_QK > D_V ? D_QK : D_V;
// [stats_per_round][slots] floats, [STATS_D_MAX] i32 first-bad rows, 16 bytes for the caller.
template <class M>
constexpr int stats_smem_bytes() { return stats_per_round<M>() * stats_red_floats<M>() * 4 + STATS_D_MAX * 4 + 16; }

// emit(s, c, v) receives, for every channel c < d_out (padded channels: 0, 0, 0, NO_BAD):
// s = 0 sum, 1 min, 2 max, 3 first non-finite row (v holds the i32 bits).
template <class M, class Emit>
__device__ __forceinline__ void stats_rows(const Input& in, const u16* row0, i64 n0, i64 n1, int d_out,
                                           u8* smem, Emit&& emit) {
  constexpr int RED_W = M::TPR * M::CPT * 8;  // floats per slot in the reduction buffer
  constexpr int RED = stats_red_floats<M>();
  constexpr int PER = stats_per_round<M>();
  constexpr int CPT = M::CPT, RPP = M::RPP;
  float* s_red = reinterpret_cast<float*>(smem);     // [PER][RED]
  i32* s_fb = reinterpret_cast<i32*>(s_red + PER * RED);  // per channel: first non-finite row (shared min)
  const int tid = threadIdx.x, lane_r = tid % M::TPR, slot = tid / M::TPR;
  for (int c = tid; c < STATS_D_MAX; c += THREADS) s_fb[c] = NO_BAD;
  float sum[CPT][8], mn[CPT][8], mx[CPT][8];
#pragma unroll
  for (int k = 0; k < CPT; ++k)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sum[k][e] = 0.f;
      mn[k][e] = ptx::bits_f32(0x7f800000u);  // +Inf
      mx[k][e] = ptx::bits_f32(0xff800000u);  // -Inf
    }
  __syncthreads();  // s_fb set before any non-finite element is recorded

  constexpr int U = CPT == 1 ? 4 : 2;  // rows in flight per thread (8 spilled at 3 CTAs per SM)
  // The walk, with the vector-or-scalar choice made once and the row pointers advanced by a
  // 64-bit add per row (no per-row multiply).
  auto walk = [&](auto vec) {
    constexpr bool VEC = decltype(vec)::value;
    // (the one-launch stages address each row from its index: fewer live registers)
    const i64 step = ROOMY ? static_cast<i64>(RPP) * in.sn : 0;
    const u16* rows = ROOMY ? row0 + (n0 + slot) * in.sn : row0;
#pragma unroll 1
    for (i64 nb = n0 + slot; nb < n1; nb += static_cast<i64>(U) * RPP) {
      ptx::u32x4 raw[U][CPT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 n = nb + static_cast<i64>(u) * RPP;
        const u16* rp = ROOMY ? rows + u * step : row0 + n * in.sn;
#pragma unroll
        for (int k = 0; k < CPT; ++k)
          raw[u][k] = (n < n1) ? load_chunk_as<VEC>(in, rp, lane_r + k * M::TPR) : ptx::u32x4{0u, 0u, 0u, 0u};
      }
      if (ROOMY) rows += U * step;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 n = nb + static_cast<i64>(u) * RPP;
        if (n < n1) {
          // the kernel's own launch limits keep rows below 2^31; saturate anyway
          const i32 n32 = static_cast<i32>(n < NO_BAD ? n : static_cast<i64>(NO_BAD - 1));
#pragma unroll
          for (int k = 0; k < CPT; ++k) {
            float x[8];
            const u32 bad = to_f32x8_sane(raw[u][k], x);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              sum[k][e] += x[e];
              mn[k][e] = ptx::min_nan(mn[k][e], x[e]);
              mx[k][e] = ptx::max_nan(mx[k][e], x[e]);
            }
            if (bad != 0u) {  // rare: off the common path; the first bad row is order-free (a min)
              const int j = lane_r + k * M::TPR;
#pragma unroll
              for (int e = 0; e < 8; ++e)
                if ((bad >> e) & 1u) red_min_shared_s32(ptx::smem_addr(&s_fb[j * 8 + e]), n32);
            }
          }
        }
      }
    }
  };
  if (ROOMY && VEC_HD && in.vec)  // (the one-launch stages keep one walk: their register bound)
    walk(BoolC<VEC_HD>{});
  else
    walk(BoolC<false>{});

  // Combine the RPP row slots, PER statistics per barrier (sum, min, max; sums left to right from
  // slot 0's: the contract's order); the first bad row with the last.
#pragma unroll
  for (int r0 = 0; r0 < 3; r0 += PER) {
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * M::TPR;
#pragma unroll
      for (int e = 0; e < 8; ++e)
#pragma unroll
        for (int q = 0; q < PER; ++q) {
          const int st = r0 + q;
          s_red[q * RED + slot * RED_W + j * 8 + e] = st == 0 ? sum[k][e] : st == 1 ? mn[k][e] : mx[k][e];
        }
    }
    __syncthreads();
#pragma unroll 1
    for (int c = tid; c < d_out; c += THREADS) {
#pragma unroll
      for (int q = 0; q < PER; ++q) {
        const int st = r0 + q;
        const float* red = s_red + q * RED;
        float acc = 0.f;
        if (c < HD) {
          acc = red[c];
#pragma unroll 4
          for (int sl = 1; sl < RPP; ++sl) {
            const float v = red[sl * RED_W + c];
            acc = st == 0 ? acc + v : st == 1 ? ptx::min_nan(acc, v) : ptx::max_nan(acc, v);
          }
        }
        emit(st, c, acc);
      }
      if (r0 + PER == 3) emit(3, c, ptx::bits_f32(static_cast<u32>(c < HD ? s_fb[c] : NO_BAD)));
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------------------------
// The varlen table (SAGE2_VARLEN; run by the first CTA of sage2_channel_stats, the stage's first
// kernel, so that it costs no launch): one CTA builds the sequence table and the block maps of a
// varlen call from the caller's arrays (include/sage2/sage2.hpp SeqLens), so that lengths stay on
// the device (a graph replays new lengths); the later kernels of the call read them. Packed: sequence s = tokens [cu[s], cu[s+1]);
// key padding (no cu arrays): q_len tokens of batch entry s, and kv_lens[s] keys. Arrays that
// break the rules (cu[0] != 0, decreasing, past the tensor, kv_lens outside [0, Nk]) empty the
// maps, so no later kernel does anything, and fill the output and LSE with NaN.
#if SAGE2_QUANT_OP == 1 && SAGE2_VARLEN
constexpr int TABLE_THREADS = THREADS;
__device__ __forceinline__ void varlen_table(const QuantizeParams& p) {
  __shared__ i32 s_q[TABLE_THREADS], s_k[TABLE_THREADS];
  __shared__ i32 s_carry[2];
  __shared__ int s_bad;
  const int tid = threadIdx.x;
  if (tid == 0) { s_carry[0] = s_carry[1] = 0; s_bad = 0; }
  __syncthreads();
  const bool packed = p.cu_q != nullptr;
#pragma unroll 1
  for (i64 base = 0; base < p.batch; base += TABLE_THREADS) {
    const i64 s = base + tid;
    sage2::dev::SeqEntry e{};
    bool bad = false;
    if (s < p.batch) {
      if (packed) {
        const i64 q0 = p.cu_q[s], q1 = p.cu_q[s + 1], k0 = p.cu_k[s], k1 = p.cu_k[s + 1];
        bad = (s == 0 && (q0 != 0 || k0 != 0)) || q1 < q0 || k1 < k0 || q1 > p.total_q || k1 > p.total_k;
        e.q_start = static_cast<i32>(q0);
        e.q_len = static_cast<i32>(q1 - q0);
        e.k_start = static_cast<i32>(k0);
        e.k_len = static_cast<i32>(k1 - k0);
      } else {
        const i64 kl = p.kv_lens[s];
        bad = kl < 0 || kl > p.kv_len;
        e.q_start = 0;
        e.q_len = static_cast<i32>(p.q_len);
        e.k_start = 0;
        e.k_len = static_cast<i32>(kl);
      }
      if (bad) e.q_len = e.k_len = 0;
    }
    if (bad) s_bad = 1;
    // Inclusive scans of the block counts (Hillis-Steele: a one-CTA set-up kernel).
    s_q[tid] = (e.q_len + BQ - 1) / BQ;
    s_k[tid] = (e.k_len + BK - 1) / BK;
    __syncthreads();
#pragma unroll 1
    for (int d = 1; d < TABLE_THREADS; d *= 2) {
      const i32 aq = tid >= d ? s_q[tid - d] : 0, ak = tid >= d ? s_k[tid - d] : 0;
      __syncthreads();
      s_q[tid] += aq;
      s_k[tid] += ak;
      __syncthreads();
    }
    if (s < p.batch) {
      e.q_blk = s_carry[0] + s_q[tid] - (e.q_len + BQ - 1) / BQ;
      e.k_blk = s_carry[1] + s_k[tid] - (e.k_len + BK - 1) / BK;
      p.seqs[s] = e;
    }
    __syncthreads();
    if (tid == 0) { s_carry[0] += s_q[TABLE_THREADS - 1]; s_carry[1] += s_k[TABLE_THREADS - 1]; }
    __syncthreads();
  }
  // The bounds hold for valid lengths (Σ ceil(len / b) <= ceil(total / b) + B); kept as a check.
  if (tid == 0 && (s_carry[0] > p.q_map_len || s_carry[1] > p.k_map_len)) s_bad = 1;
  __syncthreads();
  const bool bad = s_bad != 0;
  // Block maps: the sequence of packed block X is the last one starting at or before X (empty
  // sequences after it start past X).
#pragma unroll 1
  for (int kv = 0; kv < 2; ++kv) {
    i32* map = kv ? p.k_map : p.q_map;
    const i64 n = kv ? p.k_map_len : p.q_map_len, used = bad ? 0 : s_carry[kv];
#pragma unroll 1
    for (i64 X = tid; X < n; X += TABLE_THREADS) {
      i32 seq = sage2::dev::kNoSeq;
      if (X < used) {
        i64 lo = 0, hi = p.batch - 1;
        while (lo < hi) {
          const i64 mid = (lo + hi + 1) / 2;
          if ((kv ? p.seqs[mid].k_blk : p.seqs[mid].q_blk) <= X) lo = mid; else hi = mid - 1;
        }
        seq = static_cast<i32>(lo);
      }
      map[X] = seq;
    }
  }
  if (!bad) return;
  const u16 nan16 = IN_BF16 ? static_cast<u16>(0x7fc0u) : static_cast<u16>(0x7e00u);
  const i64 rows = p.out_batch * p.q_heads * p.out_seq;
#pragma unroll 1
  for (i64 i = tid; i < rows * HD; i += TABLE_THREADS) {
    const i64 r = i / HD, c = i % HD;
    const i64 b = r / (p.q_heads * p.out_seq), h = (r / p.out_seq) % p.q_heads, n = r % p.out_seq;
    static_cast<u16*>(p.out)[b * p.o_stride_batch + h * p.o_stride_head + n * p.o_stride_seq + c] = nan16;
  }
  if (p.lse)
    for (i64 i = tid; i < p.lse_count; i += TABLE_THREADS) p.lse[i] = ptx::bits_f32(0x7fc00000u);
}
#endif

#if SAGE2_QUANT_OP == 1 || SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 6 || SAGE2_QUANT_OP == 7
// One channel's statistics from `n` partials (sum, min, max, first-bad as i32 bits), partial i's
// statistic s read by load(i, s): sums left to right from partial 0's (the order of
// kernels/quant_buffers.hpp), min/max/first-bad order-free. UB partials' loads are in flight at once
// (latency, not order).
template <class Load>
__device__ __forceinline__ void combine_partials(u32 n, Load&& load, float& sum, float& mn, float& mx, i32& fb) {
  constexpr int UB = 8;
#pragma unroll 1
  for (u32 k0 = 0; k0 < n; k0 += UB) {
    float v[UB][4];
#pragma unroll
    for (int u = 0; u < UB; ++u)
#pragma unroll
      for (int st = 0; st < 4; ++st) v[u][st] = load(k0 + u < n ? k0 + u : k0, st);
#pragma unroll
    for (int u = 0; u < UB; ++u) {
      if (k0 + u >= n) break;
      const i32 f = static_cast<i32>(ptx::f32_bits(v[u][3]));
      if (k0 + u == 0) {
        sum = v[u][0]; mn = v[u][1]; mx = v[u][2]; fb = f;
      } else {
        sum += v[u][0];
        mn = ptx::min_nan(mn, v[u][1]);
        mx = ptx::max_nan(mx, v[u][2]);
        fb = f < fb ? f : fb;
      }
    }
  }
}

#endif

#if SAGE2_QUANT_OP == 1 || SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 7
constexpr int STATS_T = SAGE2_QZ_STATS_CHUNK;  // tokens per statistics chunk (kernels::quantize_stats_chunk)
static_assert(STATS_T % 16 == 0, "statistics chunk");

// Statistics chunk `chunk` of one (sequence, kv head) `bh` of K or V — tokens [chunk·T, min(len,
// (chunk+1)·T)) of the sequence whose first row is n0 in (b, h) — as partials [4][D_V] (sum, min,
// max, first-bad as i32 bits) at part_g[chunk]. Then the arrival at `arrive` (zero at launch):
// the last of the sequence's `chunks` chunks to arrive reduces all of them in chunk order (sum:
// left to right from chunk 0's; min/max/first-bad: order-free) into k_stats / v_stats and the
// first-bad flags of bh, and returns true (after a barrier: every thread's final statistics are
// stored). Which CTA is last does not change a bit of the result.
__device__ __forceinline__ bool stats_chunk(const QuantizeParams& p, u8* smem, const Input& in, bool is_v, i64 b, i64 h,
                                            i64 bh, i64 n0, i64 len, float* part_g, u32 chunk, u32 chunks, u32* arrive) {
  const i64 c0 = static_cast<i64>(chunk) * STATS_T;
  const i64 c1 = len - c0 < STATS_T ? len : c0 + STATS_T;
  float* part = part_g + static_cast<i64>(chunk) * 4 * D_V;
  stats_rows<MapS>(in, row_ptr(in, b, h, n0), c0, c1, D_V, smem,
                   [&](int s, int c, float v) { ptx::st_f32(part + s * D_V + c, v); });

  // Arrive: the CTA's partials (ordered before by the barrier in stats_rows) are released at
  // gpu scope by thread 0's fence + acq_rel add; the last arriver acquires everyone's.
  u32* s_last = reinterpret_cast<u32*>(smem + stats_smem_bytes<MapS>() - 16);
  i32* s_kfb = reinterpret_cast<i32*>(smem + stats_smem_bytes<MapS>() - 12);
  if (threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    const u32 before = ptx::atom_add_acq_rel_gpu_u32(arrive, 1u);
    *s_last = before + 1u == chunks ? 1u : 0u;
    *s_kfb = NO_BAD;
  }
  __syncthreads();
  if (*s_last == 0u) return false;

  const int d_out = is_v ? D_V : D_QK;
  float* out = (is_v ? p.v_stats : p.k_stats) + bh * 3 * d_out;
#pragma unroll 1
  for (int c = threadIdx.x; c < d_out; c += THREADS) {
    float sum = 0.f, mn = 0.f, mx = 0.f;
    i32 fb = NO_BAD;
    if (c < HD) {
      const float* pc = part_g + c;
      combine_partials(chunks, [&](u32 k, int s) { return ld_stat(pc + (static_cast<i64>(k) * 4 + s) * D_V); },
                       sum, mn, mx, fb);
    }
    out[c] = sum;
    out[d_out + c] = mn;
    out[2 * d_out + c] = mx;
    if (is_v)
      p.v_first_bad[bh * D_V + c] = fb;
    else if (fb != NO_BAD)
      red_min_shared_s32(ptx::smem_addr(s_kfb), fb);
  }
  __syncthreads();
  if (!is_v && threadIdx.x == 0) p.k_first_bad[bh] = *s_kfb;
  return true;
}
#endif

#if SAGE2_QUANT_OP == 1
// sage2_channel_stats: blockIdx.x = 2·c + kv (kv 0: K, d_qk outputs; 1: V, d_v outputs) takes
// statistics chunks c, c + gridDim.x/2, ... of its (sequence, kv head) (stats_chunk; a varlen
// sequence may be longer than the bound the grid was sized for); the last chunk to arrive writes
// the statistics. Padded channels get 0, 0, 0. The same walk finds the first non-finite key per
// channel: v_first_bad[c] (V; padded channels INT32_MAX) and k_first_bad = min over K's real
// channels. A sequence without keys has no chunk: its first CTA writes the empty statistics.
__device__ __forceinline__ void channel_stats(const QuantizeParams p, u8* smem) {
  i64 b, h, bh;
  if (!block_bh(p.batch, p.kv_heads, b, h, bh)) return;
  const bool is_v = (blockIdx.x & 1u) != 0u;
  const int kv = is_v ? 1 : 0;
  i64 n0 = 0, len = p.kv_len;
#if SAGE2_VARLEN
  if (bh == 0 && blockIdx.x == 0) varlen_table(p);
  // The sequence's keys straight from the caller's arrays (the table is being built by another
  // CTA of this launch), clamped into the tensor: invalid arrays read nothing outside it (the
  // table then poisons the whole output and empties the maps).
  i64 row0;  // the sequence's first row among all the tensor's rows of head h
  if (p.cu_k) {
    const i64 k0 = p.cu_k[b], k1 = p.cu_k[b + 1];
    n0 = k0 < 0 ? 0 : (k0 > p.total_k ? p.total_k : k0);
    len = k1 < n0 ? 0 : (k1 > p.total_k ? p.total_k : k1) - n0;
    row0 = n0;
  } else {
    const i64 kl = p.kv_lens[b];
    len = kl < 0 ? 0 : (kl > p.kv_len ? p.kv_len : kl);
    row0 = b * p.kv_len;
  }
  // Partial slots of sequence b: b + row0/T onwards, disjoint from every other sequence's (each
  // sequence adds at most one slot to the chunks of the rows before it), < the buffer's
  // B + ceil(total_k / T) + 1 per (kv head, K|V).
  const i64 slots = p.batch + (p.total_k + STATS_T - 1) / STATS_T + 1;
  float* part_g = p.stats_part + ((h * 2 + kv) * slots + b + row0 / STATS_T) * 4 * D_V;
#else
  float* part_g = p.stats_part + (bh * 2 + kv) * ((p.kv_len + STATS_T - 1) / STATS_T) * 4 * D_V;
#endif
  const u32 chunks = static_cast<u32>((len + STATS_T - 1) / STATS_T);
  const u32 first = blockIdx.x >> 1, step = gridDim.x >> 1;
  if (chunks == 0u) {
    if (first != 0u) return;
    // No keys (varlen): sum 0, min +Inf, max -Inf, no bad key — the one-chunk walk of nothing.
    if (is_v)  // no V tile writes the scale and mean, which the epilogue multiplies by 0 rows
      for (int c = threadIdx.x; c < D_V; c += THREADS) p.v_scale[bh * D_V + c] = p.v_mean[bh * D_V + c] = 0.f;
    const Input in = is_v ? make_input(p.v, p.v_stride_batch, p.v_stride_head, p.v_stride_seq)
                          : make_input(p.k, p.k_stride_batch, p.k_stride_head, p.k_stride_seq);
    const int d_out = is_v ? D_V : D_QK;
    float* out = (is_v ? p.v_stats : p.k_stats) + bh * 3 * d_out;
    stats_rows<MapS>(in, row_ptr(in, b, h, n0), 0, 0, d_out, smem, [&](int s, int c, float v) {
      if (s < 3) out[s * d_out + c] = v;
      else if (is_v) p.v_first_bad[bh * D_V + c] = static_cast<i32>(ptx::f32_bits(v));
    });
    if (!is_v && threadIdx.x == 0) p.k_first_bad[bh] = NO_BAD;
    return;
  }
#pragma unroll 1
  for (u32 c = first; c < chunks; c += step)
    stats_chunk(p, smem, kv_input(p, is_v), is_v, b, h, bh, n0, len, part_g, c, chunks, p.sync + 1 + 2 * bh + kv);
}
#endif

// ---------------------------------------------------------------------------------------------
// sage2_quantize_q / sage2_quantize_k: CTA = (batch, head, block of ROWS tokens).
//  K: mean = smooth_k ? k_stats.sum / kv_len : 0 (written to k_mean by block 0).
//  Q: mean = smooth_q ? block mean over valid rows (sum order: per thread in row order, then
//     slots in order; divided by the valid row count) : 0; q_kbias[i] = Σ_c float(Q[i,c]) · k̄[c]
//     (per thread over its channels in order, then a butterfly over the row's TPR threads).
//  x = float(input) - mean; group amax = max |x| (unsigned max of |x|'s bits);
//  scale = amax / R; inv = finite positive amax ? R / amax : 0; code = rint(clamp(x*inv)).
//  A non-finite input reads as 0 in the mean, q·k̄ and amax; its code is 0; Q rows with one set
//  q_bad (padded rows 0).
// Rows are kept in registers between the passes when ITEMS * CPT <= 8 (16-byte chunks), else
// re-read in rolled loops (the re-reads hit L1/L2; this keeps big head dims quick to compile).

#if SAGE2_QUANT_OP == 2 || SAGE2_QUANT_OP == 3 || (SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 6) || SAGE2_QUANT_OP == 7
template <bool IS_Q, class M>
constexpr int qk_smem_bytes() {
  constexpr int GROUPS = IS_Q ? SAGE2_Q_GROUPS : SAGE2_K_GROUPS;
  constexpr bool BLOCK_MEAN = IS_Q && SAGE2_SMOOTH_Q;
  constexpr bool KBIAS = IS_Q && SAGE2_SMOOTH_K;
  return 4 * (D_QK + (KBIAS ? D_QK : 0) + 2 * GROUPS + (BLOCK_MEAN ? M::RPP * M::CHUNKS * 8 : 0));
}

// One block `blk` of head h of batch b (Q: a q head; K: a kv head). `k_sum`: the K channel sums
// of the block's kv head when the caller holds them in shared memory (the cluster stage), else
// null: they are read from k_stats in global memory.
template <bool IS_Q, class M>
__device__ __forceinline__ void quantize_qk(const QuantizeParams& p, u8* smem, const Input& in, i64 b, i64 h, i64 blk,
                                            const SeqItem& si, const float* k_sum = nullptr) {
  constexpr int GROUPS = IS_Q ? SAGE2_Q_GROUPS : SAGE2_K_GROUPS;
  constexpr bool BLOCK_MEAN = IS_Q && SAGE2_SMOOTH_Q;  // smooth Q
  constexpr bool KBIAS = IS_Q && SAGE2_SMOOTH_K;       // q · k̄ for the LSE
  constexpr bool K_MEAN = !IS_Q && SAGE2_SMOOTH_K;     // smooth K
  constexpr int R = SAGE2_QK_BITS == 4 ? 7 : 127;
  constexpr int ROWS = M::ROWS, TPR = M::TPR, CPT = M::CPT, CHUNKS = M::CHUNKS, RPP = M::RPP, ITEMS = M::ITEMS;
  constexpr bool CACHE = ITEMS * CPT <= 8;
  constexpr int UNROLL = CACHE ? ITEMS : 1;  // rolled loops re-read rows (small code)
  constexpr int RED_W = CHUNKS * 8;  // == D_QK
  static_assert(ROWS == (IS_Q ? BQ : BK), "rows per CTA must be the quantization block");
  static_assert(CHUNKS * 8 == D_QK, "Q/K mapping covers the padded head dim");

  float* s_mean = reinterpret_cast<float*>(smem);            // [D_QK]
  float* s_kbar = s_mean + D_QK;                             // [D_QK] (KBIAS)
  u32* s_amax = reinterpret_cast<u32*>(s_kbar + (KBIAS ? D_QK : 0));  // [GROUPS]
  float* s_inv = reinterpret_cast<float*>(s_amax + GROUPS);  // [GROUPS]
  float* s_red = s_inv + GROUPS;                             // [RPP * RED_W] (BLOCK_MEAN)

  const i64 len = si.len;
  const i64 row0 = blk * ROWS;
  const i64 out_row0 = si.out_blk * ROWS;  // the block's first row in the per-row buffers
  const int valid = static_cast<int>(len - row0 < ROWS ? len - row0 : ROWS);
  i64 kv_bh = b * p.kv_heads + h;
  if (IS_Q) {
    const u32 group = static_cast<u32>(p.q_heads) / static_cast<u32>(p.kv_heads);  // GQA (32-bit: no call)
    kv_bh = b * p.kv_heads + static_cast<i64>(static_cast<u32>(h) / group);
  }
  const u16* base = row_ptr(in, b, h, si.n0 + row0);

  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;

  // ---- this thread's rows (row r = slot + i*RPP, chunk j = lane_r + k*TPR). The split kernels
  // load them first, so that their latency overlaps the per-channel constants' (k_stats reads and
  // divisions); the one-launch stages load them after (their register bound: the cluster stage
  // spilled with the rows live across the constants).
  ptx::u32x4 cache[CACHE ? ITEMS : 1][CACHE ? CPT : 1];
  auto load_rows = [&] {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int r = slot + i * RPP;
#pragma unroll
      for (int k = 0; k < CPT; ++k)
        cache[CACHE ? i : 0][CACHE ? k : 0] =
            (r < valid) ? load_chunk(in, base + static_cast<i64>(r) * in.sn, lane_r + k * TPR)
                        : ptx::u32x4{0u, 0u, 0u, 0u};
    }
  };
  if (CACHE && ROOMY) load_rows();

  // ---- per-channel constants; group maxima start at 0
  for (int g = tid; g < GROUPS; g += THREADS) s_amax[g] = 0u;
#pragma unroll 1
  for (int c = tid; c < D_QK; c += THREADS) {
    // k̄ = sum_K / kv_len (k_stats is read only when smooth_k: it may be null otherwise)
    // (a varlen sequence may have no keys: k̄ = 0 then)
    const float kbar = (SAGE2_SMOOTH_K && c < HD && si.kv_len > 0)
                           ? ptx::div_rn(k_sum ? k_sum[c] : ld_stat(p.k_stats + kv_bh * 3 * D_QK + c),
                                         static_cast<float>(si.kv_len))
                           : 0.f;
    if (KBIAS) s_kbar[c] = kbar;
    if (!BLOCK_MEAN) {
      const float m = K_MEAN ? kbar : 0.f;
      s_mean[c] = m;
      if (!IS_Q && blk == 0) p.k_mean[kv_bh * D_QK + c] = m;
    }
  }

  if (CACHE && !ROOMY) load_rows();
  // x: the chunk with non-finite values read as 0; returns their mask (bit e = element e).
  auto fetch = [&](int i, int k, float (&x)[8]) -> u32 {
    const int r = slot + i * RPP;
    ptx::u32x4 raw;
    if (CACHE)
      raw = cache[CACHE ? i : 0][CACHE ? k : 0];
    else
      raw = (r < valid) ? load_chunk(in, base + static_cast<i64>(r) * in.sn, lane_r + k * TPR)
                        : ptx::u32x4{0u, 0u, 0u, 0u};
    return to_f32x8_sane(raw, x);
  };

  // ---- smooth Q: block mean per channel over the valid rows
  if (BLOCK_MEAN) {
    float cs[CPT][8];
#pragma unroll
    for (int k = 0; k < CPT; ++k)
#pragma unroll
      for (int e = 0; e < 8; ++e) cs[k][e] = 0.f;
#pragma unroll UNROLL
    for (int i = 0; i < ITEMS; ++i) {
      if (slot + i * RPP < valid) {
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          float x[8];
          fetch(i, k, x);
#pragma unroll
          for (int e = 0; e < 8; ++e) cs[k][e] += x[e];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j < CHUNKS)
#pragma unroll
        for (int e = 0; e < 8; ++e) s_red[slot * RED_W + j * 8 + e] = cs[k][e];
    }
    __syncthreads();
#pragma unroll 1
    for (int c = tid; c < D_QK; c += THREADS) {
      float m = 0.f;
      if (c < HD) {
        float sum = s_red[c];
        for (int sl = 1; sl < RPP; ++sl) sum += s_red[sl * RED_W + c];
        m = ptx::div_rn(sum, static_cast<float>(valid));
      }
      s_mean[c] = m;
      if (IS_Q) p.q_mean[si.out_blk * D_QK + c] = m;
    }
  }
  __syncthreads();

  // This thread's channels are the same for all its rows: keep their constants in registers.
  float mean_r[CPT][8], kbar_r[KBIAS ? CPT : 1][8];
#pragma unroll
  for (int k = 0; k < CPT; ++k) {
    const int j = lane_r + k * TPR;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      mean_r[k][e] = j < CHUNKS ? s_mean[j * 8 + e] : 0.f;
      if (KBIAS) kbar_r[KBIAS ? k : 0][e] = j < CHUNKS ? s_kbar[j * 8 + e] : 0.f;
    }
  }

  // ---- per row: q_kbias (padded rows 0) and the group amax of |x - mean|
#pragma unroll UNROLL
  for (int i = 0; i < ITEMS; ++i) {
    const int r = slot + i * RPP;
    u32 m = 0u, row_bad = 0u;
    float part = 0.f;
    if (r < valid) {
#pragma unroll
      for (int k = 0; k < CPT; ++k) {
        const int j = lane_r + k * TPR;
        if (j < CH_IN) {
          float x[8];
          row_bad |= fetch(i, k, x);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            if (KBIAS) part += x[e] * kbar_r[KBIAS ? k : 0][e];
            m = ptx::max_u32(m, ptx::abs_bits(x[e] - mean_r[k][e]));
          }
        }
      }
    }
    m = ptx::group_max_u32<TPR>(m);
    if (lane_r == 0 && r < valid) {
      const int g = IS_Q ? sage2_q_group_table[r] : sage2_k_group_table[r];
      ptx::red_max_shared_u32(ptx::smem_addr(&s_amax[g]), m);
    }
    if (KBIAS) {
      part = ptx::group_sum<TPR>(part);
      if (lane_r == 0 && r < ROWS) p.q_kbias[out_row0 + r] = (r < valid) ? part : 0.f;
    }
    if (IS_Q) {
      row_bad = ptx::group_max_u32<TPR>(row_bad != 0u ? 1u : 0u);
      if (lane_r == 0 && r < ROWS) p.q_bad[out_row0 + r] = static_cast<u8>(row_bad);
    }
  }
  __syncthreads();
#pragma unroll 1
  for (int g = tid; g < GROUPS; g += THREADS) {
    const float amax = ptx::bits_f32(s_amax[g]);
    const float scale = quant_math::group_scale<R>(amax);
    s_inv[g] = quant_math::group_inv<R>(amax);
    float* scales = IS_Q ? p.q_scale : p.k_scale;
    scales[si.out_blk * GROUPS + g] = scale;
  }
  __syncthreads();

  // ---- codes (padded rows and channels: 0)
  i8* codes = (IS_Q ? p.q_codes : p.k_codes) + out_row0 * ROW_BYTES;
#pragma unroll UNROLL
  for (int i = 0; i < ITEMS; ++i) {
    const int r = slot + i * RPP;
    if (r >= ROWS) continue;
    const float inv = (r < valid) ? s_inv[IS_Q ? sage2_q_group_table[r] : sage2_k_group_table[r]] : 0.f;
    i8* dst = codes + static_cast<i64>(r) * ROW_BYTES;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j >= CHUNKS) continue;
      i32 q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (r < valid && j < CH_IN) {
        float x[8];
        const u32 bad = fetch(i, k, x);
        if (ROOMY && quant_math::group_inv_finite(inv)) {  // every group but one with a tiny amax
#pragma unroll
          for (int e = 0; e < 8; ++e) q[e] = quant_math::quant_int_finite_inv(x[e] - mean_r[k][e], inv);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) q[e] = quant_int<R>(x[e] - mean_r[k][e], inv);
        }
        if (bad != 0u) {  // a non-finite input's code is 0 (rare: off the common path)
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if ((bad >> e) & 1u) q[e] = 0;
        }
      }
      if (SAGE2_QK_BITS == 8) {
        ptx::st_v2(dst + j * 8, quant_math::pack_low_bytes(q[0], q[1], q[2], q[3]),
                   quant_math::pack_low_bytes(q[4], q[5], q[6], q[7]));
      } else {
        u32 w = 0u;
#pragma unroll
        for (int e = 0; e < 8; ++e) w |= (static_cast<u32>(q[e]) & 0xfu) << (4 * e);
        ptx::st_u32(dst + j * 4, w);
      }
    }
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// sage2_quantize_v: CTA = (batch, kv head, tile of ROWS tokens of the padded length).
//  μ = smooth_v ? sum/kv_len : 0; amax = smooth_v ? max(max-μ, μ-min) : max(|max|, |min|)
//  (NaN-propagating max); scale = amax/448; inv = finite positive amax ? 448/amax : 0;
//  code = e4m3_rn_satfinite((float(V) - μ) * inv) (0 for a non-finite V: its statistics were
//  taken as 0 by channel_stats), stored transposed [c][slot] (slot = the consumer's key order within
//  each 16-key group, kernels::QuantLayout::v_slot) through shared
//  memory so that each channel's ROWS bytes leave as 16-byte stores (one thread per channel).
//  Tile 0 writes v_scale and v_mean (v_mean = μ, 0 when !smooth_v; padded channels 0).
//  SAGE2_PV_FP16 (FP16 P̃V): scale = δ = 2^max(0, e − 15) for amax = f·2^e, f ∈ [0.5, 1) (1 unless
//  |V − μ| reaches 2^15), inv = finite positive amax ? 1/δ : 0 (both exact), code =
//  fp16_rn((float(V) − μ) · inv), two bytes per code, same transposed layout and slot order.
//  SAGE2_PV_ACC16 (V̂ feeds an fp16 accumulator of 64 keys): 2.25 in place of 448 (64·448·2.25 =
//  64512 < 65504), and 2^max(0, e − 9) in place of 2^max(0, e − 15) (|V̂| < 2^9).

#if SAGE2_QUANT_OP == 4 || (SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 6) || SAGE2_QUANT_OP == 7
constexpr bool V_FP16 = SAGE2_PV_FP16 != 0;
constexpr int V_BYTES = V_FP16 ? 2 : 1;  // bytes of one V̂ code
constexpr float V8_MAX = SAGE2_PV_ACC16 ? 2.25f : 448.f;  // e4m3 V̂ bound (kernels::kV8Acc16Max)
constexpr int V16_EXP = SAGE2_PV_ACC16 ? 9 : 15;          // FP16 V̂ < 2^V16_EXP (kV16Acc16Exp, kV16Exp)
template <class M>
constexpr int v_smem_bytes() { return 8 * D_V + M::ROWS * D_V * V_BYTES; }

// FP16 V̂'s per-channel power-of-two scale δ for a finite positive amax (see above).
__device__ __forceinline__ float v16_scale(float amax) {
  const int e = static_cast<int>((ptx::f32_bits(amax) >> 23) & 0xffu) - 126;  // amax < 2^e
  const int k = e - V16_EXP > 0 ? e - V16_EXP : 0;
  return ptx::bits_f32(static_cast<u32>(127 + k) << 23);
}

// `stats`: the head's V statistics [3][D_V] in shared memory (the cluster stage), else null:
// read from v_stats in global memory.
template <class M>
__device__ __forceinline__ void quantize_v(const QuantizeParams& p, u8* smem, const Input& in, i64 b, i64 h, i64 tile,
                                           const SeqItem& si, const float* stats = nullptr) {
  constexpr int ROWS = M::ROWS, TPR = M::TPR, CPT = M::CPT, CHUNKS = M::CHUNKS, RPP = M::RPP, ITEMS = M::ITEMS;
  static_assert(ROWS % 16 == 0, "V tile must be a multiple of 16 tokens");
  static_assert(CHUNKS * 8 == D_V, "V mapping covers the padded head dim");
  static_assert(v_smem_bytes<M>() <= 48 * 1024, "V tile exceeds static shared memory");
  float* s_mu = reinterpret_cast<float*>(smem);  // [D_V]
  float* s_inv = s_mu + D_V;                     // [D_V]
  // Codes of the tile token-major [ROWS][D_V]: written 8 bytes per thread (contiguous along a
  // row), read back one byte per lane along a row (consecutive channels: no bank conflicts).
  u8* s_t = smem + 8 * D_V;  // 16-byte aligned: D_V is a multiple of 32

  const i64 bh = b * p.kv_heads + h;
  const i64 n0 = tile * ROWS;
  const i64 kv_len = si.len;
  const int valid = static_cast<int>(kv_len - n0 <= 0 ? 0 : (kv_len - n0 < ROWS ? kv_len - n0 : ROWS));
  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;

  // The tile's rows are loaded first when they fit 8 chunks of 16 bytes per thread: their latency
  // then overlaps the per-channel constants' (v_stats reads and divisions).
  constexpr bool PRELOAD = ROOMY && ITEMS * CPT <= 8;  // (the one-launch stages: see quantize_qk)
  const u16* base = row_ptr(in, b, h, si.n0 + n0);
  ptx::u32x4 pre[PRELOAD ? ITEMS : 1][PRELOAD ? CPT : 1];
  auto load_rc = [&](int r, int j) {
    return (r < valid && j < CH_IN) ? load_chunk(in, base + static_cast<i64>(r) * in.sn, j) : ptx::u32x4{0u, 0u, 0u, 0u};
  };
  if (PRELOAD) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < CPT; ++k) pre[PRELOAD ? i : 0][PRELOAD ? k : 0] = load_rc(slot + i * RPP, lane_r + k * TPR);
  }

  const float* st = p.v_stats + bh * 3 * D_V;
#pragma unroll 1
  for (int c = tid; c < D_V; c += THREADS) {
    float mu = 0.f, inv = 0.f, scale = 0.f;
    if (c < HD) {
      const float vsum = stats ? stats[c] : ld_stat(st + c);
      const float vmin = stats ? stats[D_V + c] : ld_stat(st + D_V + c);
      const float vmax = stats ? stats[2 * D_V + c] : ld_stat(st + 2 * D_V + c);
      float amax;
      if (SAGE2_SMOOTH_V) {
        mu = kv_len > 0 ? ptx::div_rn(vsum, static_cast<float>(kv_len)) : 0.f;
        amax = ptx::max_nan(vmax - mu, mu - vmin);
      } else {
        amax = ptx::max_nan(ptx::abs_f32(vmax), ptx::abs_f32(vmin));
      }
      if (V_FP16) {
        scale = finite_positive(amax) ? v16_scale(amax) : (amax == 0.f ? 1.f : amax);
        inv = finite_positive(amax) ? ptx::div_rn(1.f, scale) : 0.f;
      } else {
        scale = ptx::div_rn(amax, V8_MAX);
        inv = finite_positive(amax) ? ptx::div_rn(V8_MAX, amax) : 0.f;
      }
    }
    s_mu[c] = mu;
    s_inv[c] = inv;
    if (tile == 0) {
      p.v_scale[bh * D_V + c] = scale;
      p.v_mean[bh * D_V + c] = mu;
    }
  }
  __syncthreads();

  // This thread's channels are the same for all its rows: constants in registers.
  float mu_r[CPT][8], inv_r[CPT][8];
#pragma unroll
  for (int k = 0; k < CPT; ++k) {
    const int j = lane_r + k * TPR;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      mu_r[k][e] = j < CHUNKS ? s_mu[j * 8 + e] : 0.f;
      inv_r[k][e] = j < CHUNKS ? s_inv[j * 8 + e] : 0.f;
    }
  }

#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int r = slot + i * RPP;
    if (r >= ROWS) continue;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j >= CHUNKS) continue;
      u32 pair[4] = {0u, 0u, 0u, 0u};
      if (r < valid && j < CH_IN) {
        float x[8];
        const u32 bad = to_f32x8_sane(PRELOAD ? pre[PRELOAD ? i : 0][PRELOAD ? k : 0] : load_rc(r, j), x);
        float y[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) y[e] = (x[e] - mu_r[k][e]) * inv_r[k][e];
        if (bad != 0u) {  // a non-finite input's code is 0 (rare: off the common path)
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if ((bad >> e) & 1u) y[e] = 0.f;
        }
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
          if constexpr (V_FP16)  // (sm_80 has no e4m3 conversion: never emitted there)
            pair[e / 2] = ptx::pack_f16x2(y[e], y[e + 1]);
          else
            pair[e / 2] = ptx::f32x2_to_e4m3x2(y[e], y[e + 1]);
        }
      }
      if (V_FP16) {
        u32* d16 = reinterpret_cast<u32*>(&s_t[(r * D_V + j * 8) * 2]);
        d16[0] = pair[0];
        d16[1] = pair[1];
        d16[2] = pair[2];
        d16[3] = pair[3];
        continue;
      }
      u32* d8 = reinterpret_cast<u32*>(&s_t[r * D_V + j * 8]);
      d8[0] = pair[0] | (pair[1] << 16);
      d8[1] = pair[2] | (pair[3] << 16);
    }
  }
  __syncthreads();

  if (V_FP16) {  // the same write-out, two bytes per code: 32 bytes per 16-key group
    constexpr int SEGS = ROWS / 16;
    const u16* s_t16 = reinterpret_cast<const u16*>(s_t);
    u16* dst = reinterpret_cast<u16*>(p.v_codes) + si.v_row0 * si.v_pitch + si.out_blk;
#pragma unroll 1
    for (int c = tid; c < D_V; c += THREADS) {
      u16* drow = dst + static_cast<i64>(c) * si.v_pitch;
#pragma unroll
      for (int seg = 0; seg < SEGS; ++seg) {
        u32 w[8];
#pragma unroll
        for (int q = 0; q < 8; ++q)  // column 2q, 2q+1 of the group hold the layout's keys (v_slot)
          w[q] = static_cast<u32>(s_t16[(seg * 16 + sage2_v_key_of_slot[2 * q]) * D_V + c]) |
                 (static_cast<u32>(s_t16[(seg * 16 + sage2_v_key_of_slot[2 * q + 1]) * D_V + c]) << 16);
        ptx::st_v4(drow + seg * 16, ptx::u32x4{w[0], w[1], w[2], w[3]});
        ptx::st_v4(drow + seg * 16 + 8, ptx::u32x4{w[4], w[5], w[6], w[7]});
      }
    }
    return;
  }

  // Transposed write-out: a thread takes 4 channels × one 16-key group. It reads 4 keys' words of
  // those 4 channels (one 32-bit shared load each; consecutive threads: consecutive channel groups,
  // no bank conflicts) and transposes each 4×4 byte block with byte permutes, so that every
  // channel's 16 codes (in the layout's slot order, v_slot) leave as one 16-byte store. Every
  // thread of the CTA has work when ROWS·D_V = 64·THREADS (the 128-token tiles at head dim 128).
  constexpr int SEGS = ROWS / 16, CG = D_V / 4;
  u8* dst = p.v_codes + si.v_row0 * si.v_pitch + si.out_blk;
  const u32 s_base = ptx::smem_addr(s_t);
#pragma unroll 1
  for (int it = tid; it < CG * SEGS; it += THREADS) {
    const int cg = it % CG, seg = it / CG;
    u32 w[4][4];  // [channel e of the group][word q]: keys of slots 4q .. 4q+3
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      u32 k4[4];  // key slot 4q + t: the group's 4 channels, channel e in byte e
#pragma unroll
      for (int t = 0; t < 4; ++t)
        k4[t] = ptx::ld_shared_u32(s_base + static_cast<u32>((seg * 16 + sage2_v_key_of_slot[q * 4 + t]) * D_V + cg * 4));
      const u32 lo01 = ptx::prmt(k4[0], k4[1], 0x5140u), lo23 = ptx::prmt(k4[2], k4[3], 0x5140u);  // channels 0, 1
      const u32 hi01 = ptx::prmt(k4[0], k4[1], 0x7362u), hi23 = ptx::prmt(k4[2], k4[3], 0x7362u);  // channels 2, 3
      w[0][q] = ptx::prmt(lo01, lo23, 0x5410u);
      w[1][q] = ptx::prmt(lo01, lo23, 0x7632u);
      w[2][q] = ptx::prmt(hi01, hi23, 0x5410u);
      w[3][q] = ptx::prmt(hi01, hi23, 0x7632u);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      ptx::st_v4(dst + static_cast<i64>(cg * 4 + e) * si.v_pitch + seg * 16, ptx::u32x4{w[e][0], w[e][1], w[e][2], w[e][3]});
  }
}
#endif


#if (SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 6 || SAGE2_QUANT_OP == 7)
template <int A, int B>
struct MaxOf {
  static constexpr int value = A > B ? A : B;
};
// Scratch of one work item of any kind (the fused and cluster stages run every kind in one CTA).
constexpr int FUSED_SMEM =
    MaxOf<MaxOf<stats_smem_bytes<MapS>(), v_smem_bytes<MapV>()>::value,
          MaxOf<qk_smem_bytes<true, MapQ>(), qk_smem_bytes<false, MapK>()>::value>::value;
#endif

// ---------------------------------------------------------------------------------------------
// The fused stage (SAGE2_QUANT_OP 5): statistics chunks and the group's ready flags.
//  sync[0]                     work ticket
//  sync[1 + 2g + kv]           statistics chunks of group g (kv: 0 K, 1 V) that have arrived
//  sync[1 + 2G + 2g + kv]      1 once k_stats/v_stats (and the first-bad flags) of g are final
// All zero at launch (the runtime clears them on the stream before each launch).

#if SAGE2_QUANT_OP == 5 || SAGE2_QUANT_OP == 7
// One thread polls (acquire, backing off up to ~1 µs); the barrier hands what it saw to the CTA.
__device__ __forceinline__ void wait_ready(const u32* flag) {
  if (threadIdx.x == 0) {
    u32 ns = 32;
#pragma unroll 1
    while (ptx::ld_acquire_gpu_u32(flag) == 0u) {
      ptx::nanosleep_u32(ns);
      ns = ns < 1024u ? 2u * ns : 1024u;
    }
  }
  __syncthreads();
}

#endif

#if SAGE2_QUANT_OP == 5

__device__ __forceinline__ QuantizeSchedule make_schedule(const QuantizeParams& p) {
  QuantizeSchedule s;
  s.groups = static_cast<u32>(p.batch * p.kv_heads);
  s.lag = static_cast<u32>(p.sched_lag);
  s.chunks = static_cast<u32>((p.kv_len + STATS_T - 1) / STATS_T);
  s.k_blocks = static_cast<u32>((p.kv_len + BK - 1) / BK);
  s.v_tiles = static_cast<u32>((p.kv_len + BK - 1) / BK * BK / MapV::ROWS);
  s.q_blocks = static_cast<u32>((p.q_len + BQ - 1) / BQ);
  s.q_per_group = static_cast<u32>(p.q_heads) / static_cast<u32>(p.kv_heads);
  return s;
}

static_assert(FUSED_SMEM <= 48 * 1024, "fused quantize exceeds static shared memory");

__device__ __forceinline__ void quantize_fused(const QuantizeParams& p) {
  __shared__ alignas(16) u8 s_raw[FUSED_SMEM];
  __shared__ u32 s_ticket;
  if (threadIdx.x == 0) s_ticket = ptx::atom_add_relaxed_gpu_u32(p.sync, 1u);
  __syncthreads();
  const QuantizeSchedule s = make_schedule(p);
  const u32 ticket = s_ticket;
  if (static_cast<u64>(ticket) >= s.total()) return;  // the grid is exactly total(); defensive
  const QuantizeItem it = quantize_item(s, ticket);
  const i64 g = it.group;
  const i64 b = static_cast<i64>(it.group / static_cast<u32>(p.kv_heads));
  const i64 h = static_cast<i64>(it.group % static_cast<u32>(p.kv_heads));
  const u32* ready = p.sync + 1 + 2 * static_cast<i64>(s.groups) + 2 * g;  // [0] K, [1] V
  switch (it.kind) {
    case kItemStatsK:
    case kItemStatsV:
    {
      const int kv = it.kind == kItemStatsV ? 1 : 0;
      float* part_g = p.stats_part + (g * 2 + kv) * static_cast<i64>(s.chunks) * 4 * D_V;
      if (stats_chunk(p, s_raw, kv_input(p, kv == 1), kv == 1, b, h, g, 0, p.kv_len, part_g, it.index, s.chunks,
                      p.sync + 1 + 2 * g + kv) &&
          threadIdx.x == 0) {
        // Release after the barrier: every thread's final statistics are published with the flag.
        ptx::fence_acq_rel_gpu();
        ptx::st_release_gpu_u32(p.sync + 1 + 2 * static_cast<i64>(s.groups) + 2 * g + kv, 1u);
      }
      break;
    }
    case kItemK:
      if (SAGE2_SMOOTH_K) wait_ready(ready);  // k̄ (k_first_bad is not read here)
      quantize_qk<false, MapK>(p, s_raw, kv_input(p, false), b, h, it.index, dense_qk_item<false, BK>(p, b, h, it.index));
      break;
    case kItemV:
      wait_ready(ready + 1);  // μ and the per-channel scale
      quantize_v<MapV>(p, s_raw, kv_input(p, true), b, h, it.index, dense_v_item<MapV::ROWS>(p, b, h, it.index));
      break;
    default: {  // kItemQ
      if (SAGE2_SMOOTH_K) wait_ready(ready);  // q·k̄
      const u32 qh = it.index / s.q_blocks, blk = it.index % s.q_blocks;
      quantize_qk<true, MapQ>(p, s_raw, q_input(p), b, h * s.q_per_group + qh, blk,
                              dense_qk_item<true, BQ>(p, b, h * s.q_per_group + qh, blk));
      break;
    }
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// The cluster stage (SAGE2_QUANT_OP 6, sm_90): the whole quantize stage in one launch with no
// device counters, no waiting on other CTAs' flags and no memset. One thread-block cluster of C
// CTAs (C = %cluster_nctarank, set at launch: kernels::quantize_cluster_plan) per group g = (batch,
// kv head); rank r owns tokens [r·T, (r+1)·T) (T = p.cluster_chunk, a multiple of BK):
//  1. K and V statistics of its tokens (stats_rows: the fused stage's chunk sums with T tokens
//     per chunk), into its own shared memory;
//  2. cluster barrier; every rank reduces the C partials in rank order (sum left to right from
//     rank 0's, so every rank holds the same bits and the CPU reference follows the formula of
//     kernels/quant_buffers.hpp with chunks of T); rank 0 writes k_stats / v_stats / first-bad flags;
//  3. cluster barrier (the partials may then be overwritten); the K blocks and V tiles of its
//     tokens (their rows are re-read: L2 hits, the same CTA read them in step 1) and every C-th
//     Q block of the group's q heads, all with the statistics from its own shared memory.
// Hardware schedules a cluster's CTAs together, so the barriers cannot deadlock.

#if SAGE2_QUANT_OP == 6
constexpr int PART_OFF = (stats_smem_bytes<MapS>() + 15) / 16 * 16;
constexpr int PART_BYTES = 2 * 4 * D_V * 4;  // [K|V][sum, min, max, first-bad][D_V]
constexpr int CLUSTER_SMEM = MaxOf<FUSED_SMEM, PART_OFF + PART_BYTES>::value;
static_assert(CLUSTER_SMEM + 4 * (D_QK + 3 * D_V) + 16 <= 48 * 1024, "cluster quantize exceeds static shared memory");

__device__ __forceinline__ void quantize_cluster(const QuantizeParams& p) {
  __shared__ alignas(16) u8 s_raw[CLUSTER_SMEM];
  __shared__ alignas(16) float s_ksum[D_QK];     // K channel sums (k̄ = sum / kv_len)
  __shared__ alignas(16) float s_vst[3 * D_V];   // V sum, min, max
  __shared__ i32 s_kfb;
  const u32 C = ptx::cluster_nctarank(), rank = ptx::cluster_ctarank();
  const i64 g = static_cast<i64>(ptx::clusterid_x());
  const i64 T = p.cluster_chunk;
  if (g >= p.batch * p.kv_heads) return;  // the whole cluster: no barrier is left waiting
  // A launch without the planned cluster would leave tokens out of the statistics.
  if (T <= 0 || T % BK != 0 || static_cast<i64>(C) * T < p.kv_len) asm volatile("trap;");
  const i64 b = static_cast<i64>(static_cast<u32>(g) / static_cast<u32>(p.kv_heads));
  const i64 h = static_cast<i64>(static_cast<u32>(g) % static_cast<u32>(p.kv_heads));
  const int tid = threadIdx.x;

  // ---- 1. this rank's K and V statistics
  const i64 n0 = static_cast<i64>(rank) * T;
  const i64 n1 = p.kv_len - n0 < T ? p.kv_len : n0 + T;  // n0 >= kv_len: an empty chunk
  float* part = reinterpret_cast<float*>(s_raw + PART_OFF);
  {
    const Input in = make_input(p.k, p.k_stride_batch, p.k_stride_head, p.k_stride_seq);
    stats_rows<MapS>(in, row_ptr(in, b, h, 0), n0, n1 > n0 ? n1 : n0, D_V, s_raw,
                     [&](int s, int c, float v) { part[s * D_V + c] = v; });
  }
  {
    const Input in = make_input(p.v, p.v_stride_batch, p.v_stride_head, p.v_stride_seq);
    stats_rows<MapS>(in, row_ptr(in, b, h, 0), n0, n1 > n0 ? n1 : n0, D_V, s_raw,
                     [&](int s, int c, float v) { part[4 * D_V + s * D_V + c] = v; });
  }
  if (tid == 0) s_kfb = NO_BAD;
  ptx::cluster_arrive_release();
  ptx::cluster_wait_acquire();

  // ---- 2. the group's statistics from every rank's partials, in rank order
  const u32 part_addr = ptx::smem_addr(part);
  constexpr int D_MAX = D_QK > D_V ? D_QK : D_V;
#pragma unroll 1
  for (int c = tid; c < D_MAX; c += THREADS) {
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const int d_out = kv ? D_V : D_QK;
      if (c >= d_out) continue;
      float sum = 0.f, mn = 0.f, mx = 0.f;
      i32 fb = NO_BAD;
      if (c < HD) {
        const u32 a0 = part_addr + static_cast<u32>((kv * 4 * D_V + c) * 4);
        combine_partials(C, [&](u32 rank, int st) {
          return ptx::ld_cluster_f32(ptx::mapa_shared(a0, rank) + static_cast<u32>(st * 4 * D_V));
        }, sum, mn, mx, fb);
      }
      if (kv == 0) {
        s_ksum[c] = sum;
        if (fb != NO_BAD) red_min_shared_s32(ptx::smem_addr(&s_kfb), fb);
      } else {
        s_vst[c] = sum;
        s_vst[D_V + c] = mn;
        s_vst[2 * D_V + c] = mx;
      }
      if (rank == 0) {
        float* out = (kv ? p.v_stats : p.k_stats) + g * 3 * d_out;
        out[c] = sum;
        out[d_out + c] = mn;
        out[2 * d_out + c] = mx;
        if (kv) p.v_first_bad[g * D_V + c] = fb;
      }
    }
  }
  // Every rank has read every partial before any rank overwrites its scratch (step 3).
  ptx::cluster_arrive_release();
  ptx::cluster_wait_acquire();
  if (rank == 0 && tid == 0) p.k_first_bad[g] = s_kfb;

  // ---- 3. this rank's K blocks and V tiles, then its share of the group's Q blocks
  const i64 len_pad = (p.kv_len + BK - 1) / BK * BK;
  const i64 t0 = static_cast<i64>(rank) * T;
  const i64 t1 = len_pad - t0 < T ? len_pad : t0 + T;
#pragma unroll 1
  for (i64 blk = t0 / BK; blk < t1 / BK; ++blk) {
    quantize_qk<false, MapK>(p, s_raw, kv_input(p, false), b, h, blk, dense_qk_item<false, BK>(p, b, h, blk), s_ksum);
    __syncthreads();  // the next item rewrites the scratch
  }
#pragma unroll 1
  for (i64 tile = t0 / MapV::ROWS; tile < t1 / MapV::ROWS; ++tile) {
    quantize_v<MapV>(p, s_raw, kv_input(p, true), b, h, tile, dense_v_item<MapV::ROWS>(p, b, h, tile), s_vst);
    __syncthreads();
  }
  const u32 qpg = static_cast<u32>(p.q_heads) / static_cast<u32>(p.kv_heads);
  const u32 q_blocks = static_cast<u32>((p.q_len + BQ - 1) / BQ);
#pragma unroll 1
  for (u32 i = rank; i < qpg * q_blocks; i += C) {
    const i64 hq = h * qpg + i / q_blocks, blk = i % q_blocks;
    quantize_qk<true, MapQ>(p, s_raw, q_input(p), b, hq, blk, dense_qk_item<true, BQ>(p, b, hq, blk), s_ksum);
    __syncthreads();
  }
}
#endif


// ---------------------------------------------------------------------------------------------
// sage2_quantize_kv (SAGE2_QUANT_OP 7): K and V of a dense call in one cooperative launch (every
// CTA resident at once: kernels::LaunchShape::cooperative) that reads them from memory once.
// Unit u = statistics chunk c of group g (g = 2·bh + kv, kv 0: K, 1: V; C = ceil(kv_len / STATS_T)
// chunks per group, u = g·C + c); CTAs take them in rounds of whole groups. For each unit a CTA
//  1. copies the chunk's rows into its dynamic shared memory (cp.async: no registers held);
//  2. takes the chunk's statistics from there (stats_chunk: the split path's sum order, so the
//     same bits) and arrives; the group's last arriver writes k_stats / v_stats and sets the
//     group's ready flag (sync[1 + 2·BH + g], the fused stage's layout);
//  3. waits for the flag and writes the chunk's K blocks or V tiles from the same rows.
// Rounds hold whole groups (floor(grid / C) of them; CTAs past their units idle that round), so a
// CTA waits only on units that are running beside it: no deadlock. When C > grid (a sequence of more chunks than resident
// CTAs) the kernel runs two phases instead: every unit's statistics, a grid barrier (sync[0]),
// then every unit's codes, copying each chunk twice. The runtime zeroes sync before the launch.
#if SAGE2_QUANT_OP == 7
constexpr int KV_PITCH = CH_IN * 16;  // bytes of one row in shared memory
static_assert(STATS_T % BK == 0 && STATS_T % MapV::ROWS == 0, "a unit is whole K blocks and V tiles");
constexpr int KV_SCRATCH = MaxOf<MaxOf<stats_smem_bytes<MapS>() + 16, v_smem_bytes<MapV>()>::value,
                                 qk_smem_bytes<false, MapK>()>::value;
static_assert(KV_SCRATCH <= 48 * 1024, "one-pass quantize scratch exceeds static shared memory");

// The unit's rows [c0, c0 + n) of (b, h) into `rows` (KV_PITCH bytes each; rows >= n are not
// written: the bodies never read past `valid`). Ends after a barrier: the copy is visible.
__device__ __forceinline__ void copy_unit(const Input& g, u8* rows, i64 b, i64 h, i64 c0, int n) {
  const u16* base = row_ptr(g, b, h, c0);
  const u32 s0 = ptx::smem_addr(rows);
#pragma unroll 4
  for (int it = threadIdx.x; it < n * CH_IN; it += THREADS) {
    const int r = it / CH_IN, j = it - r * CH_IN;
    const u16* src = base + static_cast<i64>(r) * g.sn;
    const u32 dst = s0 + static_cast<u32>(r * KV_PITCH + j * 16);
    if (VEC_HD && g.vec)
      ptx::cp_async_16(dst, src + 8 * j);
    else
      ptx::st_shared_v4(dst, load_chunk_global(g, src, j));
  }
  ptx::cp_async_commit();
  ptx::cp_async_wait_all();
  __syncthreads();
}

// The Input the bodies read the unit through: row n of the sequence at rows + (n - c0)·KV_PITCH
// (b and h select nothing: the copy holds one (b, h)).
__device__ __forceinline__ Input smem_input(const u8* rows, i64 c0) {
  Input in;
  in.sn = KV_PITCH / 2;
  in.base = reinterpret_cast<const u16*>(rows) - c0 * in.sn;
  in.sb = in.sh = 0;
  in.vec = true;
  return in;
}

struct KvUnit {
  i64 b, h, bh, c0;
  u32 chunk;
  bool is_v;
  int n;  // rows of the unit (the last chunk of a group may be short)
};
__device__ __forceinline__ KvUnit kv_unit(const QuantizeParams& p, i64 u, i64 C) {
  KvUnit k;
  const i64 g = u / C;
  k.chunk = static_cast<u32>(u - g * C);
  k.bh = g >> 1;
  k.is_v = (g & 1) != 0;
  k.b = k.bh / p.kv_heads;
  k.h = k.bh - k.b * p.kv_heads;
  k.c0 = static_cast<i64>(k.chunk) * STATS_T;
  k.n = static_cast<int>(p.kv_len - k.c0 < STATS_T ? p.kv_len - k.c0 : STATS_T);
  return k;
}

// Step 2: the unit's statistics; the group's last arriver publishes them (ready flag).
__device__ __forceinline__ void kv_unit_stats(const QuantizeParams& p, u8* scratch, const u8* rows, const KvUnit& k,
                                              u32 C) {
  const int kv = k.is_v ? 1 : 0;
  float* part_g = p.stats_part + (k.bh * 2 + kv) * static_cast<i64>(C) * 4 * D_V;
  if (stats_chunk(p, scratch, smem_input(rows, k.c0), k.is_v, k.b, k.h, k.bh, 0, p.kv_len, part_g, k.chunk, C,
                  p.sync + 1 + 2 * k.bh + kv) &&
      threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    ptx::st_release_gpu_u32(p.sync + 1 + 2 * (p.batch * p.kv_heads) + 2 * k.bh + kv, 1u);
  }
}

// Step 3: the unit's K blocks (k_mean by block 0) or V tiles, up to the padded length.
__device__ __forceinline__ void kv_unit_codes(const QuantizeParams& p, u8* scratch, const u8* rows, const KvUnit& k) {
  const Input in = smem_input(rows, k.c0);
  const i64 len_pad = (p.kv_len + BK - 1) / BK * BK;
  const i64 t1 = len_pad - k.c0 < STATS_T ? len_pad : k.c0 + STATS_T;
  if (!k.is_v) {
#pragma unroll 1
    for (i64 blk = k.c0 / BK; blk < t1 / BK; ++blk) {
      quantize_qk<false, MapK>(p, scratch, in, k.b, k.h, blk, dense_qk_item<false, BK>(p, k.b, k.h, blk));
      __syncthreads();  // the next block rewrites the scratch
    }
  } else {
#pragma unroll 1
    for (i64 tile = k.c0 / MapV::ROWS; tile < t1 / MapV::ROWS; ++tile) {
      quantize_v<MapV>(p, scratch, in, k.b, k.h, tile, dense_v_item<MapV::ROWS>(p, k.b, k.h, tile));
      __syncthreads();
    }
  }
}

__device__ __forceinline__ void quantize_kv(const QuantizeParams& p, u8* rows) {
  __shared__ alignas(16) u8 s_scratch[KV_SCRATCH];
  const i64 C = (p.kv_len + STATS_T - 1) / STATS_T;
  const i64 groups = 2 * p.batch * p.kv_heads;
  const i64 units = groups * C;
  const i64 G = gridDim.x;
  const u32* ready = p.sync + 1 + 2 * (p.batch * p.kv_heads);
  if (C <= G) {
    // Rounds of whole groups: round r holds groups [r·per, (r+1)·per), CTA x its unit x (idle
    // past per·C), so a CTA waits only on units that run beside its own.
    const i64 per = G / C;
#pragma unroll 1
    for (i64 g0 = 0; g0 < groups; g0 += per) {
      const i64 u = g0 * C + blockIdx.x;
      if (blockIdx.x >= per * C || u >= units) continue;
      const KvUnit k = kv_unit(p, u, C);
      copy_unit(kv_input(p, k.is_v), rows, k.b, k.h, k.c0, k.n);
      kv_unit_stats(p, s_scratch, rows, k, static_cast<u32>(C));
      if (k.is_v || SAGE2_SMOOTH_K) wait_ready(ready + 2 * k.bh + (k.is_v ? 1 : 0));  // (K reads k̄ only)
      kv_unit_codes(p, s_scratch, rows, k);
    }
    return;
  }
  // Two phases (C > grid).
#pragma unroll 1
  for (i64 u = blockIdx.x; u < units; u += G) {
    const KvUnit k = kv_unit(p, u, C);
    copy_unit(kv_input(p, k.is_v), rows, k.b, k.h, k.c0, k.n);
    kv_unit_stats(p, s_scratch, rows, k, static_cast<u32>(C));
    __syncthreads();  // the rows are read before the next copy
  }
  if (threadIdx.x == 0) {  // grid barrier: every CTA is resident (cooperative launch)
    ptx::fence_acq_rel_gpu();
    ptx::atom_add_acq_rel_gpu_u32(p.sync, 1u);
    u32 ns = 32;
#pragma unroll 1
    while (ptx::ld_acquire_gpu_u32(p.sync) < gridDim.x) {
      ptx::nanosleep_u32(ns);
      ns = ns < 1024u ? 2u * ns : 1024u;
    }
  }
  __syncthreads();
#pragma unroll 1
  for (i64 u = blockIdx.x; u < units; u += G) {
    const KvUnit k = kv_unit(p, u, C);
    copy_unit(kv_input(p, k.is_v), rows, k.b, k.h, k.c0, k.n);
    kv_unit_codes(p, s_scratch, rows, k);
  }
}
#endif


// ---------------------------------------------------------------------------------------------
// sage2_mask_tiles (SAGE2_QUANT_OP 8): CTA = (KV tile x, query block y, mask (batch, head) z) —
// class 0 when no element of the tile inside q_len × kv_len is visible, 1 when every one is
// visible with no additive term (the attention kernel then skips the mask), 2 otherwise.
#if SAGE2_QUANT_OP == 8
__device__ __forceinline__ void mask_tiles(const QuantizeParams& p) {
  constexpr int KIND = SAGE2_MASK;
  static_assert(KIND >= 1 && KIND <= 4, "mask_tiles needs a mask kind");
  const i64 kt = blockIdx.x, qb = blockIdx.y, z = blockIdx.z;
  const i64 b = z / p.mask_heads, h = z % p.mask_heads;
  // A mask broadcast over rows (key padding: stride_q = 0) or keys has one row / key to read.
  const int rows = p.mask_stride_q == 0 ? 1 : static_cast<int>(p.q_len - qb * BQ < BQ ? p.q_len - qb * BQ : BQ);
  const int keys = p.mask_stride_k == 0 ? 1 : static_cast<int>(p.kv_len - kt * BK < BK ? p.kv_len - kt * BK : BK);
  const char* base = static_cast<const char*>(p.mask) +
                     (b * p.mask_stride_batch + h * p.mask_stride_head + qb * BQ * p.mask_stride_q +
                      kt * BK * p.mask_stride_k) * mask_elem::size<KIND>();
  // Per thread: any visible, any masked, the first visible term ("same": every visible term equals
  // it, bit for bit; "plain": every visible term is 0), the last visible and first masked key.
  const u32 NINF = 0xff800000u;
  bool any_visible = false, any_masked = false, same = true, tail_same = true;
  u32 first = 0u, tail = 0u;
  bool any_tail = false;
  int last_zero = -1, first_nonzero = keys;  // key indices within the tile
  for (int e = threadIdx.x; e < rows * keys; e += THREADS) {
    const int r = e / keys, c = e % keys;  // consecutive threads: consecutive keys of a row
    u32 t = ptx::f32_bits(mask_elem::term<KIND>(base + r * p.mask_stride_q * mask_elem::size<KIND>(), c,
                                                p.mask_stride_k));
    if (t == 0x80000000u) t = 0u;  // -0 adds nothing, as +0
    if (t == NINF) {
      any_masked = true;
    } else {
      if (!any_visible) first = t;
      same &= t == first && (t & 0x7f800000u) != 0x7f800000u;  // a NaN (or +inf) is never "the same"
      any_visible = true;
    }
    if (t == 0u) {
      last_zero = c > last_zero ? c : last_zero;
    } else {
      if (!any_tail) tail = t;
      tail_same &= t == tail && (t == NINF || (t & 0x7f800000u) != 0x7f800000u);
      any_tail = true;
      first_nonzero = c < first_nonzero ? c : first_nonzero;
    }
  }
  __shared__ int s_last_zero, s_first_nonzero;
  __shared__ u32 s_tail;
  if (threadIdx.x == 0) {
    s_last_zero = -1;
    s_first_nonzero = keys;
    s_tail = NINF;
  }
  __shared__ u32 s_first;
  if (threadIdx.x == 0) s_first = NINF;
  __syncthreads();
  if (any_visible) s_first = first;  // any visible thread's: "same" below compares all of them
  const bool any = __syncthreads_or(any_visible) != 0;
  const bool masked = __syncthreads_or(any_masked) != 0;
  const bool all_same = __syncthreads_and(!any_visible || (same && first == s_first)) != 0;
  if (any_tail) s_tail = tail;
  if (last_zero >= 0) atomicMax(&s_last_zero, last_zero);
  if (first_nonzero < keys) atomicMin(&s_first_nonzero, first_nonzero);
  __syncthreads();
  const bool one_tail = __syncthreads_and(!any_tail || (tail_same && tail == s_tail)) != 0;
  if (threadIdx.x == 0) {
    const i64 at = (z * gridDim.y + qb) * gridDim.x + kt;
    int cls = mask_elem::CLASS_SOME;
    if (!any)
      cls = mask_elem::CLASS_NONE;
    else if (!masked && all_same)
      cls = s_first == 0u ? mask_elem::CLASS_ALL : mask_elem::CLASS_CONST;
    else if (one_tail && p.mask_stride_k != 0 && s_last_zero >= 0 && s_last_zero + 1 == s_first_nonzero &&
             s_first_nonzero < 128 && (s_tail == NINF || p.mask_bias))
      cls = mask_elem::CLASS_PREFIX + s_first_nonzero;  // every row: keys [0, cut) plain, the rest `tail`
    if (cls == mask_elem::CLASS_CONST && !p.mask_bias) cls = mask_elem::CLASS_SOME;
    if (p.mask_bias)
      p.mask_bias[at] = cls == mask_elem::CLASS_CONST ? ptx::bits_f32(s_first)
                                                       : (cls >= mask_elem::CLASS_PREFIX ? ptx::bits_f32(s_tail) : 0.f);
    p.mask_tiles[at] = static_cast<u8>(cls);
  }
}
#endif

}  // namespace qz


// ---------------------------------------------------------------------------------------------
// Entry points (names = kernels::KernelSpec::entry_name()). Split path: (b, h, block) from the grid
// (kernels::quantize_launch_shape); surplus CTAs exit.

#if SAGE2_QUANT_OP == 1
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_channel_stats(sage2::dev::QuantizeParams p) {
  qz::enter();
  __shared__ alignas(16) u8 s_raw[qz::stats_smem_bytes<qz::MapS>()];
  qz::channel_stats(p, s_raw);
}
#elif SAGE2_QUANT_OP == 2 || SAGE2_QUANT_OP == 3
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS)
#if SAGE2_QUANT_OP == 2
sage2_quantize_q(sage2::dev::QuantizeParams p) {
#else
sage2_quantize_k(sage2::dev::QuantizeParams p) {
#endif
  constexpr bool IS_Q = SAGE2_QUANT_OP == 2;
  qz::enter();
  __shared__ alignas(16) u8 s_raw[qz::qk_smem_bytes<IS_Q, qz::MapS>()];
  constexpr int rows = IS_Q ? SAGE2_BQ : SAGE2_BK;
  if (SAGE2_VARLEN) {  // x = packed block, y = head
    const i64 X = blockIdx.x, h = blockIdx.y;
    const i32 s = (IS_Q ? p.q_map : p.k_map)[X];
    if (X >= (IS_Q ? p.q_map_len : p.k_map_len) || h >= (IS_Q ? p.q_heads : p.kv_heads) || s == sage2::dev::kNoSeq) return;
    const sage2::dev::SeqEntry e = p.seqs[s];
    qz::SeqItem si;
    si.len = IS_Q ? e.q_len : e.k_len;
    si.kv_len = e.k_len;
    si.n0 = IS_Q ? e.q_start : e.k_start;
    si.out_blk = h * (IS_Q ? p.q_map_len : p.k_map_len) + X;
    si.v_row0 = si.v_pitch = 0;
    qz::quantize_qk<IS_Q, qz::MapS>(p, s_raw, IS_Q ? qz::q_input(p) : qz::kv_input(p, false), s, h,
                                    X - (IS_Q ? e.q_blk : e.k_blk), si);
    return;
  }
  i64 b, h, bh;
  const i64 len = IS_Q ? p.q_len : p.kv_len;
  if (!qz::block_bh(p.batch, IS_Q ? p.q_heads : p.kv_heads, b, h, bh) || blockIdx.x >= (len + rows - 1) / rows) return;
  qz::quantize_qk<IS_Q, qz::MapS>(p, s_raw, IS_Q ? qz::q_input(p) : qz::kv_input(p, false), b, h, blockIdx.x,
                                  qz::dense_qk_item<IS_Q, rows>(p, b, h, blockIdx.x));
}
#elif SAGE2_QUANT_OP == 4
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_v(sage2::dev::QuantizeParams p) {
  qz::enter();
  __shared__ alignas(16) u8 s_raw[qz::v_smem_bytes<qz::MapS>()];
  constexpr int ROWS = qz::MapS::ROWS;
  if (SAGE2_VARLEN) {  // x = packed V tile (BK / ROWS per KV block), y = kv head
    constexpr i64 TPB = SAGE2_BK / ROWS;
    const i64 X = blockIdx.x, h = blockIdx.y;
    if (X >= p.k_map_len * TPB || h >= p.kv_heads) return;
    const i32 s = p.k_map[X / TPB];
    if (s == sage2::dev::kNoSeq) return;
    const sage2::dev::SeqEntry e = p.seqs[s];
    qz::SeqItem si;
    si.len = si.kv_len = e.k_len;
    si.n0 = e.k_start;
    si.v_pitch = p.k_map_len * SAGE2_BK;
    si.v_row0 = h * qz::D_V;
    si.out_blk = X * ROWS;
    qz::quantize_v<qz::MapS>(p, s_raw, qz::kv_input(p, true), s, h, X - e.k_blk * TPB, si);
    return;
  }
  i64 b, h, bh;
  const i64 len_pad = (p.kv_len + SAGE2_BK - 1) / SAGE2_BK * SAGE2_BK;
  if (!qz::block_bh(p.batch, p.kv_heads, b, h, bh) || blockIdx.x >= len_pad / ROWS) return;
  qz::quantize_v<qz::MapS>(p, s_raw, qz::kv_input(p, true), b, h, blockIdx.x, qz::dense_v_item<ROWS>(p, b, h, blockIdx.x));
}
#elif SAGE2_QUANT_OP == 5
// (3 CTAs per SM at 256 threads, <= 80 registers, spills the cached Q/K rows: left at 1.)
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, 1) sage2_quantize_fused(sage2::dev::QuantizeParams p) {
  qz::enter();
  qz::quantize_fused(p);
}
#elif SAGE2_QUANT_OP == 6
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_cluster(sage2::dev::QuantizeParams p) {
  qz::enter();
  qz::quantize_cluster(p);
}
#elif SAGE2_QUANT_OP == 7
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_kv(sage2::dev::QuantizeParams p) {
  qz::enter();
  extern __shared__ __align__(16) u8 s_rows[];  // one unit's rows: kernels::kv_quantize_chunk_bytes
  qz::quantize_kv(p, s_rows);
}
#elif SAGE2_QUANT_OP == 8
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, 1) sage2_mask_tiles(sage2::dev::QuantizeParams p) {
  qz::enter();
  qz::mask_tiles(p);
}
#else
#error "SAGE2_QUANT_OP must be 1..8"
#endif
