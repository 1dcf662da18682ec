// quantize_v: the V item body (every kernel that writes V̂).
#pragma once

#include "quantize_common.cuh"

namespace qz {

// ---------------------------------------------------------------------------------------------
// sage2_quantize_v: CTA = (batch, kv head, tile of ROWS tokens of the padded length).
//  μ = smooth_v ? sum/kv_len : 0; amax = smooth_v ? max(max-μ, μ-min) : max(|max|, |min|)
//  (NaN-propagating max); sampled statistics: / the sample's keys, amax = H·amax where finite, and
//  v_fixup_head (quantize_k) for a channel a key exceeds; scale = amax/448; inv = finite positive amax ? 448/amax : 0;
//  code = e4m3_rn_satfinite((float(V) - μ) * inv) (0 for a non-finite V: its statistics were
//  taken as 0 by channel_stats), stored transposed [c][slot] (slot = the consumer's key order within
//  each 16-key group, kernels::QuantLayout::v_slot) through shared
//  memory so that each channel's ROWS bytes leave as 16-byte stores (one thread per channel).
//  Tile 0 writes v_scale and v_mean (v_mean = μ, 0 when !smooth_v; padded channels 0).
//  SAGE2_PV_FP16 (FP16 P̃V): scale = δ = 2^max(0, e − 15) for amax = f·2^e, f ∈ [0.5, 1) (1 unless
//  |V − μ| reaches 2^15), inv = finite positive amax ? 1/δ : 0 (both exact), code =
//  fp16_rn((float(V) − μ) · inv), two bytes per code, same transposed layout and slot order.
//  SAGE2_PV_ACC16 (V̂ feeds an fp16 accumulator of 64 keys): 2.25 in place of 448 (64·448·2.25 =
//  64512 < 65504), and 2^max(0, e − 9) in place of 2^max(0, e − 15) (|V̂| < 2^9).


constexpr bool V_FP16 = SAGE2_PV_FP16 != 0;
constexpr int V_BYTES = V_FP16 ? 2 : 1;  // bytes of one V̂ code
constexpr float V8_MAX = SAGE2_PV_ACC16 ? 2.25f : 448.f;  // e4m3 V̂ bound (kernels::kV8Acc16Max)
constexpr int V16_EXP = SAGE2_PV_ACC16 ? 9 : 15;          // FP16 V̂ < 2^V16_EXP (kV16Acc16Exp, kV16Exp)
// Per-channel constants (μ, inv; sampled: H·A_s too), then the tile's codes.
constexpr int V_CONST_BYTES = (SAMPLE_TILES ? 12 : 8) * D_V;
// Sampled statistics with e4m3 codes: a key above H_s (finite, positive) has |code input| >= V8_MAX
// (|d| >= H_s·(1 + 2^-23) and inv = fl(V8_MAX / H_s)), so one running max of |d·inv| per thread
// screens for it; a thread over the screen (or a CTA with a channel whose H_s is 0) checks its
// elements exactly. FP16 codes (inv = 1/δ: no common bound) keep an exact max per channel.
constexpr bool V_SCREEN = SAMPLE_TILES && !V_FP16;
// Without smooth-V the code input is x·inv, so max |x·inv| over a channel's elements is
// fl(max |x| · inv) (rounding is monotone): the screen keeps a packed max |x| per channel pair on the
// raw 16-bit words (NaN-propagating, so a non-finite input fails it too) and multiplies once per
// channel at the end. A non-finite input's code is then set to 0 by the exact pass, not per element.
constexpr bool V_RAW_SCREEN = V_SCREEN && !SAGE2_SMOOTH_V;
template <class M>
constexpr int v_smem_bytes() { return V_CONST_BYTES + M::ROWS * D_V * V_BYTES; }

// FP16 V̂'s per-channel power-of-two scale δ for a finite positive amax (see above).
__device__ __forceinline__ float v16_scale(float amax) {
  const int e = static_cast<int>((ptx::f32_bits(amax) >> 23) & 0xffu) - 126;  // amax < 2^e
  const int k = e - V16_EXP > 0 ? e - V16_EXP : 0;
  return ptx::bits_f32(static_cast<u32>(127 + k) << 23);
}

// V̂'s scale and inverse of a channel whose amax is `amax`.
__device__ __forceinline__ void v_scale_inv(float amax, float& scale, float& inv) {
  if (V_FP16) {
    scale = finite_positive(amax) ? v16_scale(amax) : (amax == 0.f ? 1.f : amax);
    inv = finite_positive(amax) ? ptx::div_rn(1.f, scale) : 0.f;
  } else {
    scale = ptx::div_rn(amax, V8_MAX);
    inv = finite_positive(amax) ? ptx::div_rn(V8_MAX, amax) : 0.f;
  }
}

// Sampled statistics: the fix-up of one dense (batch, kv head) once every V tile is written (run
// by quantize_k's block 0 of the head, which the stream orders after quantize_v: sage2_quantize_k).
// A channel where a key exceeded H·A_s has v_over = every such tile's max |V − μ|, so their max is
// every key's amax A_all: it gets A_all's scale and its codes are rewritten over every key — the
// rule amax = A_all > H·A_s ? A_all : H·A_s (rare: a sample that missed a channel's largest
// values). Each warp reads the words of 32 channels at once (one round trip: the common case is
// none flagged; dependent loads per channel cost the kernel's tail ~25 us at 8K), then a flagged
// channel is rewritten by the warp, a lane per 16-key group, in the layout's slot order.
__device__ __forceinline__ void v_fixup_head(const QuantizeParams& p, const Input& in, i64 b, i64 h) {
  const i64 bh = b * p.kv_heads + h, len = p.kv_len, pitch = kv_tiles(len) * BK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const u16* col = row_ptr(in, b, h, 0);
#pragma unroll 1
  for (int c0 = warp * 32; c0 < HD; c0 += THREADS) {
    const u32 mine = c0 + lane < HD ? ptx::ld_relaxed_gpu_u32(p.v_over + bh * D_V + c0 + lane) : 0u;
    const u32 flagged = ptx::ballot(mine != 0u);
#pragma unroll 1
    for (int l = 0; flagged != 0u && l < 32; ++l) {
      if (((flagged >> l) & 1u) == 0u) continue;
      const int c = c0 + l;
      const u32 over = ptx::shfl_idx(mine, l);
      const float amax = ptx::bits_f32(over), mu = p.v_mean[bh * D_V + c];
      float scale, inv;
      v_scale_inv(amax, scale, inv);
      if (lane == 0) {
        p.v_scale[bh * D_V + c] = scale;
        p.v_amax[bh * D_V + c] = amax;
      }
#pragma unroll 1
      for (i64 g = lane; g < (len + 15) / 16; g += 32) {
        float y[16];
#pragma unroll
        for (int q = 0; q < 16; ++q) {
          const i64 n = g * 16 + sage2_v_key_of_slot[q];
          float x = 0.f;
          if (n < len) {
            const u16 raw = ptx::ld_nc_u16(col + n * in.sn + c);
            x = IN_BF16 ? ptx::bf16_to_f32(raw) : ptx::f16_to_f32(raw);
          }
          // a non-finite input's code is 0, as are the padded keys'
          y[q] = (n < len && !nonfinite(x)) ? (x - mu) * inv : 0.f;
        }
        u32 w[8];
#pragma unroll
        for (int q = 0; q < 8; ++q)
          w[q] = V_FP16 ? ptx::pack_f16x2(y[2 * q], y[2 * q + 1]) : ptx::f32x2_to_e4m3x2(y[2 * q], y[2 * q + 1]);
        if (V_FP16) {
          u16* d16 = reinterpret_cast<u16*>(p.v_codes) + (bh * D_V + c) * pitch + g * 16;
          ptx::st_v4(d16, ptx::u32x4{w[0], w[1], w[2], w[3]});
          ptx::st_v4(d16 + 8, ptx::u32x4{w[4], w[5], w[6], w[7]});
        } else {
          u8* d8 = p.v_codes + (bh * D_V + c) * pitch + g * 16;
          ptx::st_v4(d8, ptx::u32x4{w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16)});
        }
      }
    }
  }
}

