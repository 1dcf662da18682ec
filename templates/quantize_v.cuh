// Quantize op 4 entry, sage2_quantize_v: one V tile per CTA. kernels/family_quantize.cpp
// (kQuantOps) names this file for the op; the shared parts are quantize_common.cuh and the
// headers included below.
#pragma once

#include "quantize_common.cuh"
#include "quantize_v_body.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 4,
              "quantize_v.cuh is the entry of quantize op 4 (kernels/family_quantize.cpp kQuantOps)");
// One thread mapping for every row of this kernel (SAGE2_QZ_ROWS/_TPR/_CPT/_CHUNKS).
using MapS = Map<SAGE2_QZ_ROWS, SAGE2_QZ_TPR, SAGE2_QZ_CPT, SAGE2_QZ_CHUNKS>;

}  // namespace qz

// Entry point (name = kernels::KernelSpec::entry_name()). Split path: (b, h, block) from the grid
// (kernels::quantize_launch_shape); surplus CTAs exit.
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_quantize_v(sage2::dev::QuantizeParams p) {
  qz::enter();
  __shared__ alignas(16) u8 s_raw[SAGE2_QZ_STAGE ? qz::v_staged_smem_bytes<qz::MapS>() : qz::v_smem_bytes<qz::MapS>()];
  constexpr int ROWS = qz::MapS::ROWS;
  if (SAGE2_VARLEN) {  // x = packed V tile (BK / ROWS per KV block), y = kv head
    constexpr i64 TPB = SAGE2_BK / ROWS;
    const i64 X = blockIdx.x, h = blockIdx.y;
    if (X >= p.k_map_len * TPB || h >= p.kv_heads) return;
    const i32 s = p.k_map[X / TPB];
    if (s == sage2::dev::kNoSeq) return;
    const sage2::dev::SeqEntry e = p.seqs[s];
    qz::SeqItem si;
    si.len = si.kv_len = e.k_len;
    si.n0 = e.k_start;
    si.v_pitch = p.k_map_len * SAGE2_BK;
    si.v_row0 = h * qz::D_V;
    si.out_blk = X * ROWS;
    qz::quantize_v<qz::MapS>(p, s_raw, qz::kv_input(p, true), s, h, X - e.k_blk * TPB, si);
    return;
  }
  const i64 len_pad = (p.kv_len + SAGE2_BK - 1) / SAGE2_BK * SAGE2_BK;
#if SAGE2_QZ_STAGE
  // Dense V, persistent: tiles item = blockIdx.x, + gridDim.x, ... of item = (b·H + h)·ntiles +
  // tile, staged as quantize_k's blocks; a tile's codes are transposed in its own staging area.
  static_assert(!SAGE2_VARLEN && qz::MapS::ITEMS * qz::MapS::CPT <= 8, "only the dense V kernel with preloaded rows is staged");
  constexpr u32 AREA = qz::MapS::ITEMS * qz::MapS::CPT * SAGE2_QZ_THREADS * 16;
  static_assert(2 * AREA <= SAGE2_QZ_DYN_SMEM, "quantize_v: the launch's staging areas are too small");
  static_assert(ROWS * qz::D_V * qz::V_BYTES <= AREA, "quantize_v: a tile's codes must fit its staging area");
  extern __shared__ __align__(16) u8 s_stage[];
  const u32 ntiles = static_cast<u32>(len_pad / ROWS), heads = static_cast<u32>(p.kv_heads);
  const u32 total = static_cast<u32>(p.batch) * heads * ntiles;
  const u32 stage0 = ptx::smem_addr(s_stage) + threadIdx.x * 16u;
  auto stage_tile = [&](u32 item, u32 area) {
    const u32 bh = item / ntiles;
    qz::v_stage_rows<qz::MapS>(qz::kv_input(p, true), bh / heads, bh % heads, 0, p.kv_len, item - bh * ntiles, stage0 + area * AREA);
  };
  if (blockIdx.x < total) stage_tile(blockIdx.x, 0);
  u32 area = 0;
#pragma unroll 1
  for (u32 item = blockIdx.x; item < total; item += gridDim.x, area ^= 1u) {
    if (item + gridDim.x < total)
      stage_tile(item + gridDim.x, area ^ 1u);
    else
      ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    const u32 bh = item / ntiles;
    const i64 b = bh / heads, h = bh % heads, tile = item - bh * ntiles;
    qz::quantize_v<qz::MapS>(p, s_raw, qz::kv_input(p, true), b, h, tile, qz::dense_v_item<ROWS>(p, b, h, tile), nullptr,
                             stage0 + area * AREA, s_stage + area * AREA);
    __syncthreads();  // the next tile reuses the constants and this staging area
  }
#else
  i64 b, h, bh;
  if (!qz::block_bh(p.batch, p.kv_heads, b, h, bh) || blockIdx.x >= len_pad / ROWS) return;
  qz::quantize_v<qz::MapS>(p, s_raw, qz::kv_input(p, true), b, h, blockIdx.x, qz::dense_v_item<ROWS>(p, b, h, blockIdx.x));
#endif
}
