// mma.sync attention family (sm_89 Ada and sm_90a Hopper): INT8 (m16n8k32) or INT4 (m16n8k64)
// QKᵀ with per-thread dequantisation, optional ΔS (smooth-Q), online softmax in fp32 (exp2),
// P̃ → FP8 E4M3 (·448, folded into the exponent), FP8 P̂·V̂ (m16n8k32 e4m3, f32 accumulate), two-level accumulation.
// The float-op contract is the one at the top of include/sage2/reference.hpp.
//
// CTA = one block of BQ query rows of one (batch, q head) pair; WARPS warps, each owning
// RW = BQ/WARPS consecutive rows (MT tiles of 16). The KV sequence is walked in tiles of BK keys;
// K/V/K-scale/ΔS tiles arrive by cp.async in a ring of STAGES shared-memory buffers.
//
// Fragment bookkeeping (PTX ISA "Matrix Fragments for mma.m16n8k32 / m16n8k64"; g = lane/4,
// t = lane%4):
//  - Q (A operand, row-major) and K (B operand, "col" = K rows) are 8-bit codes or packed 4-bit
//    pairs; in BYTES both instructions use the same layout (a k-step is 32 bytes), so one ldmatrix
//    path serves INT8 and INT4.
//  - The S accumulator of an n8 tile gives thread (g, t) columns 2t, 2t+1; the e4m3 A fragment of
//    P̂·V̂ wants keys 4t..4t+3 (reg 0/1) and 16+4t..19+4t (reg 2/3). Instead of shuffling, the
//    K rows are PERMUTED in shared memory: the k-th n8 tile j (0..BK/8-1) of the QK product reads
//    the 8 K rows stored at slots 8j..8j+7, and slot 8j+r holds key
//        key_of(j, r) = 32·(j/4) + 16·((j%4)/2) + 2·(j%2) + 4·(r/2) + r%2.
//    Then accumulator (tile j, column 2t+e) is the score of key 32·(j/4) + 16·((j%4)/2) +
//    2·(j%2) + 4t + e, so the four accumulators of tiles 4c..4c+3 held by a thread are exactly
//    keys 32c + {4t..4t+3} and 32c + 16 + {4t..4t+3}: the A fragment of the k32 chunk c, with V
//    read in its natural (transposed, key-contiguous) layout. The store permutation is
//    slot(key) = (key & ~15) | bit1<<3 | bit3<<2 | bit2<<1 | bit0 (the inverse of key_of), so
//    ldmatrix reads 8 consecutive slots (pitch/16 odd: conflict-free).
//  - Per-thread K scale groups (jit::quant_layout: group = (key%8)/2): the keys of thread t in a
//    tile j are (key%8) = 2·(j%2) + 4·(t%2) + e, i.e. group 2·(t%2) + (j%2): two K scales per
//    thread and tile (even / odd n8 tiles) instead of one — the same products δq·δk, merely
//    another assignment of keys to accumulator columns. The Q scale of a thread is group
//    warp·8 + g (rows g, g+8, g+16, g+24 of its warp share it).
//  - P̂·V̂ accumulates per KV tile from zero (TWO_LEVEL) and is added into the fp32 O as
//    O = O·a + R; without TWO_LEVEL the accumulator is O itself, rescaled by a before the tile.
//
// Non-finite inputs (reference.hpp "NaN / Inf policy"): the quantize stage keeps them out of every
// scale and mean and flags them; the main loop never looks at the flags. The epilogue, for row i
// with visible keys [0, n_vis): n_vis > 0 and (q_bad[i] or k_first_bad < n_vis) → O row and LSE
// NaN; otherwise O[i, c] = NaN where v_first_bad[c] < n_vis.
//
// Head dims whose fp32 O would not fit in registers (MT·DVS/8·4 ≤ 128 registers per thread) are
// processed in NSL passes over the KV sequence, each producing DVS channels; the scores are
// recomputed bit-identically in each pass (the LSE is written by the last pass).
#pragma once

#include "attention_blocks.cuh"
#include "attention_params.cuh"
#include "ptx.cuh"
#include "types.cuh"

#if !defined(SAGE2_FAMILY) || SAGE2_FAMILY != 2
#error "attention_mma.cuh is specialised by the preamble jit::generate_source() writes (attn_mma family)"
#endif