// e4m3 codes of the tile in shared memory: token-major rows of D_V bytes whose 4-byte words are
// permuted per 16-key group g of the row (word w at w ^ v_word_mask(g)), so that the write-out's
// lanes of one channel group, one per 16-key group, read different banks. The mask stays below the
// largest power of two (<= 32) dividing the row's words, so a word never leaves its row, and it is
// a multiple of 2 words, so a thread's 8 codes of a chunk stay one aligned 8-byte store.
constexpr int V_ROW_WORDS = D_V / 4;
constexpr int V_SWZ_SPAN = (V_ROW_WORDS & -V_ROW_WORDS) < 32 ? (V_ROW_WORDS & -V_ROW_WORDS) : 32;
template <int ROWS>
__device__ __forceinline__ int v_word_mask(int g) {
  constexpr int LANES_PER_GROUP = 32 / (ROWS / 16);  // write-out lanes of one 16-key group in a warp
  return V_FP16 ? 0 : (g * LANES_PER_GROUP) & (V_SWZ_SPAN - 1) & ~1;
}
// Byte offset of code (row r, channel c) in that layout.
template <int ROWS>
__device__ __forceinline__ int v_code_at(int r, int c) {
  return r * D_V + (((c >> 2) ^ v_word_mask<ROWS>(r >> 4)) << 2) + (c & 3);
}

