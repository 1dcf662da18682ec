#include "kernels/quantize_shape.hpp"

#include <algorithm>
#include <string>

#include "kernels/arch.hpp"
#include "kernels/params_fields.hpp"

namespace sage2::kernels {
namespace {

int pow2_ceil(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}

// tpr/cpt for `chunks` chunks per row.
void fit_row(QuantizeKernelConfig& c) {
  c.tpr = std::min(32, pow2_ceil(c.chunks));
  c.cpt = (c.chunks + c.tpr - 1) / c.tpr;
}

// The CTA size of quantize_k / quantize_v. K blocks and V tiles sum nothing, so it is free. For
// the wgmma family: the fewest threads (64 to 256) that keep a CTA's rows in registers (items ·
// cpt <= 8 chunks of 16 bytes), at <= 64 registers below 256 threads (quantize_kernel_config). A
// CTA loads all its rows at once, so at as many threads per SM, smaller CTAs keep more bytes in
// flight: hd 64 runs 8 CTAs of 128 threads, 128 KB of rows per SM, where 4 CTAs of 256 held 64 KB
// (bench/NOTES.md, session 24: hd 64's stage 4-11 % faster from 4K). The mma family keeps
// min(256, tpr · rows): its 64-key blocks spill at 64 registers on sm_80 / 89 / 120 (CPU suite),
// and its archs' SMs (1536 threads on sm_86 / 89 / 120) were not measured with smaller CTAs.
int kv_quantize_threads(const KernelSpec& s, const QuantizeKernelConfig& c) {
  if (s.consumer != KernelFamily::AttentionWgmma) return std::min(256, c.tpr * c.rows);
  const int rpp = (c.rows * c.cpt + 7) / 8;  // rows per pass for at most 8 chunks per thread
  return std::clamp(c.tpr * pow2_ceil(rpp), 64, 256);
}
// Whether kv_quantize_threads chose a CTA below 256 threads (then <= 64 registers: as many threads
// per SM as 4 CTAs of 256; at 80, hd 64's 6-7 CTAs of 128 per SM took 1024 K blocks in two waves,
// 12.4 -> 18.4 us, session 24).
bool kv_small_cta(const KernelSpec& s, const QuantizeKernelConfig& c) {
  return s.consumer == KernelFamily::AttentionWgmma && c.threads < 256;
}

constexpr std::int64_t kMaxGridX = 2147483647;  // 2^31 - 1
constexpr std::int64_t kMaxGridYZ = 65535;

// Items of the one-pass K/V launch (in 64-bit): every statistics chunk of K and of V, K block and V
// tile of every (batch, kv head) — kv_quantize_schedule(...).total().
std::int64_t kv_quantize_items(const KernelSpec& spec, const QuantBuffers& b) {
  return b.p.batch * b.p.kv_heads * (2 * b.stats_chunks + b.k_blocks + b.kv_len_pad / kv_quantize_config(spec).v.rows);
}

// Items of the fused launch, in 64-bit (before the 32-bit schedule fields could wrap).
std::int64_t fused_items(const QuantBuffers& b) {
  const std::int64_t groups = b.p.batch * b.p.kv_heads;
  const std::int64_t per_group = 2 * b.stats_chunks + b.k_blocks + b.kv_len_pad / quantize_v_tile(b.layout.bk, b.d_v, b.layout.v_fp16) +
                                 (b.p.q_heads / std::max<std::int64_t>(1, b.p.kv_heads)) * b.q_blocks;
  return groups * per_group;
}

// The split statistics walk's shared memory (templates/quantize_common.cuh stats_smem_bytes, which
// the kernel checks against the launch's): batches of U rows of every thread (U = 4 at one chunk
// per thread, else 2), up to a whole statistics chunk, as many as leave min_ctas CTAs per SM room
// (the SM's shared memory taken as the arch's per-block opt-in + 1 KB, 1 KB reserved per CTA); a
// ring of fewer than two batches would overlap nothing: none then. The reduction buffer (sum, min
// and max of every row slot at once when they fit 24 KiB) reuses the ring.
void plan_stats_ring(const KernelSpec& s, QuantizeKernelConfig& c) {
  const int u = c.cpt == 1 ? 4 : 2;
  const int batch_bytes = c.threads * u * c.cpt * 16;
  const int rpp = c.threads / c.tpr;
  const int red_floats = rpp * c.tpr * c.cpt * 8;
  const int red_bytes = (3 * red_floats * 4 <= 24 * 1024 ? 3 : 1) * red_floats * 4;
  const int fixed = std::max(qk_dim_padded(s.head_dim, s.qk_bits), v_dim_padded(s.head_dim)) * 4 + 16;
  // (the whole-head walk's static partials, [kSampleTiles][4][d_v] floats, beside the 1 KB the SM
  // reserves per CTA)
  const int partials = stats_whole_head(s) ? kSampleTiles * 4 * v_dim_padded(s.head_dim) * 4 : 0;
  const int per_cta = sm_shared_bytes(s.arch) / c.min_ctas - 1024 - partials;
  // Sampled statistics walk one unit per chunk (once the sequence holds more than the sample):
  // a ring for a whole statistics chunk held shared memory no walk filled, and past 48 KB its
  // launch asks for the largest shared carveout. With it, quantize_v and quantize_k (launched
  // behind it) ran 15-20 % slower at hd 128; likely the carveout they inherit (session 22's notes).
  const int walk_rows = s.sampled_stats ? std::min(quantize_stats_chunk(s), kSampleUnit) : quantize_stats_chunk(s);
  const int rows_per_thread = (walk_rows + rpp - 1) / rpp;
  int ring = std::min((rows_per_thread + u - 1) / u, (per_cta - fixed) / batch_bytes);
  if (ring < 2) ring = 0;
  c.stats_ring = ring;
  c.dynamic_smem = std::max(ring * batch_bytes, red_bytes) + fixed;
}

// templates/quantize_stats.cuh UNITS_SMEM: the slot sums of every chunk [kSampleTiles][P][W]
// floats, the packed maxima and minima of each group's slots [groups][P][W / 2] u32 each (W =
// tpr · 8 channels), the first bad rows and K's first bad key.
int stats_units_smem(const KernelSpec& s, const QuantizeKernelConfig& c) {
  const int slot_w = c.tpr * 8;
  return kSampleTiles * c.rows * slot_w * 4 + stats_units_groups(s) * c.rows * slot_w * 4 +
         std::max(qk_dim_padded(s.head_dim, s.qk_bits), v_dim_padded(s.head_dim)) * 4 + 16;
}

}  // namespace

// Registers per thread the cluster stage is compiled for (min CTAs per SM = 65536 / (threads · this)).
constexpr int kClusterRegs = 80;

int quantize_v_tile(int bk) {
  if (bk % 64 == 0) return 64;
  if (bk % 32 == 0) return 32;
  return 16;
}

int quantize_v_tile(int bk, int d_v, bool pv_fp16) {
  int rows = quantize_v_tile(bk);
  // templates/quantize_v_body.cuh v_smem_bytes: the channel constants and the tile's codes
  while (rows > 16 && 8 * d_v + rows * d_v * v_code_bytes(pv_fp16) > 48 * 1024) rows /= 2;
  return rows;
}

int quantize_v_split_tile(int bk, int head_dim, bool pv_fp16) {
  const int d_v = v_dim_padded(head_dim);
  if (bk % 128 == 0 && 8 * d_v + 128 * d_v * v_code_bytes(pv_fp16) <= 48 * 1024) return 128;
  return quantize_v_tile(bk, d_v, pv_fp16);
}

// channel_stats' configuration; one_pass: the split kernel's (its one-pass walk over a whole head,
// kernels::stats_units_groups), else the chunk walk the one-launch stages' statistics items take.
QuantizeKernelConfig channel_stats_config(const KernelSpec& s, bool one_pass) {
  QuantizeKernelConfig c;
  c.chunks = (s.head_dim + 7) / 8;
  fit_row(c);
  // The sampled walk up to head dim 128 (one KV tile per CTA): 128 threads, 8 CTAs per SM at 64
  // registers for the chunk walk (the one-pass walk below takes 6), so B 4 × H 32's 1024 sampled
  // tiles run in one wave instead of two (session 23: channel_stats 9-20 % faster than 256 threads
  // at 4 CTAs; 256 at 5 CTAs spilled, session 22).
  // Otherwise 256 threads at 85 registers; wider heads need more (they spill).
  const bool sampled_walk = s.sampled_stats && c.chunks <= 16;
  c.threads = sampled_walk ? 128 : 256;
  c.rows = c.threads / c.tpr;  // the row slots P of the sum order (kernels/quant_buffers.hpp)
  c.min_ctas = sampled_walk ? 8 : c.chunks <= 32 ? 3 : 1;
  if (stats_units_at_once(s)) {
    // The at-once form (KernelSpec::stats_at_once): a group of those threads per sampled unit,
    // its rows loaded 4 at a time into registers (8 spilled at 64 registers on sm_80 / sm_120;
    // 64 at 512 threads: 2 CTAs per SM, 1 of 1024): the walk one unit after another, or a
    // cluster exchanging the units' partials, was a chain of ~2,000 instructions per warp at 7.6
    // cycles each (bench/NOTES.md, session 33). The slot sums and packed 16-bit maxima /
    // minima of every unit, then the first bad rows, in shared memory.
    c.threads *= kSampleTiles;
    c.min_ctas = c.threads >= 1024 ? 1 : 2;
    c.stats_ring = 0;
    c.dynamic_smem = stats_units_smem(s, c);
    return c;
  }
  if (one_pass && stats_units_groups(s) == 1) {
    // The one-pass walk over a whole head (one CTA per (head, K|V), never in clusters): two
    // batches of 4 rows in registers, so <= 80 registers (6 CTAs of 128 per SM); the
    // chunk-at-a-time walk loaded one batch per sampled unit and waited for it (bench/NOTES.md,
    // session 39).
    if (sampled_walk) c.min_ctas = 6;
    c.stats_ring = 0;
    c.dynamic_smem = stats_units_smem(s, c);
    return c;
  }
  plan_stats_ring(s, c);
  return c;
}

// The split kernel `op`'s configuration for any spec of the stage (the one-launch kernels start
// from their item kinds' split configurations).
QuantizeKernelConfig split_config(const KernelSpec& spec, QuantOp op) {
  KernelSpec s = spec;
  s.family = KernelFamily::Quantize;
  s.op = op;
  return op == QuantOp::ChannelStats ? channel_stats_config(s, false) : quantize_kernel_config(s);
}

FusedQuantizeConfig fused_quantize_config(const KernelSpec& spec) {
  FusedQuantizeConfig f;
  f.stats = split_config(spec, QuantOp::ChannelStats);
  f.q = split_config(spec, QuantOp::QuantizeQ);
  f.k = split_config(spec, QuantOp::QuantizeK);
  f.v = split_config(spec, QuantOp::QuantizeV);
  f.v.rows = quantize_v_tile(spec.tile.bk);  // the one-launch stages' V items (quantize_schedule)
  f.threads = std::max({f.stats.threads, f.q.threads, f.k.threads, f.v.threads});
  for (QuantizeKernelConfig* c : {&f.stats, &f.q, &f.k, &f.v}) c->threads = f.threads;
  f.stats.rows = f.threads / f.stats.tpr;
  return f;
}

int quantize_stats_rows_per_pass(const KernelSpec& spec) {
  const FusedQuantizeConfig f = fused_quantize_config(spec);
  return f.threads / f.stats.tpr;
}

int quantize_split_stats_rows_per_pass(const KernelSpec& spec) {
  return quantize_kernel_config(quantize_spec_for(spec, QuantOp::ChannelStats)).rows;
}

KvQuantizeConfig kv_quantize_config(const KernelSpec& spec) {
  KvQuantizeConfig f;
  f.stats = split_config(spec, QuantOp::ChannelStats);
  f.k = split_config(spec, QuantOp::QuantizeK);
  f.v = split_config(spec, QuantOp::QuantizeV);  // the split V tile (quantize_v_split_tile)
  f.threads = f.stats.threads;  // the statistics' rows per pass fix the sum order: their CTA size
  f.k.threads = f.v.threads = f.threads;
  f.k.min_ctas = f.v.min_ctas = f.stats.min_ctas;
  // One item per CTA: the statistics' ring and reduction buffer, or a V tile's scratch
  // (templates/quantize_v_body.cuh v_smem_bytes; a K block's is smaller).
  const int d_v = v_dim_padded(spec.head_dim);
  f.dynamic_smem = std::max(f.stats.dynamic_smem, 8 * d_v + f.v.rows * d_v * v_code_bytes(spec.pv_fp16));
  return f;
}

sage2::dev::QuantizeSchedule kv_quantize_schedule(const KernelSpec& spec, const QuantBuffers& b) {
  sage2::dev::QuantizeSchedule s = quantize_schedule(b);
  s.v_tiles = static_cast<unsigned>(b.kv_len_pad / kv_quantize_config(spec).v.rows);
  s.q_blocks = s.q_per_group = 0;
  return s;
}

KGroupRuns k_group_runs(const QuantLayout& layout, const QuantizeKernelConfig& k) {
  const int rpp = k.threads / k.tpr;
  const int items = (k.rows + rpp - 1) / rpp;
  // Whether every real row (slot s, item i) has the group of row (rep_slot(s), rep_item(i)).
  auto same = [&](auto rep_slot, auto rep_item) {
    for (int s = 0; s < rpp; ++s)
      for (int i = 0; i < items; ++i) {
        const int r = s + i * rpp;
        if (r < k.rows && layout.k_group(r) != layout.k_group(rep_slot(s) + rep_item(i) * rpp)) return false;
      }
    return true;
  };
  KGroupRuns g;
  for (int run = items; run >= 2 && g.items == 1; --run)
    if (items % run == 0 && same([](int s) { return s; }, [run](int i) { return i - i % run; })) g.items = run;
  if (g.items == 1) return g;
  g.lanes = k.tpr;
  for (int p = 2; p * k.tpr <= 32 && same([p](int s) { return s - s % p; }, [](int i) { return i; }); p *= 2)
    g.lanes = p * k.tpr;
  return g;
}

QuantizeClusterPlan quantize_cluster_plan(const QuantBuffers& b) {
  const std::int64_t groups = std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads);
  const std::int64_t len = std::max<std::int64_t>(1, b.p.kv_len);
  const std::int64_t bk = b.layout.bk;
  std::int64_t size = std::clamp<std::int64_t>((kClusterTargetCtas + groups - 1) / groups, 1, kMaxClusterSize);
  std::int64_t chunk = (len + size - 1) / size;
  chunk = std::max<std::int64_t>(bk, (chunk + bk - 1) / bk * bk);
  size = (len + chunk - 1) / chunk;
  return QuantizeClusterPlan{static_cast<int>(size), chunk};
}

