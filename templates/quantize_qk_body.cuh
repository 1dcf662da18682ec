// quantize_qk: the Q / K item body (every kernel that writes Q̂ or K̂).
#pragma once

#include "quantize_common.cuh"

namespace qz {

// ---------------------------------------------------------------------------------------------
// sage2_quantize_q / sage2_quantize_k: CTA = (batch, head, block of ROWS tokens).
//  K: mean = smooth_k ? k_stats.sum / kv_len : 0 (written to k_mean by block 0); sampled
//     statistics: / the sample's keys, and a block with a non-finite key lowers k_first_bad.
//  Q: mean = smooth_q ? block mean over valid rows (sum order: per thread in row order, then
//     slots in order; divided by the valid row count) : 0; q_kbias[i] = Σ_c float(Q[i,c]) · k̄[c]
//     (per thread over its channels in order, then a butterfly over the row's TPR threads).
//  x = float(input) - mean; group amax = max |x| (unsigned max of |x|'s bits);
//  scale = amax / R; inv = finite positive amax ? R / amax : 0; code = rint(clamp(x*inv)).
//  A non-finite input reads as 0 in the mean, q·k̄ and amax; its code is 0; Q rows with one set
//  q_bad (padded rows 0).
// Rows are kept in registers between the passes when ITEMS * CPT <= 8 (16-byte chunks), else
// re-read in rolled loops (the re-reads hit L1/L2; this keeps big head dims quick to compile).


// ---- K, lean form (kernels::k_group_runs: each thread's rows come in runs of K_RUN items of one
// scale group, and K_LANES consecutive lanes hold rows of that group too; every row in registers).
// Rows past the end hold a copy of their run's first row (quantize_qk's load_rows), so that
// neither pass tests rows.

// The group maxima from packed per-channel maxima and minima over each run. Over the rows x of a
// channel, max |fl(x - m)| = max(|fl(xmax - m)|, |fl(m - xmin)|) (rounding is monotonic, fl(-a) =
// -fl(a)): the same bits as the per-row pass, with one packed max and one packed min per two
// elements instead of a conversion, a subtraction and a maximum per element, and one butterfly and
// one shared atomic per run instead of per row. Returns nonzero when a maximum is not finite: a NaN
// or ±Inf input (max.NaN / min.NaN propagate NaN) or an x - m that overflows, which the per-row
// pass must handle (it reads non-finite inputs as 0).
template <class M, int K_RUN, int K_LANES>
__device__ __forceinline__ u32 k_run_maxima(const ptx::u32x4 (&cache)[M::ITEMS][M::CPT], const float (&mean_r)[M::CPT][8],
                                            int valid, u32* s_amax) {
  constexpr int TPR = M::TPR, CPT = M::CPT, RPP = M::RPP, ITEMS = M::ITEMS;
  constexpr u32 NEG_INF2 = IN_BF16 ? 0xff80ff80u : 0xfc00fc00u;
  constexpr u32 POS_INF2 = IN_BF16 ? 0x7f807f80u : 0x7c007c00u;
  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;
  u32 bad = 0u;
#pragma unroll
  for (int a = 0; a < ITEMS / K_RUN; ++a) {
    const int first = slot + a * K_RUN * RPP;  // this thread's first row of the run
    u32 hi[CPT][4], lo[CPT][4];
#pragma unroll
    for (int k = 0; k < CPT; ++k)
#pragma unroll
      for (int w = 0; w < 4; ++w) hi[k][w] = NEG_INF2, lo[k][w] = POS_INF2;
#pragma unroll
    for (int i = a * K_RUN; i < (a + 1) * K_RUN; ++i) {
#pragma unroll
      for (int k = 0; k < CPT; ++k) {
        const ptx::u32x4& c = cache[i][k];
        const u32 v[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          hi[k][w] = ptx::max_nan_x2<IN_BF16>(hi[k][w], v[w]);
          lo[k][w] = ptx::min_nan_x2<IN_BF16>(lo[k][w], v[w]);
        }
      }
    }
    float am = 0.f;
    if (first < valid) {
#pragma unroll
      for (int k = 0; k < CPT; ++k) {
        if (lane_r + k * TPR < CH_IN) {
          float xh[8], xl[8];
          to_f32x8(ptx::u32x4{hi[k][0], hi[k][1], hi[k][2], hi[k][3]}, xh);
          to_f32x8(ptx::u32x4{lo[k][0], lo[k][1], lo[k][2], lo[k][3]}, xl);
          // max(|a|, |b|) = max(a, b) here: a = fl(xmax - m) >= fl(xmin - m) = -b, so the larger
          // of the two is >= 0 (a zero's sign is cleared below)
#pragma unroll
          for (int e = 0; e < 8; ++e) am = ptx::max_nan(am, ptx::max_nan(xh[e] - mean_r[k][e], mean_r[k][e] - xl[e]));
        }
      }
    }
    // (NaN bits order above +Inf: an unsigned max keeps a NaN)
    const u32 m = ptx::group_max_u32<K_LANES>(ptx::abs_bits(am));
    bad |= m >= 0x7f800000u ? 1u : 0u;
    if (tid % K_LANES == 0 && first < valid) ptx::red_max_shared_u32(ptx::smem_addr(&s_amax[sage2_k_group_table[first]]), m);
  }
  return bad;
}

// The 8-bit codes when every input of the CTA is finite: one inverse scale per run (its rows'
// group); rows past the end get 0, which makes their codes 0 (|x - m| is finite), and so do padded
// channels (x = m = 0): no per-row branches. Codes by code_byte_finite (no cvt) unless the run's
// group has an infinite inverse (values below R / FLT_MAX).
template <class M, int K_RUN>
__device__ __forceinline__ void k_run_codes(const ptx::u32x4 (&cache)[M::ITEMS][M::CPT], const float (&mean_r)[M::CPT][8],
                                            int valid, const float* s_inv, i8* codes) {
  constexpr int ROWS = M::ROWS, TPR = M::TPR, CPT = M::CPT, CHUNKS = M::CHUNKS, RPP = M::RPP, ITEMS = M::ITEMS;
  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;
  float inv_run[ITEMS / K_RUN];
#pragma unroll
  for (int a = 0; a < ITEMS / K_RUN; ++a) {
    const int first = slot + a * K_RUN * RPP;
    inv_run[a] = first < valid ? s_inv[sage2_k_group_table[first]] : 0.f;
  }
  i8* dst0 = codes + static_cast<i64>(slot) * ROW_BYTES;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int r = slot + i * RPP;
    if (ROWS % RPP != 0 && r >= ROWS) continue;  // (slot < RPP: only a partial last pass has such rows)
    const float inv = r < valid ? inv_run[i / K_RUN] : 0.f;
    const bool fast = quant_math::group_inv_finite(inv_run[i / K_RUN]);
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j >= CHUNKS) continue;
      float x[8];
      to_f32x8(cache[i][k], x);
      u32 b[8];
      if (fast) {
#pragma unroll
        for (int e = 0; e < 8; ++e) b[e] = quant_math::code_byte_finite(x[e] - mean_r[k][e], inv);
      } else {  // a group of tiny values: its inverse is infinite
#pragma unroll
        for (int e = 0; e < 8; ++e) b[e] = static_cast<u32>(r < valid ? quant_int<127>(x[e] - mean_r[k][e], inv) : 0);
      }
      ptx::st_v2(dst0 + static_cast<i64>(i) * RPP * ROW_BYTES + j * 8, quant_math::pack_low_bytes(b[0], b[1], b[2], b[3]),
                 quant_math::pack_low_bytes(b[4], b[5], b[6], b[7]));
    }
  }
}