// The tile's codes (token-major in shared memory) to V̂, transposed: each channel's ROWS codes in
// 16-key groups, in the layout's slot order (kernels::QuantLayout::v_slot), at si.
template <int ROWS>
__device__ __forceinline__ void v_write_out(const QuantizeParams& p, const u8* s_t, const SeqItem& si) {
  const int tid = threadIdx.x;
  if (V_FP16) {  // the same write-out, two bytes per code: 32 bytes per 16-key group
    constexpr int SEGS = ROWS / 16;
    const u16* s_t16 = reinterpret_cast<const u16*>(s_t);
    u16* dst = reinterpret_cast<u16*>(p.v_codes) + si.v_row0 * si.v_pitch + si.out_blk;
#pragma unroll 1
    for (int c = tid; c < D_V; c += THREADS) {
      u16* drow = dst + static_cast<i64>(c) * si.v_pitch;
#pragma unroll
      for (int seg = 0; seg < SEGS; ++seg) {
        u32 w[8];
#pragma unroll
        for (int q = 0; q < 8; ++q)  // column 2q, 2q+1 of the group hold the layout's keys (v_slot)
          w[q] = static_cast<u32>(s_t16[(seg * 16 + sage2_v_key_of_slot[2 * q]) * D_V + c]) |
                 (static_cast<u32>(s_t16[(seg * 16 + sage2_v_key_of_slot[2 * q + 1]) * D_V + c]) << 16);
        ptx::st_v4(drow + seg * 16, ptx::u32x4{w[0], w[1], w[2], w[3]});
        ptx::st_v4(drow + seg * 16 + 8, ptx::u32x4{w[4], w[5], w[6], w[7]});
      }
    }
    return;
  }

  // Transposed write-out: a thread takes 4 channels × one 16-key group. It reads 4 keys' words of
  // those 4 channels (one 32-bit shared load each; the permuted words keep a warp's lanes on
  // different banks) and transposes each 4×4 byte block with byte permutes, so that every
  // channel's 16 codes (in the layout's slot order, v_slot) leave as one 16-byte store.
  // Consecutive lanes take consecutive 16-key groups of a channel group: a warp's store fills whole
  // 128-byte lines of ROWS = 128 (16-byte pieces of many channels' rows filled half sectors).
  // Every thread of the CTA has work when ROWS·D_V = 64·THREADS (128-token tiles at head dim 128).
  constexpr int SEGS = ROWS / 16, CG = D_V / 4;
  u8* dst = p.v_codes + si.v_row0 * si.v_pitch + si.out_blk;
  const u32 s_base = ptx::smem_addr(s_t);
#pragma unroll 1
  for (int it = tid; it < CG * SEGS; it += THREADS) {
    const int seg = it % SEGS, cg = it / SEGS;
    const u32 word = static_cast<u32>((cg ^ v_word_mask<ROWS>(seg)) * 4);
    u32 w[4][4];  // [channel e of the group][word q]: keys of slots 4q .. 4q+3
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      u32 k4[4];  // key slot 4q + t: the group's 4 channels, channel e in byte e
#pragma unroll
      for (int t = 0; t < 4; ++t)
        k4[t] = ptx::ld_shared_u32(s_base + static_cast<u32>((seg * 16 + sage2_v_key_of_slot[q * 4 + t]) * D_V) + word);
      const u32 lo01 = ptx::prmt(k4[0], k4[1], 0x5140u), lo23 = ptx::prmt(k4[2], k4[3], 0x5140u);  // channels 0, 1
      const u32 hi01 = ptx::prmt(k4[0], k4[1], 0x7362u), hi23 = ptx::prmt(k4[2], k4[3], 0x7362u);  // channels 2, 3
      w[0][q] = ptx::prmt(lo01, lo23, 0x5410u);
      w[1][q] = ptx::prmt(lo01, lo23, 0x7632u);
      w[2][q] = ptx::prmt(hi01, hi23, 0x5410u);
      w[3][q] = ptx::prmt(hi01, hi23, 0x7632u);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      ptx::st_v4(dst + static_cast<i64>(cg * 4 + e) * si.v_pitch + seg * 16, ptx::u32x4{w[e][0], w[e][1], w[e][2], w[e][3]});
  }
}

