// Quantize op 7 entry, sage2_quantize_kv: K and V of a dense call in one cooperative launch that
// reads them from memory once. kernels/family_quantize.cpp (kQuantOps) picks this file for the op;
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
// CTA resident at once: kernels::LaunchShape::cooperative) that reads them from memory once.
// Unit u = statistics chunk c of group g (g = 2·bh + kv, kv 0: K, 1: V; C = ceil(kv_len / STATS_T)
// chunks per group, u = g·C + c); CTAs take them in rounds of whole groups. For each unit a CTA
//  1. copies the chunk's rows into its dynamic shared memory (cp.async: no registers held);
//  2. takes the chunk's statistics from there (stats_chunk: the split path's sum order, so the
//     same bits) and arrives; the group's last arriver writes k_stats / v_stats and sets the
//     group's ready flag (sync[1 + 2·BH + g], the fused stage's layout);
//  3. waits for the flag and writes the chunk's K blocks or V tiles from the same rows.
// Rounds hold whole groups (floor(grid / C) of them; CTAs past their units idle that round), so a
// CTA waits only on units that are running beside it: no deadlock. When C > grid (a sequence of
// more chunks than resident CTAs) the kernel runs two phases instead: every unit's statistics, a
// grid barrier (sync[0]), then every unit's codes, copying each chunk twice. The runtime zeroes
// sync before the launch.
constexpr int KV_PITCH = CH_IN * 16;  // bytes of one row in shared memory
static_assert(STATS_T % BK == 0 && STATS_T % MapV::ROWS == 0, "a unit is whole K blocks and V tiles");
constexpr int KV_SCRATCH = MaxOf<MaxOf<stats_smem_bytes<MapS>() + 16, v_smem_bytes<MapV>()>::value,
                                 qk_smem_bytes<false, MapK>()>::value;
static_assert(KV_SCRATCH <= 48 * 1024, "one-pass quantize scratch exceeds static shared memory");

// The unit's rows [c0, c0 + n) of (b, h) into `rows` (KV_PITCH bytes each; rows >= n are not
// written: the bodies never read past `valid`). Ends after a barrier: the copy is visible.
__device__ __forceinline__ void copy_unit(const Input& g, u8* rows, i64 b, i64 h, i64 c0, int n) {
  const u16* base = row_ptr(g, b, h, c0);
  const u32 s0 = ptx::smem_addr(rows);
#pragma unroll 4
  for (int it = threadIdx.x; it < n * CH_IN; it += THREADS) {
    const int r = it / CH_IN, j = it - r * CH_IN;
    const u16* src = base + static_cast<i64>(r) * g.sn;
    const u32 dst = s0 + static_cast<u32>(r * KV_PITCH + j * 16);
    if (VEC_HD && g.vec)
      ptx::cp_async_16(dst, src + 8 * j);
    else
      ptx::st_shared_v4(dst, load_chunk_global(g, src, j));
  }
  ptx::cp_async_commit();
  ptx::cp_async_wait_all();
  __syncthreads();
}

// The Input the bodies read the unit through: row n of the sequence at rows + (n - c0)·KV_PITCH
// (b and h select nothing: the copy holds one (b, h)).
__device__ __forceinline__ Input smem_input(const u8* rows, i64 c0) {
  Input in;
  in.sn = KV_PITCH / 2;
  in.base = reinterpret_cast<const u16*>(rows) - c0 * in.sn;
  in.sb = in.sh = 0;
  in.vec = true;
  return in;
}

struct KvUnit {
  i64 b, h, bh, c0;
  u32 chunk;
  bool is_v;
  int n;  // rows of the unit (the last chunk of a group may be short)
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
  k.n = static_cast<int>(p.kv_len - k.c0 < STATS_T ? p.kv_len - k.c0 : STATS_T);
  return k;
}