namespace attn {

using sage2::dev::AttentionParams;

constexpr int HD = SAGE2_HEAD_DIM;
constexpr int D_QK = SAGE2_D_QK;
constexpr int RB = SAGE2_ROW_BYTES;
constexpr int D_V = SAGE2_D_V;
constexpr int BQ = SAGE2_BQ;
constexpr int BK = SAGE2_BK;
constexpr int WARPS = SAGE2_WARPS;
constexpr int STAGES = SAGE2_STAGES;
constexpr int THREADS = sage2::dev::attn_threads(WARPS);
constexpr int RW = BQ / WARPS;
constexpr int MT = sage2::dev::attn_m_tiles(BQ, WARPS);
constexpr int KSTEPS = RB / 32;   // 32-byte k-steps (k32 INT8 or k64 INT4)
constexpr int NT = BK / 8;        // n8 score tiles per m tile
constexpr int KC = BK / 32;       // k32 chunks of the P̂·V̂ product
constexpr int NSL = sage2::dev::attn_v_slices(D_V, MT);
constexpr int DVS = sage2::dev::attn_v_slice(D_V, MT);
constexpr int NV = DVS / 8;
// m tiles whose P̂·V̂ shares one pass over the V fragments (MG = MT: V read once per tile, more
// live registers; MG = 1: each m tile finishes its P̂·V̂ before the next one's QKᵀ).
#ifndef SAGE2_ATTN_MG
constexpr int MG = 1;
#else
constexpr int MG = SAGE2_ATTN_MG;
#endif
constexpr int QKP = sage2::dev::attn_qk_pitch(RB);
constexpr int VP = sage2::dev::attn_v_pitch(BK);
constexpr bool INT4 = SAGE2_QK_BITS == 4;
constexpr bool SMOOTH_Q = SAGE2_SMOOTH_Q != 0;
constexpr bool SMOOTH_K = SAGE2_SMOOTH_K != 0;
constexpr bool SMOOTH_V = SAGE2_SMOOTH_V != 0;
constexpr bool TWO_LEVEL = SAGE2_TWO_LEVEL_ACCUM != 0;
constexpr bool RETURN_LSE = SAGE2_RETURN_LSE != 0;
constexpr int CAUSAL = SAGE2_CAUSAL;  // 0 none, 1 top-left, 2 bottom-right
constexpr bool OUT_BF16 = SAGE2_OUT_BF16 != 0;
constexpr bool OUT_F32 = SAGE2_OUT_F32 != 0;
constexpr sage2::dev::AttnSmemLayout SM =
    sage2::dev::attn_smem_layout(BQ, BK, WARPS, RB, D_V, STAGES, SMOOTH_Q);
constexpr float LOG2_P_SCALE = 8.80735492205760410744f;  // log2(448): 448·P̃ = exp2(s - (m - log2 448))
constexpr float LN2 = 0.693147180559945309417f;

static_assert(BQ % (16 * WARPS) == 0 && MT >= 1, "each warp owns whole 16-row tiles");
static_assert(BK % 32 == 0 && BK >= 32, "the mma family needs BK a multiple of 32 (k32 P·V chunks)");
static_assert(RB % 32 == 0 && D_V % 32 == 0 && DVS % 16 == 0 && DVS * NSL >= D_V, "padded dims");
static_assert(MT * NV * 4 <= 128, "fp32 O must fit the register budget");
static_assert(STAGES >= 1 && STAGES <= 4, "1..4 pipeline stages");
static_assert(SAGE2_MMA_SHAPE == (INT4 ? 0 : 1), "the preamble's quant layout must be the mma.sync one");
static_assert(SAGE2_Q_GROUPS == WARPS * 8 && SAGE2_K_GROUPS == 4, "per-thread group counts");

// The per-thread quantisation layout the quantize kernels used (preamble tables, derived by
// jit::quant_layout) is the one this kernel reads: checked at compile time.
constexpr bool q_groups_match() {
  for (int r = 0; r < BQ; ++r)
    if (sage2_q_group_table[r] != (r / RW) * 8 + r % 8) return false;
  return true;
}
constexpr bool k_groups_match() {
  for (int k = 0; k < BK; ++k)
    if (sage2_k_group_table[k] != (k % 8) / 2) return false;
  return true;
}
static_assert(q_groups_match(), "Q scale groups differ from the mma.sync fragment rows");
static_assert(k_groups_match(), "K scale groups differ from the mma.sync fragment columns");

// K row permutation (see the header comment).
constexpr int key_of(int j, int r) { return 32 * (j / 4) + 16 * ((j % 4) / 2) + 2 * (j % 2) + 4 * (r / 2) + r % 2; }
__host__ __device__ constexpr int k_slot(int key) {
  return (key & ~15) | (((key >> 1) & 1) << 3) | (((key >> 3) & 1) << 2) | (((key >> 2) & 1) << 1) | (key & 1);
}
constexpr bool permutation_ok() {
  for (int j = 0; j < NT; ++j)
    for (int r = 0; r < 8; ++r)
      if (k_slot(key_of(j, r)) != 8 * j + r) return false;
  return true;
}
static_assert(permutation_ok(), "k_slot must invert key_of");

__device__ __forceinline__ float neg_inf() { return ptx::bits_f32(0xff800000u); }

__device__ __forceinline__ float lg2_approx(float x) {
  float r;
  asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float2 lds_f32x2(u32 addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ u32 pack_p(float a, float b, float c, float d) {
  return static_cast<u32>(ptx::f32x2_to_e4m3x2(a, b)) | (static_cast<u32>(ptx::f32x2_to_e4m3x2(c, d)) << 16);
}

struct Ctx {
  const i8* k_head;        // K codes of the kv head, row 0
  const u8* v_head;        // V codes of the kv head, channel 0
  const float* ks_head;    // K scales of the kv head, block 0
  const float* ds_row;     // ΔS row of this (pair, q block), key 0
  i64 kv_len_pad;
};

__device__ __forceinline__ void mma_qk(i32 (&acc)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  const u32 b[2] = {b0, b1};
  if (INT4)
    ptx::mma_s4_m16n8k64(acc, a, b);
  else
    ptx::mma_s8_m16n8k32(acc, a, b);
}

// P̂·V̂ for one k32 chunk. sm_89: the native e4m3 mma. sm_90 has no native e4m3 mma.sync (ptxas
// emulates it with two f16 HMMAs into zeroed temporaries plus FADDs, which costs registers), so
// the operands are widened here (e4m3 → f16 is exact) and two m16n8k16 f16 mmas accumulate in
// place. Keys are relabelled consistently in A and B: in the first k16 step, slots 2t, 2t+1 hold
// keys 4t, 4t+1 and slots 8+2t, 9+2t keys 4t+2, 4t+3 of the chunk (the second step: +16).
__device__ __forceinline__ void mma_pv(float (&acc)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if SAGE2_ARCH >= 90
  const u32 a_lo[4] = {ptx::e4m3x2_to_f16x2(static_cast<u16>(a[0])), ptx::e4m3x2_to_f16x2(static_cast<u16>(a[1])),
                       ptx::e4m3x2_to_f16x2(static_cast<u16>(a[0] >> 16)),
                       ptx::e4m3x2_to_f16x2(static_cast<u16>(a[1] >> 16))};
  const u32 b_lo[2] = {ptx::e4m3x2_to_f16x2(static_cast<u16>(b0)), ptx::e4m3x2_to_f16x2(static_cast<u16>(b0 >> 16))};
  ptx::mma_f16_m16n8k16(acc, a_lo, b_lo);
  const u32 a_hi[4] = {ptx::e4m3x2_to_f16x2(static_cast<u16>(a[2])), ptx::e4m3x2_to_f16x2(static_cast<u16>(a[3])),
                       ptx::e4m3x2_to_f16x2(static_cast<u16>(a[2] >> 16)),
                       ptx::e4m3x2_to_f16x2(static_cast<u16>(a[3] >> 16))};
  const u32 b_hi[2] = {ptx::e4m3x2_to_f16x2(static_cast<u16>(b1)), ptx::e4m3x2_to_f16x2(static_cast<u16>(b1 >> 16))};
  ptx::mma_f16_m16n8k16(acc, a_hi, b_hi);
#else
  const u32 b[2] = {b0, b1};
  ptx::mma_e4m3_m16n8k32(acc, a, b);
#endif
}


// Output stores and the launch-shape guard: attention_blocks.cuh.
__device__ __forceinline__ void store_pair(void* row, int ch, float y0, float y1, bool vec, bool second) {
  attn_common::store_pair<OUT_F32, OUT_BF16>(row, ch, y0, y1, vec, second);
}
__device__ __forceinline__ void check_block_dim() { attn_common::check_block_dim<THREADS>(); }

// Block coordinates. Read through volatile asm so that the epilogue can recompute them instead
// of keeping ~20 registers of 64-bit indices alive across the KV loop (the compiler would
// otherwise CSE the two computations and spill).
using attn_common::ctaid_x;
using attn_common::ctaid_y;
using attn_common::max_;
using attn_common::min_;
using attn_common::tid_x;
using Coords = attn_common::BlockCoords;
__device__ __forceinline__ Coords coords(const AttentionParams& p) {
  return attn_common::block_coords<BQ, BK, CAUSAL>(p);
}

// Global sources of the KV loads, recomputed per tile from the block coordinates (cheaper than
// keeping five 64-bit values alive across the loop).
__device__ __forceinline__ Ctx make_ctx(const AttentionParams& p) {
  const Coords k = coords(p);
  Ctx c;
  c.k_head = p.k_codes + k.bhk * k.kv_len_pad * RB;
  c.v_head = p.v_codes + k.bhk * D_V * k.kv_len_pad;
  c.ks_head = p.k_scale + k.bhk * k.k_blocks * 4;
  c.ds_row = SMOOTH_Q ? p.delta_s + (k.bhl * p.qb_count + k.qbl) * k.kv_len_pad : nullptr;
  c.kv_len_pad = k.kv_len_pad;
  return c;
}

// Issue the cp.async copies of KV tile `tile` (V channels of pass `slice`) into stage `st`.
__device__ __forceinline__ void load_stage(const AttentionParams& p, int tile, int slice, u32 st) {
  const Ctx c = make_ctx(p);
  const int tid = static_cast<int>(tid_x());
  // K: BK rows of RB bytes, contiguous in global memory; row `key` goes to slot k_slot(key).
  constexpr int CPR = RB / 16;          // 16-byte chunks per K row
  constexpr int KCH = BK * CPR;
  const i8* ksrc = c.k_head + static_cast<i64>(tile) * BK * RB;
  if (THREADS % CPR == 0 && (THREADS / CPR) % 16 == 0) {
    // Each thread keeps one chunk column; its rows step by a multiple of 16, which k_slot
    // preserves: one invariant destination plus compile-time offsets.
    constexpr int RPP = THREADS / CPR;
    const int key0 = tid / CPR, part = tid % CPR;
    const u32 dst = st + SM.k_off + k_slot(key0) * QKP + part * 16;
    const i8* src = ksrc + tid * 16;
#pragma unroll
    for (int i = 0; i < (KCH + THREADS - 1) / THREADS; ++i)
      if (KCH % THREADS == 0 || key0 + i * RPP < BK) ptx::cp_async_16(dst + i * RPP * QKP, src + i * THREADS * 16);
  } else {
#pragma unroll 4
    for (int q = tid; q < KCH; q += THREADS) {
      const int key = q / CPR, part = q % CPR;
      ptx::cp_async_16(st + SM.k_off + k_slot(key) * QKP + part * 16, ksrc + static_cast<i64>(q) * 16);
    }
  }
  // V slice: DVS channel rows of BK bytes (row ch of the transposed V, keys of this tile).
  constexpr int VCPR = BK / 16;
  constexpr int VRPP = THREADS / VCPR;
  static_assert(THREADS % VCPR == 0, "V chunk mapping");
  {
    const int r0 = tid / VCPR, part = tid % VCPR;
    const u8* src = c.v_head + static_cast<i64>(slice * DVS + r0) * c.kv_len_pad + static_cast<i64>(tile) * BK + part * 16;
    const i64 step = static_cast<i64>(VRPP) * c.kv_len_pad;
    const u32 dst = st + SM.v_off + r0 * VP + part * 16;
#pragma unroll
    for (int i = 0; i < (DVS + VRPP - 1) / VRPP; ++i) {
      const int r = r0 + i * VRPP;
      if (DVS % VRPP == 0 || r < DVS) {
        if (NSL * DVS == D_V || slice * DVS + r < D_V)
          ptx::cp_async_16(dst + i * VRPP * VP, src);
        else
          ptx::cp_async_16_zfill(dst + i * VRPP * VP, c.v_head, 0u);
      }
      src += step;
    }
  }
  if (tid == 0) ptx::cp_async_16(st + SM.ks_off, c.ks_head + static_cast<i64>(tile) * 4);
  if (SMOOTH_Q) {
    constexpr int DCH = BK / 4;
    const float* dsrc = c.ds_row + static_cast<i64>(tile) * BK;
#pragma unroll
    for (int q0 = 0; q0 < DCH; q0 += THREADS) {
      const int q = q0 + tid;
      if (DCH % THREADS == 0 || q < DCH) ptx::cp_async_16(st + SM.ds_off + q * 16, dsrc + q * 4);
    }
  }
}

__device__ __forceinline__ void attention(const AttentionParams& p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;

  if (static_cast<i64>(blockIdx.y) >= p.bh_count || static_cast<i64>(blockIdx.x) >= p.qb_count) return;
  const Coords k0 = coords(p);
  const i64 bh = k0.bh, qb = k0.qb, bhk = k0.bhk, q_blocks = k0.q_blocks, k_blocks = k0.k_blocks;
  const i64 q_len_pad = k0.q_len_pad, kv_len_pad = k0.kv_len_pad, i0 = k0.i0, bhl = k0.bhl, qbl = k0.qbl;

  // ---- visible KV range; tiles from mask_from on need the element mask
  const i64 off = CAUSAL == 2 ? p.kv_len - p.q_len : 0;
  i64 n_keys = p.kv_len;
  i64 mask_from = p.kv_len / BK;  // tiles that reach past kv_len
  if (CAUSAL) {
    const i64 last_row = min_<i64>(i0 + BQ, p.q_len) - 1;
    n_keys = max_<i64>(0, min_<i64>(p.kv_len, last_row + off + 1));
    // tiles whose last key is beyond the first row's limit i0 + off
    mask_from = min_<i64>(mask_from, max_<i64>(0, i0 + off + 1) / BK);
  }
  const int n_tiles = static_cast<int>((n_keys + BK - 1) / BK);

  const float qs = p.q_scale[(bh * q_blocks + qb) * (WARPS * 8) + warp * 8 + g];
  const float c2 = p.c2;


  const u32 sbase = ptx::smem_addr(smem);
  const u32 stages0 = sbase + SM.stages_off;

  // ---- Q tile → shared (kept for the whole CTA)
  {
    constexpr int CPR = RB / 16, QCH = BQ * CPR;
    const i8* qsrc = p.q_codes + (bh * q_len_pad + i0) * RB;
#pragma unroll 4
    for (int q = tid; q < QCH; q += THREADS) {
      const int row = q / CPR, part = q % CPR;
      ptx::cp_async_16(sbase + SM.q_off + row * QKP + part * 16, qsrc + static_cast<i64>(q) * 16);
    }
    ptx::cp_async_commit();
  }

  // ldmatrix lane addresses: x4 = matrices {rows 0-7, bytes 0-15}, {rows 0-7, bytes 16-31},
  // {rows 8-15, bytes 0-15}, {rows 8-15, bytes 16-31} for K and V (two n8 tiles × two halves of
  // a 32-byte k-step); Q: {rows 0-7, 0-15}, {rows 8-15, 0-15}, {rows 0-7, 16-31}, {rows 8-15, 16-31}.
  const u32 q_lane = sbase + SM.q_off + (warp * RW + (lane & 15)) * QKP + (lane >> 4) * 16;
  const int kv_row = (lane >> 4) * 8 + (lane & 7);
  const int kv_byte = ((lane >> 3) & 1) * 16;
  const u32 k_lane = SM.k_off + kv_row * QKP + kv_byte;
  const u32 v_lane = SM.v_off + kv_row * VP + kv_byte;


#pragma unroll 1
  for (int slice = 0; slice < NSL; ++slice) {
    float o[MT][NV][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int n = 0; n < NV; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][n][e] = 0.f;
      m[mt][0] = m[mt][1] = neg_inf();
      l[mt][0] = l[mt][1] = 0.f;
    }

    if (STAGES > 1) {
#pragma unroll
      for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_tiles) load_stage(p, s, slice, stages0 + s * SM.stage_bytes);
        ptx::cp_async_commit();
      }
    }

#pragma unroll 1
    for (int tile = 0; tile < n_tiles; ++tile) {
      if (STAGES == 1) {
        load_stage(p, tile, slice, stages0);
        ptx::cp_async_commit();
        ptx::cp_async_wait<0>();
        __syncthreads();
      } else {
        ptx::cp_async_wait<(STAGES > 1 ? STAGES - 2 : 0)>();
        __syncthreads();  // tile's data visible to all; everyone is done with tile-1's buffer
        const int nt = tile + STAGES - 1;
        if (nt < n_tiles) load_stage(p, nt, slice, stages0 + (nt % STAGES) * SM.stage_bytes);
        ptx::cp_async_commit();
      }
      const u32 st = stages0 + (STAGES == 1 ? 0 : (tile % STAGES)) * SM.stage_bytes;

      const float2 ks = lds_f32x2(st + SM.ks_off + (t & 1) * 8);
      // the contract's s = dot·((δq·δk)·c2) (+ ΔS·c2): one multiply per score
      const float dqk0 = (qs * ks.x) * c2;  // even n8 tiles: K group 2·(t%2)
      const float dqk1 = (qs * ks.y) * c2;  // odd n8 tiles:  K group 2·(t%2)+1
      const bool need_mask = tile >= mask_from;
      const int kbase = tile * BK;

#pragma unroll
      for (int mg = 0; mg < MT / MG; ++mg) {
      u32 pf[MG][KC][4];
      float alpha[MG][2];
#pragma unroll
      for (int mi = 0; mi < MG; ++mi) {
        const int mt = mg * MG + mi;
        // ---- S = Q̂ K̂ᵀ (int32)
        i32 acc[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] = 0;
#pragma unroll
        for (int ks_ = 0; ks_ < KSTEPS; ++ks_) {
          u32 af[4];
          ptx::ldmatrix_x4(af, q_lane + mt * 16 * QKP + ks_ * 32);
#pragma unroll
          for (int jp = 0; jp < NT / 2; ++jp) {
            u32 bf[4];
            ptx::ldmatrix_x4(bf, st + k_lane + jp * 16 * QKP + ks_ * 32);
            mma_qk(acc[2 * jp], af, bf[0], bf[1]);
            mma_qk(acc[2 * jp + 1], af, bf[2], bf[3]);
          }
        }
        // ---- dequantise, + ΔS, log2 domain, mask
        float sc[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int kofs = 32 * (j / 4) + 16 * ((j % 4) / 2) + 2 * (j % 2);  // + 4t + e
          const float dqk = (j % 2) ? dqk1 : dqk0;
          float2 ds = make_float2(0.f, 0.f);
          if (SMOOTH_Q) ds = lds_f32x2(st + SM.ds_off + (kofs + 4 * t) * 4);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float S = static_cast<float>(acc[j][e]) * dqk;
            if (SMOOTH_Q) S = S + ((e & 1) ? ds.y : ds.x) * c2;
            sc[j][e] = S;
          }
        }
        if (need_mask) {
          // Last visible key of the thread's rows g and g+8 of this m tile, relative to the tile
          // (recomputed here: key indices fit 32 bits, the host rejects kv_len >= 2^31).
          int rel[2];
          {
            const Coords km = coords(p);
            const int mtid = static_cast<int>(tid_x());
            const i64 row = km.i0 + (mtid >> 5) * RW + mt * 16 + ((mtid & 31) >> 2);
            const i64 kv_last = p.kv_len - 1;
            const i64 off_ = CAUSAL == 2 ? p.kv_len - p.q_len : 0;
            const i64 l0 = CAUSAL ? min_<i64>(kv_last, row + off_) : kv_last;
            const i64 l1 = CAUSAL ? min_<i64>(kv_last, row + 8 + off_) : kv_last;
            rel[0] = static_cast<int>(max_<i64>(-1, min_<i64>(BK, l0 - kbase)));
            rel[1] = static_cast<int>(max_<i64>(-1, min_<i64>(BK, l1 - kbase)));
          }
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int kofs = 32 * (j / 4) + 16 * ((j % 4) / 2) + 2 * (j % 2) + 4 * t;
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (kofs + (e & 1) > rel[e >> 1]) sc[j][e] = neg_inf();
          }
        }
        // ---- online softmax (max ignores NaN: max.f32)
        float m_use[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float mx = neg_inf();
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            mx = ptx::max_f32(mx, sc[j][2 * hf]);
            mx = ptx::max_f32(mx, sc[j][2 * hf + 1]);
          }
          mx = ptx::max_f32(mx, ptx::shfl_xor(mx, 1));
          mx = ptx::max_f32(mx, ptx::shfl_xor(mx, 2));
          const float m_new = ptx::max_f32(m[mt][hf], mx);
          m_use[hf] = (m_new == neg_inf()) ? 0.f : m_new;
          alpha[mi][hf] = ptx::exp2_approx(m[mt][hf] - m_use[hf]);
          m[mt][hf] = m_new;
        }
        // 448·P̃ in one exp2; l sums it (l carries the 448, removed in the epilogue)
        const float m_sh[2] = {m_use[0] - LOG2_P_SCALE, m_use[1] - LOG2_P_SCALE};
        float rs[2] = {0.f, 0.f};
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sc[j][e] = ptx::exp2_approx(sc[j][e] - m_sh[e >> 1]);
            rs[e >> 1] += sc[j][e];
          }
        // l is kept per thread (its own keys); the quad's partial sums are added at the end.
        l[mt][0] = l[mt][0] * alpha[mi][0] + rs[0];
        l[mt][1] = l[mt][1] * alpha[mi][1] + rs[1];
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {
          const int j0 = 4 * kc;
          pf[mi][kc][0] = pack_p(sc[j0][0], sc[j0][1], sc[j0 + 1][0], sc[j0 + 1][1]);
          pf[mi][kc][1] = pack_p(sc[j0][2], sc[j0][3], sc[j0 + 1][2], sc[j0 + 1][3]);
          pf[mi][kc][2] = pack_p(sc[j0 + 2][0], sc[j0 + 2][1], sc[j0 + 3][0], sc[j0 + 3][1]);
          pf[mi][kc][3] = pack_p(sc[j0 + 2][2], sc[j0 + 2][3], sc[j0 + 3][2], sc[j0 + 3][3]);
        }
      }

      // ---- P̂ V̂ of the group's m tiles (V fragments shared by the group)
      if (!TWO_LEVEL) {
#pragma unroll
        for (int mi = 0; mi < MG; ++mi)
#pragma unroll
          for (int n = 0; n < NV; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mg * MG + mi][n][e] *= alpha[mi][e >> 1];
      }
