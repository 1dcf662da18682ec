// Specification of the fused quantize stage's work schedule (templates/quantize_params.cuh
// quantize_item, the one definition the kernel also runs): every item of the stage appears
// exactly once; every work item of a group comes after ALL statistics items of that group (so a
// CTA only ever waits on lower tickets: no deadlock whatever the dispatch order); the launch has
// one CTA per item; the lag stays within [1, groups]; the sync region and the partials are laid
// out in QuantBuffers.
#include <doctest/doctest.h>

#include <map>
#include <tuple>
#include <vector>

#include "kernels/quantize_shape.hpp"
#include "kernels/quant_buffers.hpp"

using namespace sage2;
using namespace sage2::kernels;

namespace {

QuantBuffers buffers(std::int64_t batch, std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk, int d,
                     KernelFamily fam = KernelFamily::AttentionMma) {
  KernelSpec attn;
  attn.family = fam;
  attn.head_dim = d;
  if (fam == KernelFamily::AttentionWgmma) attn.tile = TileConfig{128, 128, 8, 2};
  QuantProblem p;
  p.batch = batch;
  p.q_heads = hq;
  p.kv_heads = hkv;
  p.q_len = nq;
  p.kv_len = nk;
  p.head_dim = d;
  return quant_buffers(p, attn);
}

}  // namespace

TEST_CASE("fused quantize schedule: every item once, statistics of a group before its work") {
  struct P {
    std::int64_t batch, hq, hkv, nq, nk;
    int d;
    KernelFamily fam;
  };
  const P problems[] = {
      {1, 1, 1, 1, 1, 1, KernelFamily::AttentionMma},
      {2, 8, 2, 300, 1000, 64, KernelFamily::AttentionMma},
      {4, 32, 32, 1024, 1024, 128, KernelFamily::AttentionMma},    // lag 32 of 128 groups
      {1, 4, 1, 5000, 40000, 128, KernelFamily::AttentionWgmma},  // one group, lag 1
      {3, 6, 3, 77, 8192, 256, KernelFamily::AttentionMma},
  };
  for (const P& pr : problems) {
    const QuantBuffers b = buffers(pr.batch, pr.hq, pr.hkv, pr.nq, pr.nk, pr.d, pr.fam);
    const auto s = quantize_schedule(b);
    CAPTURE(pr.nk);
    CAPTURE(s.lag);
    REQUIRE(s.lag >= 1);
    REQUIRE(s.lag <= s.groups);
    CHECK(s.chunks == static_cast<unsigned>((pr.nk + b.stats_chunk - 1) / b.stats_chunk));
    KernelSpec attn;
    attn.family = pr.fam;
    attn.head_dim = pr.d;
    if (pr.fam == KernelFamily::AttentionWgmma) attn.tile = TileConfig{128, 128, 8, 2};
    const KernelSpec fused = quantize_spec_for(attn, QuantOp::Fused);
    const LaunchShape ls = quantize_launch_shape(fused, b);
    CHECK(ls.grid[0] == s.total());
    CHECK(ls.grid[1] == 1);
    CHECK(ls.block[0] == static_cast<unsigned>(fused_quantize_config(fused).threads));
    CHECK(quantize_work_ctas(fused, b) == static_cast<std::int64_t>(s.total()));

    std::map<std::tuple<unsigned, unsigned, unsigned>, int> seen;
    std::vector<std::int64_t> last_stats(s.groups, -1), first_work(s.groups, -1);
    for (unsigned t = 0; t < s.total(); ++t) {
      const auto it = sage2::dev::quantize_item(s, t);
      REQUIRE(it.group < s.groups);
      ++seen[{it.kind, it.group, it.index}];
      if (it.kind == sage2::dev::kItemStatsK || it.kind == sage2::dev::kItemStatsV) {
        REQUIRE(it.index < s.chunks);
        last_stats[it.group] = t;
      } else if (first_work[it.group] < 0) {
        first_work[it.group] = t;
      }
      if (it.kind == sage2::dev::kItemK) REQUIRE(it.index < s.k_blocks);
      if (it.kind == sage2::dev::kItemV) REQUIRE(it.index < s.v_tiles);
      if (it.kind == sage2::dev::kItemQ) REQUIRE(it.index < s.q_blocks * s.q_per_group);
    }
    CHECK(seen.size() == s.total());  // no item twice (and total distinct = total tickets)
    bool ordered = true;
    for (unsigned g = 0; g < s.groups; ++g) ordered = ordered && last_stats[g] >= 0 && last_stats[g] < first_work[g];
    CHECK(ordered);
  }
}

