// Kernel parameters and shared-memory/register plan of the mma.sync attention family
// (templates/attention_mma.cuh) and of the ΔS kernel (templates/delta_s.cuh). Plain C++: included
// by the NVRTC-compiled device code AND by host code (kernels/family_mma.cpp, kernels/attention_shape.hpp), so the launch code
// and the kernel derive the CTA size, the V-channel slicing and the shared-memory layout from the
// same constexpr functions and cannot disagree.
//
// Buffers are those of kernels::QuantBuffers (kernels/quant_buffers.hpp); padded sizes (d_qk, row_bytes,
// d_v, bq, bk) are compile-time constants of the kernel. All pointers into the quantize workspace
// are 256-byte aligned (the runtime's layout), which the kernel relies on for 16-byte cp.async.
//
// Chunking (bounded ΔS workspace): one launch covers the rectangle of (batch·q-head) pairs
// [bh_offset, bh_offset + bh_count) × query blocks [qb_offset, qb_offset + qb_count). ΔS of the
// chunk is [bh_count][qb_count][kv_len_pad] fp32, indexed by the pair and block *relative* to the
// chunk. Without smooth-Q there is no ΔS and one chunk covers everything.
#pragma once

#include "seq_table.cuh"
#include "types.cuh"

namespace sage2 {
namespace dev {

// ---------------------------------------------------------------------------------------------
// Plan of one attention kernel (both sides).
//  - each warp owns bq/warps consecutive query rows = attn_m_tiles() tiles of 16 rows;
//  - the fp32 O accumulator of a thread holds attn_v_slice() channels per m tile
//    (m_tiles * slice/8 * 4 registers, at most 128); wider heads are processed in
//    attn_v_slices() passes over the KV sequence (S recomputed identically in each pass);
//  - shared memory: Q tile once, then `stages` ring buffers of {K tile, V slice tile, K scales,
//    ΔS row}. Rows are padded by 16 bytes (pitch/16 odd: ldmatrix reads are conflict-free).
constexpr int attn_threads(int warps) { return warps * 32; }
constexpr int attn_m_tiles(int bq, int warps) { return bq / warps / 16; }
// O registers per thread: m_tiles · slice / 2. 16-row warps keep at most 96 (a single 16-row
// tile leaves room for the QK/softmax working set without spills up to head dim 192), wider warps
// 128 (32 rows: head dims <= 128 in one pass).
constexpr int attn_max_slice(int m_tiles) { return m_tiles == 1 ? 192 : 256 / m_tiles / 16 * 16; }
constexpr int attn_v_slices(int d_v, int m_tiles) {
  return (d_v + attn_max_slice(m_tiles) - 1) / attn_max_slice(m_tiles);
}
// Channels per pass: a multiple of 16 (pairs of n8 tiles); the last pass may extend past d_v
// (those V rows are zero-filled and never written out).
constexpr int attn_v_slice(int d_v, int m_tiles) {
  return ((d_v + attn_v_slices(d_v, m_tiles) - 1) / attn_v_slices(d_v, m_tiles) + 15) / 16 * 16;
}
// m tiles of a warp that share each K and V fragment read from shared memory: all of them when
// their fp32 O and int32 S accumulators fit 128 registers (half the ldmatrix per mma of one tile,
// as the reference's 32-row warps), else 1: two tiles at head dim 128 and bk 64 spill on
// sm_80/sm_89 (ptxas, 255 registers; scripts/sass_census.py).
constexpr int attn_m_group(int m_tiles, int v_slice, int bk) {
  return m_tiles * (v_slice / 8 + bk / 8) * 4 <= 128 ? m_tiles : 1;
}
constexpr int attn_qk_pitch(int row_bytes) { return row_bytes + 16; }
// V̂ rows of bk codes of v_bytes each (1: FP8 e4m3, 2: FP16 P̃V), padded by 16 bytes.
constexpr int attn_v_pitch(int bk, int v_bytes = 1) { return bk * v_bytes + 16; }

struct AttnSmemLayout {
  int q_off, k_off, v_off, ks_off, ds_off;  // offsets inside one stage (q_off: from the base)
  int stage_bytes;                          // one ring-buffer stage
  int stages_off;                           // where stage 0 starts
  int total;                                // dynamic shared memory of the kernel
};

constexpr AttnSmemLayout attn_smem_layout(int bq, int bk, int warps, int row_bytes, int d_v, int stages,
                                          bool smooth_q, int v_bytes = 1) {
  AttnSmemLayout l{};
  l.q_off = 0;
  l.stages_off = bq * attn_qk_pitch(row_bytes);
  l.k_off = 0;
  l.v_off = bk * attn_qk_pitch(row_bytes);
  l.ks_off = l.v_off + attn_v_slice(d_v, attn_m_tiles(bq, warps)) * attn_v_pitch(bk, v_bytes);
  l.ds_off = l.ks_off + 16;
  l.stage_bytes = l.ds_off + (smooth_q ? bk * 4 : 0);
  l.total = l.stages_off + stages * l.stage_bytes;
  return l;
}

// Division of a numerator n < 2^31 by a launch constant 1 <= d < 2^31 as one wide multiply and a
// shift (Granlund and Montgomery): with l = ceil(log2 d) and m = ceil(2^(31+l) / d) (< 2^32),
// n / d = (n·m) >> (31 + l) exactly, because m·d − 2^(31+l) < d <= 2^l. The mma family recomputes
// its block coordinates for every KV tile (kept in registers they spilled on some archs), and the
// divisions by the head counts were a tenth of its loop's instructions (bench/NOTES.md).
struct DivU31 {
  u32 m, s;
};
constexpr DivU31 div_u31_of(u32 d) {
  u32 l = 0;
  while ((static_cast<u64>(1) << l) < d) ++l;
  const u64 num = static_cast<u64>(1) << (31 + l);
  return DivU31{static_cast<u32>((num + d - 1) / d), 31 + l};
}
constexpr u32 div_u31(u32 n, DivU31 f) { return static_cast<u32>((static_cast<u64>(n) * f.m) >> f.s); }

struct AttentionParams {
  // ---- quantize-stage buffers (kernels::QuantBuffers layout)
  const i8* q_codes;      // [B][Hq][q_len_pad][row_bytes]
  const float* q_scale;   // [B][Hq][q_blocks][q_groups]
  const float* q_kbias;   // [B][Hq][q_len_pad]            smooth_k (LSE only)
  const i8* k_codes;      // [B][Hkv][kv_len_pad][row_bytes]
  const float* k_scale;   // [B][Hkv][k_blocks][4]
  const u8* v_codes;      // [B][Hkv][d_v][kv_len_pad]     e4m3 (pv_fp16: fp16), transposed
  const float* v_scale;   // [B][Hkv][d_v]
  const float* v_mean;    // [B][Hkv][d_v]                 smooth_v
  const float* delta_s;   // [bh_count][qb_count][kv_len_pad]   smooth_q (this chunk)

