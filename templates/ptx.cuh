// Inline-PTX wrappers used by every kernel family. Self-contained: no CUDA toolkit header, only
// NVRTC builtins (threadIdx, __syncthreads, ...). Everything lives in namespace `ptx`.
//
// Conventions
//  - Shared-memory operands are 32-bit shared-window addresses (see smem_addr()).
//  - Packed pairs: the element named `lo` lands in bits [0, 16) (or [0, 8) for FP8 pairs), `hi`
//    above it — i.e. memory order on a little-endian machine. Note that PTX's two-source cvt
//    forms (cvt.*x2.f32 d, a, b) put `a` in the UPPER half; the wrappers below pass (hi, lo).
//  - mma fragments are arrays of 32-bit registers exactly as the PTX ISA's "Matrix Fragments"
//    tables list them (a0..a3, b0..b1, c0..c3); the wrappers do not reorder anything.
//  - Requirements: sm_80+ for everything except the e4m3 instructions (sm_89+).
#pragma once

#include "types.cuh"

#ifndef SAGE2_DEVICE_INLINE
#define SAGE2_DEVICE_INLINE __device__ __forceinline__
#endif

namespace ptx {

struct alignas(16) u32x4 {
  u32 x, y, z, w;
};
struct alignas(8) u32x2 {
  u32 x, y;
};

// ---------------------------------------------------------------------------------------------
// An opaque copy: the compilers cannot see through it, so what is computed from it is neither
// hoisted out of a loop nor merged with an earlier computation of the same value.
SAGE2_DEVICE_INLINE u32 opaque(u32 x) {
  asm volatile("mov.b32 %0, %0;" : "+r"(x));
  return x;
}

// Programmatic dependent launch (sm_90+; nothing on older archs, where the runtime never asks for
// it). A kernel the runtime launches to overlap the end of the previous kernel on its stream
// (kernels::LaunchShape::overlap_previous) calls pdl_wait() before it touches any memory an earlier
// kernel of the stream writes or reads (it returns at once after a plain launch);
// pdl_launch_dependents() lets the next kernel's CTAs be scheduled once every CTA of this one
// has run it (they then wait in their own pdl_wait()).
SAGE2_DEVICE_INLINE void pdl_wait() {
#if defined(SAGE2_ARCH) && SAGE2_ARCH >= 90
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
SAGE2_DEVICE_INLINE void pdl_launch_dependents() {
#if defined(SAGE2_ARCH) && SAGE2_ARCH >= 90
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------------------------
// Bit casts and small scalar helpers
SAGE2_DEVICE_INLINE u32 f32_bits(float f) {
  u32 r;
  asm("mov.b32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}
SAGE2_DEVICE_INLINE float bits_f32(u32 u) {
  float r;
  asm("mov.b32 %0, %1;" : "=f"(r) : "r"(u));
  return r;
}
// |x| by clearing the sign bit: exact for every input, NaN stays NaN (positive payload).
SAGE2_DEVICE_INLINE float abs_f32(float x) { return bits_f32(f32_bits(x) & 0x7fffffffu); }
// For non-negative floats and NaNs with a clear sign bit, the bit patterns order like the
// values and every NaN compares above +Inf: an unsigned max over these bits is a
// NaN-propagating max of magnitudes.
SAGE2_DEVICE_INLINE u32 abs_bits(float x) { return f32_bits(x) & 0x7fffffffu; }

// NaN-propagating min/max (PTX max.NaN / min.NaN): if either input is NaN the result is NaN.
SAGE2_DEVICE_INLINE float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
SAGE2_DEVICE_INLINE float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// IEEE max/min that return the non-NaN operand when exactly one is NaN.
SAGE2_DEVICE_INLINE float max_f32(float a, float b) {
  float r;
  asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// max_f32(a, |b|) in one instruction (FMNMX with an |operand|; a bit-mask abs is a separate LOP3).
// Like max_f32 it drops a NaN b, so a NaN's sign does not matter.
SAGE2_DEVICE_INLINE float max_abs_f32(float a, float b) {
  float r;
  asm("{ .reg .f32 t; abs.f32 t, %2; max.f32 %0, %1, t; }" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
SAGE2_DEVICE_INLINE float min_f32(float a, float b) {
  float r;
  asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
SAGE2_DEVICE_INLINE u32 max_u32(u32 a, u32 b) { return a > b ? a : b; }

// Packed 16-bit max / min of two bf16x2 (BF16) or f16x2 words, NaN-propagating per half
// (max.NaN / min.NaN, sm_80+): exact selections, no conversion.
template <bool BF16>
SAGE2_DEVICE_INLINE u32 max_nan_x2(u32 a, u32 b) {
  u32 r;
  if (BF16)
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <bool BF16>
SAGE2_DEVICE_INLINE u32 min_nan_x2(u32 a, u32 b) {
  u32 r;
  if (BF16)
    asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else
    asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// max_nan_x2(a, |b|) per half: the running maximum magnitude of a channel pair on the raw bits
// (clearing the sign bits is |b| for every value, NaN included), NaN-propagating.
template <bool BF16>
SAGE2_DEVICE_INLINE u32 max_abs_nan_x2(u32 a, u32 b) { return max_nan_x2<BF16>(a, b & 0x7fff7fffu); }

// Correctly rounded multiply and add that the compiler may not fuse into an FMA (.rn).
SAGE2_DEVICE_INLINE float mul_rn(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
SAGE2_DEVICE_INLINE float add_rn(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// Byte permute: result byte i = byte sel.nibble(i) of the 8-byte value {b, a} (a = bytes 0-3).
SAGE2_DEVICE_INLINE u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// Round to nearest integer, ties to even (cvt.rni). NaN converts to 0 in PTX; callers that
// care handle NaN before.
SAGE2_DEVICE_INLINE i32 rint_s32(float x) {
  i32 r;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// Fast 2^x (ex2.approx.ftz.f32; max rel. error 2^-22, subnormal results flush to zero).
SAGE2_DEVICE_INLINE float exp2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// IEEE-754 1/x, correctly rounded (rcp.rn.f32): the epilogue's one reciprocal per row.
SAGE2_DEVICE_INLINE float rcp_rn(float x) {
  float r;
  asm("rcp.rn.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// IEEE-754 a / b, correctly rounded (bit-identical to the host's float division), for a finite
// b > 0 and any a — without the subroutine call that div.rn.f32's slow path compiles to (a call
// forces ptxas to save live registers: stack frame and spills in register-heavy kernels).
// Method: y ≈ 1/b in double (rcp.approx + 2 Newton steps, rel. error < 2^-30), q0 = a*y, exact
// residual r = a - q0*b (fma; it fits 53 bits), q1 = q0 + r*y, so |q1 - a/b| <= 2^-53·|a/b|(1+tiny).
// A quotient of two 24-bit floats is never a float rounding midpoint and lies at least
// ~2^-49 (relative) away from one, so rounding q1 to float (cvt.rn, overflow → Inf, subnormals
// handled) gives RN(a/b). a = 0, ±Inf, NaN take the plain product (0, ±Inf, NaN as IEEE).
// (Checked on the host against float division with an emulated 8..20-bit rcp: 6e7 pairs
// including subnormals, huge quotients and the R/amax forms, no mismatch.)
SAGE2_DEVICE_INLINE float div_rn(float a, float b);
// div_rn in two steps, for quotients by one divisor: DivRn(b) once (y depends on b alone), then
// .of(a) per dividend — div_rn's own float ops (it is DivRn(b).of(a)), so the same bits.
struct DivRn {
  double bd, y;
  SAGE2_DEVICE_INLINE explicit DivRn(float b) {
    double e;
    asm("cvt.f64.f32 %0, %1;" : "=d"(bd) : "f"(b));
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(bd));
    asm("fma.rn.f64 %0, %1, %2, 0d3FF0000000000000;" : "=d"(e) : "d"(-bd), "d"(y));
    asm("fma.rn.f64 %0, %1, %2, %1;" : "=d"(y) : "d"(y), "d"(e));
    asm("fma.rn.f64 %0, %1, %2, 0d3FF0000000000000;" : "=d"(e) : "d"(-bd), "d"(y));
    asm("fma.rn.f64 %0, %1, %2, %1;" : "=d"(y) : "d"(y), "d"(e));
  }
  SAGE2_DEVICE_INLINE float of(float a) const {
    double ad, q, r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(ad) : "f"(a));
    asm("mul.rn.f64 %0, %1, %2;" : "=d"(q) : "d"(ad), "d"(y));
    if (a != 0.f && abs_f32(a) <= 3.402823466e+38f) {
      asm("fma.rn.f64 %0, %1, %2, %3;" : "=d"(r) : "d"(-q), "d"(bd), "d"(ad));
      asm("fma.rn.f64 %0, %1, %2, %3;" : "=d"(q) : "d"(r), "d"(y), "d"(q));
    }
    float res;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(res) : "d"(q));
    return res;
  }
};
SAGE2_DEVICE_INLINE float div_rn(float a, float b) { return DivRn(b).of(a); }

// ---------------------------------------------------------------------------------------------
// Conversions
SAGE2_DEVICE_INLINE float f16_to_f32(u16 h) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}
SAGE2_DEVICE_INLINE u16 f32_to_f16(float f) {
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
// bf16 is the upper half of an f32: widening is exact.
SAGE2_DEVICE_INLINE float bf16_to_f32(u16 h) { return bits_f32(static_cast<u32>(h) << 16); }
SAGE2_DEVICE_INLINE u16 f32_to_bf16(float f) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
// Two floats → f16x2 / bf16x2 (lo in bits 0..15).
SAGE2_DEVICE_INLINE u32 pack_f16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
SAGE2_DEVICE_INLINE u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
SAGE2_DEVICE_INLINE void unpack_f16x2(u32 v, float& lo, float& hi) {
  lo = f16_to_f32(static_cast<u16>(v & 0xffffu));
  hi = f16_to_f32(static_cast<u16>(v >> 16));
}
SAGE2_DEVICE_INLINE void unpack_bf16x2(u32 v, float& lo, float& hi) {
  lo = bits_f32(v << 16);
  hi = bits_f32(v & 0xffff0000u);
}
// Two floats → two FP8 E4M3 codes, round to nearest even, saturating to ±448 (NaN stays NaN).
// Result bits 0..7 hold `lo`, bits 8..15 hold `hi`.
SAGE2_DEVICE_INLINE u16 f32x2_to_e4m3x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
// Four e4m3 codes in one word, a in the low byte (two f32x2_to_e4m3x2 joined without masks).
SAGE2_DEVICE_INLINE u32 f32x4_to_e4m3x4(float a, float b, float c, float d) {
  u32 r;
  asm("{ .reg .b16 l, h; cvt.rn.satfinite.e4m3x2.f32 l, %2, %1; cvt.rn.satfinite.e4m3x2.f32 h, %4, %3; mov.b32 %0, {l, h}; }"
      : "=r"(r) : "f"(a), "f"(b), "f"(c), "f"(d));
  return r;
}
// Two FP8 E4M3 codes (bits 0..7 = lo) → f16x2 (bits 0..15 = lo). Exact.
SAGE2_DEVICE_INLINE u32 e4m3x2_to_f16x2(u16 v) {
  u32 r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Warp shuffles (full-warp variants take the member mask explicitly; default all lanes).
// The lanes of `members` whose pred is true, as a bit mask (every member must execute it).
SAGE2_DEVICE_INLINE u32 ballot(bool pred, u32 members = 0xffffffffu) {
  u32 r;
  asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n vote.sync.ballot.b32 %0, p, %2;\n}"
               : "=r"(r) : "r"(static_cast<u32>(pred)), "r"(members));
  return r;
}
SAGE2_DEVICE_INLINE u32 shfl_xor(u32 v, int lane_mask, u32 members = 0xffffffffu) {
  u32 r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(lane_mask), "r"(members));
  return r;
}
SAGE2_DEVICE_INLINE float shfl_xor(float v, int lane_mask, u32 members = 0xffffffffu) {
  return bits_f32(shfl_xor(f32_bits(v), lane_mask, members));
}
SAGE2_DEVICE_INLINE u32 shfl_idx(u32 v, int src_lane, u32 members = 0xffffffffu) {
  u32 r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(src_lane), "r"(members));
  return r;
}
SAGE2_DEVICE_INLINE float shfl_idx(float v, int src_lane, u32 members = 0xffffffffu) {
  return bits_f32(shfl_idx(f32_bits(v), src_lane, members));
}
SAGE2_DEVICE_INLINE u32 shfl_down(u32 v, int delta, u32 members = 0xffffffffu) {
  u32 r;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, %3;" : "=r"(r) : "r"(v), "r"(delta), "r"(members));
  return r;
}
SAGE2_DEVICE_INLINE float shfl_down(float v, int delta, u32 members = 0xffffffffu) {
  return bits_f32(shfl_down(f32_bits(v), delta, members));
}
SAGE2_DEVICE_INLINE u32 shfl_up(u32 v, int delta, u32 members = 0xffffffffu) {
  u32 r;
  asm volatile("shfl.sync.up.b32 %0, %1, %2, 0x0, %3;" : "=r"(r) : "r"(v), "r"(delta), "r"(members));
  return r;
}
SAGE2_DEVICE_INLINE float shfl_up(float v, int delta, u32 members = 0xffffffffu) {
  return bits_f32(shfl_up(f32_bits(v), delta, members));
}
// Butterfly reductions over aligned groups of WIDTH consecutive lanes (WIDTH: power of 2 ≤ 32).
// Every lane of the warp must call them (full mask); each lane gets its group's result.
template <int WIDTH>
SAGE2_DEVICE_INLINE float group_sum(float v) {
#pragma unroll
  for (int m = WIDTH / 2; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}
template <int WIDTH>
SAGE2_DEVICE_INLINE float group_max_nan(float v) {
#pragma unroll
  for (int m = WIDTH / 2; m > 0; m >>= 1) v = max_nan(v, shfl_xor(v, m));
  return v;
}
template <int WIDTH>
SAGE2_DEVICE_INLINE u32 group_max_u32(u32 v) {
#pragma unroll
  for (int m = WIDTH / 2; m > 0; m >>= 1) v = max_u32(v, shfl_xor(v, m));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Addresses, loads, stores
SAGE2_DEVICE_INLINE u32 smem_addr(const void* p) {
  u32 r;
  asm("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}" : "=r"(r) : "l"(p));
  return r;
}
// Read-only (non-coherent) global loads: only for data no kernel writes during the launch.
SAGE2_DEVICE_INLINE u32x4 ld_nc_v4(const void* p) {
  u32x4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
// L2 eviction priorities (sm_80+): a policy for accesses with .L2::cache_hint. PRIORITY 1:
// evict_last (lines a later kernel of the stream reads again), 2: evict_first (lines read for the
// last time leave before the others), 0: evict_normal (as without a hint).
template <int PRIORITY>
SAGE2_DEVICE_INLINE u64 l2_policy() {
  static_assert(PRIORITY >= 0 && PRIORITY <= 2, "L2 eviction priority: 0 normal, 1 last, 2 first");
  u64 r;
  if constexpr (PRIORITY == 1)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(r));
  else if constexpr (PRIORITY == 2)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(r));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(r));
  return r;
}
SAGE2_DEVICE_INLINE u32x4 ld_nc_v4_hint(const void* p, u64 policy) {
  u32x4 r;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(policy));
  return r;
}
SAGE2_DEVICE_INLINE u32x2 ld_nc_v2(const void* p) {
  u32x2 r;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
SAGE2_DEVICE_INLINE i32 ld_nc_s32(const void* p) {
  i32 r;
  asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
SAGE2_DEVICE_INLINE u32 ld_nc_u8(const void* p) {
  u32 r;
  asm volatile("ld.global.nc.u8 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
SAGE2_DEVICE_INLINE u16 ld_nc_u16(const void* p) {
  u16 r;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
SAGE2_DEVICE_INLINE void st_v4(void* p, u32x4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
SAGE2_DEVICE_INLINE void st_v2(void* p, u32 x, u32 y) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(x), "r"(y) : "memory");
}
SAGE2_DEVICE_INLINE void st_u32(void* p, u32 x) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(x) : "memory");
}
SAGE2_DEVICE_INLINE void st_f32(float* p, float x) {
  asm volatile("st.global.f32 [%0], %1;" ::"l"(p), "f"(x) : "memory");
}
SAGE2_DEVICE_INLINE u32x4 ld_shared_v4(u32 addr) {
  u32x4 r;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(addr)
               : "memory");
  return r;
}
SAGE2_DEVICE_INLINE void st_shared_v4(u32 addr, u32x4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
// Inter-CTA synchronisation (the fused quantize stage: work tickets, per-group ready flags).
// gpu-scope acquire/release and relaxed accesses go to L2 (the coherence point), never a stale L1.
SAGE2_DEVICE_INLINE u32 atom_add_relaxed_gpu_u32(u32* p, u32 v) {
  u32 r;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
  return r;
}
SAGE2_DEVICE_INLINE u32 atom_add_acq_rel_gpu_u32(u32* p, u32 v) {
  u32 r;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
  return r;
}
SAGE2_DEVICE_INLINE void st_release_gpu_u32(u32* p, u32 v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
SAGE2_DEVICE_INLINE u32 ld_acquire_gpu_u32(const u32* p) {
  u32 r;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
  return r;
}
SAGE2_DEVICE_INLINE float ld_relaxed_gpu_f32(const float* p) {
  float r;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(r) : "l"(p) : "memory");
  return r;
}
SAGE2_DEVICE_INLINE u32 ld_relaxed_gpu_u32(const u32* p) {
  u32 r;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
  return r;
}
SAGE2_DEVICE_INLINE void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
// Order-free global reductions (their results do not depend on which thread comes first).
SAGE2_DEVICE_INLINE void red_min_gpu_s32(i32* p, i32 v) {
  asm volatile("red.relaxed.gpu.global.min.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
SAGE2_DEVICE_INLINE void red_max_gpu_u32(u32* p, u32 v) {
  asm volatile("red.relaxed.gpu.global.max.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
SAGE2_DEVICE_INLINE void nanosleep_u32(u32 ns) { asm volatile("nanosleep.u32 %0;" ::"r"(ns)); }

// Shared-memory reductions.
SAGE2_DEVICE_INLINE void red_max_shared_u32(u32 smem, u32 v) {
  asm volatile("red.shared.max.u32 [%0], %1;" ::"r"(smem), "r"(v) : "memory");
}

// ---------------------------------------------------------------------------------------------
// cp.async (global → shared, bypassing L1: .cg, 16 bytes). `gmem` must be a global address and
// both addresses 16-byte aligned.
SAGE2_DEVICE_INLINE void cp_async_16(u32 smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem), "l"(gmem) : "memory");
}
SAGE2_DEVICE_INLINE void cp_async_16_hint(u32 smem, const void* gmem, u64 policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem), "l"(policy)
               : "memory");
}
// Copies src_bytes (0..16) and zero-fills the rest of the 16 bytes. With src_bytes == 0 nothing
// is read (pass any valid pointer, e.g. the tensor base) and the destination becomes zeros.
SAGE2_DEVICE_INLINE void cp_async_16_zfill(u32 smem, const void* gmem, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// Predicated form: the whole 16 bytes when `valid`, zeros otherwise.
SAGE2_DEVICE_INLINE void cp_async_16_pred(u32 smem, const void* gmem, bool valid) {
  cp_async_16_zfill(smem, gmem, valid ? 16u : 0u);
}
SAGE2_DEVICE_INLINE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still pending.
template <int N>
SAGE2_DEVICE_INLINE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
SAGE2_DEVICE_INLINE void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---------------------------------------------------------------------------------------------
// ldmatrix: 8x8 b16 matrices from shared memory. Lanes 8i..8i+7 supply the row addresses of
// matrix i (x1: lanes 0-7, x2: 0-15, x4: 0-31). `.trans` transposes each matrix.
SAGE2_DEVICE_INLINE void ldmatrix_x1(u32& r0, u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r0) : "r"(smem));
}
SAGE2_DEVICE_INLINE void ldmatrix_x2(u32& r0, u32& r1, u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(smem));
}
SAGE2_DEVICE_INLINE void ldmatrix_x4(u32& r0, u32& r1, u32& r2, u32& r3, u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem));
}
SAGE2_DEVICE_INLINE void ldmatrix_x1_trans(u32& r0, u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r0) : "r"(smem));
}
SAGE2_DEVICE_INLINE void ldmatrix_x2_trans(u32& r0, u32& r1, u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1) : "r"(smem));
}
SAGE2_DEVICE_INLINE void ldmatrix_x4_trans(u32& r0, u32& r1, u32& r2, u32& r3, u32 smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem));
}
SAGE2_DEVICE_INLINE void ldmatrix_x4(u32 (&r)[4], u32 smem) { ldmatrix_x4(r[0], r[1], r[2], r[3], smem); }
SAGE2_DEVICE_INLINE void ldmatrix_x4_trans(u32 (&r)[4], u32 smem) {
  ldmatrix_x4_trans(r[0], r[1], r[2], r[3], smem);
}

// ---------------------------------------------------------------------------------------------
// mma.sync, A row-major (4 regs), B column-major (2 regs), C/D 4 regs. acc += A·B in place.
// m16n8k32 s8·s8 → s32
SAGE2_DEVICE_INLINE void mma_s8_m16n8k32(i32 (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k64 s4·s4 → s32 (8 nibbles per register, element 2j in the low nibble of its byte)
SAGE2_DEVICE_INLINE void mma_s4_m16n8k64(i32 (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k32 e4m3·e4m3 → f32 (sm_89+)
SAGE2_DEVICE_INLINE void mma_e4m3_m16n8k32(float (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k32 e4m3·e4m3 → f16 accumulator (SageAttention2++; the overload of the f32 one for a u32[2]
// accumulator): D = two f16x2 registers, {row g: cols 2t, 2t+1} and {row g+8: cols 2t, 2t+1} (low
// half first), the f32 accumulator's c0..c3 order. PTX ISA 8.7 (CUDA 12.8), sm_89 and newer.
SAGE2_DEVICE_INLINE void mma_e4m3_m16n8k32(u32 (&acc)[2], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
      : "+r"(acc[0]), "+r"(acc[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k16 f16·f16 → f16 accumulator (same D layout; the overload for a u32[2] accumulator).
SAGE2_DEVICE_INLINE void mma_f16_m16n8k16(u32 (&acc)[2], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
      : "+r"(acc[0]), "+r"(acc[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// The two halves of an f16x2 register as floats (exact).
SAGE2_DEVICE_INLINE float2 f16x2_to_f32x2(u32 h) {
  float2 r;
  asm("{\n\t.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\tcvt.f32.f16 %0, lo;\n\tcvt.f32.f16 %1, hi;\n\t}"
      : "=f"(r.x), "=f"(r.y)
      : "r"(h));
  return r;
}
// m16n8k16 f16·f16 → f32
SAGE2_DEVICE_INLINE void mma_f16_m16n8k16(float (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace ptx
