// Specification (CPU / CI): the wgmma attention family (sm_90a) NVRTC-compiles over a covering set
// of the code-relevant axes (head dims 1..256 incl. 64/128/256, causal modes, dtypes, smoothing,
// two-level, LSE, 1 or 2 consumer warpgroups, bk 64/128, 1..4 stages); the main configurations
// (head dims 64/128 and 256 without two-level accumulation, on their default tiles) have no
// spills and no stack (256 with two-level: a bounded known spill, see below), ptxas honours
// setmaxnreg and does not serialise the wgmma batches; the cubin's SASS has the tensor-core
// instructions (checked by the GPU suite's notes with cuobjdump; here: the PTX mnemonics). The
// host plan (CTA size, shared memory, chunking, TMA boxes, config rejection) agrees with the
// kernel's own constants.
//
// SAGE2_WGMMA_PREFILL=<dir>: also compile every kernel the GPU suite's wgmma cases need
// (tests/gpu/wgmma_cases.hpp) into the disk cache at <dir> (saves device time on a GPU run).
#include <doctest/doctest.h>

#include "jit_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "cache/disk_cache.hpp"
#include "kernels/attention_family.hpp"
#include "jit/compiler.hpp"
#include "kernels/family_wgmma.hpp"
#include "../gpu/wgmma_cases.hpp"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

using sage2::test::AttentionVariant;

// The wgmma variants vary everything but the arch and the code width (sm_90a, 8-bit).
struct WVariant {
  int head_dim;
  CausalMode causal;
  DType dtype;
  bool sq, sk, sv;
  bool two_level, lse;
  TileConfig tile;
  bool main = false;  // must not spill
};

AttentionVariant variant(const WVariant& v) {
  return {Arch::Sm90a, v.head_dim, 8, v.causal, v.dtype, v.sq, v.sk, v.sv, v.two_level, v.lse, v.tile, v.main};
}
KernelSpec to_spec(const WVariant& v) { return sage2::test::to_spec(KernelFamily::AttentionWgmma, variant(v)); }

constexpr auto F16 = DType::F16;
constexpr auto BF16 = DType::BF16;
constexpr auto NONE = CausalMode::None;
constexpr auto TL = CausalMode::TopLeft;
constexpr auto BR = CausalMode::BottomRight;
const TileConfig D128{128, 128, 8, 3};  // producer design, the pipelined loop
const TileConfig S2{128, 128, 8, 2};    // 2 stages: the serial loop
const TileConfig D64{128, 64, 8, 2};    // producer design, bk 64 (serial loop)
const TileConfig G1{64, 128, 4, 2};     // one consumer warpgroup
const TileConfig G1K64{64, 64, 4, 1};   // one warpgroup, bk 64, one stage
const TileConfig S3{128, 128, 8, 3};
const TileConfig S4{128, 64, 8, 4};

std::vector<WVariant> covering_set() {
  return {
      // head causal dtype sq     sk     sv     acc2   lse    tile main
      {64, NONE, F16, false, true, false, true, false, D128, true},
      {64, TL, BF16, true, true, true, true, true, D128, true},
      {128, NONE, F16, false, true, false, true, false, D128, true},
      {128, BR, BF16, true, true, true, true, true, D128, true},
      {128, TL, F16, false, false, false, false, true, S2, true},
      {64, BR, BF16, true, true, true, true, true, S2, true},
      {128, NONE, BF16, true, true, false, true, true, G1, true},
      {256, NONE, F16, false, true, false, true, false, D64, true},
      {256, TL, BF16, true, true, true, true, true, D64, true},
      {256, BR, F16, false, true, false, false, false, D64, true},
      // other head dims (padding, panels of 32/64 bytes, P·V chunking) and tiles
      {1, NONE, F16, false, true, false, true, true, G1K64},
      {32, BR, BF16, true, true, false, true, true, S3},
      {40, TL, F16, false, false, true, true, true, D128},
      {80, NONE, BF16, true, true, false, false, true, S4},
      {96, BR, F16, false, true, true, true, false, G1},
      {160, TL, BF16, false, true, false, true, true, D64},
      {192, NONE, F16, true, true, true, true, true, D64},
      {224, BR, BF16, false, true, false, true, false, G1K64},
      {128, NONE, F16, false, true, true, true, true, S4},
  };
}

}  // namespace

