// Kernel parameters of the quantize family (templates/quantize_common.cuh lists its entry files).
// Plain C++: included by NVRTC-compiled device code AND by host code (kernels/quantize_shape.hpp), so
// both sides share this one definition. Every entry of the family (sage2_channel_stats, sage2_quantize_q,
// sage2_quantize_k, sage2_quantize_v, sage2_quantize_fused) takes one QuantizeParams by value.
// The fused entry's work-item order (QuantizeSchedule below) is defined here too, once, for the
// kernel and for the host (launch shape, tests).
//
// Shapes and buffer layouts are those of kernels::QuantBuffers (kernels/quant_buffers.hpp); the padded
// sizes (d_qk, row_bytes, d_v, bq, bk, the group tables) are compile-time constants of the
// kernel, the runtime sizes below are the only dynamic ones. The block counts and padded lengths
// are derived inside the kernels (ceil(len / tile)) — they are not passed.
//
// Requirements on the pointers (the runtime's workspace satisfies them: 256-byte aligned):
//  - every output pointer is 16-byte aligned;
//  - inputs may have any alignment and any strides (16-byte vector loads are used when the base
//    pointer and all three strides allow it, scalar loads otherwise); the dim stride is 1.
//  - a buffer a variant does not write may be null (q_mean without smooth_q, q_kbias without
//    smooth_k); the inputs a launch does not read may be null too.
#pragma once

#include "seq_table.cuh"
#include "types.cuh"

namespace sage2 {
namespace dev {

struct QuantizeParams {
  // ---- inputs: fp16 or bf16 (spec.in_dtype), [batch, heads, seq, dim] with element strides
  const void* q;
  const void* k;
  const void* v;
  i64 q_stride_batch, q_stride_head, q_stride_seq;
  i64 k_stride_batch, k_stride_head, k_stride_seq;
  i64 v_stride_batch, v_stride_head, v_stride_seq;

  // ---- problem sizes (q_heads must be a multiple of kv_heads: GQA group = q_heads / kv_heads)
  i64 batch;
  i64 q_heads;
  i64 kv_heads;
  i64 q_len;   // >= 1
  i64 kv_len;  // >= 1

  // ---- outputs (kernels::QuantBuffers; element types as listed there)
  i8* q_codes;     // [B][Hq][q_len_pad][row_bytes]      int8, or int4 packed two per byte
  float* q_scale;  // [B][Hq][q_blocks][q_groups]
  float* q_mean;   // [B][Hq][q_blocks][d_qk]            smooth_q only
  float* q_kbias;  // [B][Hq][q_len_pad]                 smooth_k only
  i8* k_codes;     // [B][Hkv][kv_len_pad][row_bytes]
  float* k_scale;  // [B][Hkv][k_blocks][4]
  float* k_mean;   // [B][Hkv][d_qk]                     zeros when !smooth_k
  float* k_stats;  // [B][Hkv][3][d_qk]                  sum, min, max
  u8* v_codes;     // [B][Hkv][d_v][kv_len_pad]          FP8 E4M3, transposed
  float* v_scale;  // [B][Hkv][d_v]
  float* v_mean;   // [B][Hkv][d_v]                      zeros when !smooth_v
  float* v_stats;  // [B][Hkv][3][d_v]                   sum, min, max

  // ---- non-finite input flags (appended; see kernels/quant_buffers.hpp)
  u8* q_bad;         // [B][Hq][q_len_pad]   1: Q row has a NaN/Inf (quantize_q; padded rows 0)
  i32* k_first_bad;  // [B][Hkv]             first key with a NaN/Inf, INT32_MAX if none (stats)
  i32* v_first_bad;  // [B][Hkv][d_v]        per channel: first key with a NaN/Inf (stats)

  // ---- fused stage only (appended; kernels/quant_buffers.hpp stats_part / sync)
  float* stats_part;  // [B][Hkv][2 (K,V)][stats_chunks][4][d_v]: sum, min, max, first-bad (i32 bits)
  u32* sync;          // [1 + 4·B·Hkv]: work ticket, arrivals per (group, K|V), ready flags; zero at launch
  i64 sched_lag;      // QuantizeSchedule::lag (groups of statistics ahead of the work that needs them)

  // ---- cluster stage only (appended; kernels::quantize_cluster_plan)
  i64 cluster_chunk;  // tokens per CTA of a cluster (a multiple of bk)

  // ---- variable-length calls only (appended; SAGE2_VARLEN, templates/seq_table.cuh). batch =
  // sequences; q_len / kv_len: the tensors' token rows per batch entry (key padding: Nq, Nk).
  const i32* cu_q;      // packed: [batch + 1] (null: key padding)
  const i32* cu_k;      // packed: [batch + 1]
  const i32* kv_lens;   // key padding: [batch]
  SeqEntry* seqs;       // [batch]            written by the first CTA of sage2_channel_stats
  i32* q_map;           // [q_map_len]        sequence of each packed Q block (kNoSeq: none)
  i32* k_map;           // [k_map_len]
  i64 q_map_len, k_map_len;  // packed blocks per head (kernels::QuantBuffers q_blocks / k_blocks)
  i64 total_q, total_k;      // packed: the tensors' token counts
  // Invalid arrays: the table's CTA writes NaN to out [out_batch, q_heads, out_seq, head_dim]
  // (element strides, input dtype) and to lse[0, lse_count).
  void* out;
  i64 out_batch, out_seq, o_stride_batch, o_stride_head, o_stride_seq;
  float* lse;
  i64 lse_count;

