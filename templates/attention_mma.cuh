// mma.sync attention family (every arch of the table: Ampere, Ada, Hopper, Blackwell): INT8
// (m16n8k32) or INT4 (m16n8k64) QKᵀ with per-thread dequantisation, optional ΔS (smooth-Q), online
// softmax in fp32 (exp2), P̃ → FP8 E4M3 (·448, folded into the exponent), FP8 P̂·V̂ (m16n8k32 e4m3,
// f32 accumulate), two-level accumulation — or with SAGE2_PV_FP16 (the Ampere path, an option
// everywhere): P̃ → fp16, fp16 V̂, P̂·V̂ in m16n8k16 f16 mma with f32 accumulation. With
// SAGE2_PV_ACC16 (SageAttention2++) either product accumulates in fp16 (f16-accumulator mma) over
// segments of 64 keys, each segment's sum added into the fp32 tile sum that is flushed into O.
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
//  - Per-thread K scale groups (kernels::quant_layout: group = (key%8)/2): the keys of thread t in a
//    tile j are (key%8) = 2·(j%2) + 4·(t%2) + e, i.e. group 2·(t%2) + (j%2): two K scales per
//    thread and tile (even / odd n8 tiles) instead of one — the same products δq·δk, merely
//    another assignment of keys to accumulator columns. The Q scale of a thread is group
//    warp·8 + g (rows g, g+8, g+16, g+24 of its warp share it).
//  - P̂·V̂ accumulates per KV tile from zero (TWO_LEVEL) and is added into the fp32 O as
//    O = O·a + R; without TWO_LEVEL the accumulator is O itself, rescaled by a before the tile.
//  - fp16 accumulation (PV_ACC16): per segment of ACC16_KEYS = 64 keys (two k32 chunks), f16
//    accumulators h start at 0, every mma rounds its sum to fp16 (e4m3 m16n8k32.f16: one rounding
//    per 32 keys; FP16 m16n8k16.f16: per 16), and the segment's h is converted and added into the
//    fp32 tile sum r (the first segment's h is r): V̂'s scale keeps |h| < 65504 (kernels/
//    quant_buffers.hpp). Needs TWO_LEVEL. The emulation (reference/emulate.cpp) does the same.
//  - FP16 P̃V (PV_FP16): V̂ has two bytes a code (its smem rows 2·BK + 16 bytes) and is stored
//    with the keys of each 16-key group permuted (kernels::QuantLayout::v_fp16: slot 2t + e holds key
//    4t + e, slot 8 + 2t + e key 4t + 2 + e), so that the P fragment of a k16 step is the thread's
//    own accumulators (attention_softmax.cuh pack_p, 8 registers) and the B fragment a plain ldmatrix of
//    V̂ᵀ rows; each k32 chunk is two m16n8k16 steps, 32 bytes apart.
//
// Non-finite inputs (reference.hpp "NaN / Inf policy"): the quantize stage keeps them out of every
// scale and mean and flags them; the main loop never looks at the flags, the epilogue applies
// them (attention_epilogue.cuh, shared with the wgmma family like the online softmax,
// attention_softmax.cuh, and the visibility rules, attention_blocks.cuh).
//
// Head dims whose fp32 O would not fit in registers (MT·DVS/8·4 ≤ 128 registers per thread) are
// processed in NSL passes over the KV sequence, each producing DVS channels; the scores are
// recomputed bit-identically in each pass (the LSE is written by the last pass).
#pragma once

#include "attention_blocks.cuh"
#include "attention_epilogue.cuh"
#include "attention_params.cuh"
#include "attention_softmax.cuh"
#include "ptx.cuh"
#include "types.cuh"

#if !defined(SAGE2_FAMILY) || SAGE2_FAMILY != 2
#error "attention_mma.cuh is specialised by the preamble jit::generate_source() writes (attn_mma family)"
#endif