TEST_CASE("jit wgmma: the covering set covers every value of every code-relevant axis") {
  std::vector<AttentionVariant> set;
  for (const WVariant& v : covering_set()) set.push_back(variant(v));
  const sage2::test::Coverage c = sage2::test::coverage(KernelFamily::AttentionWgmma, set, 5);
  for (int d : {1, 32, 64, 96, 128, 160, 192, 256}) CHECK_MESSAGE(c.dims.count(d), "head dim " << d);
}

TEST_CASE("jit wgmma: every variant compiles for sm_90a on wgmma; main configs do not spill") {
  sage2::test::SpecList list;
  for (const auto& v : covering_set()) list.add(to_spec(v), v.main);
  // The ΔS kernel that feeds a wgmma spec (canonical: one per dtype / tile / head dim).
  list.add(delta_s_spec_for(to_spec({128, NONE, F16, true, true, false, true, false, D128})), true);
  // Known exception: head dim 256 WITH two-level accumulation keeps O (128 registers) and the
  // per-tile accumulator of a 64-channel chunk live beside the softmax state and spills ~40
  // loop-invariant values (~150 bytes, L1-resident); bounded here until it is restructured.
  auto known_spill = [](const KernelSpec& s) {
    return s.head_dim > 224 && s.two_level_accum && s.family == KernelFamily::AttentionWgmma;
  };
  sage2::test::compile_and_check(list, "wgmma/ΔS", known_spill, [&](const sage2::test::Outcome& r) {
    const CompiledKernel& k = r.k;
    if (known_spill(r.spec)) {
      CHECK(k.facts.spill_store_bytes <= 256);
      CHECK(k.facts.spill_load_bytes <= 256);
    }
    if (r.spec.family != KernelFamily::AttentionWgmma) return;
    const WgmmaKernelConfig cfg = wgmma_kernel_config(r.spec);
    // the registers allow the CTAs per SM the plan counts on (__launch_bounds__ minimum)
    if (!cfg.producer_group) CHECK(k.facts.registers * cfg.threads * cfg.min_ctas <= 65536);
    // ptxas ignores setmaxnreg without a register cap at entry (C7508) and serialises wgmma
    // batches whose accumulators it cannot keep in place (C7510 "wgmma ... serialized"): neither
    // may happen.
    CHECK_MESSAGE(k.log.find("C7508") == std::string::npos, k.log);
    CHECK_MESSAGE(k.log.find("serialized") == std::string::npos, k.log);
  });
}

TEST_CASE("jit wgmma: Q quantized inside the kernel (q_in_kernel) compiles for every variant without smooth-Q; "
          "the default tiles do not spill") {
  sage2::test::SpecList list;
  auto add = [&](const WVariant& v) {
    KernelSpec s = to_spec(v);
    s.q_in_kernel = true;
    CHECK(attention_family(s.family).q_in_kernel_ok(s));
    list.add(s, v.main);
  };
  for (const auto& v : covering_set())
    if (!v.sq) add(v);
  // The heuristic default (one warpgroup, Q̂ tile in shared memory) over head dims, dtypes, causal
  // modes and the LSE's q·k̄ (smooth-K with LSE).
  const TileConfig G1K64S2{64, 64, 4, 2};
  for (int d : {64, 128})
    for (DType dt : {F16, BF16})
      for (CausalMode c : {NONE, BR}) add({d, c, dt, false, true, false, true, dt == BF16, G1, true});
  add({256, TL, F16, false, true, false, true, true, G1K64S2, false});
  add({96, NONE, BF16, false, true, true, true, true, G1, true});
  auto known_spill = [](const KernelSpec& s) { return s.head_dim > 224 && s.two_level_accum; };
  sage2::test::compile_and_check(list, "wgmma q_in_kernel", known_spill, [&](const sage2::test::Outcome& r) {
    const CompiledKernel& k = r.k;
    CHECK(r.spec.key().ends_with("|qin"));
    const WgmmaKernelConfig cfg = wgmma_kernel_config(r.spec);
    if (!cfg.producer_group) CHECK(k.facts.registers * cfg.threads * cfg.min_ctas <= 65536);
    CHECK_MESSAGE(k.log.find("C7508") == std::string::npos, k.log);
    CHECK_MESSAGE(k.log.find("serialized") == std::string::npos, k.log);
  });
  // smooth-Q keeps the quantize stage's Q̂ (its block mean): refused with the field named
  KernelSpec sq = to_spec({128, NONE, F16, true, true, false, true, false, G1, true});
  CHECK_FALSE(attention_family(sq.family).q_in_kernel_ok(sq));
  sq.q_in_kernel = true;
  CHECK_THROWS_WITH_AS(sq.validate(), doctest::Contains("q_in_kernel"), Error);
}

