// Kernel parameters and the shared-memory / register plan of the wgmma attention family
// (templates/attention_wgmma.cuh, sm_90a). Plain C++: included by the NVRTC-compiled device code
// AND by the host (jit/family_wgmma.cpp), so the launch code and the kernel derive the CTA size,
// the P·V chunking, the TMA boxes and the shared-memory layout from the same constexpr functions.
//
// Plan (one CTA = one block of BQ query rows of one (batch, q head) pair):
//  - `warps` consumer warps = warps/4 consumer warpgroups, each owning 64 consecutive query rows
//    (one wgmma m64 tile; BQ = 16·warps). With two consumer warpgroups (wg_producer_wg()) one
//    more warpgroup, the last one, only issues the copies.
//  - Q̂ up to RB = 128 bytes (head dim 128) stays in registers as wgmma A fragments (RB/2 bytes
//    per thread), loaded once from global memory; wider rows are TMA-loaded once into shared
//    memory (a 64-row tile per consumer warpgroup, same panels and swizzle as K) and QKᵀ reads
//    A from there, leaving the registers to the fp32 O.
//  - Shared memory: `stages` ring buffers of {K tile, V tile}, each filled by TMA copies that
//    complete on the stage's "full" mbarrier; consumers release a stage on its "empty" mbarrier
//    (one arrival per consumer warp). The K scales and ΔS row are read from global memory (bulk
//    copies of them into the stage drew racecheck hazards). One warpgroup at d_v 128 with 2 stages
//    takes 73 KB: 3 CTAs per SM fit the 228 KB.
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
// Two designs, chosen by the tile (the host plan and the kernel read the same rules):
//  - warps 8: a producer warpgroup issues the copies for two consumer warpgroups (setmaxnreg:
//    240 registers per consumer thread), one CTA per SM;
//  - warps 4: one warpgroup computes and its thread 0 issues the copies, no producer; several
//    CTAs per SM (wg_min_ctas) hide each other's latency, and 64-row blocks fill the SMs at short
//    sequences.
constexpr bool wg_producer_wg(int warps) { return warps >= 8; }
constexpr int wg_threads(int warps) { return warps * 32 + (wg_producer_wg(warps) ? 128 : 0); }
// Column panel (bytes) of a K-major 8-bit tile whose rows are `row_bytes` long.
constexpr int wg_panel(int row_bytes) { return row_bytes % 128 == 0 ? 128 : (row_bytes % 64 == 0 ? 64 : 32); }
// P̂·V̂ is issued in chunks of PVN channels (one wgmma width); with two-level accumulation the
// per-tile accumulator holds one chunk (PVN/2 registers), so wide heads use more chunks.
// The producer design's consumers (240 registers, O at d_v 256 taking 128 of them) use chunks of
// 32 channels above d_v 192, where 64-channel chunks spilled.
constexpr int wg_pv_chunks(int d_v, int warps) {
  return d_v <= 128 ? 1 : (d_v <= 192 ? 2 : (wg_producer_wg(warps) ? d_v / 32 : 4));
}
constexpr int wg_pv_n(int d_v, int warps) { return d_v / wg_pv_chunks(d_v, warps); }
// Wide heads (several chunks) in the serial loop: chunk c+1's P̂·V̂ is issued before chunk c's
// two-level accumulator is added into O, so the tensor cores are not drained once per chunk. Its
// second accumulator takes the registers of the S tile, dead once P̂ is packed. Off for the
// producer design's 32-channel chunks above d_v 192: the configuration measured there (session 11
// r3, r4); with it ptxas spilled 8 instead of 12 bytes at hd 256, not timed.
constexpr bool wg_pv_ring(int d_v, int warps) {
  return wg_pv_chunks(d_v, warps) > 1 && !(wg_producer_wg(warps) && d_v > 192);
}
// Software pipelining inside a consumer warpgroup: the softmax of KV tile j runs while the P̂·V̂
// of tile j−1 is on the tensor cores. Needs one P̂·V̂ chunk (d_v <= 128; the per-tile accumulator
// and the next S tile must fit beside O) and >= 3 stages: tiles j−1 and j are held at once, so
// with 2 stages the copies of tile j+1 wait for P̂·V̂ (j−1) (measured on the H100 at hd 128, 8K,
// producer design: 2 stages pipelined 512 TOPS vs serial 570; 3 stages 599 vs 561). So the stage
// count selects the loop: >= 3 pipelined, <= 2 serial. The producer design's consumers have 240
// registers: with smooth-Q (the ΔS loads) the pipelined loop spilled there, so it runs serial.
constexpr bool wg_pipelined(int d_v, int stages, int warps, bool smooth_q) {
  return wg_pv_chunks(d_v, warps) == 1 && stages >= 3 && !(smooth_q && wg_producer_wg(warps));
}
// CTAs per SM the registers are planned for (__launch_bounds__ minimum): the producer design
// takes the SM; one warpgroup keeps S, O, the tile's P̂·V̂ accumulator and P̂ — about 170
// registers serial at d_v <= 128 (3 CTAs; 2 with smooth-Q, whose ΔS loads spilled at 168),
// 230 pipelined or at d_v 256 (2 CTAs); d_v <= 64 leaves room for 4.
// Tensor masks (mask) keep these budgets although their tiles spill a little there (tests/cpu/
// plan/test_mask.cpp): one CTA fewer per SM without spills measured slower (bench/NOTES.md,
// "Tensor masks": key padding at 2K, 503 µs at 2 CTAs vs 429 µs at 3 with spills); only the
// 4 CTAs of d_v <= 64 (128 registers) become 3, like smooth-Q's.
constexpr int wg_min_ctas(int warps, int d_v, int stages, bool smooth_q, bool mask = false) {
  if (wg_producer_wg(warps)) return 1;
  if (wg_pipelined(d_v, stages, warps, smooth_q)) return 2;
  if (d_v <= 64) return smooth_q || mask ? 3 : 4;
  return d_v <= 128 && !smooth_q ? 3 : 2;
}
constexpr int wg_align(int x, int a) { return (x + a - 1) / a * a; }

