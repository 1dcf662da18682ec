// Quantize op 7 entry, sage2_quantize_kv: K and V of a dense call in one cooperative launch that
// reads them from DRAM once. kernels/family_quantize.cpp (kQuantOps) picks this file for the op;
// the shared parts are quantize_common.cuh and the headers included below.
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
// sage2_quantize_kv (SAGE2_QUANT_OP 7): K and V of a dense call in one cooperative launch (every
// CTA resident at once: kernels::LaunchShape::cooperative), each row read from DRAM once.
// Unit u = statistics chunk c of group g (g = 2·bh + kv, kv 0: K, 1: V; C = ceil(kv_len / STATS_T)
// chunks per group, u = g·C + c). CTA x takes units u_i = x + i·G (G = gridDim.x), so that step i
// of the grid covers units [i·G, (i+1)·G). At step i a CTA
//  1. takes the statistics of u_i (stats_chunk: channel_stats's walk, ring and sum order, so the
//     same bits) and arrives; the group's last arriver writes k_stats / v_stats and sets the
//     group's ready flag (sync[1 + 2·BH + g], the fused stage's layout);
//  2. waits for the ready flag of u_{i-L}'s group and writes u_{i-L}'s K blocks or V tiles with
//     the split kernels' bodies, whose loads find the rows in L2: step i-L read them, and the
//     grid reads L·G units in between (L = 1: about 25 MiB at head dim 128 on an H200).
// The lag L = ceil((C - 1) / G) steps: a group's C consecutive units lie in steps floor(u / G) ..
// floor((u + C - 1) / G) <= floor(u / G) + L, so at step i every unit of u_{i-L}'s group took its
// statistics at a step <= i. No deadlock: every CTA takes step i's statistics before it waits at
// step i, and that wait needs only statistics of steps <= i (by induction over i, every wait
// ends). L = 0 when a group is one unit (its codes follow its own statistics); L = 1 whenever C <=
// G + 1; longer groups wait longer, and their rows may have left L2 (then read twice, still right).
// The runtime zeroes sync before the launch.
constexpr int KV_SCRATCH = MaxOf<v_smem_bytes<MapV>(), qk_smem_bytes<false, MapK>()>::value;
static_assert(STATS_T % BK == 0 && STATS_T % MapV::ROWS == 0, "a unit is whole K blocks and V tiles");
static_assert(KV_SCRATCH <= SAGE2_QZ_KV_SCRATCH,
              "the bodies' scratch exceeds what kernels::kv_quantize_config reserves beside the statistics ring");
static_assert(stats_smem_bytes<MapS>() <= SAGE2_QZ_DYN_SMEM, "quantize_kv: the launch's shared memory is too small");

struct KvUnit {
  i64 b, h, bh, c0;
  u32 chunk;
  bool is_v;
};
__device__ __forceinline__ KvUnit kv_unit(const QuantizeParams& p, i64 u, i64 C) {
  KvUnit k;
  const i64 g = u / C;
  k.chunk = static_cast<u32>(u - g * C);
  k.bh = g >> 1;
  k.is_v = (g & 1) != 0;
  k.b = k.bh / p.kv_heads;
  k.h = k.bh - k.b * p.kv_heads;
  k.c0 = static_cast<i64>(k.chunk) * STATS_T;
  return k;
}

// Step 1: the unit's statistics; the group's last arriver publishes them (ready flag).
__device__ __forceinline__ void kv_unit_stats(const QuantizeParams& p, u8* smem, const KvUnit& k, u32 C) {
  const int kv = k.is_v ? 1 : 0;
  float* part_g = p.stats_part + (k.bh * 2 + kv) * static_cast<i64>(C) * 4 * D_V;
  if (stats_chunk(p, smem, kv_input(p, k.is_v), k.is_v, k.b, k.h, k.bh, 0, p.kv_len, part_g, k.chunk, C,
                  p.sync + 1 + 2 * k.bh + kv) &&
      threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    ptx::st_release_gpu_u32(p.sync + 1 + 2 * (p.batch * p.kv_heads) + 2 * k.bh + kv, 1u);
  }
}

// Step 2: the unit's K blocks (k_mean by block 0) or V tiles, up to the padded length.
__device__ __forceinline__ void kv_unit_codes(const QuantizeParams& p, u8* scratch, const KvUnit& k) {
  const Input in = kv_input(p, k.is_v);
  const i64 len_pad = (p.kv_len + BK - 1) / BK * BK;
  const i64 t1 = len_pad - k.c0 < STATS_T ? len_pad : k.c0 + STATS_T;
  if (!k.is_v) {
#pragma unroll 1
    for (i64 blk = k.c0 / BK; blk < t1 / BK; ++blk) {
      quantize_qk<false, MapK>(p, scratch, in, k.b, k.h, blk, dense_qk_item<false, BK>(p, k.b, k.h, blk));
      __syncthreads();  // the next block rewrites the scratch
    }
  } else {
#pragma unroll 1
    for (i64 tile = k.c0 / MapV::ROWS; tile < t1 / MapV::ROWS; ++tile) {
      quantize_v<MapV>(p, scratch, in, k.b, k.h, tile, dense_v_item<MapV::ROWS>(p, k.b, k.h, tile));
      __syncthreads();
    }
  }
}

__device__ __forceinline__ void quantize_kv(const QuantizeParams& p, u8* s_stats) {
  __shared__ alignas(16) u8 s_scratch[KV_SCRATCH];
  const i64 C = (p.kv_len + STATS_T - 1) / STATS_T;
  const i64 units = 2 * p.batch * p.kv_heads * C;
  const i64 G = gridDim.x, x = blockIdx.x;
  const i64 lag = C > 1 ? (C + G - 2) / G : 0;
  const i64 mine = x < units ? (units - 1 - x) / G + 1 : 0;  // units of this CTA
  const u32* ready = p.sync + 1 + 2 * (p.batch * p.kv_heads);
#pragma unroll 1
  for (i64 i = 0; i < mine + lag; ++i) {
    if (i < mine) kv_unit_stats(p, s_stats, kv_unit(p, x + i * G, C), static_cast<u32>(C));
    if (i >= lag) {
      const KvUnit k = kv_unit(p, x + (i - lag) * G, C);
      if (k.is_v || SAGE2_SMOOTH_K) wait_ready(ready + 2 * k.bh + (k.is_v ? 1 : 0));  // (K reads k̄ only)
      kv_unit_codes(p, s_scratch, k);
    }
  }
}

}  // namespace qz

extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_kv(sage2::dev::QuantizeParams p) {
  qz::enter();
  // The statistics walk's ring and reduction buffer (kernels::kv_quantize_config sizes it beside
  // the bodies' static scratch; the launch gives SAGE2_QZ_DYN_SMEM bytes).
  extern __shared__ __align__(16) u8 s_dyn[];
  qz::quantize_kv(p, s_dyn);
}
