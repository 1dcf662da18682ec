// Hardware probe: one mma.sync m16n8k32 e4m3·e4m3 → f32 per warp, on fragments supplied
// verbatim by the host, so the host can measure what the tensor core's accumulator keeps
// (the paper reports 13 mantissa bits, "FP22", on Ada). Launch: 1 block of 32 threads.
#pragma once

#include "ptx.cuh"

struct ProbeParams {
  const sage2::dev::u32* a;  // [32 lanes][4] A fragment registers (e4m3 x4 each)
  const sage2::dev::u32* b;  // [32 lanes][2] B fragment registers
  const float* c;            // [32 lanes][4] accumulator inputs
  float* d;                  // [32 lanes][4] accumulator outputs
};

extern "C" __global__ void sage2_probe_mma_e4m3(ProbeParams p) {
  const unsigned lane = threadIdx.x & 31u;
  sage2::dev::u32 a[4], b[2];
  float acc[4];
  for (int i = 0; i < 4; ++i) a[i] = p.a[lane * 4 + i];
  for (int i = 0; i < 2; ++i) b[i] = p.b[lane * 2 + i];
  for (int i = 0; i < 4; ++i) acc[i] = p.c[lane * 4 + i];
  ptx::mma_e4m3_m16n8k32(acc, a, b);
  for (int i = 0; i < 4; ++i) p.d[lane * 4 + i] = acc[i];
}
