// The direct path (small Nq, e.g. decode): split-KV attention computed from the caller's
// fp16/bf16 Q, K and V without any quantization. Two kernels from one template (SAGE2_FAMILY
// selects):
//  - sage2_direct_split (family 5): a CTA per (row block, key split, kv head, batch). Its rows
//    are query rows sharing one kv head (templates/direct_params.cuh: row r = i · group + g), so
//    K and V are read once per kv head, not once per q head. K/V tiles of BK keys stream
//    global → shared through cp.async in a ring of STAGES buffers (16-byte copies; element loads
//    where a tensor's rows are not 16-byte aligned); S = Q·Kᵀ and O += P·V run on
//    mma.sync.m16n8k16 (f16 or bf16 inputs, fp32 accumulate; fragments read with ldmatrix,
//    .trans for V); the online softmax is fp32 with exp2 and sm_scale·log2 e folded into one FMA;
//    P is rounded to the input dtype for the P·V product, the row sum l uses the fp32 values.
//    Each warp owns 16 rows and a slice of every tile's keys; it writes its partial (m, l, O)
//    to the workspace, or — one split and one key warp — the final O and LSE.
//  - sage2_direct_merge (family 6): one warp per output row combines the partials by their
//    maxima (log-sum-exp), divides, writes O in the input dtype and the natural-log LSE.
//
// Non-finite inputs (plain IEEE arithmetic of the textbook formula, as exact attention): a NaN or
// +Inf score makes its row's sum NaN (row poisoned); a -Inf score is a weight of 0; a non-finite
// V[j, c] meets its weight in P·V (0 · Inf = NaN) and poisons channel c of the rows that see j.
// Keys a row cannot see are never multiplied into its results: keys past kv_len or past every
// row's causal limit are not read (zero-filled), scores of invisible keys are set to -inf, and in
// a tile holding keys visible to some rows of the CTA and not to others (the causal diagonal) the
// non-finite V elements are replaced by 0 in shared memory and re-applied as NaN to exactly the
// rows that see them. The final O is NaN wherever it is not finite (never ±Inf); a row whose
// visible keys all score -inf is NaN (as exact attention's max = -inf); a row with no visible key
// gets O = 0 and LSE = -inf.
#pragma once

#include "direct_params.cuh"
#include "ptx.cuh"
#include "types.cuh"

#if !defined(SAGE2_FAMILY) || (SAGE2_FAMILY != 5 && SAGE2_FAMILY != 6)
#error "attention_direct.cuh is specialised by the preamble jit::generate_source() writes (direct families)"
#endif

