// ΔS family (smooth-Q only): ΔS_ij = q̄_i · γ(K_j)ᵀ in fp32, from the UN-quantised γK = K − k̄
// (the fp16/bf16 input K and the quantize stage's k_mean), for one chunk of (batch·q-head)
// pairs × query blocks (see attention_params.cuh). q̄_i is the smooth-Q mean of query block i
// (q_mean of the quantize stage). Output [bh_count][qb_count][kv_len_pad]; padded keys get 0.
//
// CTA: DS_KEYS (64) keys × DS_QBLOCKS (32) query blocks of one pair, 256 threads; thread =
// key tid % 64, query blocks tid/64 + 4i (i < 8). Channels are consumed in chunks of 32 through
// shared memory; each output is an fp32 fma chain over the channels in increasing order.
#pragma once

#include "attention_params.cuh"
#include "ptx.cuh"
#include "types.cuh"

#if !defined(SAGE2_FAMILY) || SAGE2_FAMILY != 1
#error "delta_s.cuh is specialised by the preamble jit::generate_source() writes (delta_s family)"
#endif

namespace dsk {

using sage2::dev::DeltaSParams;

constexpr int HD = SAGE2_HEAD_DIM;
constexpr int BQ = SAGE2_BQ;
constexpr int BK = SAGE2_BK;
constexpr int THREADS = sage2::dev::ds_threads();
constexpr int KT = sage2::dev::ds_keys();
constexpr int QT = sage2::dev::ds_qblocks();
constexpr int CC = 32;                      // channels per chunk
constexpr int QPT = QT / (THREADS / KT);    // query blocks per thread
constexpr bool IN_BF16 = SAGE2_IN_BF16 != 0;
static_assert(THREADS % KT == 0 && QT % (THREADS / KT) == 0, "ΔS thread mapping");
static_assert(KT * CC == THREADS * 8, "γK loader: 8 channels per thread");
static_assert((QT * CC) % THREADS == 0, "q̄ loader");

__device__ __forceinline__ float fma_rn(float a, float b, float c) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}
__device__ __forceinline__ float to_f32(u16 v) { return IN_BF16 ? ptx::bf16_to_f32(v) : ptx::f16_to_f32(v); }

__device__ __forceinline__ void delta_s(const DeltaSParams& p) {
  __shared__ float s_gk[CC][KT + 1];
  __shared__ float s_qm[QT][CC + 1];
  const int tid = threadIdx.x;
  const i64 bhl = blockIdx.z;
  const i64 key0 = static_cast<i64>(blockIdx.x) * KT;
  const i64 qbl0 = static_cast<i64>(blockIdx.y) * QT;
  const i64 q_blocks = (p.q_len + BQ - 1) / BQ;
  const i64 kv_len_pad = (p.kv_len + BK - 1) / BK * BK;
  if (bhl >= p.bh_count || key0 >= kv_len_pad || qbl0 >= p.qb_count) return;
  const i64 bh = p.bh_offset + bhl;
  const u32 Hq = static_cast<u32>(p.q_heads);
  const i64 b = static_cast<i64>(static_cast<u32>(bh) / Hq);
  const i64 h = static_cast<i64>(static_cast<u32>(bh) % Hq);
  const i64 hk = static_cast<i64>(static_cast<u32>(h) / static_cast<u32>(p.q_heads / p.kv_heads));
  const i64 bhk = b * p.kv_heads + hk;
  const u16* kbase = static_cast<const u16*>(p.k) + b * p.k_stride_batch + hk * p.k_stride_head;
  const float* kmean = p.k_mean + bhk * p.d_qk;
  const float* qmean = p.q_mean + (bh * q_blocks + p.qb_offset + qbl0) * p.d_qk;

  const int kx = tid % KT, qy = tid / KT;
  float acc[QPT];
#pragma unroll
  for (int i = 0; i < QPT; ++i) acc[i] = 0.f;

  // γK loader: key kk, channels cb..cb+7 of the chunk
  const int kk = tid / (CC / 8), cb = (tid % (CC / 8)) * 8;
  const i64 lkey = key0 + kk;
  const bool key_ok = lkey < p.kv_len;
  const u16* krow = kbase + (key_ok ? lkey : 0) * p.k_stride_seq;

#pragma unroll 1
  for (int c0 = 0; c0 < HD; c0 += CC) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int ch = c0 + cb + e;
      float v = 0.f;
      if (key_ok && ch < HD) v = to_f32(ptx::ld_nc_u16(krow + ch)) - kmean[ch];
      s_gk[cb + e][kk] = v;
    }
#pragma unroll
    for (int i = 0; i < QT * CC / THREADS; ++i) {
      const int idx = tid + i * THREADS;
      const int qq = idx / CC, cc = idx % CC;
      float v = 0.f;
      if (qbl0 + qq < p.qb_count && c0 + cc < HD) v = qmean[static_cast<i64>(qq) * p.d_qk + c0 + cc];
      s_qm[qq][cc] = v;
    }
    __syncthreads();
#pragma unroll 8
    for (int cc = 0; cc < CC; ++cc) {
      const float gv = s_gk[cc][kx];
#pragma unroll
      for (int i = 0; i < QPT; ++i) acc[i] = fma_rn(s_qm[qy + i * (THREADS / KT)][cc], gv, acc[i]);
    }
    __syncthreads();
  }

  const i64 key = key0 + kx;
  if (key < kv_len_pad) {
#pragma unroll
    for (int i = 0; i < QPT; ++i) {
      const i64 qbl = qbl0 + qy + i * (THREADS / KT);
      if (qbl < p.qb_count) p.delta_s[(bhl * p.qb_count + qbl) * kv_len_pad + key] = acc[i];
    }
  }
}

__device__ __forceinline__ void check_block_dim() {
  if (blockDim.x != THREADS || blockDim.y != 1 || blockDim.z != 1) asm volatile("trap;");
}

}  // namespace dsk

extern "C" __global__ void __launch_bounds__(dsk::THREADS) sage2_delta_s(const sage2::dev::DeltaSParams p) {
  dsk::check_block_dim();
  dsk::delta_s(p);
}