  // ---- outputs
  void* out;              // [B, Hq, q_len, head_dim] in out_dtype, element strides, dim stride 1
  i64 o_stride_batch, o_stride_head, o_stride_seq;
  float* lse;             // [B][Hq][q_len] natural log (return_lse only)

  // ---- sizes
  i64 batch, q_heads, kv_heads, q_len, kv_len;
  i64 bh_offset, bh_count;  // chunk: (batch·q-head) pairs
  i64 qb_offset, qb_count;  // chunk: query blocks

  float sm_scale;         // fp32(sm_scale)
  float c2;               // fp32(sm_scale) · fp32(log2 e)

  // ---- non-finite input flags of the quantize stage (appended; read by the epilogue only)
  const u8* q_bad;         // [B][Hq][q_len_pad]   Q row has a NaN/Inf
  const i32* k_first_bad;  // [B][Hkv]             first key with a NaN/Inf (INT32_MAX: none)
  const i32* v_first_bad;  // [B][Hkv][d_v]        per channel: first key with a NaN/Inf

  // ---- variable-length calls only (SAGE2_VARLEN; templates/seq_table.cuh). The grid is then
  // x = packed query blocks (q_map_len), y = q heads; batch = sequences; q_len / kv_len are
  // bounds only, every length comes from the table. Per-token buffers are [H][packed rows].
  const SeqEntry* seqs;    // [B]
  const i32* q_map;        // [q_map_len] sequence of each packed query block, kNoSeq past the last
  i64 q_map_len, k_map_len;  // packed Q / KV blocks per head (the buffers' bounds)
  i64 lse_stride_batch, lse_stride_head;  // LSE index: b·sb + h·sh + (q_start + row)

