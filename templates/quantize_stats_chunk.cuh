// stats_chunk: one statistics chunk's partials and the last arriver's reduction (channel_stats, the
// fused and one-pass stages); wait_ready: waiting on a group's ready flag (fused, one-pass). Needs
// SAGE2_QZ_STATS_CHUNK and the includer's MapS (the statistics walk's thread mapping).
#pragma once

#include "quantize_common.cuh"
#include "quantize_partials.cuh"

namespace qz {

constexpr int STATS_T = SAGE2_QZ_STATS_CHUNK;  // tokens per statistics chunk (kernels::quantize_stats_chunk)
static_assert(STATS_T % 16 == 0, "statistics chunk");

// The final statistics of (sequence, kv head) `bh` of K or V: channel(c, sum, min, max, first_bad)
// gives real channel c's (padded channels get 0, 0, 0, NO_BAD), written to k_stats / v_stats and
// the first-bad flags; `s_kfb` (shared, NO_BAD on entry, the CTA's barrier between) gathers K's
// first bad key over the channels. V's writer also zeroes the head's overflow maxima when the
// stage clears no sync words (SAGE2_QZ_STATS_WHOLE_HEAD: kernels::quantize_clears_sync), before
// quantize_v, which runs after this kernel, raises them.
template <class Channel>
__device__ __forceinline__ void write_stats_of(const QuantizeParams& p, bool is_v, i64 bh, i32* s_kfb, Channel&& channel) {
  const int d_out = is_v ? D_V : D_QK;
  float* out = (is_v ? p.v_stats : p.k_stats) + bh * 3 * d_out;
#pragma unroll 1
  for (int c = threadIdx.x; c < d_out; c += THREADS) {
    float sum = 0.f, mn = 0.f, mx = 0.f;
    i32 fb = NO_BAD;
    if (c < HD) channel(c, sum, mn, mx, fb);
    out[c] = sum;
    out[d_out + c] = mn;
    out[2 * d_out + c] = mx;
    if (is_v) {
      p.v_first_bad[bh * D_V + c] = fb;
#if SAGE2_QZ_STATS_WHOLE_HEAD
      if (SAMPLE_TILES) p.v_over[bh * D_V + c] = 0u;
#endif
    } else if (fb != NO_BAD) {
      red_min_shared_s32(ptx::smem_addr(s_kfb), fb);
    }
  }
  __syncthreads();
  if (!is_v && threadIdx.x == 0) p.k_first_bad[bh] = *s_kfb;
}

// write_stats_of from `chunks` partials — chunk k's statistic s of channel c read by load(k, s, c)
// — combined in the contract's order (combine_partials).
template <class Load>
__device__ __forceinline__ void write_stats(const QuantizeParams& p, bool is_v, i64 bh, u32 chunks, i32* s_kfb, Load&& load) {
  write_stats_of(p, is_v, bh, s_kfb, [&](int c, float& sum, float& mn, float& mx, i32& fb) {
    combine_partials(chunks, [&](u32 k, int s) { return load(k, s, c); }, sum, mn, mx, fb);
  });
}

// Statistics chunk `chunk` of one (sequence, kv head) `bh` of K or V — tokens [chunk·T, min(len,
// (chunk+1)·T)) of the sequence whose first row is n0 in (b, h); sampled statistics: those of
// sampled unit sample_unit(chunk) — as partials [4][D_V] (sum, min,
// max, first-bad as i32 bits) at part_g[chunk]. Then the arrival at `arrive` (zero at launch):
// the last of the sequence's `chunks` chunks to arrive reduces all of them in chunk order (sum:
// left to right from chunk 0's; min/max/first-bad: order-free) into k_stats / v_stats and the
// first-bad flags of bh, and returns true (after a barrier: every thread's final statistics are
// stored). Which CTA is last does not change a bit of the result.
// A sampled head's partials in shared memory (channel_stats with SAGE2_QZ_STATS_WHOLE_HEAD; no
// partials in global memory, no arrival counter): the CTA walks chunks first, first + step, ...
// (channel_stats' loop) and puts chunk k's partials in its s_part [k][4][D_V]; after its last
// chunk (chunk + step >= chunks) they are combined in chunk order (the same order and bits as the
// last arriver's), in one of two forms:
//  PartsIn::OwnCta   step 1: the CTA walked every chunk and combines them from its own s_part.
//  PartsIn::Cluster  (sm_90a) a cluster of `step` CTAs, rank r walked chunks r, r + step, ...:
//                    after the cluster barrier rank 0 combines chunk k from rank k % step's
//                    s_part [k] (step a power of two) through distributed shared memory; the
//                    second barrier keeps every rank's s_part until rank 0 has read it.
enum class PartsIn { Global, OwnCta, Cluster };
__device__ __forceinline__ bool stats_chunk(const QuantizeParams& p, u8* smem, const Input& in, bool is_v, i64 b, i64 h,
                                            i64 bh, i64 n0, i64 len, float* part_g, u32 chunk, u32 chunks, u32* arrive,
                                            float* s_part = nullptr, PartsIn form = PartsIn::Global, u32 step = 1) {
  const bool units = sampled(len);  // (sampled statistics: one chunk per sampled unit)
  const i64 span = units ? SAMPLE_UNIT : STATS_T;
  const i64 c0 = units ? sample_unit(chunk, len) * SAMPLE_UNIT : static_cast<i64>(chunk) * STATS_T;
  const i64 c1 = len - c0 < span ? len : c0 + span;
  float* part = part_g + static_cast<i64>(chunk) * 4 * D_V;
  float* own = form != PartsIn::Global ? s_part + static_cast<i64>(chunk) * 4 * D_V : nullptr;
  i32* s_kfb = reinterpret_cast<i32*>(smem + stats_smem_bytes<MapS>() - 12);
  // (set before each walk — only write_stats, after the last, gathers into it — whose barriers
  // order it before write_stats reads it)
  if (form != PartsIn::Global && threadIdx.x == 0) *s_kfb = NO_BAD;
  stats_rows<MapS>(in, row_ptr(in, b, h, n0), c0, c1, D_V, smem, [&](int s, int c, float v) {
    if (form != PartsIn::Global)
      own[s * D_V + c] = v;
    else
      ptx::st_f32(part + s * D_V + c, v);
  });
  const bool last_here = chunk + step >= chunks;  // this CTA's last chunk
  if (form == PartsIn::OwnCta) {
    if (!last_here) return false;
    // (stats_rows ended with a barrier: every chunk's partials are written)
    write_stats(p, is_v, bh, chunks, s_kfb, [&](u32 k, int s, int c) { return s_part[(static_cast<int>(k) * 4 + s) * D_V + c]; });
    return true;
  }
#if SAGE2_QZ_STATS_CLUSTER
  if (form == PartsIn::Cluster) {
    if (!last_here) return false;
    ptx::cluster_arrive_release();  // (stats_rows ended with a barrier: every partial is written)
    ptx::cluster_wait_acquire();
    const bool rank0 = ptx::cluster_ctarank() == 0;
    if (rank0) {
      const u32 part0 = ptx::smem_addr(s_part);
      write_stats(p, is_v, bh, chunks, s_kfb, [&](u32 k, int s, int c) {
        return ptx::ld_cluster_f32(ptx::mapa_shared(part0 + static_cast<u32>(((static_cast<int>(k) * 4 + s) * D_V + c) * 4), k & (step - 1u)));
      });
    }
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
    return rank0;
  }
#endif

  // Arrive: the CTA's partials (ordered before by the barrier in stats_rows) are released at
  // gpu scope by thread 0's fence + acq_rel add; the last arriver acquires everyone's. A single
  // chunk is its own last: no counter (the stage then needs no cleared sync words).
  u32* s_last = reinterpret_cast<u32*>(smem + stats_smem_bytes<MapS>() - 16);
  if (threadIdx.x == 0) {
    if (chunks == 1u) {
      *s_last = 1u;
    } else {
      ptx::fence_acq_rel_gpu();
      const u32 before = ptx::atom_add_acq_rel_gpu_u32(arrive, 1u);
      *s_last = before + 1u == chunks ? 1u : 0u;
    }
    *s_kfb = NO_BAD;
  }
  __syncthreads();
  if (*s_last == 0u) return false;
  write_stats(p, is_v, bh, chunks, s_kfb, [&](u32 k, int s, int c) { return ld_stat(part_g + (static_cast<i64>(k) * 4 + s) * D_V + c); });
  return true;
}

// The fused stage (SAGE2_QUANT_OP 5): statistics chunks and the group's ready flags.
//  sync[0]                     work ticket
//  sync[1 + 2g + kv]           statistics chunks of group g (kv: 0 K, 1 V) that have arrived
//  sync[1 + 2G + 2g + kv]      1 once k_stats/v_stats (and the first-bad flags) of g are final
// All zero at launch (the runtime clears them on the stream before each launch).

// A statistics item of the one-launch stages (fused, one-pass K/V): chunk `chunk` of group g's K
// (kv 0) or V (kv 1); the group's last arriver publishes the statistics with the group's ready flag
// (release after stats_chunk's barrier: every thread's final statistics go with it).
__device__ __forceinline__ void stats_item(const QuantizeParams& p, u8* smem, i64 groups, i64 g, i64 b, i64 h, int kv,
                                           u32 chunk, u32 chunks) {
  float* part_g = p.stats_part + (g * 2 + kv) * static_cast<i64>(chunks) * 4 * D_V;
  if (stats_chunk(p, smem, kv_input(p, kv == 1), kv == 1, b, h, g, 0, p.kv_len, part_g, chunk, chunks,
                  p.sync + 1 + 2 * g + kv) &&
      threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    ptx::st_release_gpu_u32(p.sync + 1 + 2 * groups + 2 * g + kv, 1u);
  }
}

// One thread polls (acquire, backing off up to ~1 µs); the barrier hands what it saw to the CTA.
__device__ __forceinline__ void wait_ready(const u32* flag) {
  if (threadIdx.x == 0) {
    u32 ns = 32;
#pragma unroll 1
    while (ptx::ld_acquire_gpu_u32(flag) == 0u) {
      ptx::nanosleep_u32(ns);
      ns = ns < 1024u ? 2u * ns : 1024u;
    }
  }
  __syncthreads();
}

}  // namespace qz
