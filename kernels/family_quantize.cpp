#include "kernels/family_quantize.hpp"

#include <initializer_list>
#include <string>
#include <utility>

#include "kernels/quantize_shape.hpp"

namespace sage2::kernels {
namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, "kernel spec: " + what); }

// ---- canonical forms: what each op does not read
void reads_all(KernelSpec&) {}
// The statistics and V keep only the KV tile (V is padded to it); the statistics of a varlen call
// also build the table of Q blocks (bq, warps). Neither depends on Q smoothing; V not on the Q/K
// code width (the statistics do: k_stats rows are d_qk = qk_dim_padded(head_dim, qk_bits) wide).
void keep_kv_tile(KernelSpec& c, bool q_blocks) {
  const TileConfig t = c.tile;
  c.tile = TileConfig{};
  c.tile.bk = t.bk;
  if (q_blocks) {
    c.tile.bq = t.bq;
    c.tile.warps = t.warps;
  }
  c.smooth_q = false;
  c.smooth_k = false;
}
void stats_fields(KernelSpec& c) {
  keep_kv_tile(c, c.varlen);
  c.smooth_v = false;
}
void v_fields(KernelSpec& c) {
  keep_kv_tile(c, false);
  c.qk_bits = 8;
}
void q_fields(KernelSpec& c) { c.smooth_v = false; }
void k_fields(KernelSpec& c) {
  c.smooth_q = false;
  c.smooth_v = false;
}
void kv_fields(KernelSpec& c) { c.smooth_q = false; }
// Block counts (bq, bk), the output dtype and head dim of the NaN fill: nothing else.
void mask_tiles_fields(KernelSpec& c) {
  c.qk_bits = 8;
  c.smooth_q = c.smooth_k = c.smooth_v = false;
}

// ---- validation
void no_rules(const KernelSpec&) {}
void split_only(const KernelSpec& s, const char* name) {
  if (s.varlen) bad(std::string("varlen calls run the split quantize path, not ") + name);
}
void cluster_rules(const KernelSpec& s) {
  if (s.arch != Arch::Sm90a)
    bad("the cluster quantize stage needs thread-block clusters (sm_90a), got " + std::string(arch_name(s.arch)));
  if (s.head_dim > kClusterMaxHeadDim)
    bad("the cluster quantize stage runs up to head dim " + std::to_string(kClusterMaxHeadDim) +
        " (its shared memory), got head_dim=" + std::to_string(s.head_dim));
  split_only(s, "quantize_cluster");
}
void fused_rules(const KernelSpec& s) { split_only(s, "quantize_fused"); }
void kv_rules(const KernelSpec& s) { split_only(s, "quantize_kv"); }
void mask_tiles_rules(const KernelSpec& s) {
  if (s.mask == 0) bad("mask_tiles needs a mask");
}

