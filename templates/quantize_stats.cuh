// Quantize op 1 entry, sage2_channel_stats: per (batch, kv head, channel): sum, min, max of K and
// of V, and (SAGE2_VARLEN) the varlen table, built by its first CTA. kernels/family_quantize.cpp
// (kQuantOps) names this file for the op; the shared parts are quantize_common.cuh and the
// headers included below.
#pragma once

#include "quantize_common.cuh"

namespace qz {

static_assert(SAGE2_QUANT_OP == 1,
              "quantize_stats.cuh is the entry of quantize op 1 (kernels/family_quantize.cpp kQuantOps)");
// One thread mapping for every row of this kernel (SAGE2_QZ_ROWS/_TPR/_CPT/_CHUNKS).
using MapS = Map<SAGE2_QZ_ROWS, SAGE2_QZ_TPR, SAGE2_QZ_CPT, SAGE2_QZ_CHUNKS>;

// ---------------------------------------------------------------------------------------------
// The varlen table (SAGE2_VARLEN; run by the first CTA of sage2_channel_stats, the stage's first
// kernel, so that it costs no launch): one CTA builds the sequence table and the block maps of a
// varlen call from the caller's arrays (include/sage2/sage2.hpp SeqLens), so that lengths stay on
// the device (a graph replays new lengths); the later kernels of the call read them. Packed: sequence s = tokens [cu[s], cu[s+1]);
// key padding (no cu arrays): q_len tokens of batch entry s, and kv_lens[s] keys. Arrays that
// break the rules (cu[0] != 0, decreasing, past the tensor, kv_lens outside [0, Nk]) empty the
// maps, so no later kernel does anything, and fill the output and LSE with NaN.
#if SAGE2_VARLEN
constexpr int TABLE_THREADS = THREADS;
__device__ __forceinline__ void varlen_table(const QuantizeParams& p) {
  __shared__ i32 s_q[TABLE_THREADS], s_k[TABLE_THREADS];
  __shared__ i32 s_carry[2];
  __shared__ int s_bad;
  const int tid = threadIdx.x;
  if (tid == 0) { s_carry[0] = s_carry[1] = 0; s_bad = 0; }
  __syncthreads();
  const bool packed = p.cu_q != nullptr;
#pragma unroll 1
  for (i64 base = 0; base < p.batch; base += TABLE_THREADS) {
    const i64 s = base + tid;
    sage2::dev::SeqEntry e{};
    bool bad = false;
    if (s < p.batch) {
      if (packed) {
        const i64 q0 = p.cu_q[s], q1 = p.cu_q[s + 1], k0 = p.cu_k[s], k1 = p.cu_k[s + 1];
        bad = (s == 0 && (q0 != 0 || k0 != 0)) || q1 < q0 || k1 < k0 || q1 > p.total_q || k1 > p.total_k;
        e.q_start = static_cast<i32>(q0);
        e.q_len = static_cast<i32>(q1 - q0);
        e.k_start = static_cast<i32>(k0);
        e.k_len = static_cast<i32>(k1 - k0);
      } else {
        const i64 kl = p.kv_lens[s];
        bad = kl < 0 || kl > p.kv_len;
        e.q_start = 0;
        e.q_len = static_cast<i32>(p.q_len);
        e.k_start = 0;
        e.k_len = static_cast<i32>(kl);
      }
      if (bad) e.q_len = e.k_len = 0;
    }
    if (bad) s_bad = 1;
    // Inclusive scans of the block counts (Hillis-Steele: a one-CTA set-up kernel).
    s_q[tid] = (e.q_len + BQ - 1) / BQ;
    s_k[tid] = (e.k_len + BK - 1) / BK;
    __syncthreads();
#pragma unroll 1
    for (int d = 1; d < TABLE_THREADS; d *= 2) {
      const i32 aq = tid >= d ? s_q[tid - d] : 0, ak = tid >= d ? s_k[tid - d] : 0;
      __syncthreads();
      s_q[tid] += aq;
      s_k[tid] += ak;
      __syncthreads();
    }
    if (s < p.batch) {
      e.q_blk = s_carry[0] + s_q[tid] - (e.q_len + BQ - 1) / BQ;
      e.k_blk = s_carry[1] + s_k[tid] - (e.k_len + BK - 1) / BK;
      p.seqs[s] = e;
    }
    __syncthreads();
    if (tid == 0) { s_carry[0] += s_q[TABLE_THREADS - 1]; s_carry[1] += s_k[TABLE_THREADS - 1]; }
    __syncthreads();
  }
  // The bounds hold for valid lengths (Σ ceil(len / b) <= ceil(total / b) + B); kept as a check.
  if (tid == 0 && (s_carry[0] > p.q_map_len || s_carry[1] > p.k_map_len)) s_bad = 1;
  __syncthreads();
  const bool bad = s_bad != 0;
  // Block maps: the sequence of packed block X is the last one starting at or before X (empty
  // sequences after it start past X).
#pragma unroll 1
  for (int kv = 0; kv < 2; ++kv) {
    i32* map = kv ? p.k_map : p.q_map;
    const i64 n = kv ? p.k_map_len : p.q_map_len, used = bad ? 0 : s_carry[kv];
#pragma unroll 1
    for (i64 X = tid; X < n; X += TABLE_THREADS) {
      i32 seq = sage2::dev::kNoSeq;
      if (X < used) {
        i64 lo = 0, hi = p.batch - 1;
        while (lo < hi) {
          const i64 mid = (lo + hi + 1) / 2;
          if ((kv ? p.seqs[mid].k_blk : p.seqs[mid].q_blk) <= X) lo = mid; else hi = mid - 1;
        }
        seq = static_cast<i32>(lo);
      }
      map[X] = seq;
    }
  }
  if (!bad) return;
  const u16 nan16 = IN_BF16 ? static_cast<u16>(0x7fc0u) : static_cast<u16>(0x7e00u);
  const i64 rows = p.out_batch * p.q_heads * p.out_seq;
#pragma unroll 1
  for (i64 i = tid; i < rows * HD; i += TABLE_THREADS) {
    const i64 r = i / HD, c = i % HD;
    const i64 b = r / (p.q_heads * p.out_seq), h = (r / p.out_seq) % p.q_heads, n = r % p.out_seq;
    static_cast<u16*>(p.out)[b * p.o_stride_batch + h * p.o_stride_head + n * p.o_stride_seq + c] = nan16;
  }
  if (p.lse)
    for (i64 i = tid; i < p.lse_count; i += TABLE_THREADS) p.lse[i] = ptx::bits_f32(0x7fc00000u);
}
#endif

}  // namespace qz