// ---- K, warp-group form (the split K kernel where every warp can hold whole scale groups). A K
// scale group is 16 rows of one 64-key unit, 64·(g/4) + 8m + 2·(g%4) + e (m < 8, e < 2: the wgmma
// S fragment's keys of one thread, kernels::QuantLayout::k_group). Here warp w takes groups
// w·GW .. w·GW + GW − 1, lane (s, j) = (lane / TPR, lane % TPR) chunk j of the group's rows
// q = s + S·i (i < RUN), so a group's maximum is one warp reduction: no shared memory, no barrier,
// each warp loads, reads its channels' k̄, takes its maxima and writes its codes on its own (the
// CTA-wide form waited three times for its slowest thread). The same bits: maxima are order-free,
// scales and codes the same float ops; a group with a non-finite maximum takes the per-row form
// (non-finite inputs read as 0, their codes 0), as the CTA-wide form does for the whole CTA.
constexpr bool k_groups_of_16_rows() {
  for (int r = 0; r < BK; ++r)
    if (sage2_k_group_table[r] != (r % 8) / 2 + 4 * (r / 64)) return false;
  return true;
}
template <class M>
struct KWarpGroups {
  static constexpr int S = 32 / M::TPR;                 // row slots of a warp
  static constexpr int RUN = S <= 16 ? 16 / S : 1;      // a lane's rows of one group
  static constexpr int GW = M::ITEMS / RUN;             // groups per warp
  // (rows of 8 or 16 lanes, more than half of them on real channels: head dims 33-128; the
  // narrower rows' 4-lane groups were not measured)
  static constexpr bool value = SAGE2_QUANT_OP == 3 && SAGE2_QK_BITS == 8 && M::CPT == 1 && M::TPR >= M::CHUNKS &&
                                (M::TPR == 8 || M::TPR == 16) && 2 * CH_IN > M::TPR && M::ROWS == BK && BK % 64 == 0 &&
                                M::ROWS % M::RPP == 0 && M::ITEMS <= 8 && M::ITEMS % RUN == 0 &&
                                (THREADS / 32) * GW * 16 == BK && SAGE2_K_GROUPS == BK / 16 && k_groups_of_16_rows();
  // The k̄ rows: a static array of their own where the lanes match the row's real chunks (hd 64,
  // 128: ptxas then issues the k̄ loads ahead of the rows; fp16 hd 128's K ran 20 % longer from 4K
  // with one k̄ load behind them, with the rows in the item's shared memory), else the item's
  // shared memory (qk_smem_bytes: the static array cost 4-8 bytes of spills; bench/NOTES.md,
  // session 38).
  static constexpr bool OWN_KBAR_ROWS = M::TPR == M::CHUNKS && CH_IN == M::CHUNKS;
};