// ---- preamble constants
// Every op's sampling constants (0 tiles: the statistics over every key; templates/quantize_common.cuh).
void sample_defines(QuantMapping& m, const KernelSpec& c) {
  m.defines.push_back({"SAGE2_QZ_SAMPLE_TILES", c.sampled_stats ? kSampleTiles : 0, "units of the sampled statistics (0: every key)"});
  m.defines.push_back({"SAGE2_QZ_SAMPLE_UNIT", kSampleUnit, "keys per unit of the sampled statistics"});
  m.defines.push_back({"SAGE2_QZ_V_HEADROOM", static_cast<int>(kVHeadroom), "V scale headroom of the sampled statistics"});
}
void item_maps(QuantMapping& m, std::initializer_list<std::pair<const char*, const QuantizeKernelConfig*>> kinds) {
  for (const auto& [name, k] : kinds) {
    const std::string pre = std::string("SAGE2_QZ_") + name + "_";
    m.defines.push_back({pre + "ROWS", k->rows, ""});
    m.defines.push_back({pre + "TPR", k->tpr, ""});
    m.defines.push_back({pre + "CPT", k->cpt, ""});
    m.defines.push_back({pre + "CHUNKS", k->chunks, ""});
  }
}
// K rows per thread that share a scale group, for the kernel's K item mapping (1: none).
void k_runs(QuantMapping& m, const KGroupRuns& r) {
  m.defines.push_back({"SAGE2_QZ_K_RUN", r.items, "K items of a thread per scale group run (kernels::k_group_runs)"});
  m.defines.push_back({"SAGE2_QZ_K_RUN_LANES", r.lanes, "consecutive lanes whose rows share the run's group"});
}
QuantMapping split_mapping(const KernelSpec& c, const QuantLayout& layout) {
  const QuantizeKernelConfig q = quantize_kernel_config(c);
  QuantMapping m{"quantize thread mapping (kernels/quantize_shape: quantize_kernel_config)", {}};
  m.defines = {{"SAGE2_QZ_THREADS", q.threads, "CTA size"},
               {"SAGE2_QZ_ROWS", q.rows, "token rows per CTA (stats: per pass)"},
               {"SAGE2_QZ_TPR", q.tpr, "threads per token row"},
               {"SAGE2_QZ_CPT", q.cpt, "8-channel chunks per thread"},
               {"SAGE2_QZ_CHUNKS", q.chunks, "8-channel chunks per row covered"},
               {"SAGE2_QZ_MIN_CTAS", q.min_ctas, "CTAs per SM the registers must allow"}};
  if (c.op == QuantOp::ChannelStats) {
    m.defines.push_back({"SAGE2_QZ_STATS_CHUNK", quantize_stats_chunk(c), "tokens per statistics chunk"});
    m.defines.push_back({"SAGE2_QZ_STATS_RING", q.stats_ring, "batches of rows in flight through shared memory"});
    m.defines.push_back({"SAGE2_QZ_DYN_SMEM", q.dynamic_smem, "dynamic shared memory of the launch (bytes)"});
    m.defines.push_back({"SAGE2_QZ_STATS_WHOLE_HEAD", stats_whole_head(c) ? 1 : 0,
                         "a sampled head's partials in shared memory (kernels::stats_whole_head)"});
    m.defines.push_back({"SAGE2_QZ_STATS_UNITS", stats_units_groups(c),
                         "thread groups of the one-pass form over a head, 0: none (kernels::stats_units_groups)"});
    m.defines.push_back({"SAGE2_QZ_STATS_CLUSTER", stats_whole_head(c) && stats_units_groups(c) == 0 && c.arch == Arch::Sm90a ? 1 : 0,
                         "launched in clusters over a sampled head (kernels::stats_cluster_size)"});
  }
  k_runs(m, c.op == QuantOp::QuantizeK ? k_group_runs(layout, q) : KGroupRuns{});
  sample_defines(m, c);
  return m;
}
QuantMapping one_launch_mapping(const KernelSpec& c, const QuantLayout&) {
  const FusedQuantizeConfig f = fused_quantize_config(c);
  QuantMapping m{"fused quantize: one CTA size, a thread mapping per item kind (kernels/quantize_shape: fused_quantize_config)", {}};
  m.defines.push_back({"SAGE2_QZ_THREADS", f.threads, "CTA size"});
  if (c.op == QuantOp::Fused) m.defines.push_back({"SAGE2_QZ_STATS_CHUNK", quantize_stats_chunk(c), "tokens per statistics item"});
  if (c.op == QuantOp::Cluster)
    m.defines.push_back({"SAGE2_QZ_MIN_CTAS", quantize_kernel_config(c).min_ctas, "CTAs per SM the registers must allow"});
  item_maps(m, {{"S", &f.stats}, {"Q", &f.q}, {"K", &f.k}, {"V", &f.v}});
  k_runs(m, KGroupRuns{});  // (their bodies keep the per-row form: an 80-register bound)
  sample_defines(m, c);
  return m;
}
QuantMapping kv_mapping(const KernelSpec& c, const QuantLayout& layout) {
  const KvQuantizeConfig f = kv_quantize_config(c);
  QuantMapping m{"one-pass K/V quantize: the split kernels' items at one CTA size (kernels/quantize_shape: kv_quantize_config)", {}};
  m.defines = {{"SAGE2_QZ_THREADS", f.threads, "CTA size"},
               {"SAGE2_QZ_MIN_CTAS", f.stats.min_ctas, "CTAs per SM the registers must allow"},
               {"SAGE2_QZ_STATS_CHUNK", quantize_stats_chunk(c), "tokens per statistics chunk = per unit"},
               {"SAGE2_QZ_STATS_RING", f.stats.stats_ring, "batches of rows in flight through shared memory"},
               {"SAGE2_QZ_DYN_SMEM", f.dynamic_smem, "dynamic shared memory of the launch (bytes)"}};
  item_maps(m, {{"S", &f.stats}, {"K", &f.k}, {"V", &f.v}});
  k_runs(m, k_group_runs(layout, f.k));
  sample_defines(m, c);
  return m;
}

// One small entry file per op (templates/quantize_common.cuh lists them and the headers they share).
constexpr QuantOpDesc kQuantOps[] = {
    {QuantOp::ChannelStats, "channel_stats", "quantize_stats.cuh", false, false, true, stats_fields, no_rules, split_mapping},
    {QuantOp::QuantizeQ, "quantize_q", "quantize_qk.cuh", false, false, true, q_fields, no_rules, split_mapping},
    {QuantOp::QuantizeK, "quantize_k", "quantize_qk.cuh", false, false, true, k_fields, no_rules, split_mapping},
    {QuantOp::QuantizeV, "quantize_v", "quantize_v.cuh", true, false, true, v_fields, no_rules, split_mapping},
    {QuantOp::Fused, "quantize_fused", "quantize_fused.cuh", true, false, false, reads_all, fused_rules, one_launch_mapping},
    {QuantOp::Cluster, "quantize_cluster", "quantize_cluster.cuh", true, false, false, reads_all, cluster_rules, one_launch_mapping},
    {QuantOp::QuantizeKV, "quantize_kv", "quantize_kv.cuh", true, false, false, kv_fields, kv_rules, kv_mapping},
    {QuantOp::MaskTiles, "mask_tiles", "quantize_mask_tiles.cuh", false, true, false, mask_tiles_fields, mask_tiles_rules, split_mapping},
};

constexpr AuxFamilyDesc kAuxFamilies[] = {
    {KernelFamily::DeltaS, "delta_s", "delta_s.cuh", "sage2_delta_s"},
    {KernelFamily::Probe, "probe", "probe.cuh", "sage2_probe_mma_e4m3"},
    {KernelFamily::DirectSplit, "direct_split", "attention_direct.cuh", "sage2_direct_split"},
    {KernelFamily::DirectMerge, "direct_merge", "attention_direct.cuh", "sage2_direct_merge"},
};

}  // namespace

const QuantOpDesc* find_quant_op(QuantOp op) noexcept {
  for (const QuantOpDesc& d : kQuantOps)
    if (d.op == op) return &d;
  return nullptr;
}

const AuxFamilyDesc* aux_family(KernelFamily family) noexcept {
  for (const AuxFamilyDesc& d : kAuxFamilies)
    if (d.family == family) return &d;
  return nullptr;
}

}  // namespace sage2::kernels