#include "quantize_stats_chunk.cuh"

namespace qz {

// sage2_channel_stats: blockIdx.x = 2·c + kv (kv 0: K, d_qk outputs; 1: V, d_v outputs) takes
// statistics chunks c, c + gridDim.x/2, ... of its (sequence, kv head) (stats_chunk; sampled
// statistics: one chunk per sampled unit of keys, a head's partials in shared memory when
// SAGE2_QZ_STATS_WHOLE_HEAD, whose first-bad flags quantize_k / quantize_v then
// lower over every key; a varlen
// sequence may be longer than the bound the grid was sized for); the last chunk to arrive writes
// the statistics. Padded channels get 0, 0, 0. The same walk finds the first non-finite key per
// channel: v_first_bad[c] (V; padded channels INT32_MAX) and k_first_bad = min over K's real
// channels. A sequence without keys has no chunk: its first CTA writes the empty statistics.
__device__ __forceinline__ void channel_stats(const QuantizeParams p, u8* smem, float* s_part) {
  i64 b, h, bh;
  if (!block_bh(p.batch, p.kv_heads, b, h, bh)) return;
  bool is_v = (blockIdx.x & 1u) != 0u;
  int kv = is_v ? 1 : 0;
  i64 n0 = 0, len = p.kv_len;
#if SAGE2_VARLEN
  if (bh == 0 && blockIdx.x == 0) varlen_table(p);
  // The sequence's keys straight from the caller's arrays (the table is being built by another
  // CTA of this launch), clamped into the tensor: invalid arrays read nothing outside it (the
  // table then poisons the whole output and empties the maps).
  i64 row0;  // the sequence's first row among all the tensor's rows of head h
  if (p.cu_k) {
    const i64 k0 = p.cu_k[b], k1 = p.cu_k[b + 1];
    n0 = k0 < 0 ? 0 : (k0 > p.total_k ? p.total_k : k0);
    len = k1 < n0 ? 0 : (k1 > p.total_k ? p.total_k : k1) - n0;
    row0 = n0;
  } else {
    const i64 kl = p.kv_lens[b];
    len = kl < 0 ? 0 : (kl > p.kv_len ? p.kv_len : kl);
    row0 = b * p.kv_len;
  }
  // Partial slots of sequence b: b + row0/T onwards, disjoint from every other sequence's (each
  // sequence adds at most one slot to the chunks of the rows before it), < the buffer's
  // B + ceil(total_k / T) + 1 per (kv head, K|V).
  const i64 slots = p.batch + (p.total_k + STATS_T - 1) / STATS_T + 1;
  float* part_g = p.stats_part + ((h * 2 + kv) * slots + b + row0 / STATS_T) * 4 * D_V;
#else
  // (kernels::QuantBuffers::stats_part: stats_chunks per (batch, kv head, K|V))
  const i64 head_chunks = sampled(p.kv_len) ? SAMPLE_TILES : (p.kv_len + STATS_T - 1) / STATS_T;
  float* part_g = p.stats_part + (bh * 2 + kv) * head_chunks * 4 * D_V;
#endif
  const u32 chunks = sampled(len) ? SAMPLE_TILES : static_cast<u32>((len + STATS_T - 1) / STATS_T);
  u32 first = blockIdx.x >> 1, step = gridDim.x >> 1;
  // A sampled head's partials in shared memory (kernels::stats_whole_head): walked by one CTA
  // (x = kv: this CTA takes every unit), or on sm_90a by a cluster of S = 2 or SAMPLE_TILES CTAs
  // when the launch has 2 · S of them (kernels::stats_cluster_size: x = kv · S + rank; rank r
  // takes units r, r + S, ...).
  PartsIn form = SAGE2_QZ_STATS_WHOLE_HEAD && sampled(len) ? PartsIn::OwnCta : PartsIn::Global;
#if SAGE2_QZ_STATS_CLUSTER
  if (form == PartsIn::OwnCta && gridDim.x > 2u) {
    form = PartsIn::Cluster;
    is_v = blockIdx.x >= step;
    kv = is_v ? 1 : 0;
    first = blockIdx.x % step;
  }
#endif
  if (chunks == 0u) {
    if (first != 0u) return;
    // No keys (varlen): what the walk gives for no rows — sum 0, min +Inf, max -Inf (padded
    // channels 0, 0, 0), no bad key — written directly: a second instantiation of the walk here
    // doubled the kernel's code (NVRTC: 1.2 s → 0.67 s optimized at hd 320; bench/NOTES.md, session 21).
    if (is_v)  // no V tile writes the scale and mean, which the epilogue multiplies by 0 rows
      for (int c = threadIdx.x; c < D_V; c += THREADS) p.v_scale[bh * D_V + c] = p.v_mean[bh * D_V + c] = 0.f;
    const int d_out = is_v ? D_V : D_QK;
    float* out = (is_v ? p.v_stats : p.k_stats) + bh * 3 * d_out;
    for (int c = threadIdx.x; c < d_out; c += THREADS) {
      out[c] = 0.f;
      out[d_out + c] = c < HD ? ptx::bits_f32(0x7f800000u) : 0.f;
      out[2 * d_out + c] = c < HD ? ptx::bits_f32(0xff800000u) : 0.f;
      if (is_v) p.v_first_bad[bh * D_V + c] = NO_BAD;
    }
    if (!is_v && threadIdx.x == 0) p.k_first_bad[bh] = NO_BAD;
    return;
  }
#pragma unroll 1
  for (u32 c = first; c < chunks; c += step)
    stats_chunk(p, smem, kv_input(p, is_v), is_v, b, h, bh, n0, len, part_g, c, chunks, p.sync + 1 + 2 * bh + kv, s_part, form,
                step);
}


}  // namespace qz

// Entry point (name = kernels::KernelSpec::entry_name()). Split path: (b, h, block) from the grid
// (kernels::quantize_launch_shape); surplus CTAs exit.
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_channel_stats(sage2::dev::QuantizeParams p) {
  qz::enter();
  // Dynamic: the walk's ring can exceed static shared memory's 48 KB (kernels::quantize_kernel_config
  // sizes it, and the launch gives SAGE2_QZ_DYN_SMEM bytes).
  static_assert(qz::stats_smem_bytes<qz::MapS>() <= SAGE2_QZ_DYN_SMEM, "channel_stats: the launch's shared memory is too small");
  extern __shared__ __align__(16) u8 s_dyn[];
#if SAGE2_QZ_STATS_WHOLE_HEAD
  __shared__ __align__(16) float s_part[qz::SAMPLE_TILES * 4 * qz::D_V];  // the units' partials (stats_chunk)
#else
  float* s_part = nullptr;
#endif
  qz::channel_stats(p, s_dyn, s_part);
}
