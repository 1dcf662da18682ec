// Launch shape, resource checks, TMA tensor-map descriptions and parameter builder of the wgmma
// attention family (templates/attention_wgmma.cuh, sm_90a). The CTA size, the P·V chunking and
// the shared-memory layout come from the constexpr functions of templates/wgmma_params.cuh,
// which the device template uses too (the kernel also traps on another blockDim).
//
// The ΔS kernel, its chunking (bounded ΔS workspace) and the AttentionParams part of the kernel
// parameters are the mma family's (jit/attention_shape.hpp): only the kernel differs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "jit/attention_shape.hpp"
#include "jit/kernel_spec.hpp"
#include "jit/launch_shape.hpp"
#include "jit/quant_buffers.hpp"
#include "templates/wgmma_params.cuh"

namespace sage2::jit {

struct WgmmaKernelConfig {
  int threads = 0;              // CTA size: consumer warps · 32 (+ 128 for the producer warpgroup)
  int consumer_groups = 0;      // consumer warpgroups (64 query rows each)
  bool producer_group = false;  // a producer warpgroup issues the copies (warp specialisation)
  int panel = 0;                // K tile column panel = its swizzle span (32/64/128 bytes)
  int pv_chunks = 0, pv_n = 0;  // P̂·V̂ in pv_chunks wgmma chunks of pv_n channels
  bool q_in_smem = false;       // Q̂ read by wgmma from shared memory (wide heads, pipelined, 1 warpgroup)
  bool pipelined = false;       // softmax of tile j under P̂·V̂ (j−1) (>= 3 stages, d_v <= 128)
  int min_ctas = 1;             // CTAs per SM the registers are planned for (__launch_bounds__)
  std::size_t smem = 0;         // dynamic shared memory (bytes)
};
WgmmaKernelConfig wgmma_kernel_config(const KernelSpec& attention_spec);

// Throws Error(InvalidArgument) naming the field when the wgmma family cannot run `spec`:
// not the wgmma family or not sm_90a, qk_bits != 8, warps not 4 or 8, bq != 16·warps (one 64-row
// wgmma tile per consumer warpgroup), bk not 64 or 128, stages outside 1..4; Error(Unsupported)
// for head dims above 256 (the fp32 O of a 64-row tile would not fit the registers; use the mma
// family) and when the shared memory exceeds `max_smem_optin`.
void check_wgmma_config(const KernelSpec& attention_spec, int max_smem_optin);

// A starting tile until the autotuner has an entry: one warpgroup (bq 64, several CTAs per SM),
// 2 stages, bk 128 for head dims <= 128 and 64 above, the stages (then bk) lowered until the
// shared memory fits `max_smem_optin`. Unsupported above head dim 256.
TileConfig default_wgmma_tile(const KernelSpec& attention_spec, int max_smem_optin);

// Grid x = query blocks of the chunk, y = pairs of the chunk (as the mma family).
LaunchShape wgmma_launch_shape(const KernelSpec& attention_spec, const QuantBuffers& b, const AttentionChunk& chunk);

// A 2-D u8 TMA map as cuTensorMapEncodeTiled wants it (dims innermost first, one row stride).
struct TmaMapSpec {
  const void* base = nullptr;
  std::uint64_t dims[2] = {0, 0};
  std::uint64_t row_stride = 0;    // bytes between consecutive rows (dim 1)
  std::uint32_t box[2] = {0, 0};
  int swizzle_bytes = 0;           // 32, 64 or 128 (the box's inner extent)
};
struct WgmmaTmaSpecs {
  TmaMapSpec q;  // Q codes  {row_bytes, B·Hq·q_len_pad},  box {panel, 64} (used when q_in_smem)
  TmaMapSpec k;  // K codes  {row_bytes, B·Hkv·kv_len_pad}, box {panel, bk}
  TmaMapSpec v;  // V codes  {kv_len_pad, B·Hkv·d_v},      box {bk, d_v}
};
// Throws InvalidArgument when the buffers do not match the spec or exceed TMA's limits.
WgmmaTmaSpecs wgmma_tma_specs(const KernelSpec& attention_spec, const QuantBuffers& b, const void* workspace);

// Kernel parameters of one chunk; tm_q / tm_k / tm_v are left zero (the runtime encodes them through
// the driver, runtime/wgmma_stage). Same checks as make_attention_params.
sage2::dev::WgmmaAttentionParams make_wgmma_params(const KernelSpec& attention_spec, const QuantBuffers& b,
                                                   const void* workspace, const TensorRef& out, float* lse,
                                                   float sm_scale, const void* delta_s, const AttentionChunk& chunk);

}  // namespace sage2::jit