namespace attn {

// The spec's constants, block coordinates, visibility rules, softmax and epilogue: attn_common.
using namespace attn_common;

constexpr int THREADS = sage2::dev::attn_threads(WARPS);
constexpr int RW = BQ / WARPS;
constexpr int MT = sage2::dev::attn_m_tiles(BQ, WARPS);
constexpr int KSTEPS = RB / 32;   // 32-byte k-steps (k32 INT8 or k64 INT4)
constexpr int NT = BK / 8;        // n8 score tiles per m tile
constexpr int KC = BK / 32;       // k32 chunks of the P̂·V̂ product
constexpr int NSL = sage2::dev::attn_v_slices(D_V, MT);
constexpr int DVS = sage2::dev::attn_v_slice(D_V, MT);
constexpr int NV = DVS / 8;
// m tiles of a warp that share every K and V fragment read from shared memory (attention_params.cuh).
constexpr int MG = sage2::dev::attn_m_group(MT, DVS, BK);
constexpr int QKP = sage2::dev::attn_qk_pitch(RB);
constexpr int VB = PV_FP16 ? 2 : 1;  // bytes of one V̂ code
constexpr int VP = sage2::dev::attn_v_pitch(BK, VB);
constexpr int PFR = PV_FP16 ? 8 : 4;  // P̂ fragment registers of one k32 chunk
// The row sum l of FP16 P̃V adds the P̂ the product reads, on the tensor cores (rowsum_of_phat;
// reference::RowSumForm: O and the LSE as accurate as with the fp32 sum of P̃ for FP16 P̂, while
// FP8 P̂ would move the LSE); FP8 P̃V keeps the fp32 sum of P̃.
constexpr bool ROWSUM_PHAT = PV_FP16;
constexpr bool INT4 = SAGE2_QK_BITS == 4;
constexpr sage2::dev::AttnSmemLayout SM =
    sage2::dev::attn_smem_layout(BQ, BK, WARPS, RB, D_V, STAGES, SMOOTH_Q, VB);

static_assert(BQ % (16 * WARPS) == 0 && MT >= 1, "each warp owns whole 16-row tiles");
static_assert(BK % 32 == 0 && BK >= 32, "the mma family needs BK a multiple of 32 (k32 P·V chunks)");
static_assert(RB % 32 == 0 && D_V % 32 == 0 && DVS % 16 == 0 && DVS * NSL >= D_V, "padded dims");
static_assert(MT * NV * 4 <= 128, "fp32 O must fit the register budget");
static_assert(SAGE2_MMA_SHAPE == (INT4 ? 0 : 1), "the preamble's quant layout must be the mma.sync one");
static_assert(SAGE2_K_GROUPS == 4, "per-thread K group count");
static_assert(!PV_ACC16 || TWO_LEVEL, "fp16 accumulation is flushed into fp32 per tile");
static_assert(ACC16_KEYS % 32 == 0, "fp16 accumulator segments are whole k32 chunks");

// The per-thread quantisation layout the quantize kernels used (preamble tables, derived by
// kernels::quant_layout) is the one this kernel reads: checked at compile time.
static_assert(groups_match(sage2_q_group_table, [](int r) { return (r / RW) * 8 + r % 8; }),
              "Q scale groups differ from the mma.sync fragment rows");
static_assert(groups_match(sage2_k_group_table, [](int k) { return (k % 8) / 2; }),
              "K scale groups differ from the mma.sync fragment columns");

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

__device__ __forceinline__ float2 lds_f32x2(u32 addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}

// The K and V̂ sources of KV tile 0 for one pass, computed once a pass (KV_SRC_KEPT): a tile's are
// these plus the tile's offset (the next tile's block coordinates and 64-bit address chains were
// ~90 of the loop's ~500 instructions on sm_80, scripts/sass_census.py). They are the thread's own
// (its chunk's offsets folded in), so they take 4-6 registers across the loop, and ptxas spilled
// with them, or with the CTA's, where a kernel sits at its register line: 8 warps (ptxas aims at
// 128 registers; sm_90a bq128.bk64.w8, hd 64, FP8 P̃V), and the compute_89 FP8 P̃V kernel with fp16
// accumulation at hd 128 as Hopper's ptxas compiles its PTX (128 registers: spills, or 4 → 3 CTAs
// an SM; bench/NOTES.md session 29). There every tile finds them from the block coordinates. The
// K scales' source and the thread's shared-memory destinations are kept too (SRC_ALL_KEPT) but for
// smooth Q, whose ΔS row is found from the block coordinates per tile (kept too, or with the K
// scales' or the destinations, each made ptxas spill on sm_90a: INT4 smooth Q, hd 128), and for
// varlen INT4 (the destinations spilled on sm_89 at hd 64).
constexpr bool KV_SRC_KEPT = WARPS <= 4 && !(PV_ACC16 && !PV_FP16 && DVS > 64);
constexpr bool SRC_ALL_KEPT = KV_SRC_KEPT && !SMOOTH_Q && !(VARLEN && INT4);
struct KvSrc {
  const i8* k;      // K̂: the thread's first 16-byte chunk (the one-column mapping) or row 0 of the kv head
  const u8* v;      // V̂ᵀ: the thread's first channel row of the pass, key 0, its 16-byte part
  const float* ks;  // the K scales of tile 0 (copied by thread 0)
  u32 k_dst, v_dst;  // shared-memory offsets of the thread's first K chunk / V̂ᵀ part in a stage (K_COLUMN)
};

__device__ __forceinline__ void mma_qk(i32 (&acc)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  const u32 b[2] = {b0, b1};
  if (INT4)
    ptx::mma_s4_m16n8k64(acc, a, b);
  else
    ptx::mma_s8_m16n8k32(acc, a, b);
}

// P̂·V̂ for one k32 chunk. sm_89 and Blackwell: the native e4m3 mma. sm_90 has no native e4m3
// mma.sync (ptxas emulates it with two f16 HMMAs into zeroed temporaries plus FADDs, which costs
// registers), so the operands are widened here (e4m3 → f16 is exact) and two m16n8k16 f16 mmas
// accumulate in place. Keys are relabelled consistently in A and B: in the first k16 step, slots
// 2t, 2t+1 hold keys 4t, 4t+1 and slots 8+2t, 9+2t keys 4t+2, 4t+3 of the chunk (the second
// step: +16) — the order the FP16 P̃V path stores V̂ in. (PTX for compute_89 run on a Hopper GPU
// takes the native branch; the driver's ptxas lowers it there.)
// (`a` by pointer: the PV_FP16 build type-checks this call with 8-register fragments too.)
#if SAGE2_ARCH == 90
// The widened f16 operands of k16 step `hi` (0, 1) of a k32 chunk, in the relabelled key order above.
__device__ __forceinline__ void widen_pv_step(const u32* a, u32 b0, u32 b1, int hi, u32 (&af)[4], u32 (&bf)[2]) {
  const u32 x = hi ? a[2] : a[0], y = hi ? a[3] : a[1], b = hi ? b1 : b0;
  af[0] = ptx::e4m3x2_to_f16x2(static_cast<u16>(x));
  af[1] = ptx::e4m3x2_to_f16x2(static_cast<u16>(y));
  af[2] = ptx::e4m3x2_to_f16x2(static_cast<u16>(x >> 16));
  af[3] = ptx::e4m3x2_to_f16x2(static_cast<u16>(y >> 16));
  bf[0] = ptx::e4m3x2_to_f16x2(static_cast<u16>(b));
  bf[1] = ptx::e4m3x2_to_f16x2(static_cast<u16>(b >> 16));
}
#endif

// Acc: float[4] (fp32 accumulation) or u32[2] (an f16 accumulator, PV_ACC16: the native e4m3 mma with
// .f16 accumulation; on sm_90, where it is not offered, kept equivalent by two f16-accumulator k16
// mmas of the widened operands). The ptx:: overloads take either.
template <class Acc>
__device__ __forceinline__ void mma_pv(Acc& acc, const u32* a, u32 b0, u32 b1) {
#if SAGE2_ARCH == 90
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    u32 af[4], bf[2];
    widen_pv_step(a, b0, b1, hi, af, bf);
    ptx::mma_f16_m16n8k16(acc, af, bf);
  }
#else
  const u32 b[2] = {b0, b1};
  const u32 a4[4] = {a[0], a[1], a[2], a[3]};
  ptx::mma_e4m3_m16n8k32(acc, a4, b);
#endif
}

