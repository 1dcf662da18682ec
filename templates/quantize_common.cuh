// Quantize family, shared part: constants of the preamble, the thread mapping (Map), input access,
// value conversions, per-item coordinates (SeqItem) and the statistics walk (stats_rows).
//
// The family is one small template per kernel entry, each specialised by the generated preamble
// (jit/source_builder.cpp; the quantize family's descriptor, kernels/family_quantize.cpp, names the
// entry file of each SAGE2_QUANT_OP) and including the shared headers it needs:
//   1 sage2_channel_stats    quantize_stats.cuh       per (batch, kv head, channel): sum, min, max of K and of V
//   2 sage2_quantize_q       quantize_qk.cuh          per (batch, q head, BQ block)
//   3 sage2_quantize_k       quantize_qk.cuh          per (batch, kv head, BK block)
//   4 sage2_quantize_v       quantize_v.cuh           per (batch, kv head, V tile of SAGE2_QZ_ROWS tokens)
//   5 sage2_quantize_fused   quantize_fused.cuh       the whole stage in one launch (work tickets)
//   6 sage2_quantize_cluster quantize_cluster.cuh     the whole stage in one launch of clusters (sm_90a)
//   7 sage2_quantize_kv      quantize_kv.cuh          K and V in one launch, re-read from L2
//   8 sage2_mask_tiles       quantize_mask_tiles.cuh  tensor masks: the class of every (query block, KV tile)
// Shared headers: quantize_common.cuh (this file), quantize_partials.cuh (combine_partials),
// quantize_stats_chunk.cuh (stats_chunk, wait_ready), quantize_qk_body.cuh (quantize_qk),
// quantize_v_body.cuh (quantize_v), quantize_one_launch.cuh (every item body and one item's scratch
// for ops 5-7). An entry file declares its item kinds' Map aliases (MapS, MapQ, MapK, MapV)
// before the headers that use them (stats_chunk, the one-launch scratch).
// With SAGE2_VARLEN (ops 1-4) the grid of ops 2-4 covers packed blocks instead of (batch, block)
// pairs and every item takes its sequence's lengths and positions from the table (SeqItem below),
// which the first CTA of op 1 builds.
// The numerics are the contract written in kernels/quant_buffers.hpp; comments below say where the
// kernel fixes an order the contract leaves open (sums). Non-finite inputs: every statistic reads
// them as 0, their codes are 0, and the flags q_bad / k_first_bad / v_first_bad say where they
// were (the attention epilogue poisons exactly the outputs that read them).
//
// Thread mapping (SAGE2_QZ_*, from kernels::quantize_kernel_config; per item kind in the one-launch
// kernels 5-7, SAGE2_QZ_{S,Q,K,V}_*): a token row is covered by TPR
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
#error "the quantize templates are specialised by the preamble jit::generate_source() writes (SAGE2_QUANT_OP missing)"
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

// Sampled statistics (kernels::KernelSpec::sampled_stats; the contract in kernels/quant_buffers.hpp):
// k̄, μ and V's amax from SAMPLE_TILES units of SAMPLE_UNIT keys, V's scale with V_HEADROOM. 0: every key.
constexpr int SAMPLE_TILES = SAGE2_QZ_SAMPLE_TILES;
constexpr int SAMPLE_UNIT = SAGE2_QZ_SAMPLE_UNIT;
constexpr float V_HEADROOM = SAGE2_QZ_V_HEADROOM;
static_assert(SAMPLE_TILES == 0 || !SAGE2_VARLEN, "sampled statistics: dense calls only");
static_assert(SAMPLE_UNIT > 0 && SAMPLE_UNIT % 16 == 0, "sample unit");
__device__ __forceinline__ i64 kv_tiles(i64 len) { return (len + BK - 1) / BK; }
// A sequence of len keys has U = ceil(len / SAMPLE_UNIT) units. With U > S the statistics are those
// of units ⌊i·U/S⌋, i < S, one chunk each (all full units: the last sampled one, U − ceil(U/S), is
// never the partial last unit); with U <= S, every key's (the split stage's own chunks).
__device__ __forceinline__ i64 sample_units(i64 len) { return (len + SAMPLE_UNIT - 1) / SAMPLE_UNIT; }
__device__ __forceinline__ bool sampled(i64 len) { return SAMPLE_TILES != 0 && sample_units(len) > SAMPLE_TILES; }
__device__ __forceinline__ i64 sample_unit(u32 i, i64 len) {
  return static_cast<i64>(i) * sample_units(len) / (SAMPLE_TILES ? SAMPLE_TILES : 1);
}
// The keys k̄ and μ divide by: len, or the sample's.
__device__ __forceinline__ i64 stats_keys(i64 len) { return sampled(len) ? static_cast<i64>(SAMPLE_TILES) * SAMPLE_UNIT : len; }

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

