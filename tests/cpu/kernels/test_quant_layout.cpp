// Specification: per-thread quantization groups are exactly "the tokens whose dot products land in
// one thread's accumulator fragment". This test derives those groups from the PTX ISA fragment
// tables (written out below, from the ISA text — not from kernels/quant_layout.cpp), by enumerating
// every warp, lane and accumulator register of the attention kernel's S tile, and compares them
// with kernels::quant_layout (which the quantize kernels, the attention kernels and the CPU reference
// all use), and with the scales the reference quantize stage actually assigns.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/quant_layout.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
using namespace sage2::kernels;

namespace {

struct Elem {
  int row, col;
};

// PTX ISA 9.7.14.5, "Matrix Fragments for mma.m16n8k32" (.s8) and "for mma.m16n8k64" (.s4):
// accumulators C/D (.s32) are four registers c0..c3 per thread, with
//   groupID = %laneid >> 2,  threadID_in_group = %laneid % 4
//   row = groupID            for c0 and c1
//         groupID + 8        for c2 and c3
//   col = (threadID_in_group * 2) + (i & 0x1)   for ci, i = 0..3
// (the two shapes share the 16x8 C/D layout; only the A/B operand layouts differ).
Elem mma_m16n8_acc(int lane, int i) {
  const int group_id = lane >> 2;
  const int tig = lane % 4;
  return {i < 2 ? group_id : group_id + 8, tig * 2 + (i & 0x1)};
}
constexpr int kMmaAccRegs = 4;

// PTX ISA 9.7.15.5.1.1, "Register Fragments" for wgmma.mma_async .m64nNk32 (.s8 → .s32
// accumulator D): a warpgroup of 4 warps; warp w (warp index within the warpgroup) holds rows
// 16w .. 16w+15 of the 64-row tile; within them the per-8-column pattern is the mma one: thread
// lane holds, for every 8-column slice j = 0..N/8-1, the registers d(4j) .. d(4j+3) at
//   row = 16w + groupID (+ 8 for d(4j+2), d(4j+3)),  col = 8j + threadID_in_group*2 + (i & 1)
// N/2 registers per thread in total.
Elem wgmma_m64_acc(int warp_in_group, int lane, int i) {
  const int group_id = lane >> 2;
  const int tig = lane % 4;
  const int j = i / 4;
  const int r = i % 4;
  return {16 * warp_in_group + group_id + (r >= 2 ? 8 : 0), 8 * j + tig * 2 + (r & 0x1)};
}

// Union-find over token indices: tokens seen by one thread must share a scale.
struct Dsu {
  std::vector<int> parent;
  explicit Dsu(int n) : parent(static_cast<std::size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[static_cast<std::size_t>(x)] != x) x = parent[static_cast<std::size_t>(x)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
    return x;
  }
  void unite(int a, int b) { parent[static_cast<std::size_t>(find(a))] = find(b); }
};

struct Owners {
  // thread id (global over the CTA) → the query rows / keys of the S tile it holds
  std::map<int, std::set<int>> rows, keys;
  std::map<int, int> warp_of_row;
};

// How the attention kernel tiles one bq × bk S block over its warps (the kernel design stated in
// kernels/quant_layout.hpp): mma.sync — warp w owns query rows [w·bq/warps, (w+1)·bq/warps) as m16
// tiles and every key of the block as n8 tiles; wgmma — warpgroup g owns rows
// [g·bq/G, (g+1)·bq/G) as 64-row tiles with N = bk.
Owners enumerate_owners(MmaShape shape, int bq, int bk, int warps) {
  Owners o;
  if (shape == MmaShape::WGMMA_M64NK32_S8) {
    const int groups = warps / 4;
    const int rows_per_group = bq / groups;
    for (int g = 0; g < groups; ++g)
      for (int tile = 0; tile < rows_per_group / 64; ++tile)
        for (int w = 0; w < 4; ++w)
          for (int lane = 0; lane < 32; ++lane)
            for (int i = 0; i < bk / 2; ++i) {
              const Elem e = wgmma_m64_acc(w, lane, i);
              const int row = g * rows_per_group + tile * 64 + e.row;
              const int thread = (g * 4 + w) * 32 + lane;
              o.rows[thread].insert(row);
              o.keys[thread].insert(e.col);
              o.warp_of_row[row] = g * 4 + w;
            }
    return o;
  }
  const int rows_per_warp = bq / warps;
  for (int w = 0; w < warps; ++w)
    for (int mt = 0; mt < rows_per_warp / 16; ++mt)
      for (int nt = 0; nt < bk / 8; ++nt)
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < kMmaAccRegs; ++i) {
            const Elem e = mma_m16n8_acc(lane, i);
            const int row = w * rows_per_warp + mt * 16 + e.row;
            const int key = nt * 8 + e.col;
            const int thread = w * 32 + lane;
            o.rows[thread].insert(row);
            o.keys[thread].insert(key);
            o.warp_of_row[row] = w;
          }
  return o;
}

