// Kernel parameters and shared-memory plan of the direct (unquantized) small-Nq attention path
// (templates/attention_direct.cuh: the split kernel and the merge kernel). Plain C++: included by
// the NVRTC-compiled device code AND by the host (kernels/direct.cpp), so the launch code and the
// kernel derive the CTA size, the warp roles and the shared-memory layout from the same constexpr
// functions and cannot disagree.
//
// Rows: the R = q_len · group query rows that share one kv head (group = Hq / Hkv), row
// r = i · group + g for query i of q head kv_head · group + g. A CTA of the split kernel takes
// `bq` consecutive rows (a row block, 16 per row warp) of one (batch, kv head), one split of
// the keys and one part of the output channels (direct_o_parts: 1 up to head dim 256); its
// warps are `bq / 16` row warps × `key_warps` key warps: key warp w of a KV tile of `bk` keys
// handles keys [w · bk / key_warps, (w + 1) · bk / key_warps). Grid x = part + parts · (row block
// + row_blocks · split).
//
// Partials (partials > 1): every (split, key warp) writes, for each of its rows r < R, the
// running max m (log2 domain: max_j s_ij · sm_scale · log2 e; -inf when it saw no visible key),
// the row sum l = Σ_j 2^(s_ij·c − m) and the unnormalised O = Σ_j 2^(s_ij·c − m) · V_j (fp32,
// head_dim channels) at
//   part_ml[(((b · Hkv + kv_head) · partials + p) · R + r) · 2 + {0: m, 1: l}]
//   part_o [(((b · Hkv + kv_head) · partials + p) · R + r) · head_dim + c]
// with p = split · key_warps + key warp. The merge kernel combines them per output row. With
// partials == 1 (one split, one key warp) the split kernel writes O and the LSE itself.
#pragma once

#include "types.cuh"

namespace sage2 {
namespace dev {

struct DirectParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;      // [B][Hq][Nq] (natural log) when the spec returns it
  float* part_o;   // partials > 1: see above
  float* part_ml;
  i64 q_sb, q_sh, q_sn;  // element strides (the last dim is contiguous)
  i64 k_sb, k_sh, k_sn;
  i64 v_sb, v_sh, v_sn;
  i64 o_sb, o_sh, o_sn;
  i32 batch, q_heads, kv_heads, group;
  i32 q_len, kv_len;
  i32 rows;             // R = q_len · group
  i32 row_blocks;       // ceil(R / bq)
  i32 splits;           // key splits
  i32 tiles_per_split;  // KV tiles of bk keys per split (the last split may have fewer)
  i32 kv_limit;         // keys [0, kv_limit) are visible to some row (causal: min(kv_len, q_len + offset))
  i32 causal_offset;    // causal: key j is visible to query i iff j <= i + causal_offset
  i32 partials;         // splits · key warps; 1: the split kernel writes O (and LSE) itself
  u32 vec_mask;         // bit 0: q, 1: k, 2: v rows start 16-byte aligned (cp.async); else element loads
  float scale_log2;     // sm_scale · log2(e)
};

// Head dims are padded to 16 (the mma k and n granularity); channels past head_dim read as 0.
constexpr int direct_d_pad(int head_dim) { return (head_dim + 15) / 16 * 16; }
// Shared-memory rows (Q, K and V, one token each) are padded by 16 bytes: pitch / 16 odd, so the
// 8 row addresses of an ldmatrix fall into distinct bank groups.
constexpr int direct_pitch(int d_pad) { return d_pad * 2 + 16; }
// Output channels per CTA: above 256 padded channels O's fp32 accumulator (128 registers per
// thread at 256) is split over `direct_o_parts` CTAs, each computing the same scores and its own
// `direct_o_part_dim` channels (a multiple of 16; the last part may run past d_pad and skips them).
constexpr int direct_o_parts(int d_pad) { return (d_pad + 255) / 256; }
constexpr int direct_o_part_dim(int d_pad) { return (d_pad / direct_o_parts(d_pad) + 15) / 16 * 16; }
constexpr int direct_row_warps(int bq) { return bq / 16; }
constexpr int direct_key_warps(int bq, int warps) { return warps / direct_row_warps(bq); }
constexpr int direct_threads(int warps) { return warps * 32; }

struct DirectSmem {
  int q_off;        // Q tile: bq rows
  int stages_off;   // stage s at stages_off + s · stage_bytes
  int stage_bytes;  // K tile (bk rows) then V tile (bk rows)
  int v_off;        // inside a stage
  int bad_off;      // d_pad int32: smallest key of the tile with a non-finite V[., c] (causal diagonal tiles)
  int total;
};
constexpr DirectSmem direct_smem(int bq, int bk, int head_dim, int stages) {
  DirectSmem s{};
  const int pitch = direct_pitch(direct_d_pad(head_dim));
  s.q_off = 0;
  s.stages_off = bq * pitch;
  s.stage_bytes = 2 * bk * pitch;
  s.v_off = bk * pitch;
  s.bad_off = s.stages_off + stages * s.stage_bytes;
  s.total = s.bad_off + direct_d_pad(head_dim) * 4;
  return s;
}

// The merge kernel: one warp per output row, this many warps per CTA.
constexpr int direct_merge_warps() { return 4; }

}  // namespace dev
}  // namespace sage2
