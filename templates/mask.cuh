// Elements of an attention mask (include/sage2/sage2.hpp MaskRef), shared by the attention
// families (attention_blocks.cuh) and the tile classification (quantize_mask_tiles.cuh, sage2_mask_tiles).
// KIND: 1 bool (nonzero: the key takes part), 2 f16, 3 bf16, 4 f32 (additive: added to the scaled
// score, -inf masks out).
#pragma once

#include "ptx.cuh"
#include "types.cuh"

namespace mask_elem {

// The class of one (query block, KV tile) of a mask (sage2_mask_tiles writes them):
//  NONE  no element visible             ALL    all visible, no additive term
//  SOME  per element                    CONST  all visible with one finite additive term, kept in
//                                              the bias table (log2 units): no element is read
//  PREFIX + n (n < 128): in every row, keys [0, n) of the tile have no term and the others one
//        common term: -inf (masked; bool masks always), or a finite value kept in the bias table
//        (Hugging Face's finfo.min padding) — the boundary tile of key padding, no element is read
constexpr int CLASS_NONE = 0, CLASS_ALL = 1, CLASS_SOME = 2, CLASS_CONST = 3, CLASS_PREFIX = 128;

template <int KIND>
constexpr i64 size() { return KIND == 1 ? 1 : (KIND == 4 ? 4 : 2); }

// The score term of key j of a mask row (byte pointer), in log2 units (value · log2 e, the
// scores' scale): 0 visible without bias, -inf masked out, NaN propagates.
template <int KIND>
__device__ __forceinline__ float term(const char* row, i64 j, i64 stride_k) {
  constexpr float LOG2E = 1.44269504088896340736f;
  if (KIND == 1) return ptx::ld_nc_u8(row + j * stride_k) != 0 ? 0.f : ptx::bits_f32(0xff800000u);
  float v;
  if (KIND == 4) {
    v = ptx::bits_f32(static_cast<u32>(ptx::ld_nc_s32(row + j * stride_k * 4)));
  } else {
    const u32 h = ptx::ld_nc_u16(row + j * stride_k * 2);
    v = KIND == 3 ? ptx::bits_f32(h << 16) : ptx::f16_to_f32(static_cast<u16>(h));
  }
  return v * LOG2E;
}

}  // namespace mask_elem
