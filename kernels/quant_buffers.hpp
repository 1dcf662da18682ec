// Layout of everything the quantize stage writes (the attention stage's inputs), for one call.
// One struct derives every shape from (problem sizes, attention KernelSpec); the quantize
// kernels, the CPU reference and the workspace planner all use it.
//
// Numerics of the quantize stage (the CPU reference implements exactly these float ops):
//  Non-finite inputs (NaN, ±Inf; include/sage2/reference.hpp "NaN / Inf policy"): every
//  statistic below (sum, min, max, q̄, q·k̄, group amax, V amax) reads a non-finite input element
//  as 0, and its own code is 0 — one bad value never spreads through a mean or a shared scale.
//  Where they were is recorded instead (q_bad, k_first_bad, v_first_bad); the attention
//  epilogue turns exactly the outputs that read them into NaN. For finite inputs the rules below
//  are unchanged (bit-identical codes).
//  stats  (per batch, head, channel c over the valid tokens n < len):  sum, min, max   (fp32)
//     sum order (fixed, so results are bit-reproducible and the reference bit-faithful): tokens
//     are cut into chunks of T tokens; chunk k's sum is
//        Σ_{s=0}^{P-1} ( Σ_{i>=0, k·T+s+i·P < min(len,(k+1)·T)} x[k·T+s+i·P] )
//     (inner sums from 0.f in increasing token order, then the P slot sums left to right from
//     slot 0's), and the total adds the chunk sums left to right from chunk 0's. T = stats_chunk
//     (kernels::quantize_stats_chunk, ~64 KiB of input) on every path but the cluster stage; P =
//     kernels::quantize_split_stats_rows_per_pass on the default split path (one CTA per chunk,
//     so the statistics fill the GPU whatever the head count), kernels::quantize_stats_rows_per_pass
//     on the fused path (SAGE2_QUANT_PATH=fused). A varlen sequence's chunks start at its first
//     key. The reference follows each (reference::QuantizeOptions::fused_stats_order,
//     cluster_stats_order). min/max are order-free.
//  k̄[c]  = smooth_k ? sum_K[c] / kv_len : 0
//  Q/K group g of a block (QuantLayout::q_group / k_group), x = float(input) - mean:
//     amax  = max |x| over the group's valid rows and real channels (x of a non-finite input
//             is 0 - mean; amax can still be Inf when finite values overflow fp32)
//     scale = amax / R                                  R = 127 (int8) or 7 (int4)
//     inv   = (amax > 0 && amax finite) ? R / amax : 0
//     t     = x * inv;  t = (t is NaN) ? 0 : t;  code = rint(clamp(t, -R, R))  (ties to even)
//  Padded rows/channels hold code 0. INT4 codes are packed two per byte: element 2j in the low
//  nibble, 2j+1 in the high nibble (two's complement), as mma .s4 reads them.
//  q̄ (smooth_q): mean of float(Q) over the block's valid rows, per channel.
//  q_kbias[i] = Σ_c float(Q[i,c]) · k̄[c]  (fp32, unscaled; LSE adds it back times sm_scale)
//  V (per channel c): μ = smooth_v ? sum_V[c]/kv_len : 0;
//     amax = smooth_v ? max(max_V[c] - μ, μ - min_V[c]) : max(|max_V[c]|, |min_V[c]|)
//     scale = amax / 448;  inv = (amax > 0 && finite) ? 448 / amax : 0
//     code = e4m3_rn_satfinite((float(V[n,c]) - μ) * inv)      stored transposed [c][n]
//     FP16 P̃V (KernelSpec::pv_fp16): scale = δ = 2^max(0, e - 15) where amax = f·2^e, f in
//     [0.5, 1) (δ = 1 unless |V - μ| reaches 2^15; amax 0: 1; not finite: amax), inv = (amax > 0 &&
//     finite) ? 1/δ : 0, code = fp16_rn((float(V[n,c]) - μ) * inv) (exact for an unsmoothed fp16 V)
//     fp16 accumulation (KernelSpec::pv_acc16; an fp16 accumulator holds at most kPvAcc16Keys = 64
//     keys' products): e4m3: 2.25 (kV8Acc16Max, the reference's bound for "fp32+fp16") in place of
//     448, so 64·448·2.25 = 64512 < 65504; FP16: 2^max(0, e - 9) (kV16Acc16Exp) in place of
//     2^max(0, e - 15), so |V̂| < 2^9 and 64·2^9 = 32768.
//  Sampled statistics (KernelSpec::sampled_stats: Auto's split stage for dense calls; the
//  reference's QuantizeOptions::sample_statistics): with T = ceil(kv_len / U) units of U =
//  kSampleUnit keys (64, whatever the tile), the statistics stats / k̄ / μ above are taken over
//  the keys of units ⌊i·T/S⌋, i < S = kSampleTiles when T > S (the sampled units are then all
//  full), summed in chunks of one sampled unit (T = U in the formula above, chunks in sample
//  order), and k̄ / μ divide by the sample's key count (S·U); when T <= S they are the statistics
//  above (every key, the same order). V's amax: A_s from
//  the sampled statistics as above, H_s = kVHeadroom · A_s where that is finite (else A_s), and
//  amax = A_all > H_s ? A_all : H_s, A_all = max over every key of |float(V) − μ| (non-finite
//  inputs read as 0), so no code saturates; v_amax holds it. The flags below still cover every key.
//  Flags (padded entries: q_bad 0, first-bad INT32_MAX):
//     q_bad[i]        = 1 if Q row i has a non-finite element (real channels), else 0
//     k_first_bad     = smallest key j whose K row has a non-finite element; INT32_MAX if none
//     v_first_bad[c]  = smallest key j with V[j, c] non-finite; INT32_MAX if none
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/problem_shape.hpp"
#include "kernels/quant_layout.hpp"