// Shared memory of the V item bodies: [s_mu | s_inv | s_ha] per-channel constants (V_CONST_BYTES),
// then the tile's codes token-major [ROWS][D_V] (e4m3: words permuted per 16-key group, v_code_at;
// written 8 bytes per thread along a row).
__device__ __forceinline__ float* v_smem_mu(u8* smem) { return reinterpret_cast<float*>(smem); }
__device__ __forceinline__ float* v_smem_inv(u8* smem) { return v_smem_mu(smem) + D_V; }
__device__ __forceinline__ float* v_smem_ha(u8* smem) { return v_smem_mu(smem) + 2 * D_V; }  // sampled: H·A_s
__device__ __forceinline__ u8* v_smem_codes(u8* smem) { return smem + V_CONST_BYTES; }       // 16-byte aligned

// The per-channel constants of V of (batch·kv head) bh into shared memory (μ, inv; sampled: H·A_s);
// `writes_globals` (the CTA of tile 0) also stores v_scale, v_mean and v_amax. `stats`: the head's
// V statistics [3][D_V] in shared memory (the cluster stage), else null: read from v_stats. Returns
// (after a barrier) whether every element of the head needs the exact check (a channel with H_s =
// 0 escapes the e4m3 screen).
__device__ __forceinline__ bool v_channel_constants(const QuantizeParams& p, u8* smem, i64 bh, i64 kv_len,
                                                    bool writes_globals, const float* stats) {
  float* s_mu = v_smem_mu(smem);
  float* s_inv = v_smem_inv(smem);
  float* s_ha = v_smem_ha(smem);
  const float* st = p.v_stats + bh * 3 * D_V;
  int zero_hs = 0;  // sampled: a channel of this thread with H_s = 0
#pragma unroll 1
  for (int c = threadIdx.x; c < D_V; c += THREADS) {
    float mu = 0.f, inv = 0.f, scale = 0.f;
    if (c < HD) {
      const float vsum = stats ? stats[c] : ld_stat(st + c);
      const float vmin = stats ? stats[D_V + c] : ld_stat(st + D_V + c);
      const float vmax = stats ? stats[2 * D_V + c] : ld_stat(st + 2 * D_V + c);
      float amax;
      if (SAGE2_SMOOTH_V) {
        mu = kv_len > 0 ? ptx::div_rn(vsum, static_cast<float>(stats_keys(kv_len))) : 0.f;
        amax = ptx::max_nan(vmax - mu, mu - vmin);
      } else {
        amax = ptx::max_nan(ptx::abs_f32(vmax), ptx::abs_f32(vmin));
      }
      if (SAMPLE_TILES) {  // the sample's amax with headroom (none where that is not finite)
        const float ha = amax * V_HEADROOM;
        amax = ptx::abs_f32(ha) <= FLT_MAX_ ? ha : amax;
      }
      v_scale_inv(amax, scale, inv);
      if (SAMPLE_TILES) {
        s_ha[c] = amax;
        if (writes_globals) p.v_amax[bh * D_V + c] = amax;
        if (V_SCREEN && amax == 0.f) zero_hs = 1;  // (any key off μ exceeds it: no screen)
      }
    }
    s_mu[c] = mu;
    s_inv[c] = inv;
    if (SAMPLE_TILES && c >= HD) s_ha[c] = 0.f;
    if (writes_globals) {
      p.v_scale[bh * D_V + c] = scale;
      p.v_mean[bh * D_V + c] = mu;
      if (SAMPLE_TILES && c >= HD) p.v_amax[bh * D_V + c] = 0.f;
    }
  }
  // (the screen misses a channel with H_s = 0: then every thread of the CTA checks exactly)
  return V_SCREEN ? __syncthreads_or(zero_hs) != 0 : (__syncthreads(), false);
}

