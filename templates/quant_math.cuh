// The float ops of the quantization contract (kernels/quant_buffers.hpp) that more than one kernel
// performs: the quantize kernels (quantize_*.cuh) and the attention kernels that quantize Q
// themselves (attention_wgmma.cuh with SAGE2_Q_IN_KERNEL). One definition, so that a Q group
// quantized inside the attention kernel gets the codes and scale the quantize_q kernel gives it.
#pragma once

#include "ptx.cuh"
#include "types.cuh"

namespace quant_math {

constexpr float FLT_MAX_ = 3.402823466e+38f;

__device__ __forceinline__ bool finite_positive(float a) { return a > 0.f && a <= FLT_MAX_; }

// Q/K code: t = x * inv; NaN → 0; clamp to [-R, R]; round half to even.
template <int R>
__device__ __forceinline__ i32 quant_int(float x, float inv) {
  float t = x * inv;
  t = (t != t) ? 0.f : t;
  t = ptx::min_f32(ptx::max_f32(t, -static_cast<float>(R)), static_cast<float>(R));
  return ptx::rint_s32(t);
}

// quant_int for a code of a group whose inv = group_inv<R>(amax), amax the group's own maximum of
// |x|, when that inv is finite (0 included). Then x·inv is NaN (x NaN or ±Inf: amax is not finite,
// inv = 0) or |x·inv| <= R·(1 + 2^-23) < R + 0.5: the NaN test and the clamp change nothing and
// cvt.rni alone gives quant_int's code (PTX converts NaN to 0). An infinite inv (a positive amax
// below R / FLT_MAX) needs quant_int itself. Callers branch per group on group_inv_finite.
__device__ __forceinline__ bool group_inv_finite(float inv) { return inv <= FLT_MAX_; }
__device__ __forceinline__ i32 quant_int_finite_inv(float x, float inv) { return ptx::rint_s32(x * inv); }
// The same code in the low byte of the result, by full-rate float adds instead of a conversion
// (cvt.rni issues at a quarter of the FP32 rate): t = x·inv rounded, then t + 1.5·2^23 rounds t to
// an integer, ties to even as cvt.rni does, and leaves it in the low mantissa bits (|t| < 2^22 puts
// the sum in [2^23, 2^24), where the spacing is 1): byte 0 is the code's two's-complement byte.
// Only for a finite x of the group (|x| <= amax): x NaN or ±Inf would not give 0 here.
__device__ __forceinline__ u32 code_byte_finite(float x, float inv) {
  return ptx::f32_bits(ptx::add_rn(ptx::mul_rn(x, inv), 12582912.f));
}

// The low bytes of four 32-bit values as one word (byte e = v[e] & 0xff): three byte permutes.
__device__ __forceinline__ u32 pack_low_bytes(i32 v0, i32 v1, i32 v2, i32 v3) {
  const u32 lo = ptx::prmt(static_cast<u32>(v0), static_cast<u32>(v1), 0x0040u);  // v0.b0, v1.b0 in bytes 0, 1
  const u32 hi = ptx::prmt(static_cast<u32>(v2), static_cast<u32>(v3), 0x0040u);
  return ptx::prmt(lo, hi, 0x5410u);
}

// A group's scale and inverse from its amax: scale = amax / R; inv = R / amax for a finite
// positive amax, else 0 (every code of the group is then 0).
template <int R>
__device__ __forceinline__ float group_inv(float amax) {
  return finite_positive(amax) ? ptx::div_rn(static_cast<float>(R), amax) : 0.f;
}
template <int R>
__device__ __forceinline__ float group_scale(float amax) {
  return ptx::div_rn(amax, static_cast<float>(R));
}

__device__ __forceinline__ bool nonfinite(float x) { return (ptx::f32_bits(x) & 0x7f800000u) == 0x7f800000u; }

// Whether any of the two 16-bit values packed in `w` is a NaN/Inf, on the bits: for each half h,
// (h & EXP) + EXP_LSB carries into the half's top bit exactly when its exponent is all ones (and
// never out of the half). The result is nonzero (bit 15 or 31) when one is; OR it over words.
template <bool BF16>
__device__ __forceinline__ u32 nonfinite_bits(u32 w) {
  constexpr u32 EXP = BF16 ? 0x7f807f80u : 0x7c007c00u;
  constexpr u32 LSB = BF16 ? 0x00800080u : 0x04000400u;
  return ((w & EXP) + LSB) & 0x80008000u;
}

template <bool BF16>
__device__ __forceinline__ void unpack2(u32 w, float& lo, float& hi) {
  if (BF16)
    ptx::unpack_bf16x2(w, lo, hi);
  else
    ptx::unpack_f16x2(w, lo, hi);
}

}  // namespace quant_math