// Q̂ is read by wgmma from a TMA-loaded shared-memory tile (A from a descriptor) for heads wider
// than 128 bytes (the registers go to O), in the pipelined loop (its registers go to the second
// S tile and P̂ in flight) and without a producer (the register budget of several CTAs per SM);
// otherwise its A fragments stay in registers for the whole KV loop.
constexpr bool wg_q_in_smem(int row_bytes, int d_v, int stages, int warps, bool smooth_q) {
  return row_bytes > 128 || wg_pipelined(d_v, stages, warps, smooth_q) || !wg_producer_wg(warps);
}

struct WgSmemLayout {
  int q_off;                         // Q̂ tiles (wg_q_in_smem only): [warpgroup][panel][64][panel]
  int stages_off;                    // stage 0
  int k_off, v_off;                  // inside one stage
  int stage_bytes;                   // one ring-buffer stage (1024-aligned)
  int bar_off;                       // mbarriers: full[stages], empty[stages], q_full
  int total;                         // dynamic shared memory incl. 1024 B of alignment slack
};

constexpr WgSmemLayout wg_smem_layout(int bq, int bk, int row_bytes, int d_v, int stages, bool smooth_q, int warps) {
  WgSmemLayout l{};
  l.q_off = 0;
  l.stages_off = wg_q_in_smem(row_bytes, d_v, stages, warps, smooth_q) ? wg_align(bq * row_bytes, 1024) : 0;
  l.k_off = 0;
  l.v_off = wg_align(bk * row_bytes, 1024);
  // (the K scales and ΔS are read from global memory: nothing of them in the stage)
  l.stage_bytes = l.v_off + wg_align(d_v * bk, 1024);
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