// Shared memory of the Q / K item bodies: the CTA-wide form's per-channel and per-group words, or
// the warp-group form's k̄ rows, one of D_QK floats per warp (KWarpGroups).
template <bool IS_Q, class M>
constexpr int qk_smem_bytes() {
  constexpr int GROUPS = IS_Q ? SAGE2_Q_GROUPS : SAGE2_K_GROUPS;
  constexpr bool BLOCK_MEAN = IS_Q && SAGE2_SMOOTH_Q;
  constexpr bool KBIAS = IS_Q && SAGE2_SMOOTH_K;
  constexpr int cta_wide = 4 * (D_QK + (KBIAS ? D_QK : 0) + 2 * GROUPS + (BLOCK_MEAN ? M::RPP * M::CHUNKS * 8 : 0));
  constexpr int warp_rows = !IS_Q && KWarpGroups<M>::value && !KWarpGroups<M>::OWN_KBAR_ROWS ? 4 * (THREADS / 32) * D_QK : 0;
  return cta_wide > warp_rows ? cta_wide : warp_rows;
}

// VEC: 16-byte rows, kept in registers; else (rare: unaligned rows, or a head dim that is not a
// multiple of 8) each pass reads the rows again through load_chunk, so no rows stay live.
template <class M, bool VEC>
__device__ __forceinline__ void quantize_k_warp_groups(const QuantizeParams& p, u8* smem, const Input& in, i64 b,
                                                       i64 h, i64 blk, const SeqItem& si) {
  using W = KWarpGroups<M>;
  constexpr int TPR = M::TPR, S = W::S, RUN = W::RUN, GW = W::GW, ROWS = M::ROWS, GROUPS = SAGE2_K_GROUPS;
  constexpr u32 NEG_INF2 = IN_BF16 ? 0xff80ff80u : 0xfc00fc00u;
  constexpr u32 POS_INF2 = IN_BF16 ? 0x7f807f80u : 0x7c007c00u;
  const i64 row0 = blk * ROWS;
  const int valid = static_cast<int>(si.len - row0 < ROWS ? si.len - row0 : ROWS);
  const i64 kv_bh = b * p.kv_heads + h;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int s = lane / TPR, j = lane % TPR;
  // Rows of fewer chunks than lanes (hd 65-96: 12 over 16): lanes past the row's chunks load a real
  // chunk (unpredicated loads, see below) and store nothing; chunks of padded channels (past CH_IN)
  // get code 0.
  const bool lane_stores = j < M::CHUNKS;
  const int j_in = j < CH_IN ? j : CH_IN - 1;
  // group a's rows of this lane: first + 4·S·i (i < RUN)
  int first[GW];
#pragma unroll
  for (int a = 0; a < GW; ++a) {
    const int g = warp * GW + a;
    first[a] = 64 * (g / 4) + 2 * (g % 4) + s % 2 + 8 * (s / 2);
  }

  // 1 / (the keys k̄ divides by), before the rows: the quotients below then hold fewer registers.
  const ptx::DivRn by_keys(static_cast<float>(stats_keys(si.kv_len)));
  // The rows first (they are the caller's K: complete before the stage began, see wait_previous).
  // A row past the end reads the lane's first row of its group (k_run_maxima's rule), so that the
  // maxima need no per-row test, or row 0 when that is past the end too; its code is 0 anyway.
  const u16* base = row_ptr(in, b, h, si.n0 + row0);
  ptx::u32x4 cache[VEC ? GW : 1][VEC ? RUN : 1];
  // bit a·RUN + i: the lane's row i of group a is a valid row
  u32 vmask = 0u;
#pragma unroll
  for (int a = 0; a < GW; ++a)
#pragma unroll
    for (int i = 0; i < RUN; ++i) vmask |= first[a] + 4 * S * i < valid ? 1u << (a * RUN + i) : 0u;
  auto ok = [&](int a, int i) { return ((vmask >> (a * RUN + i)) & 1u) != 0u; };
  auto row_at = [&](int a, int i) {
    return base + static_cast<i64>(ok(a, i) ? first[a] + 4 * S * i : ok(a, 0) ? first[a] : 0) * in.sn;
  };
  if (VEC)  // (unpredicated, so that ptxas keeps them above the wait: predicated loads went below
             // griddepcontrol.wait and the k̄ reads, one L2 round trip more per CTA, NOTES session 37)
#pragma unroll
    for (int a = 0; a < GW; ++a)
#pragma unroll
      for (int i = 0; i < RUN; ++i) cache[VEC ? a : 0][VEC ? i : 0] = ld_row16(in, row_at(a, i) + 8 * j_in);
  auto chunk = [&](int a, int i) -> ptx::u32x4 { return VEC ? cache[VEC ? a : 0][VEC ? i : 0] : load_chunk(in, row_at(a, i), j); };
  wait_previous();

  // k̄ (k_stats is read only when smooth_k: it may be null otherwise): lane l of each warp finds
  // channels l, l + 32, ... into the warp's row of shared memory (8 quotients a lane would crowd
  // the rows' registers), then every lane reads its chunk's 8 where it uses them. The sample's key count
  // is a power of two: dividing by it is a multiply by its exact inverse, the same rounded value.
  constexpr bool OWN_ROWS = W::OWN_KBAR_ROWS;
  __shared__ alignas(16) float s_kbar_rows[OWN_ROWS ? THREADS / 32 : 1][OWN_ROWS ? D_QK : 1];
  float* s_kbar = OWN_ROWS ? s_kbar_rows[OWN_ROWS ? warp : 0] : reinterpret_cast<float*>(smem) + warp * D_QK;
  {
    constexpr i64 SAMPLE_KEYS = static_cast<i64>(SAMPLE_TILES) * SAMPLE_UNIT;
    static_assert((SAMPLE_KEYS & (SAMPLE_KEYS - 1)) == 0 && SAMPLE_KEYS <= (1 << 20), "the sample's keys: a power of two");
    constexpr float SAMPLE_INV = SAMPLE_KEYS > 0 ? 1.f / static_cast<float>(SAMPLE_KEYS) : 0.f;
    const bool by_sample = sampled(si.kv_len);
    constexpr int CPL = (D_QK + 31) / 32;  // channels per lane
    float sum[CPL];
#pragma unroll
    for (int t = 0; t < CPL; ++t) {  // every load issued before the first use: one L2 round trip
      const int c = lane + 32 * t;
      sum[t] = SAGE2_SMOOTH_K && c < HD && si.kv_len > 0 ? ld_stat(p.k_stats + kv_bh * 3 * D_QK + c) : 0.f;
    }
#pragma unroll
    for (int t = 0; t < CPL; ++t) {
      const int c = lane + 32 * t;
      if (c < D_QK) {
        const float kb = SAGE2_SMOOTH_K && c < HD && si.kv_len > 0 ? (by_sample ? ptx::mul_rn(sum[t], SAMPLE_INV) : by_keys.of(sum[t])) : 0.f;
        s_kbar[c] = kb;
        if (blk == 0 && warp == 0) p.k_mean[kv_bh * D_QK + c] = kb;
      }
    }
    __syncwarp();
  }
  // This lane's 8 k̄, read where they are used (8 registers fewer across the rows' passes).
  const u32 kbar_at = ptx::smem_addr(s_kbar + 8 * (lane_stores ? j : 0));
  auto load_mean = [&](float (&mean_r)[8]) {
    const ptx::u32x4 m0 = ptx::ld_shared_v4(kbar_at), m1 = ptx::ld_shared_v4(kbar_at + 16);
    const u32 mb[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) mean_r[e] = ptx::bits_f32(mb[e]);
  };

  // (the per-row loops: unrolled over rows in registers (VEC), else rolled: a load each)
  constexpr int UNROLL_SLOW = VEC ? RUN : 1;
  i8* codes = p.k_codes + si.out_blk * ROWS * ROW_BYTES + j * 8;
#pragma unroll
  for (int a = 0; a < GW; ++a) {
    const int g = warp * GW + a;
    // The group maximum from packed per-channel maxima and minima of the raw inputs (k_run_maxima's
    // identity).
    u32 hi[4] = {NEG_INF2, NEG_INF2, NEG_INF2, NEG_INF2}, lo[4] = {POS_INF2, POS_INF2, POS_INF2, POS_INF2};
#pragma unroll
    for (int i = 0; i < (VEC ? RUN : 0); ++i) {
      const u32 v[4] = {chunk(a, i).x, chunk(a, i).y, chunk(a, i).z, chunk(a, i).w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        hi[w] = ptx::max_nan_x2<IN_BF16>(hi[w], v[w]);
        lo[w] = ptx::min_nan_x2<IN_BF16>(lo[w], v[w]);
      }
    }
    float am = 0.f;
    if (VEC && ok(a, 0) && j < CH_IN) {
      float xh[8], xl[8], mean_r[8];
      load_mean(mean_r);
      to_f32x8(ptx::u32x4{hi[0], hi[1], hi[2], hi[3]}, xh);
      to_f32x8(ptx::u32x4{lo[0], lo[1], lo[2], lo[3]}, xl);
#pragma unroll
      for (int e = 0; e < 8; ++e) am = ptx::max_nan(am, ptx::max_nan(xh[e] - mean_r[e], mean_r[e] - xl[e]));
    }
    // The scale, then the codes: every input of the group finite (`lean`) and a finite inverse, by
    // code_byte_finite; else per element (non-finite inputs: 0). Rows past the end: 0.
    auto scale_and_codes = [&](float amax, bool lean) {
      const float inv = quant_math::group_inv<127>(amax);
      if (lane == 0) p.k_scale[si.out_blk * GROUPS + g] = quant_math::group_scale<127>(amax);
      if (lean && quant_math::group_inv_finite(inv)) {
#pragma unroll
        for (int i = 0; i < RUN; ++i) {
          const int r = first[a] + 4 * S * i;
          float x[8], mean_r[8];
          to_f32x8(chunk(a, i), x);
          load_mean(mean_r);
          u32 q[8];
#pragma unroll
          for (int e = 0; e < 8; ++e) q[e] = quant_math::code_byte_finite(x[e] - mean_r[e], inv);
          // (a group past the end may have an infinite k̄: no x·0 here)
          const bool row = ok(a, i) && j < CH_IN;
          if (lane_stores)
            ptx::st_v2(codes + static_cast<i64>(r) * ROW_BYTES, row ? quant_math::pack_low_bytes(q[0], q[1], q[2], q[3]) : 0u,
                       row ? quant_math::pack_low_bytes(q[4], q[5], q[6], q[7]) : 0u);
        }
      } else {  // rare: non-finite inputs or a group of tiny values (an infinite inverse)
#pragma unroll UNROLL_SLOW
        for (int i = 0; i < RUN; ++i) {
          const int r = first[a] + 4 * S * i;
          float x[8], mean_r[8];
          const u32 bad = to_f32x8_sane(chunk(a, i), x);
          load_mean(mean_r);
          // sampled statistics saw only the sample's keys: every key's first bad row (a min)
          if (SAMPLE_TILES && bad != 0u && ok(a, i) && j < CH_IN)
            ptx::red_min_gpu_s32(p.k_first_bad + kv_bh, static_cast<i32>(row0 + r));
          u32 q[8];
#pragma unroll
          for (int e = 0; e < 8; ++e)
            q[e] = static_cast<u32>(ok(a, i) && j < CH_IN && ((bad >> e) & 1u) == 0u ? quant_int<127>(x[e] - mean_r[e], inv) : 0);
          if (lane_stores)
            ptx::st_v2(codes + static_cast<i64>(r) * ROW_BYTES, quant_math::pack_low_bytes(q[0], q[1], q[2], q[3]),
                       quant_math::pack_low_bytes(q[4], q[5], q[6], q[7]));
        }
      }
    };
    // (without VEC, every group takes the per-row form: one load per pass, a shorter program)
    const u32 m = VEC ? ptx::group_max_u32<32>(ptx::abs_bits(am)) : 0x7f800000u;
    if (m < 0x7f800000u) {  // (NaN bits order above +Inf)
      scale_and_codes(ptx::bits_f32(m), true);
    } else {  // rare: the per-row maximum, non-finite inputs read as 0
      u32 mr = 0u;
#pragma unroll UNROLL_SLOW
      for (int i = 0; i < RUN; ++i) {
        if (ok(a, i) && j < CH_IN) {
          float x[8], mean_r[8];
          to_f32x8_sane(chunk(a, i), x);
          load_mean(mean_r);
#pragma unroll
          for (int e = 0; e < 8; ++e) mr = ptx::max_u32(mr, ptx::abs_bits(x[e] - mean_r[e]));
        }
      }
      scale_and_codes(ptx::bits_f32(ptx::group_max_u32<32>(mr)), false);
    }
  }
}