  // ---- tensor masks only (SAGE2_MASK; attention_blocks.cuh "Tensor masks")
  const void* mask;        // element (b, h, i, j) at b·sb + h·sh + i·sq + j·sk (element strides, 0: broadcast)
  i64 mask_stride_batch, mask_stride_head, mask_stride_q, mask_stride_k;
  const u8* mask_tiles;    // class of each (query block, KV tile): mask.cuh CLASS_*
  i64 mask_tiles_stride_batch, mask_tiles_stride_head;  // per (b, h) class table [q_blocks][k_blocks]; 0: shared
  const float* mask_bias;  // additive masks: a CLASS_CONST tile's term (log2 units), indexed like mask_tiles

  // ---- Q quantized by the attention kernel (SAGE2_Q_IN_KERNEL): the caller's Q (in_dtype) at
  // element strides (varlen: row q_start + i of batch entry b, stride_batch 0 when packed, like
  // the output), and k̄ for the LSE's q·k̄ (smooth_k; written by quantize_k before the launch).
  const void* q_in;
  i64 q_stride_batch, q_stride_head, q_stride_seq;
  const float* k_mean;     // [B][Hkv][row_bytes]

  // ---- the block coordinates' divisions (DivU31): by q_heads, and by q_heads / kv_heads
  DivU31 q_heads_div, group_div;
  // ---- dense causal launches: the order CTAs start in (attention_blocks.cuh block_coords;
  // kernels::causal_band_pairs). band_pairs 0: x = query block (reversed), y = pair. Else the
  // linear block index x + y·qb_count walks bands of band_pairs pairs (the last band the rest),
  // each from its longest query blocks to its shortest across the band's pairs.
  u32 band_pairs;
};

// ---------------------------------------------------------------------------------------------
// ΔS kernel: ΔS[bh - bh_offset][qb - qb_offset][j] = Σ_c q̄[bh][qb][c] · (float(K[b][hk][j][c]) − k̄[c])
// for keys j < kv_len (0 for the padded keys up to kv_len_pad). CTA tile: DS_KEYS keys ×
// DS_QBLOCKS query blocks of one pair; DS_THREADS threads.
constexpr int ds_threads() { return 256; }
constexpr int ds_keys() { return 64; }
constexpr int ds_qblocks() { return 32; }

struct DeltaSParams {
  const void* k;          // input K (fp16/bf16) [B, Hkv, kv_len, head_dim], element strides
  i64 k_stride_batch, k_stride_head, k_stride_seq;
  const float* q_mean;    // [B][Hq][q_blocks][d_qk]
  const float* k_mean;    // [B][Hkv][d_qk]   (zeros without smooth_k)
  float* delta_s;         // [bh_count][qb_count][kv_len_pad]
  i64 d_qk;               // row length of q_mean / k_mean (the ATTENTION's padded Q/K head dim:
                          // the ΔS spec is canonical over qk_bits, its SAGE2_D_QK is not it)
  i64 batch, q_heads, kv_heads, q_len, kv_len;
  i64 bh_offset, bh_count;
  i64 qb_offset, qb_count;
};

}  // namespace dev
}  // namespace sage2
