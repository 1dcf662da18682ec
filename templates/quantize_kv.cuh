// Quantize op 7 entry, sage2_quantize_kv: K and V of a dense call in one launch whose codes re-read
// the rows from L2. kernels/family_quantize.cpp (kQuantOps) picks this file for the op; the shared
// parts are quantize_common.cuh and the headers included below.
#pragma once

#include "quantize_common.cuh"
#include "quantize_item_maps.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 7,
              "quantize_kv.cuh is the entry of quantize op 7 (kernels/family_quantize.cpp kQuantOps)");

}  // namespace qz

#include "quantize_stats_chunk.cuh"
#include "quantize_one_launch.cuh"

namespace qz {

// ---------------------------------------------------------------------------------------------
// sage2_quantize_kv (SAGE2_QUANT_OP 7): one item per CTA, taken from a device counter in the fused
// stage's order without Q items (QuantizeSchedule, templates/quantize_params.cuh): the statistics
// chunks of group r, then the K blocks and V tiles of group r - lag. So a group's K and V are
// re-read lag groups (about kernels::kQuantizeLagBytes) after its statistics read them, from L2,
// and a K or V item waits only on statistics items holding earlier tickets, which are running: no
// deadlock, whatever order the CTAs start in. The items are the split kernels' (channel_stats's
// walk with its ring and sum order: the same bits; quantize_k's and quantize_v's bodies and V
// tile). The runtime zeroes sync before the launch (the fused stage's layout: quantize_stats_chunk.cuh).
static_assert(stats_smem_bytes<MapS>() <= SAGE2_QZ_DYN_SMEM && v_smem_bytes<MapV>() <= SAGE2_QZ_DYN_SMEM &&
                  qk_smem_bytes<false, MapK>() <= SAGE2_QZ_DYN_SMEM,
              "quantize_kv: the launch's shared memory (kernels::kv_quantize_config) is smaller than an item's");

__device__ __forceinline__ void quantize_kv(const QuantizeParams& p, u8* smem) {
  __shared__ u32 s_ticket;
  if (threadIdx.x == 0) s_ticket = ptx::atom_add_relaxed_gpu_u32(p.sync, 1u);
  __syncthreads();
  QuantizeSchedule s;
  s.groups = static_cast<u32>(p.batch * p.kv_heads);
  s.lag = static_cast<u32>(p.sched_lag);
  s.chunks = static_cast<u32>((p.kv_len + STATS_T - 1) / STATS_T);
  s.k_blocks = static_cast<u32>((p.kv_len + BK - 1) / BK);
  s.v_tiles = static_cast<u32>((p.kv_len + BK - 1) / BK * BK / MapV::ROWS);
  s.q_blocks = s.q_per_group = 0;
  const u32 ticket = s_ticket;
  if (static_cast<u64>(ticket) >= s.total()) return;  // the grid is exactly total(); defensive
  const QuantizeItem it = quantize_item(s, ticket);
  const i64 g = it.group;
  const i64 b = static_cast<i64>(it.group / static_cast<u32>(p.kv_heads));
  const i64 h = static_cast<i64>(it.group % static_cast<u32>(p.kv_heads));
  const u32* ready = p.sync + 1 + 2 * static_cast<i64>(s.groups) + 2 * g;  // [0] K, [1] V
  if (it.kind == kItemStatsK || it.kind == kItemStatsV) {
    stats_item(p, smem, s.groups, g, b, h, it.kind == kItemStatsV ? 1 : 0, it.index, s.chunks);
  } else if (it.kind == kItemK) {
    if (SAGE2_SMOOTH_K) wait_ready(ready);  // k̄ (k_first_bad is not read here)
    quantize_qk<false, MapK>(p, smem, kv_input(p, false), b, h, it.index, dense_qk_item<false, BK>(p, b, h, it.index));
  } else {
    wait_ready(ready + 1);  // μ and the per-channel scale
    quantize_v<MapV>(p, smem, kv_input(p, true), b, h, it.index, dense_v_item<MapV::ROWS>(p, b, h, it.index));
  }
}

}  // namespace qz

extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_kv(sage2::dev::QuantizeParams p) {
  qz::enter();
  // One item's shared memory: the statistics walk's ring and reduction buffer, or a K block's or
  // V tile's scratch (kernels::kv_quantize_config; the launch gives SAGE2_QZ_DYN_SMEM bytes).
  extern __shared__ __align__(16) u8 s_dyn[];
  qz::quantize_kv(p, s_dyn);
}
