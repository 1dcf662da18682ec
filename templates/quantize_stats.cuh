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

#if SAGE2_QZ_STATS_UNITS
// ---------------------------------------------------------------------------------------------
// A dense head's statistics in one pass of one CTA (kernels::stats_units_groups), no partials in
// global memory: its chunks are the SAMPLE_TILES sampled units of SAMPLE_UNIT keys, or, for a head
// of at most SAMPLE_TILES units (no sample), one chunk of every key. The CTA is U_GROUPS groups of
// UNIT_T threads; group g takes chunks g, g + U_GROUPS, ... (the at-once form: one sampled unit
// per group; the walk: one group, every chunk). Thread slot s = t / TPR holds rows s, s + P, ... of
// a chunk (P = SAGE2_QZ_ROWS, the contract's row slots), summed from 0.f in increasing row order,
// and stores its slot sums at the chunk's end; min / max as packed 16-bit max.NaN / min.NaN of
// the raw inputs (exact, order-free) over all its rows. After one barrier, the thread of channel c
// adds chunk k's P slot sums left to right from slot 0's and the chunks' sums left to right from
// chunk 0's (the order of kernels/quant_buffers.hpp, as the old one-chunk-at-a-time walk).
// The walk (U_PIPE) loads its next batch of rows before it adds the current one, so every thread
// keeps two batches in flight across chunk boundaries: the chunk-at-a-time walk waited for each
// unit's loads and combined it behind two barriers (bench/NOTES.md, session 39).
constexpr int U_GROUPS = SAGE2_QZ_STATS_UNITS;  // SAMPLE_TILES (at once) or 1 (the walk)
constexpr bool U_PIPE = U_GROUPS == 1;
constexpr int UP = SAGE2_QZ_ROWS;        // row slots of a chunk (P)
constexpr int U_TPR = SAGE2_QZ_TPR;
constexpr int UNIT_T = UP * U_TPR;       // threads per group
constexpr int U_RPT = SAMPLE_UNIT / UP;  // rows per thread of a sampled unit
// Rows per batch: 4 (8 in registers spilled at 64 registers on sm_80 / sm_120); the walk's batches
// lie within a unit (at head dims 17-32 batches across units spilled at 80 registers).
constexpr int U_RB = U_PIPE && U_RPT < 4 ? U_RPT : 4;
static_assert(!U_PIPE || (U_RPT % U_RB == 0 && (U_RPT / U_RB == 1 || U_RPT / U_RB == 2)), "the walk: 1 or 2 batches a unit");
constexpr int U_SLOT_W = U_TPR * 8;      // channels of a slot row in shared memory
static_assert(SAGE2_QZ_CPT == 1 && U_TPR * 8 >= HD, "units: one 8-channel chunk per thread");
static_assert(SAMPLE_TILES > 0 && (U_GROUPS == 1 || U_GROUPS == SAMPLE_TILES) && THREADS == U_GROUPS * UNIT_T &&
                  SAMPLE_UNIT % UP == 0,
              "units: 1 or SAMPLE_TILES groups of P row slots (kernels::quantize_kernel_config)");
// Slot sums [SAMPLE_TILES][P][U_SLOT_W] floats, packed max and min [U_GROUPS][P][U_SLOT_W / 2]
// each, first bad rows [STATS_D_MAX], K's first bad key (kernels::stats_units_smem).
constexpr int UNITS_SMEM = SAMPLE_TILES * UP * U_SLOT_W * 4 + U_GROUPS * UP * U_SLOT_W * 4 + STATS_D_MAX * 4 + 16;

// 16-bit lanes of w that hold a NaN / Inf replaced by +0 (what every statistic reads them as).
__device__ __forceinline__ u32 sane_pair(u32 w) {
  const u32 bad = quant_math::nonfinite_bits<IN_BF16>(w);  // bit 15 / 31 per non-finite lane
  return w & ~((bad >> 15) * 0xffffu);
}