// Groups (connected components) implied by fragment ownership.
std::vector<int> components(const std::map<int, std::set<int>>& held, int n) {
  Dsu dsu(n);
  for (const auto& [thread, toks] : held) {
    const int first = *toks.begin();
    for (int t : toks) dsu.unite(first, t);
  }
  std::vector<int> comp(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) comp[static_cast<std::size_t>(i)] = dsu.find(i);
  return comp;
}

struct Case {
  KernelFamily family;
  int qk_bits, bq, bk, warps;
};

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  for (int bits : {4, 8})
    for (int warps : {1, 2, 4, 8})
      for (int bq : {16, 32, 64, 128, 256})
        for (int bk : {16, 32, 64, 128}) {
          if (bq % (16 * warps) != 0) continue;
          cs.push_back({KernelFamily::AttentionMma, bits, bq, bk, warps});
        }
  for (int warps : {4, 8, 12})
    for (int bq : {64, 128, 192, 256, 384})
      for (int bk : {64, 128, 256}) {
        if (bq % (64 * (warps / 4)) != 0) continue;
        cs.push_back({KernelFamily::AttentionWgmma, 8, bq, bk, warps});
      }
  return cs;
}

KernelSpec spec_of(const Case& c) {
  KernelSpec s;
  s.family = c.family;
  s.arch = Arch::Sm90a;
  s.qk_bits = c.qk_bits;
  s.tile.bq = c.bq;
  s.tile.bk = c.bk;
  s.tile.warps = c.warps;
  return s;
}

// The keys one thread's fragment holds, cut at k_span (64 keys for wgmma, the block for mma.sync).
std::vector<int> k_components(const Owners& o, const QuantLayout& L) {
  std::vector<int> k = components(o.keys, L.bk);
  for (int a = 0; a < L.bk; ++a) k[static_cast<std::size_t>(a)] += 1000 * (a / L.k_span());
  return k;
}

}  // namespace

TEST_CASE("quant groups: the ISA tables themselves cover each 16x8 / 64xN tile exactly once") {
  // Sanity of the transcription: every element of the tile has exactly one (lane, register).
  std::map<std::pair<int, int>, int> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < kMmaAccRegs; ++i) {
      const Elem e = mma_m16n8_acc(lane, i);
      CHECK(e.row >= 0);
      CHECK(e.row < 16);
      CHECK(e.col < 8);
      ++seen[{e.row, e.col}];
    }
  CHECK(seen.size() == 128u);
  for (const auto& kv : seen) CHECK(kv.second == 1);
  seen.clear();
  const int n = 64;
  for (int w = 0; w < 4; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < n / 2; ++i) ++seen[{wgmma_m64_acc(w, lane, i).row, wgmma_m64_acc(w, lane, i).col}];
  CHECK(seen.size() == static_cast<std::size_t>(64 * n));
  for (const auto& kv : seen) CHECK(kv.second == 1);
}

