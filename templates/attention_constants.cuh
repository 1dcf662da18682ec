// The kernel spec as the attention families see it: the preamble's SAGE2_* values that both
// families (attention_mma.cuh, attention_wgmma.cuh) specialise on, as constants of attn_common,
// plus the contract constants of include/sage2/reference.hpp. Family-specific values (fragment
// counts, shared-memory layouts) stay in the family files.
#pragma once

#include "types.cuh"

#if !defined(SAGE2_FAMILY) || (SAGE2_FAMILY != 2 && SAGE2_FAMILY != 3)
#error "attention_constants.cuh is specialised by the preamble of an attention family (attn_mma, attn_wgmma)"
#endif

namespace attn_common {

constexpr int HD = SAGE2_HEAD_DIM;      // original head dim
constexpr int RB = SAGE2_ROW_BYTES;     // bytes of one quantized Q/K row
constexpr int D_V = SAGE2_D_V;          // padded V head dim
constexpr int BQ = SAGE2_BQ;
constexpr int BK = SAGE2_BK;
constexpr int WARPS = SAGE2_WARPS;
constexpr int STAGES = SAGE2_STAGES;
constexpr bool SMOOTH_Q = SAGE2_SMOOTH_Q != 0;
constexpr bool SMOOTH_K = SAGE2_SMOOTH_K != 0;
constexpr bool SMOOTH_V = SAGE2_SMOOTH_V != 0;
constexpr bool TWO_LEVEL = SAGE2_TWO_LEVEL_ACCUM != 0;
constexpr bool RETURN_LSE = SAGE2_RETURN_LSE != 0;
constexpr int CAUSAL = SAGE2_CAUSAL;  // 0 none, 1 top-left, 2 bottom-right
constexpr bool VARLEN = SAGE2_VARLEN != 0;  // sequences of their own lengths (templates/seq_table.cuh)
// A tensor mask (attention_blocks.cuh "Tensor masks"): 0 none, 1 bool, 2 f16, 3 bf16, 4 f32 additive.
constexpr int MASK = SAGE2_MASK;
constexpr bool IN_BF16 = SAGE2_IN_BF16 != 0;
// Q quantized by the attention kernel itself from the caller's Q (KernelSpec::q_in_kernel; the
// wgmma family only): no Q̂ buffers, no q_bad / q_kbias from the quantize stage.
constexpr bool Q_IN_KERNEL = SAGE2_Q_IN_KERNEL != 0;
constexpr bool OUT_BF16 = SAGE2_OUT_BF16 != 0;
constexpr bool OUT_F32 = SAGE2_OUT_F32 != 0;
// P̃V in FP16 (P̂ = fp16(P̃), V̂ fp16, m16n8k16 with fp32 accumulation) instead of FP8 e4m3.
constexpr bool PV_FP16 = SAGE2_PV_FP16 != 0;
// P̃V accumulated in fp16 inside a KV tile (KernelSpec::pv_acc16): f16-accumulator mma over
// segments of ACC16_KEYS keys, each converted and added into the fp32 tile sum.
constexpr bool PV_ACC16 = SAGE2_PV_ACC16 != 0;
constexpr int ACC16_KEYS = 64;  // kernels::kPvAcc16Keys
// log2 of P̃'s static scale p_scale: log2(448) for E4M3 (448·P̃ = exp2(s - (m - log2 448)), the scale
// folded into the exponent), 0 for FP16 (P̃ <= 1 is in fp16's range as it is)
constexpr float LOG2_P_SCALE = PV_FP16 ? 0.f : 8.80735492205760410744f;
constexpr float LN2 = 0.693147180559945309417f;

static_assert(STAGES >= 1 && STAGES <= 4, "1..4 pipeline stages");
static_assert(SAGE2_Q_GROUPS == WARPS * 8, "one Q scale group per (warp, row % 8)");

// True when the preamble's per-thread group table (kernels::quant_layout, what the quantize kernels
// used) equals the group the kernel's fragments read for each entry.
template <int N, class F>
constexpr bool groups_match(const int (&table)[N], F group_of) {
  for (int i = 0; i < N; ++i)
    if (table[i] != group_of(i)) return false;
  return true;
}

}  // namespace attn_common