bool cluster_quantize_supported(const KernelSpec& spec) {
  return spec.arch == Arch::Sm90a && spec.head_dim <= kClusterMaxHeadDim;
}

sage2::dev::QuantizeSchedule quantize_schedule(const QuantBuffers& b) {
  sage2::dev::QuantizeSchedule s{};
  const std::int64_t groups = b.p.batch * b.p.kv_heads;
  const std::int64_t group_bytes = std::max<std::int64_t>(1, 2 * b.p.kv_len * b.p.head_dim * 2);
  const std::int64_t lag = std::clamp<std::int64_t>(kQuantizeLagBytes / group_bytes, 1, std::max<std::int64_t>(1, groups));
  s.groups = static_cast<unsigned>(groups);
  s.lag = static_cast<unsigned>(lag);
  s.chunks = static_cast<unsigned>(b.stats_chunks);
  s.k_blocks = static_cast<unsigned>(b.k_blocks);
  s.v_tiles = static_cast<unsigned>(b.kv_len_pad / quantize_v_tile(b.layout.bk, b.d_v, b.layout.v_fp16));
  s.q_blocks = static_cast<unsigned>(b.q_blocks);
  s.q_per_group = static_cast<unsigned>(b.p.q_heads / std::max<std::int64_t>(1, b.p.kv_heads));
  // total() < 2^31 is checked by quantize_launch_shape (and the 32-bit fields then cannot wrap)
  return s;
}

