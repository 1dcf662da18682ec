// Quantize shapes: the per-op thread configuration of the quantize family, its launch shapes
// (grid, block; kernels/launch.hpp) and its kernel parameters. The configuration is computed HERE
// only: generate_source() emits it into the device preamble (SAGE2_QZ_*), and
// quantize_launch_shape() launches with the same numbers, so the kernel's compile-time CTA size
// and the host's launch cannot disagree. (The kernel also traps if launched with another
// blockDim.x.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/kernel_spec.hpp"
#include "kernels/launch.hpp"
#include "kernels/quant_buffers.hpp"
#include "templates/quantize_params.cuh"

namespace sage2::kernels {

// Thread mapping of one quantize kernel. A CTA walks token rows; each row is covered by `tpr`
// consecutive threads (a power of two <= 32, so a row's threads share a warp), each handling
// `cpt` chunks of 8 channels (chunk j of a thread: lane_in_row + k * tpr). Rows of the CTA are
// slot + i * (threads / tpr).
struct QuantizeKernelConfig {
  int threads = 256;  // CTA size (1-D)
  int rows = 0;       // tokens per CTA: bq (Q), bk (K), v_tile (V); channel_stats: rows per pass
  int tpr = 1;        // threads per token row
  int cpt = 1;        // 8-channel chunks per thread
  int chunks = 1;     // chunks per row the mapping covers: d_qk/8 (Q, K), d_v/8 (V), ceil(d/8) (stats)
  // CTAs per SM the compiler must fit (__launch_bounds__ minimum): these kernels stream and wait
  // on memory, so residency is what keeps bytes in flight (Q at 1 measured 1.4 TB/s on the H100)
  int min_ctas = 1;
  // channel_stats: batches of a thread's rows in flight through a shared-memory ring (cp.async;
  // templates/quantize_common.cuh STATS_RING), as many as fit beside min_ctas CTAs per SM on the
  // spec's arch (0: rows loaded into registers), and the dynamic shared memory its launch gives.
  int stats_ring = 0;
  int dynamic_smem = 0;
};
// For QuantOp::Fused: threads = the fused CTA size, the other fields those of the statistics
// items (fused_quantize_config has all four).
QuantizeKernelConfig quantize_kernel_config(const KernelSpec& quantize_spec);

// The fused kernel runs every item kind with one CTA size: the largest the separate kernels
// would use; each kind keeps its own rows/tpr/cpt/chunks (rows of the statistics items = rows
// per pass = threads / tpr).
struct FusedQuantizeConfig {
  int threads = 256;
  QuantizeKernelConfig stats, q, k, v;
};
FusedQuantizeConfig fused_quantize_config(const KernelSpec& spec);  // any spec of the stage

// P of the sum-order formula in kernels/quant_buffers.hpp: token rows per pass of the fused stage's
// statistics items (fused threads / threads per row).
int quantize_stats_rows_per_pass(const KernelSpec& spec);
// The split path's order (the default, runtime/quantize_stage.hpp): sage2_channel_stats takes one
// chunk of T = stats_chunk tokens per CTA with P = its own rows per pass (threads / threads per row).
int quantize_split_stats_rows_per_pass(const KernelSpec& spec);

// The cluster stage (QuantOp::Cluster): `size` CTAs per cluster, one cluster per (batch, kv
// head); rank r owns tokens [r·chunk, (r+1)·chunk). From the problem alone (never the device), so
// the statistics' sum order — chunks of `chunk` tokens, kernels/quant_buffers.hpp — and therefore
// every bit of the result is the same on every GPU:
//   size  = clamp(ceil(kClusterTargetCtas / groups), 1, kMaxClusterSize), then
//   chunk = ceil(kv_len / size) rounded up to a multiple of bk (at least bk), size = ceil(kv_len / chunk).
// 8 is the portable cluster size limit; 1024 CTAs fill an H100 (132 SMs, 2 per SM) about 4 times.
constexpr int kMaxClusterSize = 8;
constexpr std::int64_t kClusterTargetCtas = 1024;
struct QuantizeClusterPlan {
  int size = 1;
  std::int64_t chunk = 0;
};
QuantizeClusterPlan quantize_cluster_plan(const QuantBuffers& b);
// Where the cluster stage runs: sm_90a, head dims up to kClusterMaxHeadDim (kernels/kernel_spec.hpp).
bool cluster_quantize_supported(const KernelSpec& spec);

// The one-pass K/V kernel (QuantOp::QuantizeKV, templates/quantize_kv.cuh): dense calls, one item per
// CTA in the fused stage's ticket order without Q (kv_quantize_schedule): the statistics chunks of
// group r, then the K blocks and V tiles of group r - lag, which find their rows in L2.
// Its items are the split kernels' at the statistics' CTA size: statistics exactly as
// sage2_channel_stats (the split path's sum order and bits, with its ring), K blocks and V tiles as
// quantize_k's and quantize_v's; `dynamic_smem`: the largest item's shared memory.
struct KvQuantizeConfig {
  int threads = 256;
  int dynamic_smem = 0;
  QuantizeKernelConfig stats, k, v;
};
KvQuantizeConfig kv_quantize_config(const KernelSpec& spec);
sage2::dev::QuantizeSchedule kv_quantize_schedule(const KernelSpec& spec, const QuantBuffers& b);

// How a K item mapping `k` (rows slot + i·rpp of a thread, rpp = threads / tpr) meets the K scale
// groups of `layout`: each thread's items come in runs of `items` consecutive i whose rows share a
// group, and `lanes` consecutive threads (tpr of one row times aligned slots) hold rows of that
// group for every i. The kernel then takes a group's maximum per run instead of per row
// (templates/quantize_qk_body.cuh); items 1: no runs (lanes is then 1 too).
struct KGroupRuns {
  int items = 1;
  int lanes = 1;
};
KGroupRuns k_group_runs(const QuantLayout& layout, const QuantizeKernelConfig& k);

// Work-item schedule of the fused launch for the buffers `b` (templates/quantize_params.cuh):
// lag = the number of groups whose K+V bytes fit kLagBytes (at least 1, at most all groups), so
// a group's K/V are re-read from L2 after its statistics items read them.
constexpr std::int64_t kQuantizeLagBytes = 16ll << 20;
sage2::dev::QuantizeSchedule quantize_schedule(const QuantBuffers& b);

// Grid and block of one quantize launch for the buffers `b` (built from the attention spec the
// quantize spec was derived from; a mismatch in tile, head dim, bits, consumer or smoothing is
// an InvalidArgument). Grid: x = token blocks of one (batch, head) sequence —
//   channel_stats: 2 · stats_chunks (chunk c of K at 2c, of V at 2c + 1; varlen: chunks of the
//                  length bound, a longer sequence's CTAs take several); 2 over a sampled head
//                  walked by one CTA (stats_whole_head, stats_sampled): K at 0, V at 1; in clusters
//                  (stats_cluster_size S): rank r of K at r, of V at S + r, cluster_x = S
//   quantize_q: q_blocks      quantize_k: k_blocks
//   quantize_v:    kv_len_pad / quantize_v_split_tile(bk, head_dim)
//   quantize_fused: 1-D grid of quantize_schedule(b).total() CTAs (items come from a device
//                   counter, not from blockIdx; more than 2^31 - 1 items is an InvalidArgument)
//   quantize_cluster: 1-D grid of batch·kv_heads clusters of quantize_cluster_plan(b).size CTAs
//                   (cluster_x = size)
//   mask_tiles:     x = KV tiles, y = query blocks, z = the mask's (batch, head) pairs
//   quantize_kv:    1-D grid of kv_quantize_schedule(spec, b).total() CTAs (items from the device
//                   counter); dynamic shared memory = kv_quantize_config(spec).dynamic_smem
// Varlen (spec.varlen): quantize_q/k/v cover every head's packed blocks (b.q_blocks, b.k_blocks)
// with y = head; channel_stats keeps its (sequence, kv head) pairs.
// and the batch*heads pairs (Hq for quantize_q, Hkv otherwise) numbered
// blockIdx.z * gridDim.y + blockIdx.y, folded into z when above 65535; surplus CTAs exit.
// block = (quantize_kernel_config(spec).threads, 1, 1); no dynamic shared memory.
// sm_count: the device's SMs (0: unknown), for channel_stats' choice of clusters.
LaunchShape quantize_launch_shape(const KernelSpec& quantize_spec, const QuantBuffers& b, int sm_count = 0);
// The thread-block clusters channel_stats (quantize spec `stats_spec`) over the buffers `b` runs
// in on a device of `sm_count` SMs: on sm_90a, a sampled dense head's kSampleTiles units walked
// by a cluster of S CTAs (rank r takes units r, r + S, ...; the partials combined over
// distributed shared memory), S the largest of kSampleTiles and 2 for which every cluster of the
// launch is resident at once — its 2·B·H_kv·S CTAs within 7/8 of the SMs' planned CTAs (a cluster
// stays in one GPC: the H200 holds 248 clusters of 4 at 8 CTAs per SM, 94 % of 264). Returns S,
// or 0: one CTA per (head, K|V) walks the units in turn (a second wave of clusters cost more than
// the walk, bench/NOTES.md, session 32). 0 for sm_count 0.
int stats_cluster_size(const KernelSpec& stats_spec, const QuantBuffers& b, int sm_count);

// channel_stats' at-once form (KernelSpec::stats_at_once) of the call with `attention_spec`, where
// its spec admits one (a dense sampled call of a head dim from 9 to 256), else nullopt.
std::optional<KernelSpec> stats_at_once_spec(const KernelSpec& attention_spec);
// The channel_stats spec a call over buffers `b` launches on a device of `sm_count` SMs: the
// at-once form where the head takes a sample and its 2·B·H_kv CTAs fit one wave at the form's
// planned CTAs per SM, else the walk (quantize_spec_for). At few heads the at-once form took
// channel_stats 1.3-1.6x faster (one load round trip and one barrier per CTA); at many its 512-
// or 1024-thread CTAs took 2-6 waves where the walk's 128-thread CTAs at 8 per SM took one, and
// lost (bench/NOTES.md, session 36). sm_count <= 0: the walk.
KernelSpec stats_spec_for(const KernelSpec& attention_spec, const QuantBuffers& b, int sm_count);

// (batch, head) pairs of one quantize launch's grid: per (sequence, kv head) for the statistics,
// per head for the varlen token ops (their x covers the packed blocks).
std::int64_t quantize_pairs(const KernelSpec& quantize_spec, const QuantBuffers& b);
// CTAs of work per (batch, head) and in total (before folding) of one quantize launch.
std::int64_t quantize_blocks_per_head(const KernelSpec& quantize_spec, const QuantBuffers& b);
std::int64_t quantize_work_ctas(const KernelSpec& quantize_spec, const QuantBuffers& b);

// The V tile (tokens per V item of the fused and cluster stages) for a KV tile of `bk` keys.
int quantize_v_tile(int bk);
// With FP16 V̂ (two bytes a code) the tile of a wide head shrinks so that its codes fit the 48 KiB
// of static shared memory the transposition uses: 32 rows from padded head dim 384 up.
int quantize_v_tile(int bk, int d_v, bool pv_fp16);
// Tokens per quantize_v CTA (the split path): a whole 128-key tile where its codes fit the static
// shared memory, so that the transposed write-out keeps every thread busy; else quantize_v_tile().
int quantize_v_split_tile(int bk, int head_dim, bool pv_fp16 = false);

// Whether the sampled split stage of these buffers runs with its L2 eviction priorities
// (QuantizeParams::l2_hints; templates/quantize_common.cuh L2_HINT): when K and V together fit
// twice the device's L2 (l2_bytes). Measured on the H200 (50 MB of L2; bench/NOTES.md, session
// 26), hints on every call: the stage 1.03-1.14x faster with K + V of 8-67 MB, about 1.00x at
// 134 MB, 0.92-0.96x from 268 MB.
bool quantize_l2_hints(const QuantBuffers& b, std::int64_t l2_bytes);

// Fills the parameter struct from the buffers, the inputs and the workspace base pointer
// (outputs at b.offsets()). Inputs must be fp16/bf16 with stride_dim == 1; shapes are checked
// against b.p (InvalidArgument naming the mismatch).
sage2::dev::QuantizeParams make_quantize_params(const QuantBuffers& b, const TensorRef& q,
                                                const TensorRef& k, const TensorRef& v,
                                                void* workspace);
// Varlen calls: the caller's length arrays, and the output and LSE the table kernel fills with
// NaN when the arrays are invalid (templates/quantize_stats.cuh varlen_table, in channel_stats).
void add_varlen_quantize_params(const QuantBuffers& b, const SeqLens& lens, const TensorRef& out, float* lse,
                                sage2::dev::QuantizeParams& p);
// Tensor masks: the mask the mask_tiles kernel classifies.
void add_mask_quantize_params(const QuantBuffers& b, const MaskRef& mask, sage2::dev::QuantizeParams& p);

}  // namespace sage2::kernels