#pragma unroll
      for (int np = 0; np < NV / 2; ++np) {
        float r[MG][2][4];
#pragma unroll
        for (int mi = 0; mi < MG; ++mi)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh)
#pragma unroll
            for (int e = 0; e < 4; ++e) r[mi][hh][e] = 0.f;
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {
          u32 vf[4];
          ptx::ldmatrix_x4(vf, st + v_lane + np * 16 * VP + kc * 32);
#pragma unroll
          for (int mi = 0; mi < MG; ++mi) {
            if (TWO_LEVEL) {
              mma_pv(r[mi][0], pf[mi][kc], vf[0], vf[1]);
              mma_pv(r[mi][1], pf[mi][kc], vf[2], vf[3]);
            } else {
              mma_pv(o[mg * MG + mi][2 * np], pf[mi][kc], vf[0], vf[1]);
              mma_pv(o[mg * MG + mi][2 * np + 1], pf[mi][kc], vf[2], vf[3]);
            }
          }
        }
        if (TWO_LEVEL) {
#pragma unroll
          for (int mi = 0; mi < MG; ++mi)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                o[mg * MG + mi][2 * np + hh][e] = o[mg * MG + mi][2 * np + hh][e] * alpha[mi][e >> 1] + r[mi][hh][e];
        }
      }
      }  // m-tile groups
      if (STAGES == 1) __syncthreads();  // the next tile overwrites the only buffer
    }

    // ---- epilogue: O = (O · (1/l)) · δV (+ μ) (l carries the 448), LSE (indices recomputed, see coords()),
    //      then the non-finite poison of the flags
    {
    const Coords ke = coords(p);
    const int etid = static_cast<int>(tid_x());
    const int ewarp = etid >> 5, eg = (etid & 31) >> 2, et = etid & 3;
    const i64 vbase = ke.bhk * D_V + slice * DVS + 2 * et;
    const i64 kfb = p.k_first_bad[ke.bhk];
    const float qnan = ptx::bits_f32(0x7fc00000u);
    const bool out_vec = OUT_F32 ? ((reinterpret_cast<u64>(p.out) & 7u) == 0 && p.o_stride_batch % 2 == 0 &&
                                  p.o_stride_head % 2 == 0 && p.o_stride_seq % 2 == 0)
                               : ((reinterpret_cast<u64>(p.out) & 3u) == 0 && p.o_stride_batch % 2 == 0 &&
                                  p.o_stride_head % 2 == 0 && p.o_stride_seq % 2 == 0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float lt = l[mt][hf];
        lt += ptx::shfl_xor(lt, 1);
        lt += ptx::shfl_xor(lt, 2);
        const float rl = ptx::rcp_rn(lt);  // the contract's O · (1/l): one reciprocal per row
        const i64 row = ke.i0 + ewarp * RW + mt * 16 + hf * 8 + eg;
        if (row >= p.q_len) continue;
        // keys visible to the row: [0, n_vis)
        const i64 n_vis = CAUSAL ? max_<i64>(0, min_<i64>(p.kv_len, row + (CAUSAL == 2 ? p.kv_len - p.q_len : 0) + 1))
                                 : p.kv_len;
        const bool row_bad = n_vis > 0 && (p.q_bad[ke.bh * ke.q_len_pad + row] != 0 || kfb < n_vis);
        char* orow = static_cast<char*>(p.out) +
                     (ke.b * p.o_stride_batch + ke.h * p.o_stride_head + row * p.o_stride_seq) *
                         static_cast<i64>(OUT_F32 ? 4 : 2);
#pragma unroll
        for (int n = 0; n < NV; ++n) {
          const int ch = slice * DVS + 8 * n + 2 * et;
          if (NSL * DVS > HD && ch >= HD) continue;
          float y0 = 0.f, y1 = 0.f;
          if (lt != 0.f) {
            const float2 vs = *reinterpret_cast<const float2*>(p.v_scale + vbase + 8 * n);
            y0 = (o[mt][n][2 * hf] * rl) * vs.x;
            y1 = (o[mt][n][2 * hf + 1] * rl) * vs.y;
            if (SMOOTH_V) {
              const float2 vm = *reinterpret_cast<const float2*>(p.v_mean + vbase + 8 * n);
              y0 = y0 + vm.x;
              y1 = y1 + vm.y;
            }
          }
          if (row_bad) {
            y0 = y1 = qnan;
          } else {
            const int2 vf = *reinterpret_cast<const int2*>(p.v_first_bad + vbase + 8 * n);
            if (vf.x < n_vis) y0 = qnan;
            if (vf.y < n_vis) y1 = qnan;
          }
          store_pair(orow, ch, y0, y1, out_vec, ch + 1 < HD);
        }
        if (RETURN_LSE && et == 0 && slice == NSL - 1) {
          float v = neg_inf();
          if (lt != 0.f) {
            v = (m[mt][hf] + (lg2_approx(lt) - LOG2_P_SCALE)) * LN2;
            if (SMOOTH_K) v = v + p.q_kbias[ke.bh * ke.q_len_pad + row] * p.sm_scale;
          }
          if (row_bad) v = qnan;
          p.lse[ke.bh * p.q_len + row] = v;
        }
      }
    }
    }
    if (NSL > 1) __syncthreads();  // the next pass refills the stage buffers
  }
  ptx::cp_async_wait_all();
}

}  // namespace attn

extern "C" __global__ void __launch_bounds__(attn::THREADS) sage2_attention_mma(const sage2::dev::AttentionParams p) {
  attn::check_block_dim();
  attn::attention(p);
}
