// Quantize op 6 entry, sage2_quantize_cluster: the whole stage in one launch of thread-block
// clusters (sm_90a). kernels/family_quantize.cpp (kQuantOps) picks this file for the op; the
// shared parts are quantize_common.cuh and the headers included below.
#pragma once

#include "quantize_common.cuh"
#include "quantize_item_maps.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 6,
              "quantize_cluster.cuh is the entry of quantize op 6 (kernels/family_quantize.cpp kQuantOps)");

}  // namespace qz

#include "quantize_partials.cuh"
#include "quantize_one_launch.cuh"

namespace qz {

// ---------------------------------------------------------------------------------------------
// The cluster stage (SAGE2_QUANT_OP 6, sm_90): the whole quantize stage in one launch with no
// device counters, no waiting on other CTAs' flags and no memset. One thread-block cluster of C
// CTAs (C = %cluster_nctarank, set at launch: kernels::quantize_cluster_plan) per group g = (batch,
// kv head); rank r owns tokens [r·T, (r+1)·T) (T = p.cluster_chunk, a multiple of BK):
//  1. K and V statistics of its tokens (stats_rows: the fused stage's chunk sums with T tokens
//     per chunk), into its own shared memory;
//  2. cluster barrier; every rank reduces the C partials in rank order (sum left to right from
//     rank 0's, so every rank holds the same bits and the CPU reference follows the formula of
//     kernels/quant_buffers.hpp with chunks of T); rank 0 writes k_stats / v_stats / first-bad flags;
//  3. cluster barrier (the partials may then be overwritten); the K blocks and V tiles of its
//     tokens (their rows are re-read: L2 hits, the same CTA read them in step 1) and every C-th
//     Q block of the group's q heads, all with the statistics from its own shared memory.
// Hardware schedules a cluster's CTAs together, so the barriers cannot deadlock.

constexpr int PART_OFF = (stats_smem_bytes<MapS>() + 15) / 16 * 16;
constexpr int PART_BYTES = 2 * 4 * D_V * 4;  // [K|V][sum, min, max, first-bad][D_V]
constexpr int CLUSTER_SMEM = MaxOf<FUSED_SMEM, PART_OFF + PART_BYTES>::value;
static_assert(CLUSTER_SMEM + 4 * (D_QK + 3 * D_V) + 16 <= 48 * 1024, "cluster quantize exceeds static shared memory");

__device__ __forceinline__ void quantize_cluster(const QuantizeParams& p) {
  __shared__ alignas(16) u8 s_raw[CLUSTER_SMEM];
  __shared__ alignas(16) float s_ksum[D_QK];     // K channel sums (k̄ = sum / kv_len)
  __shared__ alignas(16) float s_vst[3 * D_V];   // V sum, min, max
  __shared__ i32 s_kfb;
  const u32 C = ptx::cluster_nctarank(), rank = ptx::cluster_ctarank();
  const i64 g = static_cast<i64>(ptx::clusterid_x());
  const i64 T = p.cluster_chunk;
  if (g >= p.batch * p.kv_heads) return;  // the whole cluster: no barrier is left waiting
  // A launch without the planned cluster would leave tokens out of the statistics.
  if (T <= 0 || T % BK != 0 || static_cast<i64>(C) * T < p.kv_len) asm volatile("trap;");
  const i64 b = static_cast<i64>(static_cast<u32>(g) / static_cast<u32>(p.kv_heads));
  const i64 h = static_cast<i64>(static_cast<u32>(g) % static_cast<u32>(p.kv_heads));
  const int tid = threadIdx.x;

  // ---- 1. this rank's K and V statistics
  const i64 n0 = static_cast<i64>(rank) * T;
  const i64 n1 = p.kv_len - n0 < T ? p.kv_len : n0 + T;  // n0 >= kv_len: an empty chunk
  float* part = reinterpret_cast<float*>(s_raw + PART_OFF);
  {
    const Input in = make_input(p.k, p.k_stride_batch, p.k_stride_head, p.k_stride_seq);
    stats_rows<MapS>(in, row_ptr(in, b, h, 0), n0, n1 > n0 ? n1 : n0, D_V, s_raw,
                     [&](int s, int c, float v) { part[s * D_V + c] = v; });
  }
  {
    const Input in = make_input(p.v, p.v_stride_batch, p.v_stride_head, p.v_stride_seq);
    stats_rows<MapS>(in, row_ptr(in, b, h, 0), n0, n1 > n0 ? n1 : n0, D_V, s_raw,
                     [&](int s, int c, float v) { part[4 * D_V + s * D_V + c] = v; });
  }
  if (tid == 0) s_kfb = NO_BAD;
  ptx::cluster_arrive_release();
  ptx::cluster_wait_acquire();

  // ---- 2. the group's statistics from every rank's partials, in rank order
  const u32 part_addr = ptx::smem_addr(part);
  constexpr int D_MAX = D_QK > D_V ? D_QK : D_V;
#pragma unroll 1
  for (int c = tid; c < D_MAX; c += THREADS) {
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const int d_out = kv ? D_V : D_QK;
      if (c >= d_out) continue;
      float sum = 0.f, mn = 0.f, mx = 0.f;
      i32 fb = NO_BAD;
      if (c < HD) {
        const u32 a0 = part_addr + static_cast<u32>((kv * 4 * D_V + c) * 4);
        combine_partials(C, [&](u32 rank, int st) {
          return ptx::ld_cluster_f32(ptx::mapa_shared(a0, rank) + static_cast<u32>(st * 4 * D_V));
        }, sum, mn, mx, fb);
      }
      if (kv == 0) {
        s_ksum[c] = sum;
        if (fb != NO_BAD) red_min_shared_s32(ptx::smem_addr(&s_kfb), fb);
      } else {
        s_vst[c] = sum;
        s_vst[D_V + c] = mn;
        s_vst[2 * D_V + c] = mx;
      }
      if (rank == 0) {
        float* out = (kv ? p.v_stats : p.k_stats) + g * 3 * d_out;
        out[c] = sum;
        out[d_out + c] = mn;
        out[2 * d_out + c] = mx;
        if (kv) p.v_first_bad[g * D_V + c] = fb;
      }
    }
  }
  // Every rank has read every partial before any rank overwrites its scratch (step 3).
  ptx::cluster_arrive_release();
  ptx::cluster_wait_acquire();
  if (rank == 0 && tid == 0) p.k_first_bad[g] = s_kfb;