// A thread's channels are the same for all its rows: their constants in registers. Without
// smooth-V, μ is 0 and x − μ = x exactly: the subtraction is left out at compile time.
template <class M>
struct VRegs {
  float mu[M::CPT][8], inv[M::CPT][8];
  __device__ __forceinline__ void load(u8* smem) {
    const int lane_r = threadIdx.x % M::TPR;
#pragma unroll
    for (int k = 0; k < M::CPT; ++k) {
      const int j = lane_r + k * M::TPR;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        mu[k][e] = SAGE2_SMOOTH_V && j < M::CHUNKS ? v_smem_mu(smem)[j * 8 + e] : 0.f;
        inv[k][e] = j < M::CHUNKS ? v_smem_inv(smem)[j * 8 + e] : 0.f;
      }
    }
  }
};

// One V tile of ROWS tokens from token n0 of (batch·kv head) bh, `valid` of them real (rows from
// `base`): the codes from raw(i, k) (the 16 bytes of the thread's row slot + i·RPP, chunk lane_r +
// k·TPR; only called for real rows and channels) into shared memory, the sampled screen and its
// exact pass, then the transposed write-out at si. Ends after the write-out (no barrier after it).
template <class M, class Raw>
__device__ __forceinline__ void v_tile(const QuantizeParams& p, u8* smem, const Input& in, i64 bh, i64 n0, int valid,
                                       const u16* base, const SeqItem& si, bool exact_all, const VRegs<M>& vr,
                                       Raw&& raw) {
  constexpr int ROWS = M::ROWS, TPR = M::TPR, CPT = M::CPT, CHUNKS = M::CHUNKS, RPP = M::RPP, ITEMS = M::ITEMS;
  const float* s_mu = v_smem_mu(smem);
  const float* s_ha = v_smem_ha(smem);
  u8* s_t = v_smem_codes(smem);
  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;

  // Sampled statistics: this thread's max |V − μ| per channel (FP16 V̂), or its max |(V − μ)·inv|
  // (the e4m3 screen); non-finite inputs read as 0.
  constexpr bool V_EXACT = SAMPLE_TILES && !V_SCREEN;
  float dmax[V_EXACT ? CPT : 1][8];
#pragma unroll
  for (int k = 0; k < (V_EXACT ? CPT : 1); ++k)
#pragma unroll
    for (int e = 0; e < 8; ++e) dmax[k][e] = 0.f;
  float ymax = 0.f;
  u32 xmax[V_RAW_SCREEN ? CPT : 1][4];  // raw screen: max |x| of channels 8j + 2w, 8j + 2w + 1
#pragma unroll
  for (int k = 0; k < (V_RAW_SCREEN ? CPT : 1); ++k)
#pragma unroll
    for (int w = 0; w < 4; ++w) xmax[k][w] = 0u;
  bool recheck = false;  // a non-finite input (sampled statistics: the exact pass takes its flag)

  // Which of the thread's rows are real, once (recomputing it per row from the 64-bit lengths
  // cost ~12 instructions per chunk in the unrolled loop).
  static_assert(ITEMS <= 32, "one bit per row of the thread");
  u32 real_rows = 0u;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) real_rows |= (slot + i * RPP < valid ? 1u : 0u) << i;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int r = slot + i * RPP;
    if (ITEMS * RPP != ROWS && r >= ROWS) continue;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
      if (j >= CHUNKS) continue;
      u32 pair[4] = {0u, 0u, 0u, 0u};
      if (((real_rows >> i) & 1u) != 0u && j < CH_IN) {
        float x[8];
        const ptx::u32x4 v = raw(i, k);
        u32 bad = 0u;
        if (V_RAW_SCREEN) {  // (a non-finite input: its code is zeroed by the exact pass)
          to_f32x8(v, x);
          const u32 vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int w = 0; w < 4; ++w)
            xmax[V_RAW_SCREEN ? k : 0][w] = ptx::max_abs_nan_x2<IN_BF16>(xmax[V_RAW_SCREEN ? k : 0][w], vw[w]);
        } else {
          bad = to_f32x8_sane(v, x);
        }
        float y[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = SAGE2_SMOOTH_V ? x[e] - vr.mu[k][e] : x[e];
          if (V_EXACT) dmax[V_EXACT ? k : 0][e] = ptx::max_abs_f32(dmax[V_EXACT ? k : 0][e], d);
          y[e] = d * vr.inv[k][e];
          if (V_SCREEN && !V_RAW_SCREEN) ymax = ptx::max_abs_f32(ymax, y[e]);
        }
        if (!V_RAW_SCREEN && bad != 0u) {  // a non-finite input's code is 0 (rare: off the common path)
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if ((bad >> e) & 1u) y[e] = 0.f;
          // sampled statistics saw only the sample's keys: the exact pass below lowers the
          // first-bad flags over every key
          if (SAMPLE_TILES) recheck = true;
        }
        if constexpr (V_FP16) {
#pragma unroll
          for (int e = 0; e < 8; e += 2) pair[e / 2] = ptx::pack_f16x2(y[e], y[e + 1]);
        } else {  // (sm_80 has no e4m3 conversion: never emitted there) four codes per word
          pair[0] = ptx::f32x4_to_e4m3x4(y[0], y[1], y[2], y[3]);
          pair[1] = ptx::f32x4_to_e4m3x4(y[4], y[5], y[6], y[7]);
        }
      }
      if (V_FP16) {
        u32* d16 = reinterpret_cast<u32*>(&s_t[(r * D_V + j * 8) * 2]);
        d16[0] = pair[0];
        d16[1] = pair[1];
        d16[2] = pair[2];
        d16[3] = pair[3];
        continue;
      }
      u32* d8 = reinterpret_cast<u32*>(&s_t[v_code_at<ROWS>(r, j * 8)]);
      d8[0] = pair[0];
      d8[1] = pair[1];
    }
  }
  // A key above H·A_s: its |V − μ| into v_over for the fix-up (rare; order-free maxima).
  if (V_EXACT) {
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int j = lane_r + k * TPR;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float dm = dmax[V_EXACT ? k : 0][e];
        if (j < CH_IN && j * 8 + e < HD && dm > s_ha[j * 8 + e])
          ptx::red_max_gpu_u32(p.v_over + bh * D_V + j * 8 + e, ptx::f32_bits(dm));
      }
    }
  }
  // The raw screen's test, once per channel: NaN (a non-finite input, or Inf · 0) fails it too.
  if (V_RAW_SCREEN) {
#pragma unroll
    for (int k = 0; k < CPT; ++k)
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float lo, hi;
        quant_math::unpack2<IN_BF16>(xmax[V_RAW_SCREEN ? k : 0][w], lo, hi);
        recheck |= !(lo * vr.inv[k][2 * w] < V8_MAX) || !(hi * vr.inv[k][2 * w + 1] < V8_MAX);
      }
  }
  // Over the screen, or a non-finite input: the exact test per element; its first-bad flags (order-
  // free minima over every key); after the raw screen, a non-finite input's code set to 0 here.
  if (SAMPLE_TILES && (recheck || (V_SCREEN && (ymax >= V8_MAX || exact_all)))) {
#pragma unroll 1
    for (int i = 0; i < ITEMS; ++i) {
      const int r = slot + i * RPP;
      if (r >= valid) continue;
#pragma unroll 1
      for (int k = 0; k < CPT; ++k) {
        const int j = lane_r + k * TPR;
        if (j >= CH_IN) continue;
        float x[8];
        const u32 bad = to_f32x8_sane(load_chunk(in, base + static_cast<i64>(r) * in.sn, j), x);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if ((bad >> e) & 1u) {
            ptx::red_min_gpu_s32(p.v_first_bad + bh * D_V + j * 8 + e, static_cast<i32>(n0 + r));
            if (V_RAW_SCREEN) s_t[v_code_at<ROWS>(r, j * 8 + e)] = 0;
          }
          if (!V_SCREEN) continue;  // (FP16 V̂: its exact maxima above)
          const float d = ptx::abs_f32(x[e] - s_mu[j * 8 + e]);
          if (j * 8 + e < HD && d > s_ha[j * 8 + e]) ptx::red_max_gpu_u32(p.v_over + bh * D_V + j * 8 + e, ptx::f32_bits(d));
        }
      }
    }
  }
  __syncthreads();
  v_write_out<ROWS>(p, s_t, si);
}