TEST_CASE("fused quantize: lag, sync region and partials come from the buffers") {
  const QuantBuffers b = buffers(4, 32, 32, 1024, 1024, 128);
  CHECK(quantize_schedule(b).lag == 32);  // 16 MiB / (2 · 1024 · 128 · 2 B)
  CHECK(quantize_schedule(buffers(4, 32, 32, 32768, 32768, 128)).lag == 1);
  CHECK(b.stats_chunk == 256);  // ~64 KiB of fp16 input per chunk: 256 tokens at head dim 128
  CHECK(b.stats_chunks == 4);
  // 512 at head dim 64 (and 72), 1024 at 32, at most 2048, never below 256
  for (auto [d, t] : {std::pair{64, 512}, {72, 512}, {32, 1024}, {8, 2048}, {1, 2048}, {256, 256}, {512, 256}}) {
    KernelSpec k;
    k.head_dim = d;
    CHECK(quantize_stats_chunk(k) == t);
  }
  CHECK(b.sync_words() == 1 + 4 * 4 * 32);
  CHECK(b.stats_part() == 4 * 32 * 2 * 4 * 4 * b.d_v);
  const auto o = b.offsets();
  CHECK(o.sync_bytes == static_cast<std::size_t>(b.sync_words()) * 4);
  CHECK(o.stats_part >= o.v_first_bad);
  CHECK(o.sync >= o.stats_part + static_cast<std::size_t>(b.stats_part()) * 4);
  CHECK(o.total >= o.sync + o.sync_bytes);
  CHECK(o.sync % 256 == 0);
}

// The cluster stage's plan (kernels::quantize_cluster_plan): one cluster of `size` CTAs per (batch,
// kv head), each rank owning `chunk` tokens. The chunk is a whole number of KV tiles (K blocks and
// V tiles never straddle two ranks), the ranks cover the sequence with none left empty, the size
// stays within the portable cluster limit, and the plan depends on the problem alone (the sum
// order, and so every bit of the statistics, is the same on every GPU).
TEST_CASE("cluster quantize plan: whole tiles per rank, every token covered, no empty rank") {
  struct P {
    std::int64_t batch, hkv, nk;
    KernelFamily fam;
  };
  const P cases[] = {{1, 1, 1, KernelFamily::AttentionMma},        {1, 1, 17, KernelFamily::AttentionWgmma},
                     {4, 32, 1024, KernelFamily::AttentionWgmma},  {4, 32, 32768, KernelFamily::AttentionWgmma},
                     {1, 8, 4096, KernelFamily::AttentionWgmma},   {1, 8, 32768, KernelFamily::AttentionMma},
                     {2, 1, 129, KernelFamily::AttentionMma},      {64, 64, 256, KernelFamily::AttentionMma},
                     {1, 2, 29040, KernelFamily::AttentionWgmma},  {3, 5, 100000, KernelFamily::AttentionMma}};
  for (const P& c : cases) {
    const QuantBuffers b = buffers(c.batch, c.hkv, c.hkv, c.nk, c.nk, 128, c.fam);
    const QuantizeClusterPlan p = quantize_cluster_plan(b);
    CAPTURE(c.batch);
    CAPTURE(c.hkv);
    CAPTURE(c.nk);
    CHECK(p.size >= 1);
    CHECK(p.size <= kMaxClusterSize);
    CHECK(p.chunk % b.layout.bk == 0);
    CHECK(p.chunk % quantize_v_tile(b.layout.bk) == 0);
    CHECK(p.size * p.chunk >= c.nk);          // every token has a rank
    CHECK((p.size - 1) * p.chunk < c.nk);     // and every rank has a token
    const std::int64_t groups = c.batch * c.hkv;
    // enough CTAs to fill the GPU where the sequence allows it
    if (groups < kClusterTargetCtas && c.nk >= kMaxClusterSize * b.layout.bk)
      CHECK(groups * p.size >= std::min<std::int64_t>(kClusterTargetCtas, groups * kMaxClusterSize));
    KernelSpec attn;
    attn.family = c.fam;
    attn.head_dim = 128;
    if (c.fam == KernelFamily::AttentionWgmma) attn.tile = TileConfig{128, 128, 8, 2};
    const KernelSpec qs = quantize_spec_for(attn, QuantOp::Cluster);
    const LaunchShape ls = quantize_launch_shape(qs, b);
    CHECK(ls.cluster_x == static_cast<unsigned>(p.size));
    CHECK(ls.grid[0] == static_cast<unsigned>(groups * p.size));
    CHECK(ls.grid[1] == 1u);
    // the kernel reads its chunk from the parameters
    CHECK(make_quantize_params(b, TensorRef::hnd(nullptr, DType::F16, c.batch, c.hkv, c.nk, 128),
                               TensorRef::hnd(nullptr, DType::F16, c.batch, c.hkv, c.nk, 128),
                               TensorRef::hnd(nullptr, DType::F16, c.batch, c.hkv, c.nk, 128), nullptr)
              .cluster_chunk == p.chunk);
  }
}