// Kernels whose register budget holds the item bodies' fast forms (rows loaded before the
// per-channel constants, one statistics walk per vector case, codes by cvt.rni alone): the split
// path's (ops 1-4) and the one-pass K/V kernel (7), as opposed to the one-launch stages (5, 6),
// which spilled with them under their 80-register bound.
constexpr bool ROOMY = SAGE2_QUANT_OP <= 4 || SAGE2_QUANT_OP == 7;

// Statistics written in this launch by other CTAs (fused path): read at L2, never through the
// read-only path.
__device__ __forceinline__ float ld_stat(const float* p) { return ptx::ld_relaxed_gpu_f32(p); }

// ---------------------------------------------------------------------------------------------
// Input access

// L2 eviction priorities of the sampled split stage (dense calls; QuantizeParams::l2_hints, set
// where K and V fit twice the L2: kernels::quantize_l2_hints): channel_stats reads the sampled KV
// tiles with evict_last, so that quantize_v / quantize_k, which read every row once more, find them
// in L2; those read with evict_first (each row's last use), so that V's rows streaming through do
// not push K's sample out before quantize_k runs. 0: no hint; 1: evict_last; 2: evict_first.
constexpr int L2_HINT = (SAMPLE_TILES == 0 || SAGE2_VARLEN) ? 0
                        : SAGE2_QUANT_OP == 1                        ? 1
                        : (SAGE2_QUANT_OP == 3 || SAGE2_QUANT_OP == 4) ? 2
                                                                       : 0;
__device__ __forceinline__ u64 l2_policy(u32 on) { return on != 0u ? ptx::l2_policy<L2_HINT>() : ptx::l2_policy<0>(); }

struct Input {
  const u16* base;
  i64 sb, sh, sn;  // element strides (batch, head, seq)
  bool vec;        // 16-byte vector loads are legal
  u64 l2_policy;   // the rows' L2 eviction policy (L2_HINT kernels; see ld_row16)
};

__device__ __forceinline__ Input make_input(const void* p, i64 sb, i64 sh, i64 sn) {
  Input in;
  in.base = static_cast<const u16*>(p);
  in.sb = sb;
  in.sh = sh;
  in.sn = sn;
  in.vec = VEC_HD && ((reinterpret_cast<u64>(p) & 15u) == 0) && (sb % 8 == 0) && (sh % 8 == 0) &&
           (sn % 8 == 0);
  in.l2_policy = 0ull;
  return in;
}

__device__ __forceinline__ const u16* row_ptr(const Input& in, i64 b, i64 h, i64 n) {
  return in.base + b * in.sb + h * in.sh + n * in.sn;
}

// 16 bytes of a row (16-byte aligned) under the input's L2 policy.
__device__ __forceinline__ ptx::u32x4 ld_row16(const Input& in, const u16* p) {
  return L2_HINT ? ptx::ld_nc_v4_hint(p, in.l2_policy) : ptx::ld_nc_v4(p);
}

