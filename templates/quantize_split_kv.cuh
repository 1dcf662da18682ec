// Quantize op 9 entry, sage2_quantize_split_kv: the sampled split stage's V tiles and K blocks in one
// launch after channel_stats. kernels/family_quantize.cpp (kQuantOps) picks this file for the op;
// the shared parts are quantize_common.cuh and the headers included below.
#pragma once

#include "quantize_common.cuh"
#include "quantize_qk_body.cuh"
#include "quantize_v_body.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 9,
              "quantize_split_kv.cuh is the entry of quantize op 9 (kernels/family_quantize.cpp kQuantOps)");
static_assert(SAMPLE_TILES != 0 && !SAGE2_VARLEN, "quantize_split_kv: the sampled split stage of dense calls");
// Each item kind's thread mapping at the launch's one CTA size (kernels::split_kv_config).
using MapK = Map<SAGE2_QZ_K_ROWS, SAGE2_QZ_K_TPR, SAGE2_QZ_K_CPT, SAGE2_QZ_K_CHUNKS>;
using MapV = Map<SAGE2_QZ_V_ROWS, SAGE2_QZ_V_TPR, SAGE2_QZ_V_CPT, SAGE2_QZ_V_CHUNKS>;
constexpr int SPLIT_KV_SMEM =
    qk_smem_bytes<false, MapK>() > v_smem_bytes<MapV>() ? qk_smem_bytes<false, MapK>() : v_smem_bytes<MapV>();

// After its codes, a V tile arrives on its head's count (sync[1 + 2G + bh], zero at launch, the
// split path's unused ready-flag words: kernels/quant_buffers.hpp); the last of the head's tiles
// runs V's fix-up (v_fixup_head). Its codes, overflow maxima and tile 0's constants are released by
// every tile's barrier + thread 0's fence and acq_rel add, and acquired by the last one's.
__device__ __forceinline__ void v_tile_arrive(const QuantizeParams& p, u8* smem, i64 b, i64 h, i64 bh, u32 tiles) {
  u32* s_last = reinterpret_cast<u32*>(smem);
  __syncthreads();  // every thread's codes and maxima written; the tile's scratch free
  if (threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    const u32 before = ptx::atom_add_acq_rel_gpu_u32(p.sync + 1 + 2 * p.batch * p.kv_heads + bh, 1u);
    *s_last = before + 1u == tiles ? 1u : 0u;
  }
  __syncthreads();
  if (*s_last != 0u) v_fixup_head(p, kv_input(p, true), b, h);
}

}  // namespace qz

// Entry point (name = kernels::KernelSpec::entry_name()): x < V tiles of a head: V tile x; then K
// block x - V tiles ((b, h) from y, z: kernels::quantize_launch_shape); surplus CTAs exit. V first:
// the fix-up's chain starts from the V tiles, and V's kernel ran first in the two-kernel stage too.
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS)
    sage2_quantize_split_kv(sage2::dev::QuantizeParams p) {
  qz::enter();
  __shared__ alignas(16) u8 s_raw[qz::SPLIT_KV_SMEM];
  i64 b, h, bh;
  const i64 k_blocks = (p.kv_len + SAGE2_BK - 1) / SAGE2_BK;
  const i64 v_tiles = k_blocks * SAGE2_BK / qz::MapV::ROWS;
  if (!qz::block_bh(p.batch, p.kv_heads, b, h, bh) || blockIdx.x >= v_tiles + k_blocks) return;
  const i64 x = blockIdx.x;
  if (x < v_tiles) {
    qz::quantize_v<qz::MapV>(p, s_raw, qz::kv_input(p, true), b, h, x, qz::dense_v_item<qz::MapV::ROWS>(p, b, h, x));
    qz::v_tile_arrive(p, s_raw, b, h, bh, static_cast<u32>(v_tiles));
  } else {
    qz::quantize_qk<false, qz::MapK>(p, s_raw, qz::kv_input(p, false), b, h, x - v_tiles,
                                     qz::dense_qk_item<false, SAGE2_BK>(p, b, h, x - v_tiles));
  }
}