TEST_CASE("jit wgmma: the default tile of every head dim above 128 compiles; spills bounded, no serialised wgmma") {
  // The wide-head default (the producer design, bq128.bk128.w8.s2) at every multiple of 8 from 136
  // to 256, as the user's call runs it (Q quantized in the kernel) and from the quantize stage's
  // Q̂, with and without causal mask and LSE. 240 registers per consumer hold O (up to 128), S
  // (64) and the softmax state: ptxas (CUDA 13.0) spills a few loop-invariant values at some
  // head dims above 192 (L1-resident; measured faster than the spill-free one-warpgroup tile:
  // bench/NOTES.md, session 11), bounded here like the masks' (tests/cpu/plan/test_mask.cpp).
  sage2::test::SpecList list;
  for (int d = 136; d <= 256; d += 8)
    for (bool qin : {true, false})
      for (bool tl : {false, true}) {
        KernelSpec s = to_spec({d, tl ? TL : NONE, tl ? BF16 : F16, false, true, false, true, tl, D128});
        s.tile = attention_family(KernelFamily::AttentionWgmma).default_tile(s, 227 * 1024);
        s.q_in_kernel = qin;
        list.add(s, true);
      }
  auto wide = [](const KernelSpec& s) { return s.head_dim > 192; };
  sage2::test::compile_and_check(list, "wgmma wide-head defaults", wide, [&](const sage2::test::Outcome& r) {
    const CompiledKernel& k = r.k;
    CHECK(r.spec.tile.warps == 8);
    CHECK(k.facts.spill_store_bytes <= 128);
    CHECK(k.facts.spill_load_bytes <= 128);
    CHECK_MESSAGE(k.log.find("C7508") == std::string::npos, k.log);
    CHECK_MESSAGE(k.log.find("serialized") == std::string::npos, k.log);
  });
}

TEST_CASE("jit wgmma: the generated source issues wgmma and TMA (PTX mnemonics)") {
  KernelSpec s = to_spec({128, NONE, F16, false, true, false, true, false, D128});
  const std::string src = generate_source(s);
  CHECK(src.find("#include \"attention_wgmma.cuh\"") != std::string::npos);
  CHECK(src.find("#define SAGE2_MMA_SHAPE 2") != std::string::npos);
}

