// Quantize op 8 entry, sage2_mask_tiles: the class of every (query block, KV tile) of a tensor
// mask. kernels/family_quantize.cpp (kQuantOps) picks this file for the op; the shared parts are
// quantize_common.cuh and the headers included below.
#pragma once

#include "quantize_common.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 8,
              "quantize_mask_tiles.cuh is the entry of quantize op 8 (kernels/family_quantize.cpp kQuantOps)");


// ---------------------------------------------------------------------------------------------
// sage2_mask_tiles (SAGE2_QUANT_OP 8): CTA = (KV tile x, query block y, mask (batch, head) z) —
// class 0 when no element of the tile inside q_len × kv_len is visible, 1 when every one is
// visible with no additive term (the attention kernel then skips the mask), 2 otherwise.
__device__ __forceinline__ void mask_tiles(const QuantizeParams& p) {
  constexpr int KIND = SAGE2_MASK;
  static_assert(KIND >= 1 && KIND <= 4, "mask_tiles needs a mask kind");
  const i64 kt = blockIdx.x, qb = blockIdx.y, z = blockIdx.z;
  const i64 b = z / p.mask_heads, h = z % p.mask_heads;
  // A mask broadcast over rows (key padding: stride_q = 0) or keys has one row / key to read.
  const int rows = p.mask_stride_q == 0 ? 1 : static_cast<int>(p.q_len - qb * BQ < BQ ? p.q_len - qb * BQ : BQ);
  const int keys = p.mask_stride_k == 0 ? 1 : static_cast<int>(p.kv_len - kt * BK < BK ? p.kv_len - kt * BK : BK);
  const char* base = static_cast<const char*>(p.mask) +
                     (b * p.mask_stride_batch + h * p.mask_stride_head + qb * BQ * p.mask_stride_q +
                      kt * BK * p.mask_stride_k) * mask_elem::size<KIND>();
  // Per thread: any visible, any masked, the first visible term ("same": every visible term equals
  // it, bit for bit; "plain": every visible term is 0), the last visible and first masked key.
  const u32 NINF = 0xff800000u;
  bool any_visible = false, any_masked = false, same = true, tail_same = true;
  u32 first = 0u, tail = 0u;
  bool any_tail = false;
  int last_zero = -1, first_nonzero = keys;  // key indices within the tile
  for (int e = threadIdx.x; e < rows * keys; e += THREADS) {
    const int r = e / keys, c = e % keys;  // consecutive threads: consecutive keys of a row
    u32 t = ptx::f32_bits(mask_elem::term<KIND>(base + r * p.mask_stride_q * mask_elem::size<KIND>(), c,
                                                p.mask_stride_k));
    if (t == 0x80000000u) t = 0u;  // -0 adds nothing, as +0
    if (t == NINF) {
      any_masked = true;
    } else {
      if (!any_visible) first = t;
      same &= t == first && (t & 0x7f800000u) != 0x7f800000u;  // a NaN (or +inf) is never "the same"
      any_visible = true;
    }
    if (t == 0u) {
      last_zero = c > last_zero ? c : last_zero;
    } else {
      if (!any_tail) tail = t;
      tail_same &= t == tail && (t == NINF || (t & 0x7f800000u) != 0x7f800000u);
      any_tail = true;
      first_nonzero = c < first_nonzero ? c : first_nonzero;
    }
  }
  __shared__ int s_last_zero, s_first_nonzero;
  __shared__ u32 s_tail;
  if (threadIdx.x == 0) {
    s_last_zero = -1;
    s_first_nonzero = keys;
    s_tail = NINF;
  }
  __shared__ u32 s_first;
  if (threadIdx.x == 0) s_first = NINF;
  __syncthreads();
  if (any_visible) s_first = first;  // any visible thread's: "same" below compares all of them
  const bool any = __syncthreads_or(any_visible) != 0;
  const bool masked = __syncthreads_or(any_masked) != 0;
  const bool all_same = __syncthreads_and(!any_visible || (same && first == s_first)) != 0;
  if (any_tail) s_tail = tail;
  if (last_zero >= 0) atomicMax(&s_last_zero, last_zero);
  if (first_nonzero < keys) atomicMin(&s_first_nonzero, first_nonzero);
  __syncthreads();
  const bool one_tail = __syncthreads_and(!any_tail || (tail_same && tail == s_tail)) != 0;
  if (threadIdx.x == 0) {
    const i64 at = (z * gridDim.y + qb) * gridDim.x + kt;
    int cls = mask_elem::CLASS_SOME;
    if (!any)
      cls = mask_elem::CLASS_NONE;
    else if (!masked && all_same)
      cls = s_first == 0u ? mask_elem::CLASS_ALL : mask_elem::CLASS_CONST;
    else if (one_tail && p.mask_stride_k != 0 && s_last_zero >= 0 && s_last_zero + 1 == s_first_nonzero &&
             s_first_nonzero < 128 && (s_tail == NINF || p.mask_bias))
      cls = mask_elem::CLASS_PREFIX + s_first_nonzero;  // every row: keys [0, cut) plain, the rest `tail`
    if (cls == mask_elem::CLASS_CONST && !p.mask_bias) cls = mask_elem::CLASS_SOME;
    if (p.mask_bias)
      p.mask_bias[at] = cls == mask_elem::CLASS_CONST ? ptx::bits_f32(s_first)
                                                       : (cls >= mask_elem::CLASS_PREFIX ? ptx::bits_f32(s_tail) : 0.f);
    p.mask_tiles[at] = static_cast<u8>(cls);
  }
}

}  // namespace qz

extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, 1) sage2_mask_tiles(sage2::dev::QuantizeParams p) {
  qz::enter();
  qz::mask_tiles(p);
}