// Step 2: the unit's statistics; the group's last arriver publishes them (ready flag).
__device__ __forceinline__ void kv_unit_stats(const QuantizeParams& p, u8* scratch, const u8* rows, const KvUnit& k,
                                              u32 C) {
  const int kv = k.is_v ? 1 : 0;
  float* part_g = p.stats_part + (k.bh * 2 + kv) * static_cast<i64>(C) * 4 * D_V;
  if (stats_chunk(p, scratch, smem_input(rows, k.c0), k.is_v, k.b, k.h, k.bh, 0, p.kv_len, part_g, k.chunk, C,
                  p.sync + 1 + 2 * k.bh + kv) &&
      threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    ptx::st_release_gpu_u32(p.sync + 1 + 2 * (p.batch * p.kv_heads) + 2 * k.bh + kv, 1u);
  }
}

// Step 3: the unit's K blocks (k_mean by block 0) or V tiles, up to the padded length.
__device__ __forceinline__ void kv_unit_codes(const QuantizeParams& p, u8* scratch, const u8* rows, const KvUnit& k) {
  const Input in = smem_input(rows, k.c0);
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

__device__ __forceinline__ void quantize_kv(const QuantizeParams& p, u8* rows) {
  __shared__ alignas(16) u8 s_scratch[KV_SCRATCH];
  const i64 C = (p.kv_len + STATS_T - 1) / STATS_T;
  const i64 groups = 2 * p.batch * p.kv_heads;
  const i64 units = groups * C;
  const i64 G = gridDim.x;
  const u32* ready = p.sync + 1 + 2 * (p.batch * p.kv_heads);
  if (C <= G) {
    // Rounds of whole groups: round r holds groups [r·per, (r+1)·per), CTA x its unit x (idle
    // past per·C), so a CTA waits only on units that run beside its own.
    const i64 per = G / C;
#pragma unroll 1
    for (i64 g0 = 0; g0 < groups; g0 += per) {
      const i64 u = g0 * C + blockIdx.x;
      if (blockIdx.x >= per * C || u >= units) continue;
      const KvUnit k = kv_unit(p, u, C);
      copy_unit(kv_input(p, k.is_v), rows, k.b, k.h, k.c0, k.n);
      kv_unit_stats(p, s_scratch, rows, k, static_cast<u32>(C));
      if (k.is_v || SAGE2_SMOOTH_K) wait_ready(ready + 2 * k.bh + (k.is_v ? 1 : 0));  // (K reads k̄ only)
      kv_unit_codes(p, s_scratch, rows, k);
    }
    return;
  }
  // Two phases (C > grid).
#pragma unroll 1
  for (i64 u = blockIdx.x; u < units; u += G) {
    const KvUnit k = kv_unit(p, u, C);
    copy_unit(kv_input(p, k.is_v), rows, k.b, k.h, k.c0, k.n);
    kv_unit_stats(p, s_scratch, rows, k, static_cast<u32>(C));
    __syncthreads();  // the rows are read before the next copy
  }
  if (threadIdx.x == 0) {  // grid barrier: every CTA is resident (cooperative launch)
    ptx::fence_acq_rel_gpu();
    ptx::atom_add_acq_rel_gpu_u32(p.sync, 1u);
    u32 ns = 32;
#pragma unroll 1
    while (ptx::ld_acquire_gpu_u32(p.sync) < gridDim.x) {
      ptx::nanosleep_u32(ns);
      ns = ns < 1024u ? 2u * ns : 1024u;
    }
  }
  __syncthreads();
#pragma unroll 1
  for (i64 u = blockIdx.x; u < units; u += G) {
    const KvUnit k = kv_unit(p, u, C);
    copy_unit(kv_input(p, k.is_v), rows, k.b, k.h, k.c0, k.n);
    kv_unit_codes(p, s_scratch, rows, k);
  }
}

}  // namespace qz

extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_kv(sage2::dev::QuantizeParams p) {
  qz::enter();
  extern __shared__ __align__(16) u8 s_rows[];  // one unit's rows: kernels::kv_quantize_chunk_bytes
  qz::quantize_kv(p, s_rows);
}