// FP16 P̃V: k16 step s (0, 1) of a k32 chunk, P̂ fragment registers 4s..4s+3 of the chunk's 8
// (attention_softmax.cuh pack_p), V̂ fragments b0, b1, into a float[4] or (PV_ACC16) u32[2]
// accumulator. (The FP8 build type-checks the call with 4 registers a chunk and never runs it:
// nothing is read then.)
template <int N, class Acc>
__device__ __forceinline__ void pv_step16(Acc& acc, const u32 (&p)[N], int s, u32 b0, u32 b1) {
  if constexpr (N == 8) {
    const u32 a[4] = {p[4 * s], p[4 * s + 1], p[4 * s + 2], p[4 * s + 3]};
    const u32 b[2] = {b0, b1};
    ptx::mma_f16_m16n8k16(acc, a, b);
  }
}

// FP16 P̃V: the row sums of P̂ on the tensor cores (reference::RowSumForm, the contract for this
// path): P̂'s A fragments of the tile against a B of ones, 16 keys a step, each step's sum added
// into an fp32 accumulator that starts from 0 per tile; every lane of a quad gets its rows' whole
// sums (columns 2t, 2t+1 of row g, row g+8). l = l·alpha + the tile's sum, as the contract's
// update. One mma a 16 keys instead of an FADD a score.
template <int KCH>
__device__ __forceinline__ void rowsum_of_phat(const u32 (&pf)[KCH][8], const float (&alpha)[2], float (&l)[2]) {
  constexpr u32 ONES = 0x3c003c00u;  // f16x2 (1, 1)
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int kc = 0; kc < KCH; ++kc)
#pragma unroll
    for (int s = 0; s < 2; ++s) pv_step16(acc, pf[kc], s, ONES, ONES);
  l[0] = l[0] * alpha[0] + acc[0];
  l[1] = l[1] * alpha[1] + acc[2];
}
template <int KCH>
__device__ __forceinline__ void rowsum_of_phat(const u32 (&)[KCH][4], const float (&)[2], float (&)[2]) {}

