// What every attention family shares on the host: the chunk plan, the ΔS kernel (its spec, launch
// shape and parameters), the per-chunk launch grid and the AttentionParams part of the kernel
// parameters. What differs per family (config rules, shared memory, CTA size, the parameter
// struct, tensor maps) is its descriptor's (kernels/attention_family.hpp).
//
// Chunking (bounded ΔS workspace): with smooth-Q, ΔS needs q_blocks·kv_len_pad fp32 values per
// (batch, q head) pair — O(N²/bq) — so ΔS + attention are launched per chunk of pairs (or, when
// one pair alone exceeds the workspace, per chunk of query blocks of one pair); the workspace
// holds one chunk. Without smooth-Q there is no ΔS and only the grid limit splits the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/launch.hpp"
#include "kernels/quant_buffers.hpp"
#include "templates/attention_params.cuh"

namespace sage2::kernels {

// Default cap of the ΔS workspace (a parameter of delta_s_workspace_bytes()).
constexpr std::size_t kDeltaSWorkspaceCap = std::size_t(256) << 20;

// What the launch of one attention kernel needs from its family's plan (the spec alone decides).
struct AttentionKernelConfig {
  int threads = 0;        // CTA size
  int min_ctas = 1;       // CTAs per SM the registers are planned for (__launch_bounds__)
  std::size_t smem = 0;   // dynamic shared memory (bytes)
};

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

// Throws InvalidArgument (`who`: the caller, named in the message) unless the buffers were laid
// out for this attention spec: tile, head dim, bits, quantization layout, smoothing.
void check_buffers_match(const KernelSpec& attention_spec, const QuantBuffers& b, const char* who);

// Throws Unsupported when the kernel of `attention_spec` needs `smem` bytes of shared memory per
// block and the device allows fewer (`max_smem_optin`), naming the tile, the need and `remedy`;
// `who` starts the message ("attention (mma family): ").
void check_shared_memory(const KernelSpec& attention_spec, std::size_t smem, int max_smem_optin, const char* who,
                         const char* remedy);

// One CTA per query block of the chunk: grid x = its query blocks, y = its pairs; block = the
// config's threads; dynamic shared memory from the config. The spec must match the buffers and the
// chunk lie inside the problem and the grid limits (InvalidArgument otherwise).
LaunchShape chunk_launch_shape(const KernelSpec& attention_spec, const QuantBuffers& b, const AttentionChunk& chunk,
                               const AttentionKernelConfig& config);
// Grid x = 64-key tiles of kv_len_pad, y = 32-block tiles of the chunk's query blocks, z = pairs.
LaunchShape delta_s_launch_shape(const KernelSpec& delta_s_spec, const QuantBuffers& b, const AttentionChunk& chunk);

// The pointers and scalars of one attention call. `workspace` is the quantize-stage workspace
// (buffers at b.offsets()). `out` is the output view [B, Hq, q_len, head_dim] (device memory,
// dtype = spec.out_dtype, stride_dim 1); `lse` is [B][Hq][q_len] fp32 or null (required iff
// spec.return_lse); `delta_s` is the ΔS workspace (required iff smooth-Q).
struct AttentionArgs {
  const void* workspace = nullptr;
  TensorRef out;
  float* lse = nullptr;
  float sm_scale = 0.f;
  const void* delta_s = nullptr;
  MaskRef mask;  // required iff spec.mask (its type)
  // The caller's Q (spec.in_dtype; dense [B, Hq, q_len, head_dim], varlen as the quantize stage
  // reads it): required iff spec.q_in_kernel.
  TensorRef q;
};

// Dense causal launches start their CTAs band by band (dev::AttentionParams::band_pairs): each
// band's longest query blocks first across its pairs, so that the shortest blocks start last —
// in the pair-by-pair order a long block that starts near the end runs alone after the rest
// (simulated: 6-10 % of the kernel at 1K-2K with B 4 H 32, 16-22 % with 28 heads; bench/NOTES.md
// session 32) — and a band's K̂ and V̂ (kCausalBandBytes, whole kv heads) stay in the L2 while its
// CTAs run. The pairs of a band for the chunk; 0: the pair-by-pair order (non-causal, varlen,
// tensor masks — their kernels have no registers to spare: 132 bytes of spills at hd 128 —, more
// than 2^31 blocks, or the mma family: it recomputes the coordinates for every KV tile, and the
// mapping made its sm_80 causal loop 4-5 % longer).
constexpr std::int64_t kCausalBandBytes = 8ll << 20;
std::int64_t causal_band_pairs(const KernelSpec& attention_spec, const QuantBuffers& b, const AttentionChunk& chunk);

// The AttentionParams every family's kernel reads (buffers, outputs, sizes, chunk). Shapes are
// checked (InvalidArgument naming the value).
sage2::dev::AttentionParams make_attention_params(const KernelSpec& attention_spec, const QuantBuffers& b,
                                                  const AttentionArgs& args, const AttentionChunk& chunk);
sage2::dev::DeltaSParams make_delta_s_params(const QuantBuffers& b, const void* workspace, const TensorRef& k,
                                             void* delta_s, const AttentionChunk& chunk);

}  // namespace sage2::kernels