namespace dpath {

using sage2::dev::DirectParams;

constexpr int D = SAGE2_HEAD_DIM;
constexpr int DP = sage2::dev::direct_d_pad(D);
constexpr int PITCH = sage2::dev::direct_pitch(DP);
constexpr int CHUNKS = DP / 8;  // 16-byte chunks per shared-memory row
constexpr bool BF16 = SAGE2_IN_BF16 != 0;
constexpr int CAUSAL = SAGE2_CAUSAL;
constexpr bool LSE = SAGE2_RETURN_LSE != 0;
constexpr float LN2 = 0.693147180559945309f;
constexpr int NO_BAD = 0x7fffffff;

static_assert(D >= 1 && D <= 512, "the direct path runs head dims 1..512");

__device__ __forceinline__ float ninf() { return ptx::bits_f32(0xff800000u); }
__device__ __forceinline__ float qnan() { return ptx::bits_f32(0x7fffffffu); }
__device__ __forceinline__ bool is_finite(float x) { return (ptx::f32_bits(x) & 0x7f800000u) != 0x7f800000u; }
__device__ __forceinline__ float lg2(float x) {
  float r;
  asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ u16 from_f32(float x) { return BF16 ? ptx::f32_to_bf16(x) : ptx::f32_to_f16(x); }
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  return BF16 ? ptx::pack_bf16x2(lo, hi) : ptx::pack_f16x2(lo, hi);
}
__device__ __forceinline__ void st_u16(void* p, u16 x) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(x) : "memory");
}
__device__ __forceinline__ void st_shared_v4(u32 addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ void ld_shared_v4(u32 addr, u32& a, u32& b, u32& c, u32& d) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr));
}
__device__ __forceinline__ int ld_shared_s32(u32 addr) {
  int r;
  asm volatile("ld.shared.s32 %0, [%1];" : "=r"(r) : "r"(addr));
  return r;
}
__device__ __forceinline__ void st_shared_s32(u32 addr, int v) {
  asm volatile("st.shared.s32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void atom_min_shared_s32(u32 addr, int v) {
  asm volatile("red.shared.min.s32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// An f16 / bf16 element is finite iff its exponent bits are not all ones.
__device__ __forceinline__ bool half_finite(u32 h) {
  return BF16 ? (h & 0x7f80u) != 0x7f80u : (h & 0x7c00u) != 0x7c00u;
}

// mma.sync m16n8k16, f16 or bf16 inputs, f32 accumulate: acc += A·B.
__device__ __forceinline__ void mma16816(float (&acc)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Copies channels [8c, 8c + 8) of one token row (`src`: the row's first element; `valid`: the row
// exists) to the 16 shared-memory bytes at `dst`; channels past D and invalid rows become 0.
// vec: the row start is 16-byte aligned (one cp.async, zero-filling the tail); else element loads
// and a shared store (visible, like the cp.async data, after the pipeline's __syncthreads).
// `any`: a valid global address to name when nothing is read.
__device__ __forceinline__ void load_chunk(u32 dst, const u16* src, int c, bool valid, bool vec, const void* any) {
  const int e0 = c * 8;
  const int n = valid ? (D - e0 < 8 ? D - e0 : 8) : 0;  // elements to read (<= 0: none)
  if (vec) {
    ptx::cp_async_16_zfill(dst, n > 0 ? static_cast<const void*>(src + e0) : any, n > 0 ? static_cast<u32>(n) * 2u : 0u);
  } else {
    u32 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 lo = 2 * i < n ? ptx::ld_nc_u16(src + e0 + 2 * i) : 0u;
      const u32 hi = 2 * i + 1 < n ? ptx::ld_nc_u16(src + e0 + 2 * i + 1) : 0u;
      w[i] = lo | (hi << 16);
    }
    st_shared_v4(dst, w[0], w[1], w[2], w[3]);
  }
}

// The number of keys query i sees: [0, visible_keys(i)).
__device__ __forceinline__ int visible_keys(int i, const DirectParams& p) {
  if (CAUSAL == 0) return p.kv_len;
  const long long e = static_cast<long long>(i) + p.causal_offset + 1;
  return e <= 0 ? 0 : (e >= p.kv_len ? p.kv_len : static_cast<int>(e));
}

// Final value of one row from its (m, l, unnormalised O) — the split kernel's direct epilogue and
// the merge kernel share it. n_vis = 0: O = 0, LSE = -inf. m = -inf with visible keys (every
// visible score -inf), or a non-finite or zero l: the row is NaN. Else O / l, NaN where not finite.
__device__ __forceinline__ bool row_poisoned(float m, float l) {
  return m == ninf() || !(l > 0.f) || !is_finite(l) || !is_finite(m);
}
__device__ __forceinline__ float row_lse(float m, float l, int n_vis) {
  if (n_vis == 0) return ninf();
  if (row_poisoned(m, l)) return qnan();
  const float r = (m + lg2(l)) * LN2;
  return is_finite(r) ? r : qnan();
}
__device__ __forceinline__ float final_o(float o, float inv_l, bool poisoned, int n_vis) {
  if (n_vis == 0) return 0.f;
  const float r = o * inv_l;
  return (poisoned || !is_finite(r)) ? qnan() : r;
}

}  // namespace dpath

#if SAGE2_FAMILY == 5
// ================================================================================================
// The split kernel.
namespace dpath {

constexpr int BR = SAGE2_BQ;      // rows per CTA (16 per row warp)
constexpr int BK = SAGE2_BK;      // keys per KV tile
constexpr int WARPS = SAGE2_WARPS;
constexpr int STAGES = SAGE2_STAGES;
constexpr int WR = sage2::dev::direct_row_warps(BR);
constexpr int WK = sage2::dev::direct_key_warps(BR, WARPS);
constexpr int THREADS = sage2::dev::direct_threads(WARPS);
constexpr int BKW = BK / WK;     // keys per warp and tile
constexpr int KS = DP / 16;      // k16 steps of Q·Kᵀ
constexpr int NTS = BKW / 8;     // n8 score tiles per warp
constexpr int KV = BKW / 16;     // k16 steps of P·V
// O's channels per CTA (direct_params.cuh: all of them up to 256; wider heads in parts).
constexpr int PARTS = sage2::dev::direct_o_parts(DP);
constexpr int DPO = sage2::dev::direct_o_part_dim(DP);
constexpr int NO = DPO / 8;      // n8 output tiles of the CTA's part
constexpr bool Q_REGS = DP <= 128;  // Q fragments kept in registers (wider heads: ldmatrix per use)
constexpr int MIN_CTAS = THREADS <= 128 ? 2 : 1;
constexpr sage2::dev::DirectSmem SM = sage2::dev::direct_smem(BR, BK, D, STAGES);

static_assert(BR % 16 == 0 && WR >= 1 && WARPS % WR == 0, "whole 16-row warps");
static_assert(BK % (16 * WK) == 0, "each key warp takes a multiple of 16 keys per tile");
static_assert(STAGES >= 2, "the ring needs two buffers at least");

// Issues the copies of the KV tile of keys [key0, key0 + BK) into the ring buffer at `stage`; keys
// at or past `load_end` are zero-filled, never read.
__device__ __forceinline__ void load_kv_tile(const DirectParams& p, int b, int h, int key0, int load_end, u32 stage) {
  const u16* kb = static_cast<const u16*>(p.k) + b * p.k_sb + h * p.k_sh;
  const u16* vb = static_cast<const u16*>(p.v) + b * p.v_sb + h * p.v_sh;
  const bool kvec = (p.vec_mask & 2u) != 0, vvec = (p.vec_mask & 4u) != 0;
  for (int idx = threadIdx.x; idx < BK * CHUNKS; idx += THREADS) {
    const int row = idx / CHUNKS, c = idx % CHUNKS;
    const int j = key0 + row;
    const bool valid = j < load_end;
    const long long jj = valid ? j : 0;
    load_chunk(stage + row * PITCH + c * 16, kb + jj * p.k_sn, c, valid, kvec, p.k);
    load_chunk(stage + SM.v_off + row * PITCH + c * 16, vb + jj * p.v_sn, c, valid, vvec, p.v);
  }
}

__device__ __forceinline__ void load_q_tile(const DirectParams& p, int b, int h, int rb, u32 base) {
  const u16* qb = static_cast<const u16*>(p.q) + b * p.q_sb;
  const bool qvec = (p.vec_mask & 1u) != 0;
  for (int idx = threadIdx.x; idx < BR * CHUNKS; idx += THREADS) {
    const int row = idx / CHUNKS, c = idx % CHUNKS;
    const int r = rb * BR + row;
    const bool valid = r < p.rows;
    const int i = valid ? r / p.group : 0;
    const int g = valid ? r - i * p.group : 0;
    const u16* src = qb + static_cast<long long>(h * p.group + g) * p.q_sh + static_cast<long long>(i) * p.q_sn;
    load_chunk(base + SM.q_off + row * PITCH + c * 16, src, c, valid, qvec, p.q);
  }
}

// Replaces the non-finite V elements of the tile in `stage` by 0 and records, per channel, the
// smallest tile row that held one (bad[c], NO_BAD: none). Called by every thread between barriers.
__device__ __forceinline__ void sanitize_v(u32 stage, u32 bad) {
  for (int c = threadIdx.x; c < DP; c += THREADS) st_shared_s32(bad + c * 4, NO_BAD);
  __syncthreads();
  for (int idx = threadIdx.x; idx < BK * CHUNKS; idx += THREADS) {
    const int row = idx / CHUNKS, c = idx % CHUNKS;
    const u32 a = stage + SM.v_off + row * PITCH + c * 16;
    u32 w[4];
    ld_shared_v4(a, w[0], w[1], w[2], w[3]);
    bool changed = false;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const u32 h = (w[e / 2] >> (16 * (e % 2))) & 0xffffu;
      if (!half_finite(h)) {
        w[e / 2] &= ~(0xffffu << (16 * (e % 2)));
        changed = true;
        atom_min_shared_s32(bad + (c * 8 + e) * 4, row);
      }
    }
    if (changed) st_shared_v4(a, w[0], w[1], w[2], w[3]);
  }
  __syncthreads();
}

__device__ __forceinline__ void split_kernel(const DirectParams& p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const u32 smem = ptx::smem_addr(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wr = warp / WK, wk = warp % WK;
  const int part = PARTS > 1 ? static_cast<int>(blockIdx.x % PARTS) : 0;
  const int xb = PARTS > 1 ? static_cast<int>(blockIdx.x / PARTS) : static_cast<int>(blockIdx.x);
  const int rb = xb % p.row_blocks, split = xb / p.row_blocks;
  const int ch0 = part * DPO;  // the part's first output channel
  const int h = blockIdx.y, b = blockIdx.z;
  const int R = p.rows, G = p.group;

  // The CTA's rows, their queries and visible key ranges.
  const int r_first = rb * BR;
  const int r_last = (r_first + BR < R ? r_first + BR : R) - 1;
  const int i_first = r_first / G, i_last = r_last / G;
  const int kend_first = visible_keys(i_first, p);  // fewest visible keys of the CTA's rows
  const int load_end = visible_keys(i_last, p);     // most: nothing at or past it is read
  const int key_begin = split * p.tiles_per_split * BK;
  int key_end = key_begin + p.tiles_per_split * BK;
  if (key_end > p.kv_limit) key_end = p.kv_limit;
  if (key_end > load_end) key_end = load_end;
  const int n_tiles = key_end > key_begin ? (key_end - key_begin + BK - 1) / BK : 0;

  // This thread's two rows (lane/4 and lane/4 + 8 of its warp's 16).
  const int ra = r_first + wr * 16 + (lane >> 2), rbw = ra + 8;
  const int ia = ra < R ? ra / G : 0, ib = rbw < R ? rbw / G : 0;
  const int kend_a = ra < R ? visible_keys(ia, p) : p.kv_len;
  const int kend_b = rbw < R ? visible_keys(ib, p) : p.kv_len;
  const int kend_min = kend_a < kend_b ? kend_a : kend_b;

  float o[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_a = ninf(), m_b = ninf(), l_a = 0.f, l_b = 0.f;
  const float c2 = p.scale_log2;

  if (n_tiles > 0) {
    const u32 stages = smem + SM.stages_off;
    load_q_tile(p, b, h, rb, smem);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < n_tiles) load_kv_tile(p, b, h, key_begin + s * BK, load_end, stages + s * SM.stage_bytes);
      ptx::cp_async_commit();
    }
    u32 qf[Q_REGS ? KS : 1][4];
    // ldmatrix row addresses: Q (A, x4: rows +0..7 / +8..15, k +0 / +8), K (B, x4: keys +0..7 /
    // +8..15, k +0 / +8), V (B via .trans, x4: keys +0..7 / +8..15, channels +0 / +8).
    const u32 q_lane = smem + SM.q_off + (wr * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * PITCH + (lane >> 4) * 16;
    const int key_warp0 = wk * BKW;
    const u32 k_lane = (key_warp0 + (lane & 7) + (lane >> 4) * 8) * PITCH + ((lane >> 3) & 1) * 16;
    const u32 v_lane = SM.v_off + (key_warp0 + (lane & 7) + ((lane >> 3) & 1) * 8) * PITCH + (lane >> 4) * 16;
    const u32 bad = smem + SM.bad_off;

    for (int t = 0; t < n_tiles; ++t) {
      ptx::cp_async_wait<STAGES - 2>();
      __syncthreads();
      {
        const int tn = t + STAGES - 1;
        if (tn < n_tiles) load_kv_tile(p, b, h, key_begin + tn * BK, load_end, stages + (tn % STAGES) * SM.stage_bytes);
        ptx::cp_async_commit();
      }
      if constexpr (Q_REGS) {
        if (t == 0) {
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) ptx::ldmatrix_x4(qf[ks], q_lane + ks * 32);
        }
      }
      const u32 stage = stages + (t % STAGES) * SM.stage_bytes;
      const int tile0 = key_begin + t * BK;
      // The causal diagonal: keys of this tile that some rows of the CTA see and others do not.
      const bool diagonal = CAUSAL != 0 && tile0 + BK > kend_first && kend_first < load_end;
      if (diagonal) sanitize_v(stage, bad);

      // S = Q·Kᵀ for this warp's BKW keys.
      float s[NTS][4];
#pragma unroll
      for (int n = 0; n < NTS; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        u32 a[4];
        if constexpr (Q_REGS) {
          a[0] = qf[ks][0]; a[1] = qf[ks][1]; a[2] = qf[ks][2]; a[3] = qf[ks][3];
        } else {
          ptx::ldmatrix_x4(a, q_lane + ks * 32);
        }
#pragma unroll
        for (int np = 0; np < NTS / 2; ++np) {
          u32 kb[4];
          ptx::ldmatrix_x4(kb, stage + k_lane + np * 16 * PITCH + ks * 32);
          mma16816(s[2 * np], a, kb[0], kb[1]);
          mma16816(s[2 * np + 1], a, kb[2], kb[3]);
        }
      }
      // Visibility: keys at or past a row's end (kv_len, or its causal limit) score -inf.
      const int wkey0 = tile0 + key_warp0;
      if (wkey0 + BKW > kend_min) {
#pragma unroll
        for (int n = 0; n < NTS; ++n) {
          const int j = wkey0 + n * 8 + 2 * (lane & 3);
          if (j >= kend_a) s[n][0] = ninf();
          if (j + 1 >= kend_a) s[n][1] = ninf();
          if (j >= kend_b) s[n][2] = ninf();
          if (j + 1 >= kend_b) s[n][3] = ninf();
        }
      }
      // Online softmax (log2 domain; max.f32 ignores NaN scores, which then poison l and P).
      float mx_a = ninf(), mx_b = ninf();
#pragma unroll
      for (int n = 0; n < NTS; ++n) {
        mx_a = ptx::max_f32(mx_a, ptx::max_f32(s[n][0], s[n][1]));
        mx_b = ptx::max_f32(mx_b, ptx::max_f32(s[n][2], s[n][3]));
      }
      mx_a = ptx::max_f32(mx_a, ptx::shfl_xor(mx_a, 1));
      mx_a = ptx::max_f32(mx_a, ptx::shfl_xor(mx_a, 2));
      mx_b = ptx::max_f32(mx_b, ptx::shfl_xor(mx_b, 1));
      mx_b = ptx::max_f32(mx_b, ptx::shfl_xor(mx_b, 2));
      const float mn_a = ptx::max_f32(m_a, mx_a * c2), mn_b = ptx::max_f32(m_b, mx_b * c2);
      const float mu_a = mn_a == ninf() ? 0.f : mn_a, mu_b = mn_b == ninf() ? 0.f : mn_b;
      const float al_a = ptx::exp2_approx(m_a - mu_a), al_b = ptx::exp2_approx(m_b - mu_b);
      m_a = mn_a;
      m_b = mn_b;
      float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
      for (int n = 0; n < NTS; ++n) {
        s[n][0] = ptx::exp2_approx(fmaf(s[n][0], c2, -mu_a));
        s[n][1] = ptx::exp2_approx(fmaf(s[n][1], c2, -mu_a));
        s[n][2] = ptx::exp2_approx(fmaf(s[n][2], c2, -mu_b));
        s[n][3] = ptx::exp2_approx(fmaf(s[n][3], c2, -mu_b));
        sum_a += s[n][0] + s[n][1];
        sum_b += s[n][2] + s[n][3];
      }
      l_a = l_a * al_a + sum_a;
      l_b = l_b * al_b + sum_b;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        o[n][0] *= al_a;
        o[n][1] *= al_a;
        o[n][2] *= al_b;
        o[n][3] *= al_b;
      }
      // O += P·V (P rounded to the input dtype; the accumulator fragments of two n8 score tiles
      // are the A fragment of one k16 step).
#pragma unroll
      for (int kv = 0; kv < KV; ++kv) {
        u32 pa[4];
        pa[0] = pack2(s[2 * kv][0], s[2 * kv][1]);
        pa[1] = pack2(s[2 * kv][2], s[2 * kv][3]);
        pa[2] = pack2(s[2 * kv + 1][0], s[2 * kv + 1][1]);
        pa[3] = pack2(s[2 * kv + 1][2], s[2 * kv + 1][3]);
#pragma unroll
        for (int cp = 0; cp < NO / 2; ++cp) {
          if (PARTS > 1 && ch0 + 16 * cp >= DP) break;  // the last part past the padded head dim
          u32 vb[4];
          ptx::ldmatrix_x4_trans(vb, stage + v_lane + kv * 16 * PITCH + (ch0 / 16 + cp) * 32);
          mma16816(o[2 * cp], pa, vb[0], vb[1]);
          mma16816(o[2 * cp + 1], pa, vb[2], vb[3]);
        }
      }
      if (diagonal) {
        // Re-apply the V elements sanitize_v zeroed, to the rows that see their keys.
#pragma unroll
        for (int n = 0; n < NO; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int ch = ch0 + n * 8 + 2 * (lane & 3) + e;
            if (PARTS > 1 && ch >= DP) continue;
            const int bk = ld_shared_s32(bad + ch * 4);
            if (bk != NO_BAD) {
              if (tile0 + bk < kend_a) o[n][e] = qnan();
              if (tile0 + bk < kend_b) o[n][2 + e] = qnan();
            }
          }
        }
      }
    }
    ptx::cp_async_wait_all();
  }

  // Row sums over the quad.
  l_a += ptx::shfl_xor(l_a, 1);
  l_a += ptx::shfl_xor(l_a, 2);
  l_b += ptx::shfl_xor(l_b, 1);
  l_b += ptx::shfl_xor(l_b, 2);

  const int c0 = ch0 + 2 * (lane & 3);
  if (p.partials == 1) {
    // One split and one key warp: the final O and LSE.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = half ? rbw : ra;
      if (r >= R) continue;
      const int i = half ? ib : ia;
      const int g = r - i * G;
      const int n_vis = half ? kend_b : kend_a;
      const float m = half ? m_b : m_a, l = half ? l_b : l_a;
      const bool poisoned = row_poisoned(m, l);
      const float inv = poisoned ? 0.f : ptx::rcp_rn(l);
      u16* orow = static_cast<u16*>(p.out) + b * p.o_sb + static_cast<long long>(h * G + g) * p.o_sh +
                  static_cast<long long>(i) * p.o_sn;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        const int c = n * 8 + c0;
        if (c < D) st_u16(orow + c, from_f32(final_o(o[n][2 * half], inv, poisoned, n_vis)));
        if (c + 1 < D) st_u16(orow + c + 1, from_f32(final_o(o[n][2 * half + 1], inv, poisoned, n_vis)));
      }
      if (LSE && part == 0 && (lane & 3) == 0)
        ptx::st_f32(p.lse + (static_cast<long long>(b) * p.q_heads + h * G + g) * p.q_len + i, row_lse(m, l, n_vis));
    }
  } else {
    const long long partial = (static_cast<long long>(b) * p.kv_heads + h) * p.partials + split * WK + wk;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = half ? rbw : ra;
      if (r >= R) continue;
      const long long row = partial * R + r;
      // (every part computes the same m and l: part 0 writes them)
      if (part == 0 && (lane & 3) == 0)
        ptx::st_v2(p.part_ml + row * 2, ptx::f32_bits(half ? m_b : m_a), ptx::f32_bits(half ? l_b : l_a));
      float* orow = p.part_o + row * D;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        const int c = n * 8 + c0;
        if (c < D) ptx::st_f32(orow + c, o[n][2 * half]);
        if (c + 1 < D) ptx::st_f32(orow + c + 1, o[n][2 * half + 1]);
      }
    }
  }
}

}  // namespace dpath