__device__ __forceinline__ void units_stats(const QuantizeParams& p, u8* smem, bool is_v, i64 b, i64 h) {
  float* s_sum = reinterpret_cast<float*>(smem);
  u32* s_hi = reinterpret_cast<u32*>(smem + SAMPLE_TILES * UP * U_SLOT_W * 4);
  u32* s_lo = s_hi + U_GROUPS * UP * U_SLOT_W / 2;
  i32* s_fb = reinterpret_cast<i32*>(s_lo + U_GROUPS * UP * U_SLOT_W / 2);
  i32* s_kfb = s_fb + STATS_D_MAX;
  // (unsigned: shifts and masks)
  const int tid = threadIdx.x, g = threadIdx.x / UNIT_T, slot = threadIdx.x % UNIT_T / U_TPR, j = threadIdx.x % U_TPR;
  const i64 len = p.kv_len;
  const bool smp = sampled(len);
  if (U_GROUPS > 1 && !smp) asm volatile("trap;");  // (the launch refuses such buffers first)
  // This thread's chunks g + i·U_GROUPS, i < own, of rpc rows each (a head without a sample has at
  // most SAMPLE_TILES · SAMPLE_UNIT keys); rows past those are never read.
  const int chunks = smp ? SAMPLE_TILES : 1;
  const int own = chunks > g ? (chunks - g + U_GROUPS - 1) / U_GROUPS : 0;
  const int rpc = smp ? U_RPT : (len > slot ? static_cast<int>((len - slot + UP - 1) / UP) : 0);
  const int rows = own * rpc;
  const Input in = kv_input(p, is_v);
  const u16* head = row_ptr(in, b, h, 0);
  const u32 units = static_cast<u32>(sample_units(len));  // (< 2^32: the launch limits rows to 2^31)
  const i64 step = static_cast<i64>(UP) * in.sn;
  // The sampled unit of the thread's i-th chunk (sample_unit, from 32-bit parts).
  auto unit_of = [&](int i) -> i64 { return static_cast<i64>(static_cast<u64>(g + i * U_GROUPS) * units / SAMPLE_TILES); };
  // The key of the thread's q-th row (its chunk q / rpc; from 64-bit arithmetic on the fly: the
  // chunks' first keys held in registers spilled at 80 registers).
  auto key_of = [&](int q) -> i64 {
    if (!smp) return slot + static_cast<i64>(q) * UP;
    return unit_of(static_cast<int>(static_cast<u32>(q) / U_RPT)) * SAMPLE_UNIT + slot +
           static_cast<i64>(static_cast<u32>(q) % U_RPT) * UP;
  };
  constexpr u32 NEG_INF2 = IN_BF16 ? 0xff80ff80u : 0xfc00fc00u;
  constexpr u32 POS_INF2 = IN_BF16 ? 0x7f807f80u : 0x7c007c00u;
  float sum[8];
  u32 hi[4], lo[4];
  // One pass over the thread's rows; CHECKED reads non-finite values as 0 and records their rows.
  auto pass = [&](auto vec, auto checked) {
    constexpr bool VEC = decltype(vec)::value;
    constexpr bool CHECKED = decltype(checked)::value;
#pragma unroll
    for (int e = 0; e < 8; ++e) sum[e] = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) hi[w] = NEG_INF2, lo[w] = POS_INF2;
    // (a slot without rows adds 0.f: the contract sums every slot)
    if (rpc == 0)
      for (int i = 0; i < own; ++i) {
        float* d = s_sum + ((g + i * U_GROUPS) * UP + slot) * U_SLOT_W + j * 8;
        ptx::st_shared_v4(ptx::smem_addr(d), ptx::u32x4{0u, 0u, 0u, 0u});
        ptx::st_shared_v4(ptx::smem_addr(d + 4), ptx::u32x4{0u, 0u, 0u, 0u});
      }
    // One row's 8 channels (v: raw 16-bit pairs, non-finite ones already read as 0 where checked).
    auto accumulate = [&](const u32 (&v)[4]) {
      float x[8];
      to_f32x8(ptx::u32x4{v[0], v[1], v[2], v[3]}, x);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] += x[e];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        hi[w] = ptx::max_nan_x2<IN_BF16>(hi[w], v[w]);
        lo[w] = ptx::min_nan_x2<IN_BF16>(lo[w], v[w]);
      }
    };
    // The thread's slot sums of its i-th chunk, then the next chunk's from 0.f.
    auto store_sums = [&](int i) {
      float* d = s_sum + ((g + i * U_GROUPS) * UP + slot) * U_SLOT_W + j * 8;
      ptx::st_shared_v4(ptx::smem_addr(d), ptx::u32x4{ptx::f32_bits(sum[0]), ptx::f32_bits(sum[1]),
                                                      ptx::f32_bits(sum[2]), ptx::f32_bits(sum[3])});
      ptx::st_shared_v4(ptx::smem_addr(d + 4), ptx::u32x4{ptx::f32_bits(sum[4]), ptx::f32_bits(sum[5]),
                                                          ptx::f32_bits(sum[6]), ptx::f32_bits(sum[7])});
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] = 0.f;
    };
    // The next row's address: the walk finds each batch's first (a batch lies in one chunk), the
    // at-once form steps through its one chunk.
    const u16* rp = head + key_of(0) * in.sn;
    auto load = [&](ptx::u32x4 (&raw)[U_RB], int q0) {
      if (U_PIPE) rp = head + key_of(q0) * in.sn;
#pragma unroll
      for (int r = 0; r < U_RB; ++r) {
        raw[r] = q0 + r < rows ? load_chunk_as<VEC>(in, rp, j) : ptx::u32x4{0u, 0u, 0u, 0u};
        rp += step;
      }
    };
    auto add = [&](const ptx::u32x4 (&raw)[U_RB], int q0) {
#pragma unroll
      for (int r = 0; r < U_RB; ++r) {
        const int q = q0 + r;
        if (q >= rows) continue;
        u32 v[4] = {raw[r].x, raw[r].y, raw[r].z, raw[r].w};
        if (CHECKED) {
          u32 bad8 = 0u;  // bit e: channel j·8 + e
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            const u32 bad = quant_math::nonfinite_bits<IN_BF16>(v[w]);
            bad8 |= ((bad >> 15) & 1u) << (2 * w) | ((bad >> 31) & 1u) << (2 * w + 1);
            v[w] = sane_pair(v[w]);
          }
          if (bad8 != 0u) record_first_bad8(ptx::smem_addr(s_fb) + static_cast<u32>(j) * 32u, bad8, static_cast<i32>(key_of(q)));
        }
        accumulate(v);
        if (smp ? (static_cast<u32>(q) + 1u) % U_RPT == 0u : q + 1 == rows)  // the chunk's slot sums; the next from 0.f
          store_sums(smp ? static_cast<int>(static_cast<u32>(q) / U_RPT) : 0);
      }
    };
    ptx::u32x4 ra[U_RB], rb[U_RB];
    if constexpr (U_PIPE && VEC && !CHECKED) if (smp) {
      // The walk over a sample: every batch full and BPC batches a unit (both known here), so no
      // per-row tests, one pointer per unit (the general loop below spent ~60 of ~90 warp
      // instructions per row on them: ncu, session 39 d2).
      constexpr int BPC = U_RPT / U_RB;  // 1 or 2
      int k_load = 0, k_add = 0;
      auto load_full = [&](ptx::u32x4 (&raw)[U_RB], bool unit_start) {
        if (unit_start) {
          rp = head + (unit_of(k_load) * SAMPLE_UNIT + slot) * in.sn;
          ++k_load;
        }
#pragma unroll
        for (int r = 0; r < U_RB; ++r) {
          raw[r] = load_chunk_as<VEC>(in, rp, j);
          rp += step;
        }
      };
      auto add_full = [&](const ptx::u32x4 (&raw)[U_RB], bool unit_end) {
#pragma unroll
        for (int r = 0; r < U_RB; ++r) {
          const u32 v[4] = {raw[r].x, raw[r].y, raw[r].z, raw[r].w};
          accumulate(v);
        }
        if (unit_end) {
          store_sums(k_add);
          ++k_add;
        }
      };
      const int batches = own * BPC;  // (even: own is SAMPLE_TILES)
      load_full(ra, true);
#pragma unroll 1
      for (int bt = 0; bt < batches; bt += 2) {
        load_full(rb, BPC == 1);
        add_full(ra, BPC == 1);
        if (bt + 2 < batches) load_full(ra, true);
        add_full(rb, true);
      }
      return;
    }
    if (U_PIPE && VEC) {
      load(ra, 0);
#pragma unroll 1
      for (int q0 = 0; q0 < rows; q0 += 2 * U_RB) {
        load(rb, q0 + U_RB);
        add(ra, q0);
        load(ra, q0 + 2 * U_RB);
        add(rb, q0 + U_RB);
      }
    } else if (U_PIPE) {  // (rows read element by element: one batch at a time, as their registers allow)
#pragma unroll 1
      for (int q0 = 0; q0 < rows; q0 += U_RB) {
        load(ra, q0);
        add(ra, q0);
      }
    } else {
#pragma unroll
      for (int q0 = 0; q0 < U_RPT; q0 += U_RB) {
        load(ra, q0);
        add(ra, q0);
      }
    }
  };
  // The vector-or-scalar choice once (uniform over the CTA: the barrier below is in both).
  auto walk = [&](auto vec) {
    pass(vec, BoolC<false>{});
    for (int c = tid; c < STATS_D_MAX; c += THREADS) s_fb[c] = NO_BAD;
    if (tid == 0) *s_kfb = NO_BAD;
    __syncthreads();  // s_fb set before a checked pass records into it
    // A NaN / ±Inf input leaves an all-ones exponent in hi or lo (a thread without rows keeps ±Inf:
    // it has nothing to check). Rare: walk the rows again from memory in the checked form.
    u32 nonfinite = 0u;
#pragma unroll
    for (int w = 0; w < 4; ++w)
      nonfinite |= quant_math::nonfinite_bits<IN_BF16>(hi[w]) | quant_math::nonfinite_bits<IN_BF16>(lo[w]);
    if (nonfinite != 0u && rows > 0) pass(vec, BoolC<true>{});
  };
  if (VEC_HD && in.vec)
    walk(BoolC<VEC_HD>{});
  else
    walk(BoolC<false>{});
  const int mrow = g * UP + slot;
  ptx::st_shared_v4(ptx::smem_addr(s_hi + mrow * U_SLOT_W / 2 + j * 4), ptx::u32x4{hi[0], hi[1], hi[2], hi[3]});
  ptx::st_shared_v4(ptx::smem_addr(s_lo + mrow * U_SLOT_W / 2 + j * 4), ptx::u32x4{lo[0], lo[1], lo[2], lo[3]});
  __syncthreads();
  // (the pair's index again, not held through the walk: at 80 registers it spilled)
  const i64 bh = static_cast<i64>(blockIdx.z * gridDim.y + blockIdx.y);
  write_stats_of(p, is_v, bh, s_kfb, [&](int c, float& sum_c, float& mn, float& mx, i32& fb) {
#pragma unroll 1
    for (int k = 0; k < chunks; ++k) {
      const float* ps = s_sum + k * UP * U_SLOT_W + c;
      float s = ps[0];
#pragma unroll 4
      for (int sl = 1; sl < UP; ++sl) s += ps[sl * U_SLOT_W];
      sum_c = k == 0 ? s : sum_c + s;
    }
    const u32* ph = s_hi + c / 2;
    const u32* pl = s_lo + c / 2;
    u32 h2 = ph[0], l2 = pl[0];
#pragma unroll 4
    for (int r = 1; r < U_GROUPS * UP; ++r) {
      h2 = ptx::max_nan_x2<IN_BF16>(h2, ph[r * U_SLOT_W / 2]);
      l2 = ptx::min_nan_x2<IN_BF16>(l2, pl[r * U_SLOT_W / 2]);
    }
    float h0, h1, l0, l1;
    quant_math::unpack2<IN_BF16>(h2, h0, h1);
    quant_math::unpack2<IN_BF16>(l2, l0, l1);
    mx = (c & 1) ? h1 : h0;
    mn = (c & 1) ? l1 : l0;
    fb = s_fb[c];
  });
}
#endif

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
#if SAGE2_QZ_STATS_UNITS
  (void)n0;  // (dense: every sequence starts at row 0)
  (void)part_g;
  (void)s_part;
  units_stats(p, smem, is_v, b, h);