// One block `blk` of head h of batch b (Q: a q head; K: a kv head). `k_sum`: the K channel sums
// of the block's kv head when the caller holds them in shared memory (the cluster stage), else
// null: they are read from k_stats in global memory.
template <bool IS_Q, class M>
__device__ __forceinline__ void quantize_qk(const QuantizeParams& p, u8* smem, const Input& in, i64 b, i64 h, i64 blk,
                                            const SeqItem& si, const float* k_sum = nullptr) {
  constexpr int GROUPS = IS_Q ? SAGE2_Q_GROUPS : SAGE2_K_GROUPS;
  constexpr bool BLOCK_MEAN = IS_Q && SAGE2_SMOOTH_Q;  // smooth Q
  constexpr bool KBIAS = IS_Q && SAGE2_SMOOTH_K;       // q · k̄ for the LSE
  constexpr bool K_MEAN = !IS_Q && SAGE2_SMOOTH_K;     // smooth K
  constexpr int R = SAGE2_QK_BITS == 4 ? 7 : 127;
  constexpr int ROWS = M::ROWS, TPR = M::TPR, CPT = M::CPT, CHUNKS = M::CHUNKS, RPP = M::RPP, ITEMS = M::ITEMS;
  constexpr bool CACHE = ITEMS * CPT <= 8;
  constexpr int UNROLL = CACHE ? ITEMS : 1;  // rolled loops re-read rows (small code)
  constexpr int RED_W = CHUNKS * 8;  // == D_QK
  // K rows that share a scale group (kernels::k_group_runs): each thread's rows come in runs of
  // K_RUN consecutive items of one group, and K_LANES consecutive lanes hold rows of that group too.
  constexpr int K_RUN = SAGE2_QZ_K_RUN, K_LANES = SAGE2_QZ_K_RUN_LANES;
  constexpr bool LEAN = !IS_Q && CACHE && ROOMY && K_RUN > 1;
  static_assert(!LEAN || (ITEMS % K_RUN == 0 && K_LANES >= TPR && K_LANES <= 32), "bad K runs");
  static_assert(ROWS == (IS_Q ? BQ : BK), "rows per CTA must be the quantization block");
  static_assert(CHUNKS * 8 == D_QK, "Q/K mapping covers the padded head dim");
  if constexpr (!IS_Q && KWarpGroups<M>::value) {  // (the split K kernel: k_sum is null there)
    if (VEC_HD && in.vec)  // 16-byte rows
      quantize_k_warp_groups<M, true>(p, smem, in, b, h, blk, si);
    else
      quantize_k_warp_groups<M, false>(p, smem, in, b, h, blk, si);
    return;
  }

  float* s_mean = reinterpret_cast<float*>(smem);            // [D_QK]
  float* s_kbar = s_mean + D_QK;                             // [D_QK] (KBIAS)
  u32* s_amax = reinterpret_cast<u32*>(s_kbar + (KBIAS ? D_QK : 0));  // [GROUPS]
  float* s_inv = reinterpret_cast<float*>(s_amax + GROUPS);  // [GROUPS]
  float* s_red = s_inv + GROUPS;                             // [RPP * RED_W] (BLOCK_MEAN)

  const i64 len = si.len;
  const i64 row0 = blk * ROWS;
  const i64 out_row0 = si.out_blk * ROWS;  // the block's first row in the per-row buffers
  const int valid = static_cast<int>(len - row0 < ROWS ? len - row0 : ROWS);
  i64 kv_bh = b * p.kv_heads + h;
  if (IS_Q) {
    const u32 group = static_cast<u32>(p.q_heads) / static_cast<u32>(p.kv_heads);  // GQA (32-bit: no call)
    kv_bh = b * p.kv_heads + static_cast<i64>(static_cast<u32>(h) / group);
  }
  const u16* base = row_ptr(in, b, h, si.n0 + row0);

  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;

  // ---- this thread's rows (row r = slot + i*RPP, chunk j = lane_r + k*TPR). The split kernels
  // load them first, so that their latency overlaps the per-channel constants' (k_stats reads and
  // divisions); the one-launch stages load them after (their register bound: the cluster stage
  // spilled with the rows live across the constants).
  ptx::u32x4 cache[CACHE ? ITEMS : 1][CACHE ? CPT : 1];
  // (LEAN: a row past the end holds a copy of its run's first row, so that the run's packed
  // maxima need no per-row test; its codes are 0 anyway. Only the per-row forms read such rows as 0.)
  auto load_rows = [&] {
    if (ROOMY && VEC_HD && in.vec && valid == ROWS) {  // a whole block of 16-byte rows: one add per row
      const u16* pr = base + static_cast<i64>(slot) * in.sn;
      const i64 step = static_cast<i64>(RPP) * in.sn;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const bool row = ROWS % RPP == 0 || slot + i * RPP < ROWS;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          const int j = lane_r + k * TPR;
          cache[CACHE ? i : 0][CACHE ? k : 0] = row && j < CH_IN ? ld_row16(in, pr + 8 * j) : ptx::u32x4{0u, 0u, 0u, 0u};
        }
        pr += step;
      }
      return;
    }
    if (ROOMY && VEC_HD && in.vec) {  // 16-byte rows: pointers by adds, no per-row choice
      const u16* p0 = base + static_cast<i64>(slot) * in.sn;
      const i64 step = static_cast<i64>(RPP) * in.sn;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        int r = slot + i * RPP, ii = i;
        if (LEAN && r >= valid) r = slot + (i - i % K_RUN) * RPP, ii = i - i % K_RUN;
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          const int j = lane_r + k * TPR;
          cache[CACHE ? i : 0][CACHE ? k : 0] =
              (r < valid && j < CH_IN) ? ld_row16(in, p0 + ii * step + 8 * j) : ptx::u32x4{0u, 0u, 0u, 0u};
        }
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      int r = slot + i * RPP;
      if (LEAN && r >= valid) r = slot + (i - i % K_RUN) * RPP;