TEST_CASE("jit wgmma: host plan — CTA size, shared memory, TMA boxes and config rejection") {
  KernelSpec s = to_spec({128, NONE, F16, false, true, false, true, false, S2});
  WgmmaKernelConfig k = wgmma_kernel_config(s);
  CHECK(k.consumer_groups == 2);
  CHECK(k.producer_group);  // two consumer warpgroups: a producer warpgroup issues the copies
  CHECK(k.threads == 256 + 128);
  CHECK(k.min_ctas == 1);
  CHECK(k.panel == 128);
  CHECK(k.pv_chunks == 1);
  CHECK(k.pv_n == 128);
  // 2 stages of {K 128×128, V 128×128} + barriers + alignment slack
  CHECK(!k.q_in_smem);
  CHECK(!k.pipelined);
  CHECK(k.smem == std::size_t(2 * (16384 + 16384) + 40 + 1024));
  {  // 3 stages (the default): the pipelined loop reads Q̂ (128 rows × 128 B) from shared memory
    KernelSpec s3 = s;
    s3.tile = D128;
    const WgmmaKernelConfig k3 = wgmma_kernel_config(s3);
    CHECK(k3.q_in_smem);
    CHECK(k3.pipelined);
    CHECK(k3.smem == std::size_t(128 * 128 + 3 * (16384 + 16384) + 56 + 1024));
  }
  {  // one warpgroup, 2 stages: no producer, Q̂ from shared memory, 3 CTAs per SM in registers and
     // shared memory (228 KB per SM, 1 KB of it reserved per CTA)
    KernelSpec g = s;
    g.tile = TileConfig{64, 128, 4, 2};
    const WgmmaKernelConfig kg = wgmma_kernel_config(g);
    CHECK(!kg.producer_group);
    CHECK(kg.threads == 128);
    CHECK(kg.q_in_smem);
    CHECK(!kg.pipelined);
    CHECK(kg.min_ctas == 3);
    CHECK(kg.smem == std::size_t(64 * 128 + 2 * (16384 + 16384) + 40 + 1024));
    CHECK(3 * (kg.smem + 1024) <= 228u * 1024u);
    g.tile.stages = 3;  // pipelined: 2 CTAs per SM
    CHECK(wgmma_kernel_config(g).pipelined);
    CHECK(wgmma_kernel_config(g).min_ctas == 2);
  }
  s.smooth_q = true;  // the ΔS row is read from global memory: no shared memory for it
  CHECK(wgmma_kernel_config(s).smem == k.smem);
  s.head_dim = 256;
  s.tile = D64;
  k = wgmma_kernel_config(s);
  CHECK(k.panel == 128);
  CHECK(k.pv_chunks == 8);  // the producer design's consumers: 32-channel chunks above d_v 192
  CHECK(k.pv_n == 32);
  CHECK(k.q_in_smem);  // + Q̂ 128 rows × 256 B
  CHECK(k.smem == std::size_t(128 * 256 + 2 * (64 * 256 + 256 * 64) + 40 + 1024));
  {
    KernelSpec one = s;
    one.tile = G1K64;  // one warpgroup: 64-channel chunks
    CHECK(wgmma_kernel_config(one).pv_chunks == 4);
    CHECK(wgmma_kernel_config(one).pv_n == 64);
  }
  s.head_dim = 96;  // row 96 bytes: 32-byte panels
  CHECK(wgmma_kernel_config(s).panel == 32);
  s.head_dim = 33;  // d_qk 64
  CHECK(wgmma_kernel_config(s).panel == 64);
  s.head_dim = 160;
  CHECK(wgmma_kernel_config(s).pv_chunks == 2);
  CHECK(wgmma_kernel_config(s).pv_n == 80);

  // default tiles fit the H100's 227 KB and pass the checks
  for (int d : {1, 32, 64, 96, 128, 160, 192, 256}) {
    KernelSpec t = to_spec({d, NONE, F16, true, true, true, true, true, D128});
    t.tile = attention_family(KernelFamily::AttentionWgmma).default_tile(t, 227 * 1024);
    CHECK_NOTHROW(check_attention_config(t, 227 * 1024));
    CHECK(t.tile.bk == 128);
    // up to 128: one warpgroup per CTA, several CTAs per SM; wider: two consumer warpgroups and a producer
    CHECK(t.tile.warps == (d <= 128 ? 4 : 8));
    CHECK(t.tile.stages == 2);
  }
  // rejections
  KernelSpec r = to_spec({128, NONE, F16, false, true, false, true, false, D128});
  r.tile = TileConfig{128, 128, 4, 2};  // bq != 16·warps
  CHECK_THROWS_AS(check_attention_config(r, 227 * 1024), Error);
  r.tile = TileConfig{128, 96, 8, 2};
  CHECK_THROWS_AS(check_attention_config(r, 227 * 1024), Error);
  r.tile = TileConfig{128, 128, 8, 4};
  sage2::test::check_refused_for_shared_memory(r, 100 * 1024);
  r.tile = D64;
  r.head_dim = 512;
  try {
    check_attention_config(r, 227 * 1024);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unsupported);
  }
  r.head_dim = 128;
  r.family = KernelFamily::AttentionMma;  // the wgmma descriptor checks its own family's specs only
  CHECK_THROWS_AS(attention_family(KernelFamily::AttentionWgmma).check(r, 227 * 1024), Error);

  // TMA maps: K {row_bytes, rows} box {panel, bk}; V {kv_len_pad, B·Hkv·d_v} box {bk, d_v}
  const AttentionFamilyDesc& wg = attention_family(KernelFamily::AttentionWgmma);
  KernelSpec t = to_spec({128, NONE, F16, false, true, false, true, false, D128});
  QuantProblem qp{2, 8, 4, 300, 1000, 128};
  const QuantBuffers b = quant_buffers(qp, t);
  alignas(256) static char fake[256];
  REQUIRE(wg.tma_maps == 3);
  TmaMapSpec m[kMaxTmaMaps];
  wg.tma_specs(t, b, fake, m);
  const TmaMapSpec &mq = m[0], &mk = m[1], &mv = m[2];
  CHECK(mq.dims[0] == 128);
  CHECK(mq.dims[1] == std::uint64_t(2 * 8 * 384));
  CHECK(mq.box[0] == 128);
  CHECK(mq.box[1] == 64);
  CHECK(mq.base == fake + b.offsets().q_codes);
  CHECK(mk.dims[0] == 128);
  CHECK(mk.dims[1] == std::uint64_t(2 * 4 * 1024));
  CHECK(mk.box[0] == 128);
  CHECK(mk.box[1] == 128);
  CHECK(mk.swizzle_bytes == 128);
  CHECK(mv.dims[0] == 1024);
  CHECK(mv.dims[1] == std::uint64_t(2 * 4 * 128));
  CHECK(mv.box[0] == 128);
  CHECK(mv.box[1] == 128);
  CHECK(mk.base == fake + b.offsets().k_codes);
  CHECK(mv.base == fake + b.offsets().v_codes);
  CHECK_THROWS_AS(wg.tma_specs(t, b, fake + 16, m), Error);  // TMA needs a 256-byte aligned workspace
  // launch shape
  const auto chunks = attention_chunks(b, 0);
  REQUIRE(chunks.size() == 1);
  const LaunchShape ls = attention_launch_shape(t, b, chunks[0]);
  CHECK(ls.grid[0] == 3);
  CHECK(ls.grid[1] == 16);
  CHECK(ls.block[0] == static_cast<unsigned>(wgmma_kernel_config(t).threads));
  // buffers laid out for the mma family do not match
  KernelSpec mm = t;
  mm.family = KernelFamily::AttentionMma;
  mm.tile = TileConfig{128, 128, 8, 2};
  CHECK_THROWS_AS(wg.tma_specs(t, quant_buffers(qp, mm), fake, m), Error);
}

TEST_CASE("jit wgmma: prefill the disk cache with the GPU suite's kernels (SAGE2_WGMMA_PREFILL)") {
  const char* dir = std::getenv("SAGE2_WGMMA_PREFILL");
  if (!dir) return;
  std::set<std::string> seen;
  std::vector<KernelSpec> specs;
  auto add = [&](const KernelSpec& s) {
    if (seen.insert(s.key()).second) specs.push_back(s);
  };
  for (const KernelSpec& a : sage2::test::wgmma_suite_specs()) {
    add(a);
    for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV})
      add(quantize_spec_for(a, op));
    if (a.smooth_q) add(delta_s_spec_for(a));
  }
  const auto results = sage2::test::compile_all(specs);
  cache::DiskCache disk(dir, false);
  int stored = 0;
  for (const auto& r : results) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    stored += disk.store(r.k) ? 1 : 0;
  }
  MESSAGE("prefilled " << stored << " of " << results.size() << " kernels into " << std::string(dir));
}
