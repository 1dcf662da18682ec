// The cases of the GPU wgmma suite (tests/gpu/test_wgmma.cpp), shared with the CPU suite so that
// `SAGE2_WGMMA_PREFILL=<dir> sage2_cpu_tests -tc="*prefill*"` can compile every kernel the GPU run
// needs into a disk cache on a machine without a GPU (tests/cpu/jit/test_wgmma_kernels.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "kernels/kernel_spec.hpp"
#include "templates/wgmma_params.cuh"

namespace sage2::test {

struct WgCase {
  DType dtype = DType::F16;
  bool nhd = false;
  int gqa = 1;
  CausalMode causal = CausalMode::None;
  int head_dim = 64;
  std::int64_t q_len = 1, kv_len = 1;
  bool sq = false, sk = true, sv = false;
  bool two_level = true, lse = true;
  kernels::TileConfig tile{128, 128, 8, 2};
  std::int64_t batch = 1, kv_heads = 1;
  bool variant = false;  // also run it on the other design's tile (other_design())
};

inline kernels::KernelSpec wgmma_spec_for(const WgCase& c) {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionWgmma;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  s.tile = c.tile;
  s.qk_bits = 8;
  s.smooth_q = c.sq;
  s.smooth_k = c.sk;
  s.smooth_v = c.sv;
  s.in_dtype = c.dtype;
  s.out_dtype = c.dtype;
  s.two_level_accum = c.two_level;
  s.return_lse = c.lse;
  return s;
}

inline std::vector<WgCase> wgmma_case_list() {
  const auto F16 = DType::F16, BF16 = DType::BF16;
  const auto NONE = CausalMode::None, TL = CausalMode::TopLeft, BR = CausalMode::BottomRight;
  // S3 is the default tile up to head dim 128 (pipelined consumer loop, Q̂ in shared memory); S4 and
  // W1S3 pipeline too; W2, W1, K64 and S1 run the serial loop (wgmma_params.cuh: wg_pipelined).
  const kernels::TileConfig W2{128, 128, 8, 2}, W1{64, 128, 4, 2}, K64{128, 64, 8, 2}, S3{128, 128, 8, 3},
      S1{64, 64, 4, 1}, S4{128, 64, 8, 4}, W1S3{64, 128, 4, 3};
  std::vector<WgCase> v;
  auto add = [&](DType dt, bool nhd, int gqa, CausalMode cm, int d, std::int64_t nq, std::int64_t nk, bool sq, bool sv,
                 bool two, bool lse, kernels::TileConfig tile, std::int64_t hkv = 1, bool sk = true, bool variant = false) {
    WgCase c;
    c.dtype = dt;
    c.nhd = nhd;
    c.gqa = gqa;
    c.causal = cm;
    c.head_dim = d;
    c.q_len = nq;
    c.kv_len = nk;
    c.sq = sq;
    c.sk = sk;
    c.sv = sv;
    c.two_level = two;
    c.lse = lse;
    c.tile = tile;
    c.kv_heads = hkv;
    c.variant = variant;
    v.push_back(c);
  };
  //  dtype nhd  gqa causal d    Nq    Nk   sq     sv     acc2   lse   tile
  add(F16, false, 1, NONE, 64, 1, 1, false, false, true, true, W2);
  add(BF16, true, 4, TL, 128, 1, 1, true, false, true, true, W2);
  add(F16, true, 1, BR, 64, 17, 17, false, true, true, true, W2);
  add(F16, false, 4, NONE, 128, 128, 3000, false, false, true, true, S3, 2, true, true);
  add(BF16, true, 1, BR, 128, 128, 3000, true, false, true, true, W1, 2, true, true);
  add(F16, true, 4, TL, 128, 3000, 128, false, false, true, true, S3);
  add(BF16, false, 1, BR, 64, 3000, 128, true, true, true, true, K64);  // rows with no visible key
  add(BF16, true, 1, NONE, 80, 257, 511, false, true, false, false, S4, 2);
  add(F16, true, 4, BR, 160, 200, 333, true, false, true, true, K64);
  add(BF16, false, 1, TL, 256, 130, 190, false, false, true, true, K64);
  add(F16, false, 1, NONE, 32, 500, 700, false, false, false, true, S3, 2);
  add(BF16, false, 1, NONE, 1, 33, 65, false, false, true, true, S1);
  add(F16, true, 1, TL, 40, 96, 96, false, false, true, true, W2, 1, false);  // smooth_k off
  add(F16, false, 1, NONE, 128, 1000, 1000, false, true, true, true, W1S3, 2);  // DESIGN accuracy config
  add(BF16, true, 4, TL, 64, 512, 2048, true, true, true, true, S3, 1, true, true);
  add(F16, false, 1, NONE, 96, 300, 300, false, false, true, true, S3);       // 32-byte K panels
  add(F16, false, 1, BR, 192, 150, 600, true, true, true, true, K64);
  add(BF16, false, 1, NONE, 224, 100, 257, false, false, true, true, S1);
  // the wide-head default (producer design, bk 128; 32-channel P̂·V̂ chunks above d_v 192), at a
  // head dim whose kernel spills and one whose does not
  add(F16, true, 2, NONE, 256, 300, 700, false, true, true, true, W2, 1);
  add(BF16, false, 1, BR, 200, 333, 333, false, false, true, false, W2);
  add(F16, false, 1, TL, 128, 1024, 1024, false, false, false, true, S3, 1, true, true);
  return v;
}

// Perf cases: B=4, H=32, hd 128, fp16, int8, smooth-K, no LSE: the wgmma designs (two consumer
// warpgroups + producer; one warpgroup, several CTAs per SM), serial and pipelined, and the mma
// family's default tile for comparison.
inline std::vector<kernels::KernelSpec> wgmma_perf_specs() {
  std::vector<kernels::KernelSpec> v;
  for (bool causal : {false, true}) {
    WgCase c;
    c.head_dim = 128;
    c.causal = causal ? CausalMode::TopLeft : CausalMode::None;
    c.lse = false;
    for (const kernels::TileConfig& t : {kernels::TileConfig{128, 128, 8, 2}, kernels::TileConfig{128, 128, 8, 3},
                                     kernels::TileConfig{64, 128, 4, 2}, kernels::TileConfig{64, 128, 4, 3},
                                     kernels::TileConfig{64, 64, 4, 2}, kernels::TileConfig{64, 64, 4, 3}}) {
      c.tile = t;
      v.push_back(wgmma_spec_for(c));
    }
    kernels::KernelSpec m = wgmma_spec_for(c);
    m.family = kernels::KernelFamily::AttentionMma;
    m.tile = kernels::TileConfig{64, 64, 4, 2};
    v.push_back(m);
  }
  return v;
}

// The other design on the same tile shape: one warpgroup (several CTAs per SM, no producer) for a
// two-warpgroup tile and back (wgmma_params.cuh: wg_producer_wg).
inline kernels::TileConfig other_design(const kernels::TileConfig& t) {
  return t.warps == 8 ? kernels::TileConfig{64, t.bk, 4, t.stages} : kernels::TileConfig{128, t.bk, 8, t.stages};
}
inline WgCase with_other_design(WgCase c) {
  c.tile = other_design(c.tile);
  c.variant = false;
  return c;
}

// `gpu wgmma: Q quantized inside the attention kernel ...`: each case runs with and without
// KernelSpec::q_in_kernel. Every tile design (Q̂ in registers or shared memory, serial or
// pipelined), head dims with 32/64/128-byte panels, padded and unaligned (70: element loads),
// dtypes, layouts, causal modes, GQA, odd lengths, smoothing on and off, LSE.
inline std::vector<WgCase> q_in_kernel_case_list() {
  const kernels::TileConfig tiles[] = {{64, 128, 4, 2}, {64, 64, 4, 1}, {128, 128, 8, 2}, {128, 128, 8, 3}, {128, 64, 8, 2}};
  const int dims[] = {64, 128, 80, 70, 256, 96, 160, 32};
  const std::int64_t lens[][2] = {{1000, 1000}, {77, 300}, {300, 77}, {1, 1}, {129, 4096}};
  std::vector<WgCase> v;
  for (int i = 0; i < 16; ++i) {
    WgCase c;
    c.head_dim = dims[i % 8];
    c.tile = tiles[i % 5];
    if (c.head_dim > 128 && c.tile.bk == 128 && c.tile.warps == 8) c.tile.bk = 64;  // shared memory of wide heads
    c.dtype = (i / 2) % 2 ? DType::BF16 : DType::F16;
    c.nhd = (i / 3) % 2;
    c.causal = i % 3 == 0 ? CausalMode::None : (i % 3 == 1 ? CausalMode::TopLeft : CausalMode::BottomRight);
    c.gqa = (i / 4) % 2 ? 4 : 1;
    c.q_len = lens[i % 5][0];
    c.kv_len = lens[i % 5][1];
    c.sk = i % 7 != 3;
    c.sv = i % 5 == 2;
    c.lse = true;
    v.push_back(c);
  }
  return v;
}

inline std::vector<kernels::KernelSpec> wgmma_suite_specs() {
  std::vector<kernels::KernelSpec> v;
  for (const WgCase& c : wgmma_case_list()) {
    v.push_back(wgmma_spec_for(c));
    if (c.variant) v.push_back(wgmma_spec_for(with_other_design(c)));
  }
  for (const WgCase& c : q_in_kernel_case_list()) {
    kernels::KernelSpec s = wgmma_spec_for(c);
    v.push_back(s);
    s.q_in_kernel = true;
    v.push_back(s);
  }
  for (const kernels::KernelSpec& s : wgmma_perf_specs()) v.push_back(s);
  return v;
}

}  // namespace sage2::test