TEST_CASE("quant groups: kernels::quant_layout equals the groups derived from fragment ownership") {
  const auto cases = all_cases();
  REQUIRE(cases.size() > 40);
  for (const Case& c : cases) {
    const KernelSpec spec = spec_of(c);
    REQUIRE_NOTHROW(spec.validate());
    const QuantLayout L = quant_layout(spec);
    const MmaShape expect_shape = c.family == KernelFamily::AttentionWgmma ? MmaShape::WGMMA_M64NK32_S8
                                  : c.qk_bits == 4                       ? MmaShape::M16N8K64_S4
                                                                         : MmaShape::M16N8K32_S8;
    CAPTURE(mma_shape_name(expect_shape));
    CAPTURE(c.bq);
    CAPTURE(c.bk);
    CAPTURE(c.warps);
    CHECK(L.shape == expect_shape);
    const Owners o = enumerate_owners(expect_shape, c.bq, c.bk, c.warps);
    // every row / key of the block is held by some thread
    const std::vector<int> qcomp = components(o.rows, c.bq);
    CHECK(L.k_span() == (c.family == KernelFamily::AttentionWgmma ? std::min(64, c.bk) : c.bk));
    const std::vector<int> kcomp = k_components(o, L);
    std::set<int> qsets(qcomp.begin(), qcomp.end()), ksets(kcomp.begin(), kcomp.end());
    CHECK(static_cast<int>(qsets.size()) == L.q_groups_per_block());
    CHECK(static_cast<int>(ksets.size()) == L.k_groups_per_block());
    // same partition (pairwise), so each thread needs exactly one Q scale and one K scale per span
    bool q_ok = true, k_ok = true, warp_ok = true;
    for (int a = 0; a < c.bq; ++a) {
      if (L.q_group(a) < 0 || L.q_group(a) >= L.q_groups_per_block()) q_ok = false;
      if (L.q_warp(a) != o.warp_of_row.at(a)) warp_ok = false;
      for (int b = 0; b < c.bq; ++b)
        if ((qcomp[static_cast<std::size_t>(a)] == qcomp[static_cast<std::size_t>(b)]) != (L.q_group(a) == L.q_group(b))) q_ok = false;
    }
    for (int a = 0; a < c.bk; ++a) {
      if (L.k_group(a) < 0 || L.k_group(a) >= L.k_groups_per_block()) k_ok = false;
      for (int b = 0; b < c.bk; ++b)
        if ((kcomp[static_cast<std::size_t>(a)] == kcomp[static_cast<std::size_t>(b)]) != (L.k_group(a) == L.k_group(b))) k_ok = false;
    }
    CHECK(q_ok);
    CHECK(k_ok);
    CHECK(warp_ok);
    for (const auto& [thread, rows] : o.rows) {
      std::set<int> g;
      for (int r : rows) g.insert(L.q_group(r));
      CHECK(g.size() == 1u);
    }
    // the table emitted into device source is the same function
    const auto table = q_group_table(L);
    for (int r = 0; r < c.bq; ++r) CHECK(table[static_cast<std::size_t>(r)] == L.q_group(r));
  }
}

TEST_CASE("quant groups: the paper's example (m16n8k64, bq 128, bk 64, 4 warps)") {
  // Appendix A.6: query tokens i, 8+i, 16+i, 24+i of a warp share a scale; key tokens
  // {8k + 2j, 8k + 2j + 1} of a 64-key block share one (j = 0..3).
  KernelSpec s;
  s.family = KernelFamily::AttentionMma;
  s.qk_bits = 4;
  const QuantLayout L = quant_layout(s);
  CHECK(L.q_groups_per_block() == 32);
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 8; ++i) {
      const int g = L.q_group(32 * w + i);
      for (int t = 1; t < 4; ++t) CHECK(L.q_group(32 * w + i + 8 * t) == g);
    }
  std::set<int> distinct;
  for (int r = 0; r < 128; ++r) distinct.insert(L.q_group(r));
  CHECK(distinct.size() == 32u);
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 8; ++k) {
      CHECK(L.k_group(8 * k + 2 * j) == L.k_group(2 * j));
      CHECK(L.k_group(8 * k + 2 * j + 1) == L.k_group(2 * j));
    }
}

