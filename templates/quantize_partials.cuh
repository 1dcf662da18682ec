// combine_partials: one channel's statistics from per-chunk partials (channel_stats, the fused,
// cluster and one-pass stages; with sampled statistics the split K / V / Q kernels, head_stats).
#pragma once

#include "quantize_common.cuh"

namespace qz {

// One channel's statistics from `n` partials (sum, min, max, first-bad as i32 bits), partial i's
// statistic s read by load(i, s): sums left to right from partial 0's (the order of
// kernels/quant_buffers.hpp), min/max/first-bad order-free. UB partials' loads are in flight at once
// (latency, not order).
template <int UB = 8, class Load>
__device__ __forceinline__ void combine_partials(u32 n, Load&& load, float& sum, float& mn, float& mx, i32& fb) {
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

// Sampled statistics on the split path (dense calls): channel_stats leaves each chunk's partials
// and no CTA combines them (no arrival: a fence and an atomic round trip per CTA, then the last
// one's combine, were the end of every statistics chain). Each reader combines the partials of its
// head itself, in the same order: the same bits as the combine it replaces. channel_stats' chunks
// of (batch·kv head) bh, K (kv 0) or V (kv 1): the S sampled tiles, or with T <= S tiles every key
// in chunks of SAGE2_QZ_STATS_CHUNK tokens (kernels::QuantBuffers::stats_chunks).
constexpr bool SPLIT_PARTIALS = SAMPLE_TILES != 0 && SAGE2_QUANT_OP <= 4;
#ifdef SAGE2_QZ_STATS_CHUNK
constexpr i64 PARTIALS_CHUNK = SAGE2_QZ_STATS_CHUNK;
#else
constexpr i64 PARTIALS_CHUNK = 0;  // (the kernel reads no partials of channel_stats)
#endif
static_assert(!SPLIT_PARTIALS || PARTIALS_CHUNK > 0, "sampled statistics: the split kernels need SAGE2_QZ_STATS_CHUNK");
__device__ __forceinline__ u32 head_chunks(i64 len) {
  return sampled(len) ? static_cast<u32>(SAMPLE_TILES)
                      : static_cast<u32>((len + PARTIALS_CHUNK - 1) / (PARTIALS_CHUNK ? PARTIALS_CHUNK : 1));
}
// Channel c's statistics (sum, min, max, first bad key) of head bh; only the statistics in NEED
// (bit s: statistic s of the partials) are read, the others stay 0 / NO_BAD; UB partials at a time.
template <int NEED, int UB = (SAMPLE_TILES ? SAMPLE_TILES : 1)>
__device__ __forceinline__ void head_stats(const QuantizeParams& p, i64 bh, int kv, int c, i64 len, float& sum,
                                           float& mn, float& mx, i32& fb) {
  const u32 n = head_chunks(len);
  const float* pc = p.stats_part + (bh * 2 + kv) * static_cast<i64>(n) * 4 * D_V + c;
  sum = mn = mx = 0.f;
  fb = NO_BAD;
  combine_partials<UB>(
      n,
      [&](u32 k, int s) {
        if ((NEED >> s) & 1) return ld_stat(pc + (static_cast<i64>(k) * 4 + s) * D_V);
        return s == 3 ? ptx::bits_f32(static_cast<u32>(NO_BAD)) : 0.f;
      },
      sum, mn, mx, fb);
}

// The head's statistics as the combine used to leave them (k_stats / v_stats rows, d_out channels,
// padded ones 0, 0, 0), and the first-bad flags lowered to the sample's first bad key (channel_stats
// set them to none). Run by block 0 of K and tile 0 of V after their codes: off their critical path,
// and with their rows no longer live (the combine's loads beside them spilled at 64 registers).
__device__ __forceinline__ void head_stats_out(const QuantizeParams& p, i64 bh, int kv) {
  const int d_out = kv ? D_V : D_QK;
  float* out = (kv ? p.v_stats : p.k_stats) + bh * 3 * d_out;
#pragma unroll 1
  for (int c = threadIdx.x; c < d_out; c += THREADS) {
    float sum = 0.f, mn = 0.f, mx = 0.f;
    i32 fb = NO_BAD;
    if (c < HD) head_stats<15>(p, bh, kv, c, p.kv_len, sum, mn, mx, fb);
    out[c] = sum;
    out[d_out + c] = mn;
    out[2 * d_out + c] = mx;
    if (fb != NO_BAD) ptx::red_min_gpu_s32(kv ? p.v_first_bad + bh * D_V + c : p.k_first_bad + bh, fb);
  }
}

}  // namespace qz