#pragma unroll
      for (int k = 0; k < CPT; ++k)
        cache[CACHE ? i : 0][CACHE ? k : 0] =
            (r < valid) ? load_chunk(in, base + static_cast<i64>(r) * in.sn, lane_r + k * TPR)
                        : ptx::u32x4{0u, 0u, 0u, 0u};
    }
  };
  if (CACHE && ROOMY) load_rows();
  wait_previous();  // (the split K kernel: its rows are in flight; the statistics are read below)

  // ---- per-channel constants; group maxima start at 0
  for (int g = tid; g < GROUPS; g += THREADS) s_amax[g] = 0u;
#pragma unroll 1
  for (int c = tid; c < D_QK; c += THREADS) {
    // k̄ = sum_K / kv_len (k_stats is read only when smooth_k: it may be null otherwise); sampled
    // statistics: / the sample's keys (a varlen sequence may have no keys: k̄ = 0 then)
    const float kbar = (SAGE2_SMOOTH_K && c < HD && si.kv_len > 0)
                           ? ptx::div_rn(k_sum ? k_sum[c] : ld_stat(p.k_stats + kv_bh * 3 * D_QK + c),
                                         static_cast<float>(stats_keys(si.kv_len)))
                           : 0.f;
    if (KBIAS) s_kbar[c] = kbar;
    if (!BLOCK_MEAN) {
      const float m = K_MEAN ? kbar : 0.f;
      s_mean[c] = m;
      if (!IS_Q && blk == 0) p.k_mean[kv_bh * D_QK + c] = m;
    }
  }

  if (CACHE && !ROOMY) load_rows();
  // x: the chunk with non-finite values read as 0; returns their mask (bit e = element e).
  auto fetch = [&](int i, int k, float (&x)[8]) -> u32 {
    const int r = slot + i * RPP;
    ptx::u32x4 raw;
    if (CACHE)
      raw = cache[CACHE ? i : 0][CACHE ? k : 0];
    else
      raw = (r < valid) ? load_chunk(in, base + static_cast<i64>(r) * in.sn, lane_r + k * TPR)
                        : ptx::u32x4{0u, 0u, 0u, 0u};
    return to_f32x8_sane(raw, x);
  };

  // ---- smooth Q: block mean per channel over the valid rows
  if (BLOCK_MEAN) {
    float cs[CPT][8];
#pragma unroll
    for (int k = 0; k < CPT; ++k)
#pragma unroll
      for (int e = 0; e < 8; ++e) cs[k][e] = 0.f;
#pragma unroll UNROLL
    for (int i = 0; i < ITEMS; ++i) {
      if (slot + i * RPP < valid) {
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          float x[8];
          fetch(i, k, x);
#pragma unroll
          for (int e = 0; e < 8; ++e) cs[k][e] += x[e];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j < CHUNKS)
#pragma unroll
        for (int e = 0; e < 8; ++e) s_red[slot * RED_W + j * 8 + e] = cs[k][e];
    }
    __syncthreads();
#pragma unroll 1
    for (int c = tid; c < D_QK; c += THREADS) {
      float m = 0.f;
      if (c < HD) {
        float sum = s_red[c];
        for (int sl = 1; sl < RPP; ++sl) sum += s_red[sl * RED_W + c];
        m = ptx::div_rn(sum, static_cast<float>(valid));
      }
      s_mean[c] = m;
      if (IS_Q) p.q_mean[si.out_blk * D_QK + c] = m;
    }
  }
  __syncthreads();

  // This thread's channels are the same for all its rows: keep their constants in registers.
  float mean_r[CPT][8], kbar_r[KBIAS ? CPT : 1][8];