extern "C" __global__ void __launch_bounds__(dpath::THREADS, dpath::MIN_CTAS) sage2_direct_split(const sage2::dev::DirectParams p) {
  dpath::split_kernel(p);
}
#endif  // SAGE2_FAMILY == 5

#if SAGE2_FAMILY == 6
// ================================================================================================
// The merge kernel: one warp per output row (b, q head, i), rows in LSE order.
namespace dpath {

constexpr int MW = sage2::dev::direct_merge_warps();
constexpr int CPL = (D + 31) / 32;  // channels per lane
constexpr int MB = CPL <= 4 ? 8 : 4;  // partials loaded per round

__device__ __forceinline__ void merge_kernel(const DirectParams& p) {
  const int lane = threadIdx.x & 31;
  const long long row = static_cast<long long>(blockIdx.x) * MW + (threadIdx.x >> 5);
  const long long rows = static_cast<long long>(p.batch) * p.q_heads * p.q_len;
  if (row >= rows) return;
  const int i = static_cast<int>(row % p.q_len);
  const long long bh = row / p.q_len;
  const int hq = static_cast<int>(bh % p.q_heads);
  const int b = static_cast<int>(bh / p.q_heads);
  const int h = hq / p.group, g = hq - h * p.group;
  const int r = i * p.group + g;
  const long long first = (static_cast<long long>(b) * p.kv_heads + h) * p.partials * p.rows + r;
  const long long step = p.rows;  // rows between consecutive partials
  const int np = p.partials;

  float mx = ninf();
  for (int q = lane; q < np; q += 32) mx = ptx::max_f32(mx, p.part_ml[(first + q * step) * 2]);
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) mx = ptx::max_f32(mx, ptx::shfl_xor(mx, s));

