// Hardware probe of wgmma (sm_90a): ONE warpgroup runs `steps` wgmma.m64n64k32 (e4m3·e4m3 → f32
// or s8·s8 → s32) with A from registers (supplied per thread by the host, in the PTX ISA fragment
// layout) and B from shared memory, written here from a logical [64 n][32 k] byte matrix into the
// K-major layout of a `swizzle_bytes` (128 / 64 / 32) swizzle — the layout the TMA unit produces
// for the attention kernel — and read through a matrix descriptor. The accumulator starts from
// the host's C. Used by tests/gpu/test_probe_wgmma.cpp for
//  - the FP8 accumulator width (what D keeps of C + A·B; the paper measured 13 mantissa bits for
//    mma on Ada, the mma.sync probe 23 on the H100), and
//  - a check of the fragment / descriptor / swizzle conventions against a host matrix product.
// Not used by attention; compiled through jit::compile_source (no KernelSpec of its own).
// Launch: 1 block of 128 threads.
#pragma once

#include "hopper.cuh"
#include "ptx.cuh"
#include "types.cuh"
#include "wgmma_ops.cuh"

struct WgProbeParams {
  const sage2::dev::u32* a;  // [128 threads][4] A fragment registers
  const sage2::dev::u8* b;   // [64 n][32 k] B bytes (e4m3 or s8)
  const sage2::dev::u32* c;  // [128 threads][32] accumulator inputs (f32 or s32 bits)
  sage2::dev::u32* d;        // [128 threads][32] accumulator outputs
  int kind;                  // 0: e4m3 → f32, 1: s8 → s32
  int swizzle_bytes;         // 128, 64 or 32
  int steps;                 // wgmma instructions issued back to back (D = C + steps·A·B)
};

extern "C" __global__ void __launch_bounds__(128) sage2_probe_wgmma(const WgProbeParams p) {
  __shared__ __align__(1024) unsigned char sb[64 * 128];
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < 64 * 128; i += 128) sb[i] = 0;
  __syncthreads();
  const int pitch = p.swizzle_bytes;
  const unsigned mask = pitch == 128 ? 7u : (pitch == 64 ? 3u : 1u);
  for (int i = tid; i < 64 * 32; i += 128) {
    const unsigned n = static_cast<unsigned>(i / 32), k = static_cast<unsigned>(i % 32);
    unsigned addr = n * static_cast<unsigned>(pitch) + k;
    addr ^= ((addr >> 7) & mask) << 4;  // 16-byte chunk index ^= (address / 128) mod span
    sb[addr] = p.b[i];
  }
  ptx::fence_proxy_async_smem();  // generic-proxy stores → wgmma (async proxy) reads
  __syncthreads();
  u32 a[4];
  for (int i = 0; i < 4; ++i) a[i] = p.a[tid * 4 + i];
  const u64 desc = ptx::smem_desc(ptx::smem_addr(sb), 8u * static_cast<u32>(pitch),
                                  ptx::desc_swizzle_code(pitch));
  if (p.kind == 0) {
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = ptx::bits_f32(p.c[tid * 32 + i]);
    ptx::wgmma_fence();
    for (int s = 0; s < p.steps; ++s) ptx::wgmma_e4m3_rs<64>(d, a, desc, 1u);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      ptx::fence_operand(d[i]);
      p.d[tid * 32 + i] = ptx::f32_bits(d[i]);
    }
  } else {
    i32 d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = static_cast<i32>(p.c[tid * 32 + i]);
    ptx::wgmma_fence();
    for (int s = 0; s < p.steps; ++s) ptx::wgmma_s8_rs<64>(d, a, desc, 1u);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      ptx::fence_operand(d[i]);
      p.d[tid * 32 + i] = static_cast<u32>(d[i]);
    }
  }
}