namespace sage2::kernels {

// Statistics chunk T (tokens per statistics item of the fused stage) — the one definition the
// kernel (SAGE2_QZ_STATS_CHUNK), QuantBuffers and the CPU reference use. `spec`: the attention
// spec or any quantize spec derived from it.
int quantize_stats_chunk(const KernelSpec& spec);

struct QuantProblem : ProblemShape, SeqLayout {
  // Tensor masks: the kind (KernelSpec::mask) and the mask's own batch / head extents (1 where it
  // broadcasts, else batch / q_heads): the class table has one [q_blocks][k_blocks] per pair.
  int mask = 0;
  std::int64_t mask_batch = 1, mask_heads = 1;
};

struct QuantBuffers : QuantOptions {
  QuantProblem p;
  QuantLayout layout;
  // The attention kernel quantizes Q itself (KernelSpec::q_in_kernel): no Q̂ buffers (q_codes,
  // q_scale, q_kbias, q_bad have count 0).
  bool q_in_kernel = false;
  // KernelSpec::sampled_stats: the statistics over a sample of KV tiles (the split path, dense).
  bool sampled_stats = false;

  // Dense: ceil(len / bq), ceil(len / bk) per (batch, head). Varlen: the packed blocks per head,
  // a bound for any lengths of the totals, ceil(total / b) + batch (each sequence adds at most
  // one partial block), over which every per-token buffer is [1][H][...] (token_batch() = 1).
  std::int64_t q_blocks = 0, k_blocks = 0;
  std::int64_t q_len_pad = 0, kv_len_pad = 0;   // blocks * tile
  int d_qk = 0;        // padded Q/K head dim (elements)
  int row_bytes = 0;   // bytes of one quantized Q/K row
  int d_v = 0;         // padded V head dim
  int stats_chunk = 0;            // tokens per statistics chunk (kernels::quantize_stats_chunk)
  std::int64_t stats_chunks = 0;  // ceil(kv_len / stats_chunk); sampled over k_blocks > kSampleTiles: kSampleTiles

  // Batch entries of the per-token and per-block buffers: p.batch, 1 for varlen (packed rows).
  std::int64_t token_batch() const { return p.varlen ? 1 : p.batch; }

  // Element counts of each buffer ([dims] in row-major order). Absent buffers have count 0.
  // [B] below is token_batch() for the per-token and per-block buffers (q_*, k_codes, k_scale,
  // v_codes, q_bad) and p.batch for the per-(batch, head) ones.
  std::int64_t q_codes() const;   // i8  [B][Hq][q_len_pad][row_bytes]
  std::int64_t q_scale() const;   // f32 [B][Hq][q_blocks][q_groups_per_block]
  std::int64_t q_mean() const;    // f32 [B][Hq][q_blocks][d_qk]            (smooth_q)
  std::int64_t q_kbias() const;   // f32 [B][Hq][q_len_pad]                 (smooth_k)
  std::int64_t k_codes() const;   // i8  [B][Hkv][kv_len_pad][row_bytes]
  std::int64_t k_scale() const;   // f32 [B][Hkv][k_blocks][k_groups_per_block]
  std::int64_t k_mean() const;    // f32 [B][Hkv][d_qk]  (zeros when !smooth_k)
  std::int64_t k_stats() const;   // f32 [B][Hkv][3][d_qk]   sum, min, max
  std::int64_t v_codes() const;   // u8 (e4m3) [B][Hkv][d_v][kv_len_pad]; FP16 V̂ (layout.v_fp16):
                                  // fp16, 2 bytes a code — this count is in BYTES then
  std::int64_t v_scale() const;   // f32 [B][Hkv][d_v]
  std::int64_t v_mean() const;    // f32 [B][Hkv][d_v]   (zeros when !smooth_v)
  std::int64_t v_stats() const;   // f32 [B][Hkv][3][d_v]
  std::int64_t q_bad() const;        // u8  [B][Hq][q_len_pad]   row has a non-finite element
  std::int64_t k_first_bad() const;  // i32 [B][Hkv]             first key with a non-finite element
  std::int64_t v_first_bad() const;  // i32 [B][Hkv][d_v]        per channel: first non-finite key
  // Statistics scratch (the attention stage never reads it): per-chunk partials and the
  // arrival counters of the split path's channel_stats and of the fused stage.
  std::int64_t stats_part() const;   // f32 [B][Hkv][2][stats_chunks][4][d_v]; varlen: [Hkv][2][slots][4][d_v]
  std::int64_t sync_words() const;   // u32 [1 + 4·B·Hkv]  work ticket, arrivals, ready flags;
                                     // sampled: + [B·Hkv][d_v] V's overflow maxima (f32 bits)
  // Sampled statistics only (appended):
  std::int64_t v_amax() const;       // f32 [B][Hkv][d_v]  the amax V's scale was made from
  // Varlen only (templates/seq_table.cuh):
  std::int64_t seqs() const;         // SeqEntry [B]  (8 × i32 each)
  std::int64_t q_map() const;        // i32 [q_blocks]  sequence of each packed Q block
  std::int64_t k_map() const;        // i32 [k_blocks]
  // Tensor masks only:
  std::int64_t mask_tiles() const;   // u8 [mask_batch][mask_heads][q_blocks][k_blocks]  tile classes
  std::int64_t mask_bias() const;    // f32, like mask_tiles: a constant tile's additive term (additive masks)