QuantizeKernelConfig quantize_kernel_config(const KernelSpec& s) {
  QuantizeKernelConfig c;
  switch (s.op) {
    case QuantOp::Fused:
    case QuantOp::Cluster: {
      const FusedQuantizeConfig f = fused_quantize_config(s);
      c = f.stats;
      // The cluster stage runs every item of a rank in one CTA, one after the other: residency is
      // what keeps bytes in flight (ncu, H100, hd 128: 136 registers gave 1 CTA of 8 warps per SM).
      c.min_ctas = s.op == QuantOp::Cluster ? std::max(1, 65536 / (f.threads * kClusterRegs)) : 1;
      break;
    }
    case QuantOp::ChannelStats:
      c = channel_stats_config(s, true);
      break;
    case QuantOp::QuantizeQ:
    case QuantOp::QuantizeK: {
      c.rows = s.op == QuantOp::QuantizeQ ? s.tile.bq : s.tile.bk;
      c.chunks = qk_dim_padded(s.head_dim, s.qk_bits) / 8;
      fit_row(c);
      c.threads = s.op == QuantOp::QuantizeK ? kv_quantize_threads(s, c) : std::min(256, c.tpr * c.rows);
      const int rpp = c.threads / c.tpr;
      const int items = (c.rows + rpp - 1) / rpp;
      // Keep the loaded rows in registers (items * cpt <= 8 chunks of 16 bytes) when a bigger
      // CTA makes that possible.
      if (items * c.cpt > 8 && c.tpr * c.rows >= 512) c.threads = 512;
      // <= 80 registers (3 CTAs of 256); smooth-Q's block means need more (they spilled at 80);
      // the wgmma family's K 64 at any CTA size (8 of 128, 4 of 256, 2 of 512; none spills at hd
      // 16-256, bk 64 / 128): a K CTA's chain (rows, statistics, maxima, scales, codes) is latency,
      // so more CTAs per SM overlap more of them (4 of 256 instead of 3: DiT's hd 72 K 19.3 -> 17.2
      // us, hd 192 / 256 at 4K 59 -> 47 / 53 -> 44; hd 128's within noise; bench/NOTES.md, sessions
      // 24 and 35).
      const int regs = s.op == QuantOp::QuantizeQ && s.smooth_q                          ? 128
                       : s.op == QuantOp::QuantizeK && s.consumer == KernelFamily::AttentionWgmma ? 64
                                                                                            : 80;
      c.min_ctas = std::max(1, 65536 / (c.threads * regs));
      break;
    }
    case QuantOp::MaskTiles:
      c.threads = 256;  // one CTA reads one bq × bk tile of the mask
      break;
    case QuantOp::QuantizeKV:
      c = kv_quantize_config(s).stats;
      break;
    case QuantOp::QuantizeV:
      c.rows = quantize_v_split_tile(s.tile.bk, s.head_dim, s.pv_fp16);
      c.chunks = v_dim_padded(s.head_dim) / 8;
      fit_row(c);
      // The wgmma family's rows of 12 chunks (head dims 65-96): 4 lanes x 3 chunks, not 16 lanes
      // with 4 idle; quantize_v 1.11-1.17x faster (DiT's hd 72, ViT-H's hd 80, hd 96;
      // bench/NOTES.md, session 35). Other non-power-of-two rows were not measured so.
      if (s.consumer == KernelFamily::AttentionWgmma && c.chunks == 12) c.tpr = 4, c.cpt = 3;
      c.threads = kv_quantize_threads(s, c);
      // <= 80 registers: 3 CTAs of 256. The sampled kernel up to head dim 128: <= 64, 4 CTAs (its
      // screen and exact pass took 72 at 80, the plain kernel 64; at 64 neither spills, hd 128 bf16)
      c.min_ctas = std::max(1, 65536 / (c.threads * (kv_small_cta(s, c) || (s.sampled_stats && c.chunks <= 16) ? 64 : 80)));
      break;
    case QuantOp::None:
      throw Error(ErrorCode::InvalidArgument, "quantize_kernel_config: spec without a quantize op");
  }
  return c;
}