// K chunks: with THREADS a multiple of 16 rows' chunks each thread keeps one chunk column (its
// rows step by a multiple of 16, which k_slot preserves: one invariant destination plus
// compile-time offsets); else a strided walk over the tile's chunks.
constexpr int K_CPR = RB / 16;  // 16-byte chunks per K row
constexpr bool K_COLUMN = THREADS % K_CPR == 0 && (THREADS / K_CPR) % 16 == 0;
// V̂ᵀ: VRPP channel rows of BK codes at once, each thread one 16-byte part of one row.
constexpr int V_CPR = BK * VB / 16;
constexpr int VRPP = THREADS / V_CPR;
static_assert(THREADS % V_CPR == 0, "V chunk mapping");

// The thread's shared-memory offsets of its first K chunk (K_COLUMN) and V̂ᵀ part in a stage.
__device__ __forceinline__ u32 k_dst_of(int tid) { return SM.k_off + k_slot(tid / K_CPR) * QKP + (tid % K_CPR) * 16; }
__device__ __forceinline__ u32 v_dst_of(int tid) { return SM.v_off + (tid / V_CPR) * VP + (tid % V_CPR) * 16; }

// The sources of pass `slice` (block coordinates: the caller's).
__device__ __forceinline__ KvSrc make_kv_src(const AttentionParams& p, const BlockCoords& k, int slice) {
  const int tid = static_cast<int>(tid_x());
  KvSrc s;
  s.k = p.k_codes + k.k_blk_base * BK * RB + (K_COLUMN ? tid * 16 : 0);
  s.v = p.v_codes + (k.v_row0 * k.v_pitch + k.v_col0) * VB +
        static_cast<i64>(slice * DVS + tid / V_CPR) * k.v_pitch * VB + (tid % V_CPR) * 16;
  s.ks = k_scales<4>(p, k);
  s.k_dst = k_dst_of(tid);
  s.v_dst = v_dst_of(tid);
  return s;
}