  // Byte offsets of each buffer inside one workspace allocation (each 256-byte aligned). The
  // non-finite flags come after v_stats, the fused stage's scratch after them (appended: the
  // earlier offsets did not move). `sync` must be zero when channel_stats or a fused launch
  // starts: the runtime clears it (sync_bytes) on the stream before each call's quantize stage
  // (kernels::quantize_clears_sync).
  struct Offsets {
    std::size_t q_codes, q_scale, q_mean, q_kbias, k_codes, k_scale, k_mean, k_stats, v_codes,
        v_scale, v_mean, v_stats, q_bad, k_first_bad, v_first_bad, stats_part, sync, sync_bytes, seqs, q_map,
        k_map, mask_tiles, mask_bias, v_amax, v_over, total;  // v_over: inside sync
  };
  Offsets offsets() const;
};

// attention_spec: the spec of the attention kernel that will consume the buffers.
QuantBuffers quant_buffers(const QuantProblem& p, const KernelSpec& attention_spec);

// Whether the sampled statistics of these buffers take a sample (more than kSampleTiles units of
// kSampleUnit keys; else every key).
bool stats_sampled(const QuantBuffers& b);
// Whether channel_stats (quantize spec `stats_spec`) keeps a sampled head's partials in shared
// memory (dense sampled statistics, every arch): one CTA per (head, K|V) takes the kSampleTiles
// units in one pass (stats_units_groups, head dims 9-256), or elsewhere in turn, combining their
// partials in the contract's order, there on sm_90a also as a cluster of 2 or kSampleTiles CTAs
// that combine them over distributed shared memory (the launch's choice:
// kernels::stats_cluster_size) — no partials in global memory, no arrival counter.
bool stats_whole_head(const KernelSpec& stats_spec);
// Whether such a channel_stats spec runs its at-once form (KernelSpec::stats_at_once, head dims 9 to
// 256: one 8-channel chunk per thread and row slots that divide a unit): one CTA per (head, K|V) of
// kSampleTiles groups of the walk's threads, group u loading every row of sampled unit u at once,
// one barrier before the combine (the walk's order and bits); no ring, no clusters.
bool stats_units_at_once(const KernelSpec& stats_spec);
// The thread groups of channel_stats' one-pass form over a whole head (templates/quantize_stats.cuh
// units_stats; SAGE2_QZ_STATS_UNITS): kSampleTiles for the at-once form, 1 for the walk (head dims
// 9 to 256: one CTA per (head, K|V) takes its chunks one after another, the next batch of rows in
// flight while it adds the current one, one barrier before the combine; never in clusters), 0 where
// neither applies (those walk the units one at a time, on sm_90a possibly in clusters:
// kernels::stats_cluster_size).
int stats_units_groups(const KernelSpec& stats_spec);
// Whether a quantize stage of these ops, for the attention spec and buffers, counts arrivals in
// QuantBuffers' `sync` words or needs V's overflow maxima zero, which must then be zero when it
// starts (channel_stats' chunks, the fused stage's items). Not for channel_stats over a sampled
// head (its partials in shared memory, in any of stats_whole_head's forms) or over a single chunk:
// no counter, and its V statistics zero the overflow maxima.
bool quantize_clears_sync(const std::vector<QuantOp>& ops, const KernelSpec& attention_spec, const QuantBuffers& b);

}  // namespace sage2::kernels