std::int64_t quantize_pairs(const KernelSpec& s, const QuantBuffers& b) {
  const std::int64_t heads = s.op == QuantOp::QuantizeQ ? b.p.q_heads : b.p.kv_heads;
  // Statistics are per (sequence, kv head); the varlen token ops cover each head's packed blocks.
  return (s.op == QuantOp::ChannelStats ? b.p.batch : b.token_batch()) * heads;
}

std::int64_t quantize_blocks_per_head(const KernelSpec& s, const QuantBuffers& b) {
  switch (s.op) {
    case QuantOp::ChannelStats:  // K and V, one CTA per statistics chunk (varlen: of the bound), or
      // per sampled head (stats_whole_head; quantize_launch_shape widens that to a cluster of
      // stats_cluster_size CTAs when one is chosen for the GPU)
      return stats_whole_head(s) && stats_sampled(b) ? 2 : 2 * std::max<std::int64_t>(1, b.stats_chunks);
    case QuantOp::QuantizeQ: return b.q_blocks;
    case QuantOp::QuantizeK: return b.k_blocks;
    case QuantOp::QuantizeV: return b.kv_len_pad / quantize_v_split_tile(s.tile.bk, s.head_dim, s.pv_fp16);
    case QuantOp::Fused: {
      const std::int64_t groups = std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads);
      return fused_items(b) / groups;
    }
    case QuantOp::Cluster: return quantize_cluster_plan(b).size;
    case QuantOp::QuantizeKV: return kv_quantize_items(s, b) / std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads);
    case QuantOp::MaskTiles: return b.q_blocks * b.k_blocks;
    case QuantOp::None: break;
  }
  throw Error(ErrorCode::InvalidArgument, "quantize_blocks_per_head: spec without a quantize op");
}