TEST_CASE("quant groups: the reference quantize stage gives each token the scale of its ISA group") {
  // Rows get distinct magnitudes, so a token quantized with any other group's scale would show.
  for (const Case& c : {Case{KernelFamily::AttentionMma, 4, 128, 64, 4}, Case{KernelFamily::AttentionMma, 8, 64, 32, 2},
                        Case{KernelFamily::AttentionWgmma, 8, 128, 64, 4}, Case{KernelFamily::AttentionWgmma, 8, 256, 128, 8}}) {
    KernelSpec spec = spec_of(c);
    spec.smooth_k = false;   // quantize the raw values: amax of a group is then known exactly
    spec.smooth_q = false;
    const int d = 64;
    const std::int64_t nq = 2 * c.bq, nk = 2 * c.bk;
    spec.head_dim = d;
    reference::HostTensor q(DType::F32, 1, 1, nq, d), k(DType::F32, 1, 1, nk, d), v(DType::F32, 1, 1, nk, d);
    auto mag = [](std::int64_t t) { return 1.0f + 0.37f * static_cast<float>((t * 7919) % 1013); };
    for (std::int64_t t = 0; t < nq; ++t)
      for (int ch = 0; ch < d; ++ch) q.set(0, 0, t, ch, mag(t) * std::sin(0.1f * static_cast<float>(ch + t)) * (ch == t % d ? 1.f : 0.5f));
    for (std::int64_t t = 0; t < nk; ++t)
      for (int ch = 0; ch < d; ++ch) {
        k.set(0, 0, t, ch, mag(t + 5) * std::cos(0.13f * static_cast<float>(ch * t + 1)) * (ch == (t * 3) % d ? 1.f : 0.5f));
        v.set(0, 0, t, ch, 1.f);
      }
    const reference::QuantizedHost qs =
        reference::quantize_stage(q.ref(), k.ref(), v.ref(), reference::kernel_config(spec));
    const QuantLayout L = quant_layout(spec);
    const int R = c.qk_bits == 4 ? 7 : 127;
    const MmaShape shape = L.shape;
    const Owners o = enumerate_owners(shape, c.bq, c.bk, c.warps);
    const std::vector<int> qcomp = components(o.rows, c.bq), kcomp = k_components(o, L);
    auto row_amax = [&](const reference::HostTensor& t, std::int64_t n) {
      float a = 0;
      for (int ch = 0; ch < d; ++ch) a = std::max(a, std::fabs(t.get(0, 0, n, ch)));
      return a;
    };
    CAPTURE(c.bq);
    CAPTURE(c.warps);
    for (std::int64_t t = 0; t < nq; ++t) {
      const std::int64_t blk = t / c.bq;
      const int r = static_cast<int>(t % c.bq);
      float expect = 0;
      for (int r2 = 0; r2 < c.bq; ++r2)
        if (qcomp[static_cast<std::size_t>(r2)] == qcomp[static_cast<std::size_t>(r)]) expect = std::max(expect, row_amax(q, blk * c.bq + r2));
      const float got = qs.q_scale[static_cast<std::size_t>(blk * L.q_groups_per_block() + L.q_group(r))];
      CHECK(got == expect / static_cast<float>(R));
    }
    for (std::int64_t t = 0; t < nk; ++t) {
      const std::int64_t blk = t / c.bk;
      const int r = static_cast<int>(t % c.bk);
      float expect = 0;
      for (int r2 = 0; r2 < c.bk; ++r2)
        if (kcomp[static_cast<std::size_t>(r2)] == kcomp[static_cast<std::size_t>(r)]) expect = std::max(expect, row_amax(k, blk * c.bk + r2));
      const float got = qs.k_scale[static_cast<std::size_t>(blk * L.k_groups_per_block() + L.k_group(r))];
      CHECK(got == expect / static_cast<float>(R));
    }
  }
}
