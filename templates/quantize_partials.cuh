// combine_partials: one channel's statistics from per-chunk partials (channel_stats, the fused,
// cluster and one-pass stages).
#pragma once

#include "quantize_common.cuh"

namespace qz {

// One channel's statistics from `n` partials (sum, min, max, first-bad as i32 bits), partial i's
// statistic s read by load(i, s): sums left to right from partial 0's (the order of
// kernels/quant_buffers.hpp), min/max/first-bad order-free. UB partials' loads are in flight at once
// (latency, not order).
template <class Load>
__device__ __forceinline__ void combine_partials(u32 n, Load&& load, float& sum, float& mn, float& mx, i32& fb) {
  constexpr int UB = 8;
#pragma unroll 1
  for (u32 k0 = 0; k0 < n; k0 += UB) {
    float v[UB][4];
#pragma unroll
    for (int u = 0; u < UB; ++u)
#pragma unroll
      for (int st = 0; st < 4; ++st) v[u][st] = load(k0 + u < n ? k0 + u : k0, st);
#pragma unroll
    for (int u = 0; u < UB; ++u) {
      if (k0 + u >= n) break;
      const i32 f = static_cast<i32>(ptx::f32_bits(v[u][3]));
      if (k0 + u == 0) {
        sum = v[u][0]; mn = v[u][1]; mx = v[u][2]; fb = f;
      } else {
        sum += v[u][0];
        mn = ptx::min_nan(mn, v[u][1]);
        mx = ptx::max_nan(mx, v[u][2]);
        fb = f < fb ? f : fb;
      }
    }
  }
}

}  // namespace qz
