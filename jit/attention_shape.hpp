// Launch shapes, resource checks, chunk plan and parameter builders of the ΔS kernel and the
// mma.sync attention family. The CTA size, the V-channel passes and the shared-memory layout come
// from the constexpr functions of templates/attention_params.cuh, which the device template uses
// too, so the launch and the kernel cannot disagree (the kernel also traps on another blockDim).
//
// Chunking (bounded ΔS workspace): with smooth-Q, ΔS needs q_blocks·kv_len_pad fp32 values per
// (batch, q head) pair — O(N²/bq) — so ΔS + attention are launched per chunk of pairs (or, when
// one pair alone exceeds the workspace, per chunk of query blocks of one pair); the workspace
// holds one chunk. Without smooth-Q there is no ΔS and only the grid limit splits the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "jit/kernel_spec.hpp"
#include "jit/launch_shape.hpp"
#include "jit/quant_buffers.hpp"
#include "templates/attention_params.cuh"

namespace sage2::jit {

// Default cap of the ΔS workspace (a parameter of delta_s_workspace_bytes()).
constexpr std::size_t kDeltaSWorkspaceCap = std::size_t(256) << 20;

// What one attention kernel needs (from the spec alone).
struct AttentionKernelConfig {
  int threads = 0;        // CTA size (warps · 32)
  int m_tiles = 0;        // 16-row tiles per warp
  int v_slices = 0;       // passes over the KV sequence (head dims whose O exceeds the registers)
  int v_slice = 0;        // V channels per pass
  std::size_t smem = 0;   // dynamic shared memory (bytes)
};
AttentionKernelConfig attention_kernel_config(const KernelSpec& attention_spec);

// Throws Error(InvalidArgument) naming the field when the mma family cannot run `spec` (not an
// attention family, bk not a multiple of 32, bq not whole 16-row tiles per warp) and
// Error(Unsupported) when its shared memory exceeds `max_smem_optin` bytes (the device's opt-in
// limit per block), saying how much it needs and which knobs reduce it.
// A wgmma-family spec is checked by jit::check_wgmma_config (jit/wgmma_shape.hpp).
void check_attention_config(const KernelSpec& attention_spec, int max_smem_optin);

// A spill-free starting tile for the mma family until the autotuner has an entry: bq 64, bk 64,
// 4 warps (16 rows each), 2 stages — the fastest of the tiles measured on the H100 at head dim
// 128 (see the report in tests/gpu/test_attention.cpp's perf case), no spills at any head dim —
// with the stages lowered (then bk) until the shared memory fits `max_smem_optin`.
TileConfig default_attention_tile(const KernelSpec& attention_spec, int max_smem_optin);

// The ΔS spec that feeds `attention_spec` (same arch, head dim, tile, dtype).
KernelSpec delta_s_spec_for(const KernelSpec& attention_spec);

// One launch of ΔS + attention: pairs [bh_offset, +bh_count) × query blocks [qb_offset, +qb_count).
struct AttentionChunk {
  std::int64_t bh_offset = 0, bh_count = 0, qb_offset = 0, qb_count = 0;
};

// Bytes of ΔS workspace to allocate for the call described by `b`: 0 without smooth-Q; else the
// whole ΔS when it fits in `cap`, otherwise the largest whole number of chunks rows that fits
// (at least one query block's row, kv_len_pad·4 bytes, even if that exceeds `cap`).
std::size_t delta_s_workspace_bytes(const QuantBuffers& b, std::size_t cap = kDeltaSWorkspaceCap);

// The chunks for a ΔS workspace of `delta_s_bytes` (ignored without smooth-Q). Throws
// InvalidArgument when smooth-Q is on and the workspace cannot hold one query block's row.
std::vector<AttentionChunk> attention_chunks(const QuantBuffers& b, std::size_t delta_s_bytes);

// Grid x = query blocks of the chunk, y = pairs of the chunk; block = config threads; dynamic
// shared memory from the layout. The spec must match the buffers (InvalidArgument otherwise).
LaunchShape attention_launch_shape(const KernelSpec& attention_spec, const QuantBuffers& b,
                                   const AttentionChunk& chunk);
// Grid x = 64-key tiles of kv_len_pad, y = 32-block tiles of the chunk's query blocks, z = pairs.
LaunchShape delta_s_launch_shape(const KernelSpec& delta_s_spec, const QuantBuffers& b, const AttentionChunk& chunk);

// Parameter structs. `workspace` is the quantize-stage workspace (buffers at b.offsets()).
// `out` is the output view [B, Hq, q_len, head_dim] (device memory, dtype = spec.out_dtype,
// stride_dim 1); `lse` is [B][Hq][q_len] fp32 or null (required iff spec.return_lse);
// `delta_s` is the ΔS workspace (required iff smooth-Q). Shapes are checked (InvalidArgument).
sage2::dev::AttentionParams make_attention_params(const KernelSpec& attention_spec, const QuantBuffers& b,
                                                  const void* workspace, const TensorRef& out, float* lse,
                                                  float sm_scale, const void* delta_s,
                                                  const AttentionChunk& chunk);
sage2::dev::DeltaSParams make_delta_s_params(const QuantBuffers& b, const void* workspace, const TensorRef& k,
                                             void* delta_s, const AttentionChunk& chunk);

}  // namespace sage2::jit
