// The epilogue of both attention families: for each output row of a thread, l summed over the
// quad, O = (O · (1/l)) · δV (+ μ) (l carries the 448 of P̂), the LSE, and the non-finite poison
// of the quantize stage's flags (reference.hpp "NaN / Inf policy"): for row i with visible keys
// [0, n_vis), n_vis > 0 and (q_bad[i] or k_first_bad < n_vis) → O row and LSE NaN; otherwise
// O[i, c] = NaN where v_first_bad[c] < n_vis. A row without visible keys (l = 0, O = 0) gets
// O = 0 and LSE = -inf.
//
// What the families share here is the m16n8 accumulator layout: a thread holds rows g + 8r of its
// warp's tiles (r = 0, 1 per 16-row tile) and, per row, channel pairs n = 0, 1, ...: channels
// ch0 + 8n and ch0 + 8n + 1 (ch0 = 2·(lane % 4) + the pass's first channel). Where the values sit
// in registers is the family's business: it passes accessors. Float ops and their order are the
// contract's (include/sage2/reference.hpp "Epilogue").
#pragma once

#include "attention_blocks.cuh"
#include "attention_params.cuh"
#include "ptx.cuh"
#include "types.cuh"

namespace attn_common {

// δV and μ of a thread's NP channel pairs at index vbase + 8n (vbase = bhk·D_V + ch0).
// PRELOAD: loaded once before the rows (both rows of a thread share them); otherwise at each use
// (their registers would be O's). Channels at and past CH_END are never written (and not loaded).
template <int NP, int CH_END, bool PRELOAD>
struct VScales {
  float2 s[PRELOAD ? NP : 1], m[PRELOAD ? NP : 1];