std::int64_t quantize_work_ctas(const KernelSpec& s, const QuantBuffers& b) {
  if (s.op == QuantOp::Fused) return fused_items(b);
  if (s.op == QuantOp::Cluster) return std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads) * quantize_cluster_plan(b).size;
  if (s.op == QuantOp::MaskTiles) return b.q_blocks * b.k_blocks * b.p.mask_batch * b.p.mask_heads;
  if (s.op == QuantOp::QuantizeKV) return kv_quantize_items(s, b);
  return quantize_blocks_per_head(s, b) * quantize_pairs(s, b);
}

int stats_cluster_size(const KernelSpec& s, const QuantBuffers& b, int sm_count) {
  if (s.arch != Arch::Sm90a || !stats_whole_head(s) || stats_units_groups(s) != 0 || !stats_sampled(b) || sm_count <= 0) return 0;
  const std::int64_t heads = 2 * std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads);  // (head, K|V) pairs
  const std::int64_t room = 7 * static_cast<std::int64_t>(sm_count) * quantize_kernel_config(s).min_ctas;
  for (int size = kSampleTiles; size >= 2; size /= 2)
    if (8 * heads * size <= room) return size;
  return 0;
}

std::optional<KernelSpec> stats_at_once_spec(const KernelSpec& attention_spec) {
  KernelSpec s = attention_spec;
  s.stats_at_once = true;
  s = quantize_spec_for(s, QuantOp::ChannelStats);
  if (!s.stats_at_once) return std::nullopt;
  return s;
}

KernelSpec stats_spec_for(const KernelSpec& attention_spec, const QuantBuffers& b, int sm_count) {
  const std::optional<KernelSpec> at_once = stats_at_once_spec(attention_spec);
  if (at_once && stats_sampled(b) && sm_count > 0) {
    const std::int64_t ctas = 2 * std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads);
    if (ctas <= static_cast<std::int64_t>(sm_count) * quantize_kernel_config(*at_once).min_ctas) return *at_once;
  }
  KernelSpec walk = attention_spec;
  walk.stats_at_once = false;
  return quantize_spec_for(walk, QuantOp::ChannelStats);
}