#else
#pragma unroll 1
  for (u32 c = first; c < chunks; c += step)
    stats_chunk(p, smem, kv_input(p, is_v), is_v, b, h, bh, n0, len, part_g, c, chunks, p.sync + 1 + 2 * bh + kv, s_part, form,
                step);
#endif
}


}  // namespace qz

// Entry point (name = kernels::KernelSpec::entry_name()). Split path: (b, h, block) from the grid
// (kernels::quantize_launch_shape); surplus CTAs exit.
extern "C" __global__ void __launch_bounds__(SAGE2_QZ_THREADS, SAGE2_QZ_MIN_CTAS) sage2_channel_stats(sage2::dev::QuantizeParams p) {
  qz::enter();
  // Dynamic: the walk's ring can exceed static shared memory's 48 KB (kernels::quantize_kernel_config
  // sizes it, and the launch gives SAGE2_QZ_DYN_SMEM bytes).
#if SAGE2_QZ_STATS_UNITS
  static_assert(qz::UNITS_SMEM <= SAGE2_QZ_DYN_SMEM, "channel_stats: the launch's shared memory is too small");
  static_assert(!SAGE2_QZ_STATS_CLUSTER, "channel_stats: the one-pass forms are never launched in clusters");
#else
  static_assert(qz::stats_smem_bytes<qz::MapS>() <= SAGE2_QZ_DYN_SMEM, "channel_stats: the launch's shared memory is too small");
#endif
  extern __shared__ __align__(16) u8 s_dyn[];
#if SAGE2_QZ_STATS_WHOLE_HEAD && !SAGE2_QZ_STATS_UNITS
  __shared__ __align__(16) float s_part[qz::SAMPLE_TILES * 4 * qz::D_V];  // the units' partials (stats_chunk)
#else
  float* s_part = nullptr;
#endif
  qz::channel_stats(p, s_dyn, s_part);
}