  // ---- tensor masks only (appended; SAGE2_MASK, sage2_mask_tiles): the mask's element (b, h, i, j)
  // at element offset b·sb + h·sh + i·sq + j·sk (0: broadcast), and the class table it fills,
  // [mask_batch][mask_heads][q_blocks][k_blocks] bytes (grid z = b · mask_heads + h).
  const void* mask;
  i64 mask_stride_batch, mask_stride_head, mask_stride_q, mask_stride_k;
  u8* mask_tiles;
  i64 mask_heads;
  float* mask_bias;  // additive masks: the CLASS_CONST term of each tile (log2 units), like mask_tiles

  // ---- sampled statistics only (appended; SAGE2_QZ_SAMPLE_TILES > 0, kernels/quant_buffers.hpp)
  float* v_amax;  // [B][Hkv][d_v]  the amax of V's scale (H·A_s, or every key's amax after a fix-up)
  u32* v_over;    // [B][Hkv][d_v]  f32 bits: max |V - μ| of the tiles where a key exceeds H·A_s (0: none;
                  //                in the sync region: zero at launch)
  u32 l2_hints;   // 1: the L2 eviction priorities of the sampled stage (kernels::quantize_l2_hints)
};

// Work items of sage2_quantize_fused, in the order the device counter hands them out. A group g
// is one (batch, kv head); its statistics items are the K chunks then the V chunks of
// stats_chunk tokens; its work items are its K blocks, its V tiles, then the Q blocks of its q
// heads (GQA) in (head, block) order. Rounds interleave them with a lag of `lag` groups:
//   round r (0 <= r < G + lag):  [stats of group r, if r < G]  [work of group r - lag, if >= 0]
// so every work item comes after all statistics items of its group (a CTA holding ticket w only
// waits on tickets < w, which are running: no deadlock whatever the dispatch order), and K/V
// are re-read about `lag` groups after their statistics read them (still in L2).
struct QuantizeSchedule {
  u32 groups;       // G = batch * kv_heads
  u32 lag;          // 1 <= lag <= G
  u32 chunks;       // statistics chunks per (group, K|V)
  u32 k_blocks, v_tiles, q_blocks, q_per_group;
  u32 stats_items() const { return 2u * chunks; }
  u32 work_items() const { return k_blocks + v_tiles + q_per_group * q_blocks; }
  u64 total() const { return static_cast<u64>(groups) * (stats_items() + work_items()); }
};

enum QuantizeItemKind : u32 { kItemStatsK = 0, kItemStatsV = 1, kItemK = 2, kItemV = 3, kItemQ = 4 };
struct QuantizeItem {
  u32 kind;   // QuantizeItemKind
  u32 group;  // (batch, kv head) = (group / kv_heads, group % kv_heads)
  u32 index;  // chunk / K block / V tile; for Q: q head within the group * q_blocks + block
};

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define SAGE2_QZ_HD __device__ __forceinline__
#else
#define SAGE2_QZ_HD inline
#endif

// Ticket → item (ticket < s.total(); 32-bit arithmetic: the host keeps total() < 2^31).
SAGE2_QZ_HD QuantizeItem quantize_item(const QuantizeSchedule& s, u32 t) {
  const u32 S = s.stats_items(), W = s.work_items(), R = S + W;
  const u32 head = s.lag * S;                 // rounds 0 .. lag-1: statistics only
  const u32 mid = (s.groups - s.lag) * R;     // rounds lag .. G-1: both
  u32 g, off;
  bool stats;
  if (t < head) {
    g = t / S; off = t % S; stats = true;
  } else if (t - head < mid) {
    const u32 r = (t - head) / R;
    off = (t - head) % R;
    stats = off < S;
    g = stats ? s.lag + r : r;
    if (!stats) off -= S;
  } else {
    const u32 u = t - head - mid;             // rounds G .. G+lag-1: work only
    g = s.groups - s.lag + u / W; off = u % W; stats = false;
  }
  QuantizeItem it;
  it.group = g;
  if (stats) {
    it.kind = off < s.chunks ? kItemStatsK : kItemStatsV;
    it.index = off < s.chunks ? off : off - s.chunks;
  } else if (off < s.k_blocks) {
    it.kind = kItemK; it.index = off;
  } else if (off < s.k_blocks + s.v_tiles) {
    it.kind = kItemV; it.index = off - s.k_blocks;
  } else {
    it.kind = kItemQ; it.index = off - s.k_blocks - s.v_tiles;
  }
  return it;
}

}  // namespace dev
}  // namespace sage2