  float acc[CPL];
#pragma unroll
  for (int t = 0; t < CPL; ++t) acc[t] = 0.f;
  float l = 0.f;
  // MB partials per round: all their loads are issued before any is used (the partials sit in
  // L2; a round costs one latency, not MB).
  for (int q0 = 0; q0 < np; q0 += MB) {
    float mq[MB], lq[MB], oq[MB][CPL];
    // Unconditional loads from clamped addresses (so that they can all be in flight), then the
    // out-of-range values are replaced.
#pragma unroll
    for (int u = 0; u < MB; ++u) {
      const long long pr = first + (q0 + u < np ? q0 + u : np - 1) * step;
      mq[u] = p.part_ml[pr * 2];
      lq[u] = p.part_ml[pr * 2 + 1];
      const float* orow = p.part_o + pr * D;
#pragma unroll
      for (int t = 0; t < CPL; ++t) oq[u][t] = orow[lane + 32 * t < D ? lane + 32 * t : D - 1];
    }
#pragma unroll
    for (int u = 0; u < MB; ++u) {
      if (q0 + u >= np) {
        mq[u] = ninf();
        lq[u] = 0.f;
#pragma unroll
        for (int t = 0; t < CPL; ++t) oq[u][t] = 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < MB; ++u) {
      // A partial that saw no visible key (m = -inf) weighs 0; 0 · NaN keeps its NaN channels.
      const float w = mq[u] == ninf() ? 0.f : ptx::exp2_approx(mq[u] - mx);
      l += w * lq[u];
#pragma unroll
      for (int t = 0; t < CPL; ++t) acc[t] += w * oq[u][t];
    }
  }
  const int n_vis = visible_keys(i, p);
  const bool poisoned = row_poisoned(mx, l);
  const float inv = poisoned ? 0.f : ptx::rcp_rn(l);
  u16* orow = static_cast<u16*>(p.out) + b * p.o_sb + static_cast<long long>(hq) * p.o_sh +
              static_cast<long long>(i) * p.o_sn;
#pragma unroll
  for (int t = 0; t < CPL; ++t) {
    const int c = lane + 32 * t;
    if (c < D) st_u16(orow + c, from_f32(final_o(acc[t], inv, poisoned, n_vis)));
  }
  if (LSE && lane == 0) ptx::st_f32(p.lse + row, row_lse(mx, l, n_vis));
}

}  // namespace dpath

extern "C" __global__ void __launch_bounds__(dpath::MW * 32) sage2_direct_merge(const sage2::dev::DirectParams p) {
  dpath::merge_kernel(p);
}
#endif  // SAGE2_FAMILY == 6