// `stats`: the head's V statistics [3][D_V] in shared memory (the cluster stage), else null:
// read from v_stats in global memory. One tile per call (the dense split kernel, the one-launch
// stages, varlen tiles).
template <class M>
__device__ __forceinline__ void quantize_v(const QuantizeParams& p, u8* smem, const Input& in, i64 b, i64 h, i64 tile,
                                           const SeqItem& si, const float* stats = nullptr) {
  constexpr int ROWS = M::ROWS, TPR = M::TPR, CPT = M::CPT, CHUNKS = M::CHUNKS, RPP = M::RPP, ITEMS = M::ITEMS;
  static_assert(ROWS % 16 == 0, "V tile must be a multiple of 16 tokens");
  static_assert(CHUNKS * 8 == D_V, "V mapping covers the padded head dim");
  static_assert(v_smem_bytes<M>() <= 48 * 1024, "V tile exceeds static shared memory");
  const i64 bh = b * p.kv_heads + h;
  const i64 n0 = tile * ROWS;
  const i64 kv_len = si.len;
  const int valid = static_cast<int>(kv_len - n0 <= 0 ? 0 : (kv_len - n0 < ROWS ? kv_len - n0 : ROWS));
  const int tid = threadIdx.x, lane_r = tid % TPR, slot = tid / TPR;

  // The tile's rows are loaded first when they fit 8 chunks of 16 bytes per thread: their latency
  // then overlaps the per-channel constants' (v_stats reads and divisions).
  constexpr bool PRELOAD = ROOMY && ITEMS * CPT <= 8;  // (the one-launch stages: see quantize_qk)
  const u16* base = row_ptr(in, b, h, si.n0 + n0);
  ptx::u32x4 pre[PRELOAD ? ITEMS : 1][PRELOAD ? CPT : 1];
  auto load_rc = [&](int i, int k) {
    return load_chunk(in, base + static_cast<i64>(slot + i * RPP) * in.sn, lane_r + k * TPR);
  };
  if (PRELOAD) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < CPT; ++k)
        if (slot + i * RPP < valid) pre[PRELOAD ? i : 0][PRELOAD ? k : 0] = load_rc(i, k);
  }

  wait_previous();  // (the split V kernel: its rows are in flight; the statistics are read below)
  const bool exact_all = v_channel_constants(p, smem, bh, kv_len, tile == 0, stats);
  VRegs<M> vr;
  vr.load(smem);
  v_tile<M>(p, smem, in, bh, n0, valid, base, si, exact_all, vr,
            [&](int i, int k) { return PRELOAD ? pre[PRELOAD ? i : 0][PRELOAD ? k : 0] : load_rc(i, k); });
}

}  // namespace qz