LaunchShape quantize_launch_shape(const KernelSpec& s, const QuantBuffers& b, int sm_count) {
  if (s.family != KernelFamily::Quantize)
    throw Error(ErrorCode::InvalidArgument,
                std::string("quantize_launch_shape: spec family is ") + family_name(s.family));
  const bool fused = s.op == QuantOp::Fused;
  const bool cluster = s.op == QuantOp::Cluster;
  const bool kv = s.op == QuantOp::QuantizeKV;
  const bool whole = fused || cluster;  // one launch runs every item kind
  const bool qk = s.op == QuantOp::QuantizeQ || s.op == QuantOp::QuantizeK || whole || kv;
  std::string mismatch;
  if (s.tile.bk != b.layout.bk) mismatch += " bk";
  if (s.head_dim != b.p.head_dim) mismatch += " head_dim";
  if (qk && (s.tile.bq != b.layout.bq || s.tile.warps != b.layout.warps)) mismatch += " bq/warps";
  if (qk && s.qk_bits != b.qk_bits) mismatch += " qk_bits";
  // channel_stats writes k_stats rows d_qk wide, which depends on the code width too
  if (s.op == QuantOp::ChannelStats && qk_dim_padded(s.head_dim, s.qk_bits) != b.d_qk)
    mismatch += " qk_bits (k_stats row width d_qk)";
  if (qk && mma_shape_for(s) != b.layout.shape) mismatch += " consumer";
  if (qk && s.smooth_k != b.smooth_k) mismatch += " smooth_k";
  if ((s.op == QuantOp::QuantizeQ || whole) && s.smooth_q != b.smooth_q) mismatch += " smooth_q";
  if ((s.op == QuantOp::QuantizeV || whole || kv) && s.smooth_v != b.smooth_v) mismatch += " smooth_v";
  if ((fused || kv || s.op == QuantOp::ChannelStats) && quantize_stats_chunk(s) != b.stats_chunk) mismatch += " stats_chunk";
  if (s.varlen != b.p.varlen) mismatch += " varlen";
  // The sampled kernels read and write buffers only a sampled stage has (v_amax, the overflow words)
  if (s.sampled_stats != (b.sampled_stats && op_samples_stats(s.op)))
    mismatch += " sampled_stats";
  // (the at-once form takes the sample's units: a head of at most kSampleTiles units is the walk's)
  if (s.stats_at_once && !stats_sampled(b)) mismatch += " stats_at_once (the head takes no sample)";
  if (!mismatch.empty())
    throw Error(ErrorCode::InvalidArgument, "quantize_launch_shape: the quantize spec (" + s.key() +
                                                ") does not match the buffers in:" + mismatch);
  const QuantizeKernelConfig c = quantize_kernel_config(s);
  if (cluster) {
    const QuantizeClusterPlan cp = quantize_cluster_plan(b);
    const std::int64_t ctas = std::max<std::int64_t>(1, b.p.batch * b.p.kv_heads) * cp.size;
    if (ctas > kMaxGridX)
      throw Error(ErrorCode::InvalidArgument, "cluster quantize launch needs " + std::to_string(ctas) +
                                                  " CTAs, more than a grid can hold");
    LaunchShape ls;
    ls.grid[0] = static_cast<unsigned>(ctas);
    ls.block[0] = static_cast<unsigned>(c.threads);
    ls.cluster_x = static_cast<unsigned>(cp.size);
    ls.max_shared_carveout = true;
    return ls;
  }
  if (kv) {
    const std::int64_t items = kv_quantize_items(s, b);
    if (b.p.varlen) throw Error(ErrorCode::InvalidArgument, "quantize_kv launch: varlen buffers (the split path runs them)");
    if (items > kMaxGridX)
      throw Error(ErrorCode::InvalidArgument, "quantize_kv launch needs " + std::to_string(items) +
                                                  " work items, more than a grid can hold");
    LaunchShape ls;
    ls.grid[0] = static_cast<unsigned>(std::max<std::int64_t>(1, items));
    ls.block[0] = static_cast<unsigned>(c.threads);
    ls.dynamic_smem = static_cast<std::size_t>(kv_quantize_config(s).dynamic_smem);
    return ls;
  }
  if (fused) {
    const std::int64_t items = fused_items(b);
    if (items > kMaxGridX)
      throw Error(ErrorCode::InvalidArgument, "fused quantize launch needs " + std::to_string(items) +
                                                  " work items, more than a grid can hold");
    LaunchShape ls;
    ls.grid[0] = static_cast<unsigned>(std::max<std::int64_t>(1, items));
    ls.block[0] = static_cast<unsigned>(c.threads);
    return ls;
  }
  if (s.op == QuantOp::MaskTiles) {
    if (s.mask != b.p.mask || !b.p.mask)
      throw Error(ErrorCode::InvalidArgument, "quantize_launch_shape: mask_tiles spec mask=" + std::to_string(s.mask) +
                                                  " but the buffers' is " + std::to_string(b.p.mask));
    const std::int64_t pairs = b.p.mask_batch * b.p.mask_heads;
    if (b.k_blocks > kMaxGridX || b.q_blocks > kMaxGridYZ || pairs > kMaxGridYZ)
      throw Error(ErrorCode::InvalidArgument, "mask_tiles launch: " + std::to_string(b.q_blocks) + " query blocks × " +
                                                  std::to_string(pairs) + " mask (batch, head) pairs exceed the grid (65535 each)");
    LaunchShape ls;
    ls.grid[0] = static_cast<unsigned>(b.k_blocks);
    ls.grid[1] = static_cast<unsigned>(b.q_blocks);
    ls.grid[2] = static_cast<unsigned>(pairs);
    ls.block[0] = static_cast<unsigned>(c.threads);
    return ls;
  }
  const int stats_cluster = s.op == QuantOp::ChannelStats ? stats_cluster_size(s, b, sm_count) : 0;
  const std::int64_t per_head = stats_cluster ? 2 * stats_cluster : std::max<std::int64_t>(1, quantize_blocks_per_head(s, b));
  const std::int64_t bh = std::max<std::int64_t>(1, quantize_pairs(s, b));
  if (per_head > kMaxGridX)
    throw Error(ErrorCode::InvalidArgument, "quantize launch needs " + std::to_string(per_head) +
                                                " token blocks per head, more than a grid can hold");
  const std::int64_t gz = (bh + kMaxGridYZ - 1) / kMaxGridYZ;
  if (gz > kMaxGridYZ)
    throw Error(ErrorCode::InvalidArgument, "quantize launch over " + std::to_string(bh) +
                                                " (batch, head) pairs, more than a grid can hold");
  const std::int64_t gy = (bh + gz - 1) / gz;
  LaunchShape ls;
  ls.grid[0] = static_cast<unsigned>(per_head);
  ls.grid[1] = static_cast<unsigned>(gy);
  ls.grid[2] = static_cast<unsigned>(gz);
  ls.block[0] = static_cast<unsigned>(c.threads);
  ls.block[1] = 1;
  ls.block[2] = 1;
  ls.dynamic_smem = static_cast<std::size_t>(c.dynamic_smem);  // channel_stats' ring; the others: static only
  ls.planned_ctas_per_sm = c.min_ctas;                         // (the rest of the SM stays L1: launch.hpp)
  if (stats_cluster) ls.cluster_x = static_cast<unsigned>(stats_cluster);
  return ls;
}