// Raw 16-bit values of channels 8j .. 8j+7 of a row in global memory (channels >= HD read as 0,
// nothing loaded for them).
__device__ __forceinline__ ptx::u32x4 load_chunk(const Input& in, const u16* row, int j) {
  ptx::u32x4 r = {0u, 0u, 0u, 0u};
  if (j >= CH_IN) return r;
  if (VEC_HD && in.vec) return ld_row16(in, row + 8 * j);
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


// load_chunk for a caller that checked the vector case once (VEC: in.vec and VEC_HD hold).
template <bool VEC>
__device__ __forceinline__ ptx::u32x4 load_chunk_as(const Input& in, const u16* row, int j) {
  if (VEC) return j < CH_IN ? ld_row16(in, row + 8 * j) : ptx::u32x4{0u, 0u, 0u, 0u};
  return load_chunk(in, row, j);
}

__device__ __forceinline__ Input q_input(const QuantizeParams& p) {
  return make_input(p.q, p.q_stride_batch, p.q_stride_head, p.q_stride_seq);
}
__device__ __forceinline__ Input kv_input(const QuantizeParams& p, bool is_v) {
  Input in = is_v ? make_input(p.v, p.v_stride_batch, p.v_stride_head, p.v_stride_seq)
                  : make_input(p.k, p.k_stride_batch, p.k_stride_head, p.k_stride_seq);
  if (L2_HINT) in.l2_policy = l2_policy(p.l2_hints);
  return in;
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
// The first non-finite row of each of 8 channels whose bit is set in `bad`: s_fb8 = the shared
// address of their 8 consecutive i32 minima, each reached by an immediate offset. (With 8 computed
// addresses ptxas hoisted them out of the walks' loops and spilled them at 80 registers; out of
// line, the call's ABI spilled instead: session 39.)
template <int E = 0>
__device__ __forceinline__ void record_first_bad8(u32 s_fb8, u32 bad, i32 row) {
  if constexpr (E < 8) {
    if ((bad >> E) & 1u) asm volatile("red.shared.min.s32 [%0+%2], %1;" ::"r"(s_fb8), "r"(row), "n"(4 * E) : "memory");
    record_first_bad8<E + 1>(s_fb8, bad, row);
  }
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
//
// The split K and V kernels of a dense call (LATE_WAIT) load their rows before they wait: those
// are the caller's K and V, complete before the stage's first kernel started (that launch never
// overlaps: runtime::mark_overlapping_launches), and every earlier kernel of the stage only reads
// them. So the loads of their first CTAs overlap the end of the previous kernel; nothing an earlier
// kernel writes is read, and nothing is written, before wait_previous(). (A kernel's dependents
// still start only once all of its CTAs have started: a waiting CTA never holds back the kernel it
// waits for.)
constexpr bool LATE_WAIT = (SAGE2_QUANT_OP == 3 || SAGE2_QUANT_OP == 4) && !SAGE2_VARLEN;
__device__ __forceinline__ void enter() {
  check_block_dim();
  if (!LATE_WAIT) ptx::pdl_wait();
  ptx::pdl_launch_dependents();
}
__device__ __forceinline__ void wait_previous() {
  if (LATE_WAIT) ptx::pdl_wait();
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
template <class M>
constexpr int stats_per_round() { return 3 * stats_red_floats<M>() * 4 <= 24 * 1024 ? 3 : 1; }
constexpr int STATS_D_MAX = D_QK > D_V ? D_QK : D_V;
// Rows of a thread that the walk loads before it adds them (one batch).
template <class M>
constexpr int stats_batch_rows() { return M::CPT == 1 ? 4 : 2; }
// The split channel_stats walk's ring (kernels::quantize_kernel_config: stats_ring batches; 0
// elsewhere): each thread copies its next batches of rows into shared memory with cp.async, so
// that a chunk's loads are all in flight at once without holding registers (the walk was
// latency-bound on four dependent batches of register loads: ncu, 41 % of DRAM bandwidth).
// Thread t's 16-byte pieces sit at t·16 + ((slot·U + u)·CPT + k)·THREADS·16: a warp's loads are
// 512 consecutive bytes (no bank conflicts). The reduction buffer reuses the ring after the walk.
#ifndef SAGE2_QZ_STATS_RING
#define SAGE2_QZ_STATS_RING 0
#endif
#ifndef SAGE2_QZ_STATS_WHOLE_HEAD  // (channel_stats only: kernels::stats_whole_head)
#define SAGE2_QZ_STATS_WHOLE_HEAD 0
#endif
#ifndef SAGE2_QZ_STATS_UNITS  // (channel_stats only: kernels::stats_units_at_once)
#define SAGE2_QZ_STATS_UNITS 0
#endif
#ifndef SAGE2_QZ_STATS_CLUSTER  // (channel_stats on sm_90a: may be launched in clusters, kernels::stats_cluster_size)
#define SAGE2_QZ_STATS_CLUSTER 0
#endif
constexpr int STATS_RING = SAGE2_QZ_STATS_RING;
template <class M>
constexpr int stats_ring_bytes() { return STATS_RING * stats_batch_rows<M>() * M::CPT * THREADS * 16; }
template <class M>
constexpr int stats_red_bytes() {
  return stats_per_round<M>() * stats_red_floats<M>() * 4 > stats_ring_bytes<M>() ? stats_per_round<M>() * stats_red_floats<M>() * 4
                                                                                  : stats_ring_bytes<M>();
}
// [stats_per_round][slots] floats (or the ring, if larger), [STATS_D_MAX] i32 first-bad rows,
// 16 bytes for the caller.
template <class M>
constexpr int stats_smem_bytes() { return stats_red_bytes<M>() + STATS_D_MAX * 4 + 16; }

// emit(s, c, v) receives, for every channel c < d_out (padded channels: 0, 0, 0, NO_BAD):
// s = 0 sum, 1 min, 2 max, 3 first non-finite row (v holds the i32 bits).
template <class M, class Emit>
__device__ __forceinline__ void stats_rows(const Input& in, const u16* row0, i64 n0, i64 n1, int d_out,
                                           u8* smem, Emit&& emit) {
  constexpr int RED_W = M::TPR * M::CPT * 8;  // floats per slot in the reduction buffer
  constexpr int RED = stats_red_floats<M>();
  constexpr int PER = stats_per_round<M>();
  constexpr int CPT = M::CPT, RPP = M::RPP;
  float* s_red = reinterpret_cast<float*>(smem);     // [PER][RED] (after the walk: it may be the ring)
  i32* s_fb = reinterpret_cast<i32*>(smem + stats_red_bytes<M>());  // per channel: first non-finite row (shared min)
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

  constexpr int U = stats_batch_rows<M>();  // rows per batch (8 in registers spilled at 3 CTAs per SM)
  // The walk, with the vector-or-scalar choice made once and the row pointers advanced by a
  // 64-bit add per row (no per-row multiply). LEAN: min and max as packed 16-bit max.NaN /
  // min.NaN of the raw inputs (exact, converted once at the end) and no per-element test; it
  // returns whether a NaN/Inf reached them (then the caller walks again in the checked form,
  // which reads them as 0 and records their rows: the sum is the same sequence of adds).
  auto walk = [&](auto vec, auto lean) -> bool {
    constexpr bool VEC = decltype(vec)::value;
    constexpr bool LEAN = decltype(lean)::value;
    constexpr u32 NEG_INF2 = IN_BF16 ? 0xff80ff80u : 0xfc00fc00u;
    constexpr u32 POS_INF2 = IN_BF16 ? 0x7f807f80u : 0x7c007c00u;
    u32 hi[LEAN ? CPT : 1][4], lo[LEAN ? CPT : 1][4];
    if (LEAN)
#pragma unroll
      for (int k = 0; k < CPT; ++k)
#pragma unroll
        for (int w = 0; w < 4; ++w) hi[LEAN ? k : 0][w] = NEG_INF2, lo[LEAN ? k : 0][w] = POS_INF2;
    // (the one-launch stages address each row from its index: fewer live registers)
    const i64 step = ROOMY ? static_cast<i64>(RPP) * in.sn : 0;
    const u16* rows = ROOMY ? row0 + (n0 + slot) * in.sn : row0;
    // The ring (see STATS_RING): batches issued ahead, one commit group each (empty past the
    // end), so that wait_group<STATS_RING - 1> finds the oldest batch complete. A thread reads
    // only the pieces it copied itself, so its own wait makes them visible: no barrier.
    constexpr bool RING = STATS_RING > 0 && LEAN && VEC && ROOMY;
    constexpr u32 SLOT_BYTES = static_cast<u32>(U * CPT * THREADS * 16);
    const u32 ring0 = ptx::smem_addr(smem) + static_cast<u32>(tid) * 16u;
    auto piece = [&](int sb, int u, int k) { return ring0 + static_cast<u32>(sb) * SLOT_BYTES + static_cast<u32>((u * CPT + k) * THREADS * 16); };
    i64 n_issue = n0 + slot;
    const u16* rows_issue = rows;
    auto issue = [&](int sb) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 n = n_issue + static_cast<i64>(u) * RPP;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          const int j = lane_r + k * M::TPR;
          if (n < n1 && j < CH_IN) {
            if (L2_HINT)
              ptx::cp_async_16_hint(piece(sb, u, k), rows_issue + u * step + 8 * j, in.l2_policy);
            else
              ptx::cp_async_16(piece(sb, u, k), rows_issue + u * step + 8 * j);
          }
        }
      }
      ptx::cp_async_commit();
      n_issue += static_cast<i64>(U) * RPP;
      rows_issue += U * step;
    };
    if (RING)
#pragma unroll
      for (int sb = 0; sb < (RING ? STATS_RING : 1); ++sb) issue(sb);
    int sb_read = 0;
#pragma unroll 1
    for (i64 nb = n0 + slot; nb < n1; nb += static_cast<i64>(U) * RPP) {
      ptx::u32x4 raw[U][CPT];
      if (RING) ptx::cp_async_wait<RING ? STATS_RING - 1 : 0>();
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 n = nb + static_cast<i64>(u) * RPP;
        const u16* rp = ROOMY ? rows + u * step : row0 + n * in.sn;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          const int j = lane_r + k * M::TPR;
          if (RING)
            raw[u][k] = (n < n1 && j < CH_IN) ? ptx::ld_shared_v4(piece(sb_read, u, k)) : ptx::u32x4{0u, 0u, 0u, 0u};
          else
            raw[u][k] = (n < n1) ? load_chunk_as<VEC>(in, rp, j) : ptx::u32x4{0u, 0u, 0u, 0u};
        }
      }
      if (ROOMY) rows += U * step;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 n = nb + static_cast<i64>(u) * RPP;
        if (n < n1) {
          if (LEAN) {
#pragma unroll
            for (int k = 0; k < CPT; ++k) {
              float x[8];
              to_f32x8(raw[u][k], x);
#pragma unroll
              for (int e = 0; e < 8; ++e) sum[k][e] += x[e];
              const u32 v[4] = {raw[u][k].x, raw[u][k].y, raw[u][k].z, raw[u][k].w};
#pragma unroll
              for (int w = 0; w < 4; ++w) {
                hi[LEAN ? k : 0][w] = ptx::max_nan_x2<IN_BF16>(hi[LEAN ? k : 0][w], v[w]);
                lo[LEAN ? k : 0][w] = ptx::min_nan_x2<IN_BF16>(lo[LEAN ? k : 0][w], v[w]);
              }
            }
            continue;
          }
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
              record_first_bad8(ptx::smem_addr(s_fb) + static_cast<u32>(j) * 32u, bad, n32);
            }
          }
        }
      }
      if (RING) {  // refill the slot just read (after its values were added: they are in registers)
        issue(sb_read);
        sb_read = sb_read + 1 == STATS_RING ? 0 : sb_read + 1;
      }
    }
    if (!LEAN) return false;
    if (RING) ptx::cp_async_wait_all();  // (only empty groups can be left)
    // A NaN or ±Inf input leaves an all-ones exponent in hi or lo (so do the starting ±Inf of a
    // thread without rows: its checked walk is empty, and as quick).
    u32 nonfinite = 0u;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      float xh[8], xl[8];
      to_f32x8(ptx::u32x4{hi[LEAN ? k : 0][0], hi[LEAN ? k : 0][1], hi[LEAN ? k : 0][2], hi[LEAN ? k : 0][3]}, xh);
      to_f32x8(ptx::u32x4{lo[LEAN ? k : 0][0], lo[LEAN ? k : 0][1], lo[LEAN ? k : 0][2], lo[LEAN ? k : 0][3]}, xl);