TEST_CASE("k group runs: every row of a run and of its lanes has the run's group; common shapes get runs") {
  // The K kernel takes one group maximum per run of a thread's rows (templates/quantize_qk_body.cuh):
  // a row placed in a run of another group would get the wrong scale.
  struct C {
    KernelFamily fam;
    int d, bits, bk;
    int want_items, want_lanes;  // -1: not pinned
  };
  // (the wgmma family's hd 64 blocks run 128-thread CTAs, 8 rows per thread: runs of 4 items)
  const C cases[] = {{KernelFamily::AttentionWgmma, 128, 8, 128, 4, 32}, {KernelFamily::AttentionWgmma, 64, 8, 128, 4, 16},
                     {KernelFamily::AttentionWgmma, 256, 8, 128, -1, -1}, {KernelFamily::AttentionWgmma, 72, 8, 64, -1, -1},
                     {KernelFamily::AttentionMma, 128, 8, 64, 4, 32},     {KernelFamily::AttentionMma, 64, 4, 64, -1, -1},
                     {KernelFamily::AttentionMma, 96, 8, 32, -1, -1},     {KernelFamily::AttentionMma, 40, 8, 64, -1, -1}};
  for (const C& c : cases) {
    KernelSpec attn;
    attn.family = c.fam;
    attn.head_dim = c.d;
    attn.qk_bits = c.bits;
    attn.tile = c.fam == KernelFamily::AttentionWgmma ? TileConfig{128, c.bk, 8, 2} : TileConfig{64, c.bk, 4, 2};
    const KernelSpec ks = quantize_spec_for(attn, QuantOp::QuantizeK);
    const QuantizeKernelConfig k = quantize_kernel_config(ks);
    const QuantLayout L = quant_layout(attn);
    const KGroupRuns g = k_group_runs(L, k);
    CAPTURE(c.d);
    CAPTURE(c.bk);
    CAPTURE(g.items);
    CAPTURE(g.lanes);
    if (c.want_items > 0) CHECK(g.items == c.want_items);
    if (c.want_lanes > 0) CHECK(g.lanes == c.want_lanes);
    const int rpp = k.threads / k.tpr, items = (k.rows + rpp - 1) / rpp;
    REQUIRE(items % g.items == 0);
    if (g.items == 1) continue;
    REQUIRE(g.lanes % k.tpr == 0);
    REQUIRE(g.lanes <= 32);
    const int slots = g.lanes / k.tpr;  // consecutive slots of one lane group
    for (int s = 0; s < rpp; ++s)
      for (int i = 0; i < items; ++i) {
        const int r = s + i * rpp;
        if (r >= k.rows) continue;
        const int first = (s - s % slots) + (i - i % g.items) * rpp;  // the run's first row, lane group's first slot
        CHECK(L.k_group(r) == L.k_group(first));
      }
  }
}