bool quantize_l2_hints(const QuantBuffers& b, std::int64_t l2_bytes) {
  if (!b.sampled_stats || b.p.varlen || l2_bytes <= 0) return false;
  const std::int64_t kv_bytes = 2 * b.p.batch * b.p.kv_heads * b.p.kv_len * b.p.head_dim * 2;  // fp16 / bf16 K and V
  return kv_bytes <= 2 * l2_bytes;
}

sage2::dev::QuantizeParams make_quantize_params(const QuantBuffers& b, const TensorRef& q,
                                                const TensorRef& k, const TensorRef& v,
                                                void* workspace) {
  // Varlen: packed tensors are views with batch 1 of total_* tokens.
  const std::int64_t in_batch = b.p.varlen && b.p.packed ? 1 : b.p.batch;
  auto check = [&](const TensorRef& t, const char* name, std::int64_t heads, std::int64_t len) {
    auto bad = [&](const std::string& what) {
      throw Error(ErrorCode::InvalidArgument, std::string("quantize params: ") + name + " " + what);
    };
    if (t.dtype != DType::F16 && t.dtype != DType::BF16) bad(std::string("dtype ") + dtype_name(t.dtype));
    if (t.stride_dim != 1) bad("stride_dim=" + std::to_string(t.stride_dim) + " (must be 1)");
    if (t.batch != in_batch || t.heads != heads || t.seq != len || t.dim != b.p.head_dim)
      bad("shape [" + std::to_string(t.batch) + "," + std::to_string(t.heads) + "," + std::to_string(t.seq) +
          "," + std::to_string(t.dim) + "] != expected [" + std::to_string(in_batch) + "," +
          std::to_string(heads) + "," + std::to_string(len) + "," + std::to_string(b.p.head_dim) + "]");
  };
  const std::int64_t q_rows = b.p.varlen && b.p.packed ? b.p.total_q : b.p.q_len;
  const std::int64_t k_rows = b.p.varlen && b.p.packed ? b.p.total_k : b.p.kv_len;
  check(q, "q", b.p.q_heads, q_rows);
  check(k, "k", b.p.kv_heads, k_rows);
  check(v, "v", b.p.kv_heads, k_rows);
  if (b.p.kv_heads < 1 || b.p.q_heads % b.p.kv_heads != 0)
    throw Error(ErrorCode::InvalidArgument, "quantize params: q_heads=" + std::to_string(b.p.q_heads) +
                                                " is not a multiple of kv_heads=" + std::to_string(b.p.kv_heads));
  sage2::dev::QuantizeParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.q_stride_batch = q.stride_batch; p.q_stride_head = q.stride_head; p.q_stride_seq = q.stride_seq;
  p.k_stride_batch = k.stride_batch; p.k_stride_head = k.stride_head; p.k_stride_seq = k.stride_seq;
  p.v_stride_batch = v.stride_batch; p.v_stride_head = v.stride_head; p.v_stride_seq = v.stride_seq;
  b.p.copy_sizes_to(p);
  const QuantBuffers::Offsets o = b.offsets();
  auto* base = static_cast<char*>(workspace);
  auto at = [&](std::size_t off, std::int64_t count) -> void* {
    return (base && count > 0) ? static_cast<void*>(base + off) : nullptr;
  };
  p.q_codes = static_cast<sage2::dev::i8*>(at(o.q_codes, b.q_codes()));
  p.q_scale = static_cast<float*>(at(o.q_scale, b.q_scale()));
  p.q_mean = static_cast<float*>(at(o.q_mean, b.q_mean()));
  p.q_kbias = static_cast<float*>(at(o.q_kbias, b.q_kbias()));
  p.k_codes = static_cast<sage2::dev::i8*>(at(o.k_codes, b.k_codes()));
  p.k_scale = static_cast<float*>(at(o.k_scale, b.k_scale()));
  p.k_mean = static_cast<float*>(at(o.k_mean, b.k_mean()));
  p.k_stats = static_cast<float*>(at(o.k_stats, b.k_stats()));
  p.v_codes = static_cast<sage2::dev::u8*>(at(o.v_codes, b.v_codes()));
  p.v_scale = static_cast<float*>(at(o.v_scale, b.v_scale()));
  p.v_mean = static_cast<float*>(at(o.v_mean, b.v_mean()));
  p.v_stats = static_cast<float*>(at(o.v_stats, b.v_stats()));
  p.q_bad = static_cast<sage2::dev::u8*>(at(o.q_bad, b.q_bad()));
  p.k_first_bad = static_cast<sage2::dev::i32*>(at(o.k_first_bad, b.k_first_bad()));
  p.v_first_bad = static_cast<sage2::dev::i32*>(at(o.v_first_bad, b.v_first_bad()));
  p.stats_part = static_cast<float*>(at(o.stats_part, b.stats_part()));
  p.sync = static_cast<sage2::dev::u32*>(at(o.sync, b.sync_words()));
  if (b.p.varlen) {
    // Packed: every sequence is in batch entry 0 (its tokens start at cu[s]).
    if (b.p.packed) p.q_stride_batch = p.k_stride_batch = p.v_stride_batch = 0;
    p.seqs = static_cast<sage2::dev::SeqEntry*>(at(o.seqs, b.seqs()));
    p.q_map = static_cast<sage2::dev::i32*>(at(o.q_map, b.q_map()));
    p.k_map = static_cast<sage2::dev::i32*>(at(o.k_map, b.k_map()));
    p.q_map_len = b.q_blocks;
    p.k_map_len = b.k_blocks;
    p.total_q = b.p.total_q;
    p.total_k = b.p.total_k;
  } else {
    p.sched_lag = quantize_schedule(b).lag;
    p.cluster_chunk = quantize_cluster_plan(b).chunk;
  }
  p.mask_tiles = static_cast<sage2::dev::u8*>(at(o.mask_tiles, b.mask_tiles()));
  p.mask_bias = static_cast<float*>(at(o.mask_bias, b.mask_bias()));
  p.mask_heads = b.p.mask_heads;
  if (b.sampled_stats && base) {
    p.v_amax = static_cast<float*>(at(o.v_amax, b.v_amax()));
    p.v_over = reinterpret_cast<sage2::dev::u32*>(base + o.v_over);
  }
  return p;
}

void add_mask_quantize_params(const QuantBuffers& b, const MaskRef& mask, sage2::dev::QuantizeParams& p) {
  if (!b.p.mask || static_cast<int>(mask.type) != b.p.mask)
    throw Error(ErrorCode::InvalidArgument, "mask quantize params: the mask's type does not match the buffers'");
  set_mask(mask, p);
}

void add_varlen_quantize_params(const QuantBuffers& b, const SeqLens& lens, const TensorRef& out, float* lse,
                                sage2::dev::QuantizeParams& p) {
  if (!b.p.varlen) throw Error(ErrorCode::InvalidArgument, "varlen quantize params: the buffers are not varlen");
  p.cu_q = lens.cu_seqlens_q;
  p.cu_k = lens.cu_seqlens_k;
  p.kv_lens = lens.kv_lens;
  set_output(out, p);
  p.out_batch = out.batch;
  p.out_seq = out.seq;
  p.lse = lse;
  p.lse_count = lse ? out.batch * out.heads * out.seq : 0;
}

}  // namespace sage2::kernels
