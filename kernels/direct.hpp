// The direct small-Nq path (for decode-shaped calls): the host half of templates/attention_direct.cuh.
//
// A call with few query rows per kv head (plan/attention_validate.hpp: AttentionProblem::direct)
// is computed without quantization, straight from the caller's fp16/bf16 Q, K and V, by two
// kernels of one template: a split-KV kernel (KernelFamily::DirectSplit) that writes partial
// (max, sum, O) per (key split, key warp) into the workspace, and a merge kernel
// (KernelFamily::DirectMerge) that combines them and writes O and the LSE. With one split and one
// key warp the split kernel writes O itself and there is no merge and no workspace.
//
// Why not an attention family descriptor (kernels/attention_family.hpp): a descriptor describes a
// kernel that reads the quantize stage's buffers (its instruction shape defines their layout, its
// quantize specs feed it, its tiles are tuned); this path reads the caller's tensors, has two
// kernels and a workspace of its own, and none of the quantization rules apply. So it is a small
// dedicated stage: this file (tile and split choice, specs, launch shapes, parameter struct, all
// pure host) and runtime/direct_stage.* (loading and launching).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_spec.hpp"
#include "kernels/problem_shape.hpp"
#include "kernels/launch.hpp"
#include "templates/direct_params.cuh"

namespace sage2::kernels {

// Head dims the direct path runs (its fp32 O accumulator lives in registers: above 256 padded
// channels it is split over CTAs, templates/direct_params.cuh direct_o_parts).
constexpr int kDirectMaxHeadDim = 512;

// The problem, as the direct path sees it (plan's AttentionProblem, without the quantize options).
struct DirectProblem : ProblemShape {
  DType dtype = DType::F16;
  CausalMode causal = CausalMode::None;
  bool return_lse = false;
  float sm_scale = 0;
  std::int64_t rows() const { return q_len * group(); }  // R: query rows per kv head
};

// The device facts the layout depends on.
struct DirectDevice {
  int sm_count = 132;
  int max_smem_optin = 232448;   // per block (227 KB on sm_90)
  int max_smem_per_sm = 233472;  // per SM (228 KB on sm_90)
};

// Everything derived once per call plan.
struct DirectLayout {
  KernelSpec split_spec, merge_spec;  // merge_spec is unused when partials == 1
  int group = 1;
  std::int64_t rows = 0;              // R
  int row_blocks = 1, key_warps = 1, threads = 128, ctas_per_sm = 1;
  int splits = 1, tiles_per_split = 1, kv_limit = 0, causal_offset = 0, partials = 1;
  std::size_t smem = 0;               // dynamic shared memory of the split kernel
  // Workspace: partial O [B][Hkv][partials][R][head_dim] fp32 at 0, then (m, l) pairs at ml_offset.
  std::size_t ml_offset = 0, workspace_bytes = 0;
  LaunchShape split_shape, merge_shape;
  bool merge() const { return partials > 1; }
};

// Throws InvalidArgument "kernel spec: ..." when a DirectSplit / DirectMerge spec cannot be
// generated (head dim, tile shape); called by KernelSpec::validate.
void validate_direct_spec(const KernelSpec& spec);

// Shared memory of a split spec.
std::size_t direct_smem_bytes(const KernelSpec& split_spec);

// The tile of the split kernel for R query rows per kv head: 16 rows per row warp (16, 32, 64 or
// 128 rows per CTA), the remaining warps of 4 (8 for 128 rows) split each KV tile's keys; then the
// largest of a fixed list of (keys per tile, stages) that fits `max_smem_optin`. Unsupported when
// none fits or the head dim exceeds kDirectMaxHeadDim.
TileConfig direct_default_tile(int head_dim, std::int64_t rows, int max_smem_optin);

// The specs of the two kernels for a problem and tile.
KernelSpec direct_split_spec(const DirectProblem& p, Arch arch, const TileConfig& tile);
KernelSpec direct_merge_spec(const DirectProblem& p, Arch arch);

// The whole layout: tile, key splits (enough CTAs to fill the device once: sm_count × CTAs per SM
// over B · Hkv · row blocks · output parts, never fewer than kDirectMinTilesPerSplit tiles per split), workspace
// and launch shapes. Throws InvalidArgument / Unsupported naming the reason.
constexpr int kDirectMinTilesPerSplit = 4;
DirectLayout direct_layout(const DirectProblem& p, Arch arch, const DirectDevice& device);

// The parameter struct of one call. `workspace` holds layout.workspace_bytes (256-byte aligned;
// may be null when that is 0); `lse` [B][Hq][Nq] fp32 when the problem returns it. Throws
// InvalidArgument for a workspace the merge needs but is missing.
dev::DirectParams make_direct_params(const DirectProblem& p, const DirectLayout& l, const TensorRef& q,
                                     const TensorRef& k, const TensorRef& v, const TensorRef& out, float* lse,
                                     void* workspace);

// Whether a tensor's rows can be copied with 16-byte cp.async: base 16-byte aligned, every stride
// a multiple of 8 elements.
bool direct_rows_16b_aligned(const TensorRef& t);

}  // namespace sage2::kernels
