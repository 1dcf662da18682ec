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
  __shared__ alignas(16) u8 s_raw[qz::v_smem_bytes<qz::MapS>()];
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
  i64 b, h, bh;
  const i64 len_pad = (p.kv_len + SAGE2_BK - 1) / SAGE2_BK * SAGE2_BK;
  if (!qz::block_bh(p.batch, p.kv_heads, b, h, bh) || blockIdx.x >= len_pad / ROWS) return;
  qz::quantize_v<qz::MapS>(p, s_raw, qz::kv_input(p, true), b, h, blockIdx.x, qz::dense_v_item<ROWS>(p, b, h, blockIdx.x));
}