#pragma unroll
  for (int k = 0; k < CPT; ++k) {
    const int j = lane_r + k * TPR;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      mean_r[k][e] = j < CHUNKS ? s_mean[j * 8 + e] : 0.f;
      if (KBIAS) kbar_r[KBIAS ? k : 0][e] = j < CHUNKS ? s_kbar[j * 8 + e] : 0.f;
    }
  }

  // ---- K, lean form (k_run_maxima); if a group maximum is not finite, the per-row pass below
  // runs instead, for the whole CTA.
  bool lean = false;
  if constexpr (LEAN) {
    lean = __syncthreads_or(k_run_maxima<M, K_RUN, K_LANES>(cache, mean_r, valid, s_amax)) == 0;
    if (!lean) {  // rare: start the maxima again in the per-row form
      for (int g = tid; g < GROUPS; g += THREADS) s_amax[g] = 0u;
      __syncthreads();
    }
  }

  // ---- per row: q_kbias (padded rows 0) and the group amax of |x - mean|
  if (!lean) {
#pragma unroll UNROLL
    for (int i = 0; i < ITEMS; ++i) {
      const int r = slot + i * RPP;
      u32 m = 0u, row_bad = 0u;
      float part = 0.f;
      if (r < valid) {
#pragma unroll
        for (int k = 0; k < CPT; ++k) {
          const int j = lane_r + k * TPR;
          if (j < CH_IN) {
            float x[8];
            row_bad |= fetch(i, k, x);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              if (KBIAS) part += x[e] * kbar_r[KBIAS ? k : 0][e];
              m = ptx::max_u32(m, ptx::abs_bits(x[e] - mean_r[k][e]));
            }
          }
        }
      }
      m = ptx::group_max_u32<TPR>(m);
      if (lane_r == 0 && r < valid) {
        const int g = IS_Q ? sage2_q_group_table[r] : sage2_k_group_table[r];
        ptx::red_max_shared_u32(ptx::smem_addr(&s_amax[g]), m);
      }
      if (KBIAS) {
        part = ptx::group_sum<TPR>(part);
        if (lane_r == 0 && r < ROWS) p.q_kbias[out_row0 + r] = (r < valid) ? part : 0.f;
      }
      if (IS_Q) {
        row_bad = ptx::group_max_u32<TPR>(row_bad != 0u ? 1u : 0u);
        if (lane_r == 0 && r < ROWS) p.q_bad[out_row0 + r] = static_cast<u8>(row_bad);
      }
      // Sampled statistics saw only the sample's keys: every key's first bad row (rare; a min).
      if (!IS_Q && SAMPLE_TILES && row_bad != 0u) ptx::red_min_gpu_s32(p.k_first_bad + kv_bh, static_cast<i32>(row0 + r));
    }
  }  // !lean
  __syncthreads();
