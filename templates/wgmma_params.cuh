// Kernel parameters and the shared-memory / register plan of the wgmma attention family
// (templates/attention_wgmma.cuh, sm_90a). Plain C++: included by the NVRTC-compiled device code
// AND by the host (jit/wgmma_shape.hpp), so the launch code and the kernel derive the CTA size,
// the P·V chunking, the TMA boxes and the shared-memory layout from the same constexpr functions.
//
// Plan (one CTA = one block of BQ query rows of one (batch, q head) pair):
//  - `warps` consumer warps = warps/4 consumer warpgroups, each owning 64 consecutive query rows
//    (one wgmma m64 tile; BQ = 16·warps). With warp specialisation (wg_producer_wg()) one more
//    warpgroup, the last one, only issues the copies.
//  - Q̂ up to RB = 128 bytes (head dim 128) stays in registers as wgmma A fragments (RB/2 bytes
//    per thread), loaded once from global memory; wider rows are TMA-loaded once into shared
//    memory (a 64-row tile per consumer warpgroup, same panels and swizzle as K) and QKᵀ reads
//    A from there, leaving the registers to the fp32 O.
//  - Shared memory: `stages` ring buffers of {K tile, V tile}, each filled by TMA copies that
//    complete on the stage's "full" mbarrier; consumers release a stage on its "empty" mbarrier
//    (one arrival per consumer warp). The K scales and ΔS row are read from global memory (bulk
//    copies of them into the stage drew racecheck hazards); each stage still reserves their slots.
//  - K tile: BK rows × RB bytes, stored as RB/panel column panels of [BK][panel] bytes, panel =
//    the widest swizzle span (128/64/32 B) dividing RB, swizzled like the TMA map (atom-aligned).
//  - V tile: D_V channel rows × BK key bytes (the transposed V of the quantize stage = the
//    K-major B operand of P̂·V̂), one panel of BK bytes (BK = 64 or 128 → 64/128 B swizzle).
#pragma once

#include "attention_params.cuh"
#include "types.cuh"

namespace sage2 {
namespace dev {

// Opaque CUtensorMap (128 bytes, 64-byte aligned); the host fills it with cuTensorMapEncodeTiled.
struct alignas(64) TmaDesc {
  u64 opaque[16];
};

constexpr int wg_consumer_groups(int warps) { return warps / 4; }
constexpr bool wg_producer_wg() {
#ifdef SAGE2_WG_WS
  return SAGE2_WG_WS != 0;
#else
  return true;   // default: warp-specialised (a producer warpgroup issues the copies)
#endif
}
constexpr int wg_threads(int warps) { return warps * 32 + (wg_producer_wg() ? 128 : 0); }
// Column panel (bytes) of a K-major 8-bit tile whose rows are `row_bytes` long.
constexpr int wg_panel(int row_bytes) { return row_bytes % 128 == 0 ? 128 : (row_bytes % 64 == 0 ? 64 : 32); }
// P̂·V̂ is issued in chunks of PVN channels (one wgmma width); with two-level accumulation the
// per-tile accumulator holds one chunk (PVN/2 registers), so wide heads use more chunks.
constexpr int wg_pv_chunks(int d_v) {
#ifdef SAGE2_WG_PV_CHUNKS  // experiments only (the host plan assumes the default)
  return SAGE2_WG_PV_CHUNKS;
#else
  return d_v <= 128 ? 1 : (d_v <= 192 ? 2 : 4);
#endif
}
constexpr int wg_pv_n(int d_v) { return d_v / wg_pv_chunks(d_v); }
// Software pipelining inside a consumer warpgroup: the softmax of KV tile j runs while the P̂·V̂
// of tile j−1 is on the tensor cores. Needs one P̂·V̂ chunk (d_v <= 128; the per-tile accumulator
// and the next S tile must fit beside O) and >= 3 stages: tiles j−1 and j are held at once, so
// with 2 stages the producer cannot fetch tile j+1 until P̂·V̂ (j−1) completes (measured on the
// H100 at hd 128, 8K: 2 stages pipelined 512 TOPS vs serial 570; 3 stages 599 vs 561).
// The default where it applies; SAGE2_WG_PIPE=0 in front of the source selects the serial loop
// (experiments: the host plan, which reserves the Q̂ tile for the default, stays valid).
constexpr bool wg_pipelined(int d_v, int stages) {
#ifdef SAGE2_WG_PIPE
  if (SAGE2_WG_PIPE == 0) return false;
#endif
  return wg_pv_chunks(d_v) == 1 && stages >= 3;
}
constexpr int wg_align(int x, int a) { return (x + a - 1) / a * a; }

// Q̂ is read by wgmma from a TMA-loaded shared-memory tile (A from a descriptor) for heads wider
// than 128 bytes (the registers go to O) and in the pipelined loop (its registers go to the second
// S tile and P̂ in flight); otherwise its A fragments stay in registers for the whole KV loop.
constexpr bool wg_q_in_smem(int row_bytes, int d_v, int stages) {
#ifdef SAGE2_WG_Q_SMEM  // experiments only (the host plan assumes the default)
  if (SAGE2_WG_Q_SMEM != 0) return true;
#endif
  return row_bytes > 128 || wg_pipelined(d_v, stages);
}

struct WgSmemLayout {
  int q_off;                         // Q̂ tiles (wg_q_in_smem only): [warpgroup][panel][64][panel]
  int stages_off;                    // stage 0
  int k_off, v_off, ks_off, ds_off;  // inside one stage
  int stage_bytes;                   // one ring-buffer stage (1024-aligned)
  int bar_off;                       // mbarriers: full[stages], empty[stages], q_full
  int total;                         // dynamic shared memory incl. 1024 B of alignment slack
};

constexpr WgSmemLayout wg_smem_layout(int bq, int bk, int row_bytes, int d_v, int stages, bool smooth_q) {
  WgSmemLayout l{};
  l.q_off = 0;
  l.stages_off = wg_q_in_smem(row_bytes, d_v, stages) ? wg_align(bq * row_bytes, 1024) : 0;
  l.k_off = 0;
  l.v_off = wg_align(bk * row_bytes, 1024);
  l.ks_off = l.v_off + wg_align(d_v * bk, 1024);
  l.ds_off = l.ks_off + 16;
  l.stage_bytes = wg_align(l.ds_off + (smooth_q ? bk * 4 : 0), 1024);
  l.bar_off = l.stages_off + stages * l.stage_bytes;
  l.total = l.bar_off + (2 * stages + 1) * 8 + 1024;  // the kernel aligns the dynamic base up to 1024
  return l;
}

// Bytes one stage's copies deliver (the full barrier's transaction count): the K and V tiles (the
// K scales and ΔS are read from global memory; their stage slots are unused).
constexpr int wg_stage_tx_bytes(int bk, int row_bytes, int d_v, bool smooth_q) {
  (void)smooth_q;
  return bk * row_bytes + d_v * bk;
}

struct WgmmaAttentionParams {
  TmaDesc tm_q;        // u8 2-D {row_bytes, B·Hq·q_len_pad}, box {panel, 64}, swizzle = panel
  TmaDesc tm_k;        // u8 2-D {row_bytes, B·Hkv·kv_len_pad}, box {panel, bk}, swizzle = panel
  TmaDesc tm_v;        // u8 2-D {kv_len_pad, B·Hkv·d_v}, box {bk, d_v}, swizzle = bk
  AttentionParams a;   // buffers, outputs, sizes, chunk (same meaning as the mma family)
};

}  // namespace dev
}  // namespace sage2