  static __device__ __forceinline__ void load(const AttentionParams& p, i64 vbase, int n, float2& s_, float2& m_) {
    s_ = *reinterpret_cast<const float2*>(p.v_scale + vbase + 8 * n);
    m_ = SMOOTH_V ? *reinterpret_cast<const float2*>(p.v_mean + vbase + 8 * n) : make_float2(0.f, 0.f);
  }
  __device__ __forceinline__ void init(const AttentionParams& p, i64 vbase, int ch0) {
    if (!PRELOAD) return;
#pragma unroll
    for (int n = 0; n < NP; ++n) {
      s[n] = m[n] = make_float2(0.f, 0.f);
      if (CH_END > HD && ch0 + 8 * n >= HD) continue;
      load(p, vbase, n, s[n], m[n]);
    }
  }
  __device__ __forceinline__ void get(const AttentionParams& p, i64 vbase, int n, float2& s_, float2& m_) const {
    if (PRELOAD) {
      s_ = s[n];
      m_ = m[n];
    } else {
      load(p, vbase, n, s_, m_);
    }
  }
};

// What the epilogue needs to know of a thread's Q rows (r = 2·tile + half, `row` the query row):
// whether the row holds a non-finite element, and q·k̄ (smooth-K, for the LSE). From the quantize
// stage's buffers here; a kernel that quantizes Q itself passes its own (attention_wgmma.cuh).
struct QRowsFromStage {
  const AttentionParams* p;
  i64 base;  // BlockCoords::q_row_base
  __device__ __forceinline__ bool bad(int, i64 row) const { return p->q_bad[base + row] != 0; }
  __device__ __forceinline__ float kbias(int, i64 row) const { return p->q_kbias[base + row]; }
};

// The LSE of a row (natural log): (m + (log2 l − log2 448)) · ln2 (+ q·k̄ · sm_scale, so that it
// is the LSE of the un-smoothed scores; `kbias` = q·k̄, read only with smooth-K).
__device__ __forceinline__ void store_lse(const AttentionParams& p, const BlockCoords& c, i64 row, float m, float lt,
                                          bool row_bad, float nan, float kbias) {
  float v = neg_inf();
  if (lt != 0.f) {
    v = (m + (lg2_approx(lt) - LOG2_P_SCALE)) * LN2;
    if (SMOOTH_K) v = v + kbias * p.sm_scale;
  }
  if (row_bad) v = nan;
  if (VARLEN)
    p.lse[c.b * p.lse_stride_batch + c.h * p.lse_stride_head + c.q_start + row] = v;
  else
    p.lse[c.bh * p.q_len + row] = v;
}

// The epilogue of a thread's output rows, two (g, g + 8) in each of its MTILES 16-row tiles (the
// whole quad runs it: l is summed over the quad). Row r is query row row0 + 8r, with softmax
// state l_at(r), m_at(r) and the O values o_at(r, n, e) of its NCHUNK·NPC channel pairs
// (n = chunk·NPC + i: the family's P̂·V̂ chunks, kept as a loop nest, which ptxas allocated better
// than one flat loop at head dim 256); vbase = bhk·D_V + ch0 indexes the flags and δV/μ of the
// pairs; lse_lane: the lane that writes the LSE. Channels at and past CH_END are never stored.
// The family's choices:
//  - PRELOAD: δV/μ loaded once for all rows (VScales);
//  - SPLIT: the smallest v_first_bad over the head's channels, reduced over the warp (each lane
//    reads a few), lets rows whose visible keys end before it skip the per-channel V flags (no
//    NaN/Inf in V, the common case, costs D_V/64 loads per lane instead of one per pair), and the
//    stores get one instantiation per (aligned pairs, flags to apply), so that the common rows run
//    straight-line stores without per-element predicates; otherwise one loop checks the flags of
//    every pair (less code: the mma family).
// `qrows`: the Q rows' flags and q·k̄ (QRowsFromStage or the family's own).
template <int MTILES, int NCHUNK, int NPC, int CH_END, bool PRELOAD, bool SPLIT, class LAt, class MAt, class OAt, class QR>
__device__ __forceinline__ void epilogue(const AttentionParams& p, const BlockCoords& c, int lane, i64 row0, int ch0,
                                         i64 vbase, bool lse_lane, LAt l_at, MAt m_at, OAt o_at, const QR& qrows) {
  const i64 kfb = p.k_first_bad[c.bhk];
  const float nan = qnan();
  const bool out_vec = out_pairs_aligned(p);
  int v_bad_from = 0x7fffffff;
  if (SPLIT) {
#pragma unroll
    for (int c0 = 0; c0 < D_V; c0 += 64) {
      const int ch = c0 + 2 * lane;
      if (ch < D_V) {
        const int2 vf = *reinterpret_cast<const int2*>(p.v_first_bad + c.bhk * D_V + ch);
        v_bad_from = min_(v_bad_from, min_(vf.x, vf.y));
      }
    }
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
      v_bad_from = min_(v_bad_from, static_cast<int>(ptx::shfl_xor(static_cast<u32>(v_bad_from), d)));
  }
  constexpr int NP = NCHUNK * NPC;
  VScales<NP, CH_END, PRELOAD> vsc;
  vsc.init(p, vbase, ch0);
  // rows as a (tile, half) loop nest, like the accumulators (one flat loop of 4 rows cost the mma
  // family ~60 instructions at 32 rows per warp)
#pragma unroll
  for (int tile = 0; tile < MTILES; ++tile)
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 2 * tile + half;
    float lt = l_at(r);
    lt += ptx::shfl_xor(lt, 1);
    lt += ptx::shfl_xor(lt, 2);
    // the contract's O · (1/l), one reciprocal per row. A row without visible keys (l = 0, O = 0)
    // stays 0: SPLIT by arithmetic (rl = 0, μ weighted by 0), so that its instantiations stay
    // straight-line; otherwise by a branch around the pair's math (the arithmetic form made ptxas
    // sink the δV loads into a branch per pair: ~50 more instructions in the mma family)
    // q·k̄ here, where the whole warp is converged (a kernel that quantized Q itself recomputes
    // it with quad shuffles; rows past the sequence read the buffers' padding or zeros)
    const float kbias = RETURN_LSE && SMOOTH_K ? qrows.kbias(r, row0 + 8 * r) : 0.f;
    const float rl = SPLIT ? (lt != 0.f ? ptx::rcp_rn(lt) : 0.f) : ptx::rcp_rn(lt);
    const float mu_w = SPLIT ? (lt != 0.f ? 1.f : 0.f) : 1.f;
    const i64 row = row0 + 8 * r;
    if (row >= seq_q_len(p, c)) continue;
    const i64 n_vis = visible_keys(p, c, row);
    const bool row_bad = n_vis > 0 && (qrows.bad(r, row) || kfb < n_vis);
    const bool check_v = !row_bad && v_bad_from < n_vis;
    char* orow = out_row(p, c, row);
    // vec_tag: bool_c (a compile-time choice) or runtime_c (out_vec)
    auto emit = [&](auto vec_tag, auto flags_tag) {
      const bool vec = value_or(vec_tag, out_vec);
      constexpr bool FLAGS = decltype(flags_tag)::value;
#pragma unroll
      for (int chunk = 0; chunk < NCHUNK; ++chunk)
#pragma unroll
        for (int i = 0; i < NPC; ++i) {
          const int n = chunk * NPC + i;
          const int chn = ch0 + 8 * n;
          if (CH_END > HD && chn >= HD) continue;
          float y0 = 0.f, y1 = 0.f;
          if (SPLIT || lt != 0.f) {
            float2 sv, mv;
            vsc.get(p, vbase, n, sv, mv);
            y0 = (o_at(r, n, 0) * rl) * sv.x;  // lt carries the 448 of P̂
            y1 = (o_at(r, n, 1) * rl) * sv.y;
            if (SMOOTH_V) {
              y0 = y0 + mv.x * mu_w;
              y1 = y1 + mv.y * mu_w;
            }
          }
          if (FLAGS) {
            if (row_bad) {
              y0 = y1 = nan;
            } else {
              const int2 vf = *reinterpret_cast<const int2*>(p.v_first_bad + vbase + 8 * n);
              if (vf.x < n_vis) y0 = nan;
              if (vf.y < n_vis) y1 = nan;
            }
          }
          store_pair(orow, chn, y0, y1, vec, chn + 1 < HD);
        }
    };
    using T_ = bool_c<true>;
    using F_ = bool_c<false>;
    if (!SPLIT) {
      emit(runtime_c{}, T_{});
    } else if (row_bad || check_v) {
      if (out_vec) emit(T_{}, T_{}); else emit(F_{}, T_{});
    } else {
      if (out_vec) emit(T_{}, F_{}); else emit(F_{}, F_{});
    }
    if (RETURN_LSE && lse_lane) store_lse(p, c, row, m_at(r), lt, row_bad, nan, kbias);
  }
}
// The epilogue with the Q rows' facts from the quantize stage's buffers.
template <int MTILES, int NCHUNK, int NPC, int CH_END, bool PRELOAD, bool SPLIT, class LAt, class MAt, class OAt>
__device__ __forceinline__ void epilogue(const AttentionParams& p, const BlockCoords& c, int lane, i64 row0, int ch0,
                                         i64 vbase, bool lse_lane, LAt l_at, MAt m_at, OAt o_at) {
  epilogue<MTILES, NCHUNK, NPC, CH_END, PRELOAD, SPLIT>(p, c, lane, row0, ch0, vbase, lse_lane, l_at, m_at, o_at,
                                                        QRowsFromStage{&p, c.q_row_base});
}

}  // namespace attn_common