// Issue the cp.async copies of KV tile `tile` (V channels of pass `slice`) into stage `st`.
// `kept`: the pass's sources (KV_SRC_KEPT), else unused.
__device__ __forceinline__ void load_stage(const AttentionParams& p, const KvSrc& kept, int tile, int slice, u32 st) {
  const int tid = static_cast<int>(tid_x());
  const KvSrc s = KV_SRC_KEPT ? kept : make_kv_src(p, block_coords<true>(p), slice);
  // K: BK rows of RB bytes, contiguous in global memory; row `key` goes to slot k_slot(key).
  constexpr int KCH = BK * K_CPR;
  const i8* ksrc = s.k + static_cast<i64>(tile) * BK * RB;
  if (K_COLUMN) {
    constexpr int RPP = THREADS / K_CPR;
    const int key0 = tid / K_CPR;
    const u32 dst = st + (SRC_ALL_KEPT ? s.k_dst : k_dst_of(tid));
#pragma unroll
    for (int i = 0; i < (KCH + THREADS - 1) / THREADS; ++i)
      if (KCH % THREADS == 0 || key0 + i * RPP < BK) ptx::cp_async_16(dst + i * RPP * QKP, ksrc + i * THREADS * 16);
  } else {
#pragma unroll 4
    for (int q = tid; q < KCH; q += THREADS) {
      const int key = q / K_CPR, part = q % K_CPR;
      ptx::cp_async_16(st + SM.k_off + k_slot(key) * QKP + part * 16, ksrc + static_cast<i64>(q) * 16);
    }
  }
  // V slice: DVS channel rows of BK codes (row ch of the transposed V, keys of this tile).
  {
    const int r0 = tid / V_CPR;
    const u8* src = s.v + static_cast<i64>(tile) * BK * VB;
    const i64 step = static_cast<i64>(VRPP) * v_pitch(p) * VB;
    const u32 dst = st + (SRC_ALL_KEPT ? s.v_dst : v_dst_of(tid));
#pragma unroll
    for (int i = 0; i < (DVS + VRPP - 1) / VRPP; ++i) {
      const int r = r0 + i * VRPP;
      if (DVS % VRPP == 0 || r < DVS) {
        if (NSL * DVS == D_V || slice * DVS + r < D_V)
          ptx::cp_async_16(dst + i * VRPP * VP, src);
        else
          ptx::cp_async_16_zfill(dst + i * VRPP * VP, s.v, 0u);  // past the head dim: zeros
      }
      src += step;
    }
  }
  if (tid == 0)
    ptx::cp_async_16(st + SM.ks_off, (KV_SRC_KEPT && !SRC_ALL_KEPT ? k_scales<4>(p, block_coords<true>(p)) : s.ks) +
                                         static_cast<i64>(tile) * 4);
  if (SMOOTH_Q) {
    constexpr int DCH = BK / 4;
    const float* dsrc = delta_s_row(p, block_coords<true>(p)) + static_cast<i64>(tile) * BK;
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

  if (!block_exists(p)) return;
  const BlockCoords k0 = block_coords<true>(p);
  const i64 q_row_base = k0.q_row_base, i0 = k0.i0;

  // ---- visible KV range; tiles from mask_from on need the element mask
  i64 masked_from = mask_from(p, k0, causal_offset(p, k0));
  int n_tiles = tile_count(p, k0);
  // Tensor masks: loop tile i is KV tile t0 + i, from the first to the last tile the mask leaves
  // anything visible in (attention_blocks.cuh).
  int t0 = 0;
  const u8* cls_row = nullptr;
  if (MASK) {
    int t1;
    mask_tile_range(p, k0, n_tiles, t0, t1);
    n_tiles = t1 - t0;
    masked_from -= t0;
    cls_row = mask_class_row(p, k0) + t0;
  }

  const float qs = q_scale(p, k0, warp, g);
  const float c2 = p.c2;


  const u32 sbase = ptx::smem_addr(smem);
  const u32 stages0 = sbase + SM.stages_off;

  // ---- Q tile → shared (kept for the whole CTA)
  {
    constexpr int CPR = RB / 16, QCH = BQ * CPR;
    const i8* qsrc = p.q_codes + (q_row_base + i0) * RB;
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
    const KvSrc src = KV_SRC_KEPT ? make_kv_src(p, block_coords<true>(p), slice) : KvSrc{};
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
        if (s < n_tiles) load_stage(p, src, t0 + s, slice, stages0 + s * SM.stage_bytes);
        ptx::cp_async_commit();
      }
    }

#pragma unroll 1
    for (int tile = 0; tile < n_tiles; ++tile) {
      if (STAGES == 1) {
        load_stage(p, src, t0 + tile, slice, stages0);
        ptx::cp_async_commit();
        ptx::cp_async_wait<0>();
        __syncthreads();
      } else {
        ptx::cp_async_wait<(STAGES > 1 ? STAGES - 2 : 0)>();
        __syncthreads();  // tile's data visible to all; everyone is done with tile-1's buffer
        const int nt = tile + STAGES - 1;
        if (nt < n_tiles) load_stage(p, src, t0 + nt, slice, stages0 + (nt % STAGES) * SM.stage_bytes);
        ptx::cp_async_commit();
      }
      const u32 st = stages0 + (STAGES == 1 ? 0 : (tile % STAGES)) * SM.stage_bytes;

      const float2 ks = lds_f32x2(st + SM.ks_off + (t & 1) * 8);
      // the contract's s = dot·((δq·δk)·c2) (+ ΔS·c2): one multiply per score
      // The exponent's argument as one FFMA, fma(dot, δ, −m) (the mma family's contract:
      // reference::EmulationOptions::exponent_form): the scores stay the integer dot products as
      // floats, and the row max is taken per K scale group and scaled (max s = δ · max dot, bit for
      // bit, δ >= 0). Smooth Q adds ΔS to the scaled score, a tensor mask its term: both keep the
      // unfused form, and so do warps of 32 rows (two m tiles), whose hd 128 fp32-accumulation
      // kernel sits at 255 registers and spilled with the two scales kept to the exponent.
      constexpr bool FUSED_EXP = !SMOOTH_Q && !MASK && MT == 1;
      // (fused: raised to FLT_MIN, so that a masked key's −inf dot times it stays −inf; a scale of
      // 0 comes only with codes of 0, whose products stay 0 — as the attention_wgmma.cuh max does)
      const auto dqk_of = [&](float k_scale) {
        const float d = score_scale(qs, k_scale, c2);
        return FUSED_EXP ? ptx::max_f32(d, 1.17549435e-38f) : d;
      };
      const float dqk0 = dqk_of(ks.x);  // even n8 tiles: K group 2·(t%2)
      const float dqk1 = dqk_of(ks.y);  // odd n8 tiles:  K group 2·(t%2)+1
      const bool need_mask = tile >= masked_from;
      const int kbase = (t0 + tile) * BK;
      const int cls = MASK ? static_cast<int>(cls_row[tile]) : MASK_CLASS_ALL;

#pragma unroll
      for (int mg = 0; mg < MT / MG; ++mg) {
      u32 pf[MG][KC][PFR];
      float alpha[MG][2];
      // ---- S = Q̂ K̂ᵀ (int32) of the group's m tiles, each K fragment read once for all of them
      i32 acc_g[MG][NT][4];
#pragma unroll
      for (int mi = 0; mi < MG; ++mi)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc_g[mi][j][e] = 0;
#pragma unroll
      for (int ks_ = 0; ks_ < KSTEPS; ++ks_) {
        u32 af[MG][4];
#pragma unroll
        for (int mi = 0; mi < MG; ++mi) ptx::ldmatrix_x4(af[mi], q_lane + (mg * MG + mi) * 16 * QKP + ks_ * 32);
#pragma unroll
        for (int jp = 0; jp < NT / 2; ++jp) {
          u32 bf[4];
          ptx::ldmatrix_x4(bf, st + k_lane + jp * 16 * QKP + ks_ * 32);
#pragma unroll
          for (int mi = 0; mi < MG; ++mi) {
            mma_qk(acc_g[mi][2 * jp], af[mi], bf[0], bf[1]);
            mma_qk(acc_g[mi][2 * jp + 1], af[mi], bf[2], bf[3]);
          }
        }
      }
#pragma unroll
      for (int mi = 0; mi < MG; ++mi) {
        const int mt = mg * MG + mi;
        const i32 (&acc)[NT][4] = acc_g[mi];
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
            float S = FUSED_EXP ? static_cast<float>(acc[j][e]) : static_cast<float>(acc[j][e]) * dqk;
            if (SMOOTH_Q) S = S + ((e & 1) ? ds.y : ds.x) * c2;
            sc[j][e] = S;
          }
        }
        if (need_mask) {
          // Last visible key of the thread's rows g and g+8 of this m tile, relative to the tile
          // (recomputed here: key indices fit 32 bits, the host rejects kv_len >= 2^31).
          int rel[2];
          {
            const BlockCoords km = block_coords<true>(p);
            const int mtid = static_cast<int>(tid_x());
            const i64 row = km.i0 + (mtid >> 5) * RW + mt * 16 + ((mtid & 31) >> 2);
            const i64 kv_last = seq_kv_len(p, km) - 1;
            const i64 off = causal_offset(p, km);
            const i64 l0 = last_visible(kv_last, row + off), l1 = last_visible(kv_last, row + 8 + off);
            rel[0] = tile_last_visible<i64>(l0, kbase);
            rel[1] = tile_last_visible<i64>(l1, kbase);
          }
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int kofs = 32 * (j / 4) + 16 * ((j % 4) / 2) + 2 * (j % 2) + 4 * t;
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (kofs + (e & 1) > rel[e >> 1]) sc[j][e] = neg_inf();
          }
        }
        if (MASK && cls != MASK_CLASS_ALL) {
          // the tensor mask's term of each score (an interior all-masked tile: -inf everywhere)
          const BlockCoords km = block_coords<true>(p);
          const int mtid = static_cast<int>(tid_x());
          const i64 row0 = km.i0 + (mtid >> 5) * RW + mt * 16 + ((mtid & 31) >> 2);
          const i64 kv_len = seq_kv_len(p, km);
          const char* mr[2];
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            mr[hf] = row0 + 8 * hf < seq_q_len(p, km) ? mask_row(p, km, row0 + 8 * hf) : nullptr;
          const float cterm = cls == MASK_CLASS_CONST || (MASK >= 2 && cls >= MASK_CLASS_PREFIX)
                                  ? mask_const(p, cls_row + tile)
                                  : neg_inf();  // a bool prefix tile's tail: masked
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int kofs = 32 * (j / 4) + 16 * ((j % 4) / 2) + 2 * (j % 2) + 4 * t;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const i64 key = kbase + kofs + (e & 1);
              if (cls == MASK_CLASS_NONE)
                sc[j][e] = neg_inf();
              else if (cls >= MASK_CLASS_PREFIX)  // the tail after the cut takes the tile's term
                sc[j][e] = kofs + (e & 1) >= cls - MASK_CLASS_PREFIX ? sc[j][e] + cterm : sc[j][e];
              else if (cls == MASK_CLASS_CONST)
                sc[j][e] = sc[j][e] + cterm;
              else if (mr[e >> 1] && key < kv_len)
                sc[j][e] = sc[j][e] + mask_term(mr[e >> 1], key, p.mask_stride_k);
            }
          }
        }
        // ---- online softmax (attention_softmax.cuh), on the thread's max of each row half
        float m_sh[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float mx = neg_inf();
          if (FUSED_EXP) {
            float me = neg_inf(), mo = neg_inf();
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
              me = ptx::max_f32(me, ptx::max_f32(sc[j][2 * hf], sc[j][2 * hf + 1]));
              mo = ptx::max_f32(mo, ptx::max_f32(sc[j + 1][2 * hf], sc[j + 1][2 * hf + 1]));
            }
            mx = ptx::max_f32(me * dqk0, mo * dqk1);
          } else {
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              mx = ptx::max_f32(mx, sc[j][2 * hf]);
              mx = ptx::max_f32(mx, sc[j][2 * hf + 1]);
            }
          }
          m_sh[hf] = update_max(mx, m[mt][hf], alpha[mi][hf], neg_inf());
        }
        const auto arg = [&](int j, int e) {
          return FUSED_EXP ? fmaf(sc[j][e], (j % 2) ? dqk1 : dqk0, -m_sh[e >> 1]) : sc[j][e] - m_sh[e >> 1];
        };
        if (ROWSUM_PHAT) {
          exp2_only(sc, arg);
          pack_p(sc, pf[mi]);
          rowsum_of_phat(pf[mi], alpha[mi], l[mt]);
        } else {
          exp2_rowsum(sc, alpha[mi], l[mt], arg);
          pack_p(sc, pf[mi]);  // e4m3 (4 registers a chunk) or fp16 (8): pf's type picks
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
        if constexpr (PV_ACC16) {
          // segments of ACC16_KEYS keys through f16 accumulators (header comment)
          constexpr int SEGC = ACC16_KEYS / 32;  // k32 chunks per segment
#pragma unroll
          for (int kc0 = 0; kc0 < KC; kc0 += SEGC) {
            u32 h[MG][2][2];
#pragma unroll
            for (int mi = 0; mi < MG; ++mi)
#pragma unroll
              for (int hh = 0; hh < 2; ++hh) h[mi][hh][0] = h[mi][hh][1] = 0u;  // +0.0 in f16x2
#pragma unroll
            for (int kc = kc0; kc < (kc0 + SEGC < KC ? kc0 + SEGC : KC); ++kc) {
              if constexpr (PV_FP16) {
#pragma unroll
                for (int s = 0; s < 2; ++s) {
                  u32 vf[4];
                  ptx::ldmatrix_x4(vf, st + v_lane + np * 16 * VP + kc * 64 + s * 32);
#pragma unroll
                  for (int mi = 0; mi < MG; ++mi) {
                    pv_step16(h[mi][0], pf[mi][kc], s, vf[0], vf[1]);
                    pv_step16(h[mi][1], pf[mi][kc], s, vf[2], vf[3]);
                  }
                }
              } else {
                u32 vf[4];
                ptx::ldmatrix_x4(vf, st + v_lane + np * 16 * VP + kc * 32);
#pragma unroll
                for (int mi = 0; mi < MG; ++mi) {
                  mma_pv(h[mi][0], pf[mi][kc], vf[0], vf[1]);
                  mma_pv(h[mi][1], pf[mi][kc], vf[2], vf[3]);
                }
              }
            }
#pragma unroll
            for (int mi = 0; mi < MG; ++mi)
#pragma unroll
              for (int hh = 0; hh < 2; ++hh) {
                const float2 lo = ptx::f16x2_to_f32x2(h[mi][hh][0]), hi = ptx::f16x2_to_f32x2(h[mi][hh][1]);
                if (kc0 == 0) {
                  r[mi][hh][0] = lo.x;
                  r[mi][hh][1] = lo.y;
                  r[mi][hh][2] = hi.x;
                  r[mi][hh][3] = hi.y;
                } else {
                  r[mi][hh][0] += lo.x;
                  r[mi][hh][1] += lo.y;
                  r[mi][hh][2] += hi.x;
                  r[mi][hh][3] += hi.y;
                }
              }
          }
        } else {
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {
          if (PV_FP16) {
            // two k16 steps of 16 keys (32 bytes of each V̂ᵀ row) per chunk (pv_step16)
#pragma unroll
            for (int s = 0; s < 2; ++s) {
              u32 vf[4];
              ptx::ldmatrix_x4(vf, st + v_lane + np * 16 * VP + kc * 64 + s * 32);
#pragma unroll
              for (int mi = 0; mi < MG; ++mi) {
                pv_step16(TWO_LEVEL ? r[mi][0] : o[mg * MG + mi][2 * np], pf[mi][kc], s, vf[0], vf[1]);
                pv_step16(TWO_LEVEL ? r[mi][1] : o[mg * MG + mi][2 * np + 1], pf[mi][kc], s, vf[2], vf[3]);
              }
            }
          } else {
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
        }
        }  // PV_ACC16
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

    // ---- epilogue (attention_epilogue.cuh), indices recomputed (see block_coords()): row 2·mt + half
    // of the thread is query row 16·mt + 8·half + g of its warp; pair n is channels 8n + 2t, +1 of
    // the pass = O registers [mt][n][2·half + {0, 1}].
    {
      const BlockCoords ke = block_coords<true>(p);
      const int etid = static_cast<int>(tid_x());
      const int ewarp = etid >> 5, eg = (etid & 31) >> 2, et = etid & 3;
      const int ch0 = slice * DVS + 2 * et;
      epilogue<MT, 1, NV, NSL * DVS, false, false>(
          p, ke, etid & 31, ke.i0 + ewarp * RW + eg, ch0, ke.bhk * D_V + slice * DVS + 2 * et, et == 0 && slice == NSL - 1,
          // (ROWSUM_PHAT: every lane holds its rows' whole sums; lane t = 0 alone brings them to the
          // epilogue's quad sum, the others 0, so that the sum is exact)
          [&](int r) { return ROWSUM_PHAT && et != 0 ? 0.f : l[r >> 1][r & 1]; }, [&](int r) { return m[r >> 1][r & 1]; },
          [&](int r, int n, int e) { return o[r >> 1][n][2 * (r & 1) + e]; });
    }
    if (NSL > 1) __syncthreads();  // the next pass refills the stage buffers
  }
  ptx::cp_async_wait_all();
}

}  // namespace attn

extern "C" __global__ void __launch_bounds__(attn::THREADS) sage2_attention_mma(const sage2::dev::AttentionParams p) {
  attn_common::check_block_dim<attn::THREADS>();
  attn::attention(p);
}
