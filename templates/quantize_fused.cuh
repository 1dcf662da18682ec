// Quantize op 5 entry, sage2_quantize_fused: the whole stage in one launch: statistics chunks, then
// Q, K and V items taken from a device work counter. kernels/family_quantize.cpp (kQuantOps) picks
// this file for the op; the shared parts are quantize_common.cuh and the headers included below.
#pragma once

#include "quantize_common.cuh"
#include "quantize_item_maps.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 5,
              "quantize_fused.cuh is the entry of quantize op 5 (kernels/family_quantize.cpp kQuantOps)");

}  // namespace qz

#include "quantize_stats_chunk.cuh"
#include "quantize_one_launch.cuh"

namespace qz {

// The fused stage's sync words: quantize_stats_chunk.cuh (wait_ready).
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
      stats_item(p, s_raw, s.groups, g, b, h, it.kind == kItemStatsV ? 1 : 0, it.index, s.chunks);
      break;
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

}  // namespace qz

// (3 CTAs per SM at 256 threads, <= 80 registers, spills the cached Q/K rows: left at 1.)
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, 1) sage2_quantize_fused(sage2::dev::QuantizeParams p) {
  qz::enter();
  qz::quantize_fused(p);
}