#pragma unroll
      for (int e = 0; e < 8; ++e) mx[k][e] = xh[e], mn[k][e] = xl[e];
#pragma unroll
      for (int w = 0; w < 4; ++w)
        nonfinite |= quant_math::nonfinite_bits<IN_BF16>(hi[LEAN ? k : 0][w]) |
                     quant_math::nonfinite_bits<IN_BF16>(lo[LEAN ? k : 0][w]);
    }
    return nonfinite != 0u;
  };
  if (ROOMY && VEC_HD && in.vec) {  // (the one-launch stages keep one walk: their register bound)
    if (walk(BoolC<VEC_HD>{}, BoolC<true>{})) {  // rare: a NaN/Inf among this thread's rows
#pragma unroll
      for (int k = 0; k < CPT; ++k)
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          sum[k][e] = 0.f;
          mn[k][e] = ptx::bits_f32(0x7f800000u);
          mx[k][e] = ptx::bits_f32(0xff800000u);
        }
      walk(BoolC<VEC_HD>{}, BoolC<false>{});
    }
  } else {
    walk(BoolC<false>{}, BoolC<false>{});
  }

  // Combine the RPP row slots, PER statistics per barrier (sum, min, max; sums left to right from
  // slot 0's: the contract's order); the first bad row with the last.
  if (STATS_RING > 0) __syncthreads();  // the buffer is the ring other threads may still read
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

template <int A, int B>
struct MaxOf {
  static constexpr int value = A > B ? A : B;
};

}  // namespace qz