#pragma unroll 1
  for (int g = tid; g < GROUPS; g += THREADS) {
    const float amax = ptx::bits_f32(s_amax[g]);
    const float scale = quant_math::group_scale<R>(amax);
    s_inv[g] = quant_math::group_inv<R>(amax);
    float* scales = IS_Q ? p.q_scale : p.k_scale;
    scales[si.out_blk * GROUPS + g] = scale;
  }
  __syncthreads();

  // ---- codes (padded rows and channels: 0)
  i8* codes = (IS_Q ? p.q_codes : p.k_codes) + out_row0 * ROW_BYTES;
  if constexpr (LEAN && SAGE2_QK_BITS == 8) {
    if (lean) {  // every input finite: no per-element checks
      k_run_codes<M, K_RUN>(cache, mean_r, valid, s_inv, codes);
      return;
    }
  }
#pragma unroll UNROLL
  for (int i = 0; i < ITEMS; ++i) {
    const int r = slot + i * RPP;
    if (r >= ROWS) continue;
    const float inv = (r < valid) ? s_inv[IS_Q ? sage2_q_group_table[r] : sage2_k_group_table[r]] : 0.f;
    i8* dst = codes + static_cast<i64>(r) * ROW_BYTES;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j >= CHUNKS) continue;
      i32 q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (r < valid && j < CH_IN) {
        float x[8];
        const u32 bad = fetch(i, k, x);
        if (ROOMY && quant_math::group_inv_finite(inv)) {  // every group but one with a tiny amax
#pragma unroll
          for (int e = 0; e < 8; ++e) q[e] = quant_math::quant_int_finite_inv(x[e] - mean_r[k][e], inv);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) q[e] = quant_int<R>(x[e] - mean_r[k][e], inv);
        }
        if (bad != 0u) {  // a non-finite input's code is 0 (rare: off the common path)
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if ((bad >> e) & 1u) q[e] = 0;
        }
      }
      if (SAGE2_QK_BITS == 8) {
        ptx::st_v2(dst + j * 8, quant_math::pack_low_bytes(q[0], q[1], q[2], q[3]),
                   quant_math::pack_low_bytes(q[4], q[5], q[6], q[7]));
      } else {
        u32 w = 0u;
#pragma unroll
        for (int e = 0; e < 8; ++e) w |= (static_cast<u32>(q[e]) & 0xfu) << (4 * e);
        ptx::st_u32(dst + j * 4, w);
      }
    }
  }
}

}  // namespace qz