  // ---- 3. this rank's K blocks and V tiles, then its share of the group's Q blocks
  const i64 len_pad = (p.kv_len + BK - 1) / BK * BK;
  const i64 t0 = static_cast<i64>(rank) * T;
  const i64 t1 = len_pad - t0 < T ? len_pad : t0 + T;
#pragma unroll 1
  for (i64 blk = t0 / BK; blk < t1 / BK; ++blk) {
    quantize_qk<false, MapK>(p, s_raw, kv_input(p, false), b, h, blk, dense_qk_item<false, BK>(p, b, h, blk), s_ksum);
    __syncthreads();  // the next item rewrites the scratch
  }
#pragma unroll 1
  for (i64 tile = t0 / MapV::ROWS; tile < t1 / MapV::ROWS; ++tile) {
    quantize_v<MapV>(p, s_raw, kv_input(p, true), b, h, tile, dense_v_item<MapV::ROWS>(p, b, h, tile), s_vst);
    __syncthreads();
  }
  const u32 qpg = static_cast<u32>(p.q_heads) / static_cast<u32>(p.kv_heads);
  const u32 q_blocks = static_cast<u32>((p.q_len + BQ - 1) / BQ);
#pragma unroll 1
  for (u32 i = rank; i < qpg * q_blocks; i += C) {
    const i64 hq = h * qpg + i / q_blocks, blk = i % q_blocks;
    quantize_qk<true, MapQ>(p, s_raw, q_input(p), b, hq, blk, dense_qk_item<true, BQ>(p, b, hq, blk), s_ksum);
    __syncthreads();
  }
}

}  // namespace qz

extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_cluster(sage2::dev::QuantizeParams p) {
  qz::enter();
  qz::quantize_cluster(p);
}