// The split quantize config of `op` for an 8-bit attention spec of `fam` (its arch: sm_90a for
// wgmma, sm_89 for mma) at head dim d with KV tile bk.
static QuantizeKernelConfig split_op_config(KernelFamily fam, int d, int bk, QuantOp op) {
  KernelSpec attn;
  attn.family = fam;
  attn.arch = fam == KernelFamily::AttentionWgmma ? Arch::Sm90a : Arch::Sm89;
  attn.head_dim = d;
  attn.qk_bits = 8;
  attn.tile = fam == KernelFamily::AttentionWgmma ? TileConfig{128, bk, 8, 2} : TileConfig{64, bk, 4, 2};
  return quantize_kernel_config(quantize_spec_for(attn, op));
}

TEST_CASE("quantize_k of the wgmma family plans 64 registers: 8 CTAs of 128, 4 of 256 or 2 of 512 per SM") {
  // K's per-CTA chain is latency, so the budget is set by residency (bench/NOTES.md, session 35:
  // hd 72's and hd 192 / 256's K 4 CTAs of 256 instead of 3); the CPU suite's
  // "every quantize variant compiles ... without spills" holds it to that budget. The mma
  // family's 64-key blocks keep 80 (they spilled at 64 on sm_80 / 89 / 120).
  struct C {
    KernelFamily fam;
    int d, bk, threads, min_ctas;
  };
  const C cases[] = {{KernelFamily::AttentionWgmma, 64, 128, 128, 8},  {KernelFamily::AttentionWgmma, 72, 128, 256, 4},
                     {KernelFamily::AttentionWgmma, 128, 128, 256, 4}, {KernelFamily::AttentionWgmma, 256, 64, 256, 4},
                     {KernelFamily::AttentionWgmma, 256, 128, 512, 2}, {KernelFamily::AttentionMma, 128, 64, 256, 3}};
  for (const C& c : cases) {
    const QuantizeKernelConfig k = split_op_config(c.fam, c.d, c.bk, QuantOp::QuantizeK);
    CAPTURE(c.d);
    CHECK(k.threads == c.threads);
    CHECK(k.min_ctas == c.min_ctas);
  }
}

TEST_CASE("quantize_v of the wgmma family maps a row of 12 chunks to 4 lanes x 3 chunks; powers of two keep one chunk a lane") {
  // (head dims 65-96: 16 lanes of one chunk left 4 of them idle; bench/NOTES.md, session 35)
  struct C {
    KernelFamily fam;
    int d, tpr, cpt;
  };
  const C cases[] = {{KernelFamily::AttentionWgmma, 72, 4, 3},  {KernelFamily::AttentionWgmma, 96, 4, 3},
                     {KernelFamily::AttentionWgmma, 64, 8, 1},  {KernelFamily::AttentionWgmma, 128, 16, 1},
                     {KernelFamily::AttentionWgmma, 160, 32, 1}, {KernelFamily::AttentionMma, 72, 16, 1}};
  for (const C& c : cases) {
    const QuantizeKernelConfig v = split_op_config(c.fam, c.d, c.fam == KernelFamily::AttentionWgmma ? 128 : 64, QuantOp::QuantizeV);
    CAPTURE(c.d);
    CHECK(v.tpr == c.tpr);
    CHECK(v.cpt == c.cpt);
    CHECK(v.tpr * v.cpt >= v.chunks);  // every chunk of the row has a lane
    CHECK(v.threads % v.tpr == 0);
  }
}
