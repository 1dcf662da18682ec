// Quantize op 2 / 3 entry, sage2_quantize_q / sage2_quantize_k: one Q block or one K block per CTA.
// kernels/family_quantize.cpp (kQuantOps) picks this file for the op; the shared parts are
// quantize_common.cuh and the headers included below.
#pragma once

#include "quantize_common.cuh"
#include "quantize_qk_body.cuh"
#if SAGE2_QUANT_OP == 3
#include "quantize_v_body.cuh"  // (sampled statistics: the V fix-up of the head, v_fixup_head)
#endif

namespace qz {

static_assert(SAGE2_QUANT_OP == 2 || SAGE2_QUANT_OP == 3,
              "quantize_qk.cuh is the entry of quantize ops 2 and 3 (kernels/family_quantize.cpp kQuantOps)");
// One thread mapping for every row of this kernel (SAGE2_QZ_ROWS/_TPR/_CPT/_CHUNKS).
using MapS = Map<SAGE2_QZ_ROWS, SAGE2_QZ_TPR, SAGE2_QZ_CPT, SAGE2_QZ_CHUNKS>;

}  // namespace qz

// Entry point (name = kernels::KernelSpec::entry_name()). Split path: (b, h, block) from the grid
// (kernels::quantize_launch_shape); surplus CTAs exit.
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS)
#if SAGE2_QUANT_OP == 2
sage2_quantize_q(sage2::dev::QuantizeParams p) {
#else
sage2_quantize_k(sage2::dev::QuantizeParams p) {
#endif
  constexpr bool IS_Q = SAGE2_QUANT_OP == 2;
  qz::enter();
  __shared__ alignas(16) u8 s_raw[qz::qk_smem_bytes<IS_Q, qz::MapS>()];
  constexpr int rows = IS_Q ? SAGE2_BQ : SAGE2_BK;
  if (SAGE2_VARLEN) {  // x = packed block, y = head
    const i64 X = blockIdx.x, h = blockIdx.y;
    const i32 s = (IS_Q ? p.q_map : p.k_map)[X];
    if (X >= (IS_Q ? p.q_map_len : p.k_map_len) || h >= (IS_Q ? p.q_heads : p.kv_heads) || s == sage2::dev::kNoSeq) return;
    const sage2::dev::SeqEntry e = p.seqs[s];
    qz::SeqItem si;
    si.len = IS_Q ? e.q_len : e.k_len;
    si.kv_len = e.k_len;
    si.n0 = IS_Q ? e.q_start : e.k_start;
    si.out_blk = h * (IS_Q ? p.q_map_len : p.k_map_len) + X;
    si.v_row0 = si.v_pitch = 0;
    qz::quantize_qk<IS_Q, qz::MapS>(p, s_raw, IS_Q ? qz::q_input(p) : qz::kv_input(p, false), s, h,
                                    X - (IS_Q ? e.q_blk : e.k_blk), si);
    return;
  }
  i64 b, h, bh;
  const i64 len = IS_Q ? p.q_len : p.kv_len;
  if (!qz::block_bh(p.batch, IS_Q ? p.q_heads : p.kv_heads, b, h, bh) || blockIdx.x >= (len + rows - 1) / rows) return;
  qz::quantize_qk<IS_Q, qz::MapS>(p, s_raw, IS_Q ? qz::q_input(p) : qz::kv_input(p, false), b, h, blockIdx.x,
                                  qz::dense_qk_item<IS_Q, rows>(p, b, h, blockIdx.x));
#if SAGE2_QUANT_OP == 3
  // Sampled statistics: quantize_v ran before this kernel (plan::quantize_ops), and wait_previous
  // made its codes and overflow maxima visible; block 0 of each head fixes its V channels.
  if (qz::SAMPLE_TILES && blockIdx.x == 0) qz::v_fixup_head(p, qz::kv_input(p, true), b, h);
#endif
}
