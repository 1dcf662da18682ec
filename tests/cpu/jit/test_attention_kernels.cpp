// Specification (CPU / CI): every attention variant of the mma.sync family, and the ΔS kernel,
// NVRTC-compiles for sm_89 and sm_90a over a covering set of the code-relevant axes (qk_bits ×
// causal × dtype × smooth flags × two-level × return_lse × head dims 1..512 × tile configs);
// the main configurations (head dim 64/128, INT8 and INT4, default tiles) have no spills and no
// stack; the host-side plan (CTA size, V passes, shared memory, ΔS chunks, config rejection) is
// consistent with the kernel's own constants.
#include <doctest/doctest.h>

#include "jit_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "kernels/attention_family.hpp"
#include "jit/compiler.hpp"
#include "kernels/family_mma.hpp"

using namespace sage2;
using namespace sage2::kernels;

namespace {

using sage2::test::AttentionVariant;

KernelSpec to_spec(const AttentionVariant& v) { return sage2::test::to_spec(KernelFamily::AttentionMma, v); }

constexpr auto S89 = Arch::Sm89;
constexpr auto S90 = Arch::Sm90a;
constexpr auto F16 = DType::F16;
constexpr auto BF16 = DType::BF16;
constexpr auto NONE = CausalMode::None;
constexpr auto TL = CausalMode::TopLeft;
constexpr auto BR = CausalMode::BottomRight;
const TileConfig W8{128, 64, 8, 2};   // default: 8 warps × 16 rows
const TileConfig W4{64, 64, 4, 2};    // 4 warps × 16 rows
const TileConfig M2{128, 64, 4, 2};   // 4 warps × 32 rows (two m tiles per warp)
const TileConfig K128{128, 128, 8, 2};
const TileConfig S1{64, 32, 4, 1};    // bk 32, one stage
const TileConfig S3{64, 64, 4, 3};    // three stages

std::vector<AttentionVariant> covering_set() {
  std::vector<AttentionVariant> v = {
      // arch head bits causal dtype  sq     sk     sv     acc2   lse    tile  main
      // main configurations: head dims 64/128, INT8/INT4, default tile, both archs
      {S89, 64, 8, NONE, F16, false, true, false, true, false, W8, true},
      {S90, 64, 8, NONE, F16, false, true, false, true, false, W8, true},
      {S89, 128, 8, NONE, F16, false, true, false, true, false, W8, true},
      {S90, 128, 8, NONE, BF16, false, true, false, true, false, W8, true},
      {S89, 64, 4, TL, BF16, true, true, false, true, true, W8, true},
      {S90, 64, 4, BR, F16, true, true, false, true, true, W8, true},
      {S89, 128, 4, NONE, F16, true, true, false, true, true, W8, true},
      {S90, 128, 4, TL, BF16, true, true, false, true, true, W8, true},
      {S89, 128, 8, TL, BF16, true, true, true, true, true, W8, true},
      {S90, 128, 8, BR, F16, false, false, true, false, true, W8, true},
      {S89, 64, 8, BR, F16, true, true, true, false, true, W4, true},
      {S90, 64, 8, TL, BF16, false, true, false, true, false, W4, true},
      {S89, 128, 8, NONE, F16, false, true, false, true, true, W4, true},
      {S90, 128, 4, NONE, F16, true, true, true, true, false, W4, true},
      {S89, 128, 8, NONE, F16, false, true, false, true, false, M2, true},
      {S89, 64, 4, TL, F16, true, true, false, true, true, M2, true},
      {S90, 64, 8, NONE, BF16, false, true, false, true, true, M2, true},
      // other head dims (padding, V passes) and tiles
      {S89, 1, 8, NONE, F16, false, true, false, true, true, S1},
      {S90, 32, 8, TL, BF16, false, true, true, true, true, S3},
      {S89, 32, 4, BR, F16, true, false, false, false, false, W8},
      {S90, 40, 8, NONE, F16, false, false, false, true, true, M2},
      {S89, 80, 8, BR, BF16, true, true, false, true, true, K128},
      {S90, 80, 4, NONE, F16, true, true, true, true, false, W8},
      {S89, 96, 8, TL, F16, false, true, false, false, true, W8},
      {S90, 96, 4, NONE, BF16, true, true, false, true, true, S1},
      {S89, 160, 8, NONE, BF16, true, true, false, true, true, W8},
      {S90, 160, 8, BR, F16, false, true, true, true, true, W4},
      {S89, 256, 8, TL, F16, false, true, false, true, true, W4},
      {S90, 256, 4, NONE, BF16, true, true, false, true, false, W8},
      {S89, 512, 8, NONE, F16, true, true, false, true, true, TileConfig{64, 64, 4, 1}},
      {S90, 512, 4, TL, BF16, true, true, true, false, true, TileConfig{64, 64, 4, 2}},
      {S90, 128, 8, NONE, F16, false, true, false, true, true, K128},
      {S89, 64, 8, BR, BF16, false, true, false, true, true, S3},
  };
  return v;
}

}  // namespace

TEST_CASE("jit attention: the covering set covers every value of every code-relevant axis") {
  const sage2::test::Coverage c = sage2::test::coverage(KernelFamily::AttentionMma, covering_set(), 6);
  for (int d : {32, 64, 80, 96, 128, 160, 256, 512}) CHECK_MESSAGE(c.dims.count(d), "head dim " << d);
  for (Arch a : {S89, S90})
    for (int b : {4, 8}) CHECK(c.arch_bits.count({a, b}));
}

TEST_CASE("jit attention: every attention and ΔS variant compiles for sm_89 and sm_90a; main configs do not spill") {
  sage2::test::SpecList list;
  for (const auto& v : covering_set()) list.add(to_spec(v), v.main);
  // ΔS: one per arch and input dtype, a few head dims / tiles (it is canonical over bits,
  // causal, V smoothing, two-level, LSE).
  for (const auto& v : std::vector<AttentionVariant>{{S89, 128, 8, NONE, F16, true, true, false, true, false, W8},
                                              {S90, 64, 4, NONE, BF16, true, false, false, true, false, M2},
                                              {S89, 80, 4, NONE, BF16, true, true, false, true, false, K128},
                                              {S90, 512, 8, NONE, F16, true, true, false, true, false, W4},
                                              {S90, 1, 8, NONE, F16, true, true, false, true, false, S1}})
    list.add(delta_s_spec_for(to_spec(v)), true);
  sage2::test::compile_and_check(
      list, "attention/ΔS", [](const KernelSpec&) { return false; },
      [](const sage2::test::Outcome& r) {
        const bool attention = r.spec.family == KernelFamily::AttentionMma;
        const int threads = attention ? attention_kernel_config(r.spec).threads : dev::ds_threads();
        CHECK(r.k.facts.registers * threads <= 65536);  // the CTA fits one SM's register file
      });
}

TEST_CASE("jit attention: host plan — CTA size, V passes, shared memory and config rejection") {
  KernelSpec s;
  s.family = KernelFamily::AttentionMma;
  s.head_dim = 128;
  s.tile = W8;
  MmaKernelConfig k = mma_kernel_config(s);
  CHECK(k.threads == 256);
  CHECK(k.m_tiles == 1);
  CHECK(k.v_slices == 1);
  CHECK(k.v_slice == 128);
  // Q 128 rows + 2 stages of {K 64 rows, V 128 channel rows, K scales}: rows padded by 16 bytes.
  CHECK(k.smem == std::size_t(128 * 144 + 2 * (64 * 144 + 128 * 80 + 16)));
  s.smooth_q = true;  // + the ΔS row of each stage
  CHECK(mma_kernel_config(s).smem == std::size_t(128 * 144 + 2 * (64 * 144 + 128 * 80 + 16 + 64 * 4)));
  s.head_dim = 512;
  s.tile = W4;
  k = mma_kernel_config(s);
  CHECK(k.v_slices == 3);
  CHECK(k.v_slice * k.v_slices >= 512);
  CHECK(k.v_slice % 16 == 0);
  s.tile = M2;
  s.head_dim = 128;
  k = mma_kernel_config(s);
  CHECK(k.m_tiles == 2);
  CHECK(k.v_slices == 1);

  // Rejections: shared memory over the device limit (Unsupported, naming the need), tiles the
  // family cannot run (InvalidArgument).
  s.head_dim = 512;
  s.tile = TileConfig{128, 128, 8, 4};
  sage2::test::check_refused_for_shared_memory(s, 99 * 1024);
  s.head_dim = 64;
  s.tile = TileConfig{64, 48, 4, 1};
  CHECK_THROWS_AS(check_attention_config(s, 1 << 30), Error);
  s.tile = TileConfig{64, 64, 4, 5};
  CHECK_THROWS_AS(check_attention_config(s, 1 << 30), Error);
  // A wgmma spec is held to the wgmma family's rules (its descriptor's check): 64 query rows per
  // consumer warpgroup, bk 64/128.
  s.family = KernelFamily::AttentionWgmma;
  s.arch = Arch::Sm90a;
  s.qk_bits = 8;
  s.tile = W8;  // bq 128 over 8 warps: valid for both families
  CHECK_NOTHROW(check_attention_config(s, 1 << 30));
  s.tile = TileConfig{64, 64, 8, 2};  // 8 warps = 2 warpgroups need bq 128
  CHECK_THROWS_AS(check_attention_config(s, 1 << 30), Error);
  s.tile = TileConfig{128, 32, 8, 2};  // bk 32: valid for mma, not for wgmma
  CHECK_THROWS_AS(check_attention_config(s, 1 << 30), Error);
}

TEST_CASE("jit attention: the default tile fits the device, is valid and is a tuning candidate") {
  const AttentionFamilyDesc& mma = attention_family(KernelFamily::AttentionMma);
  for (int d : {1, 32, 64, 80, 96, 128, 160, 256, 512})
    for (int bits : {4, 8})
      for (int limit : {99 * 1024, 227 * 1024}) {
        KernelSpec s;
        s.family = KernelFamily::AttentionMma;
        s.head_dim = d;
        s.qk_bits = bits;
        s.smooth_q = true;
        s.tile = mma.default_tile(s, limit);
        CAPTURE(d);
        CAPTURE(limit);
        CHECK_NOTHROW(check_attention_config(s, limit));
        CHECK(std::find(mma.candidates().begin(), mma.candidates().end(), s.tile) != mma.candidates().end());
        // no spills at any head dim, fastest on the H100; one stage where two do not fit (int8
        // rows at head dim 512 on a 99 KB device)
        const bool one_stage = d == 512 && bits == 8 && limit < 227 * 1024;
        CHECK(s.tile == (one_stage ? TileConfig{64, 64, 4, 1} : TileConfig{64, 64, 4, 2}));
      }
  KernelSpec s;
  s.family = KernelFamily::AttentionMma;
  s.head_dim = 512;
  CHECK_THROWS_AS(mma.default_tile(s, 16 * 1024), Error);
}

TEST_CASE("jit attention: ΔS workspace stays bounded; chunks tile (pairs × query blocks) exactly once") {
  KernelSpec s;
  s.family = KernelFamily::AttentionMma;
  s.head_dim = 128;
  s.tile = W8;
  s.smooth_q = true;
  auto check_cover = [](const QuantBuffers& b, const std::vector<AttentionChunk>& chunks) {
    std::map<std::pair<std::int64_t, std::int64_t>, int> seen;
    for (const auto& c : chunks) {
      CHECK(c.bh_count >= 1);
      CHECK(c.qb_count >= 1);
      CHECK(c.bh_count <= 65535);
      for (std::int64_t p = c.bh_offset; p < c.bh_offset + c.bh_count; ++p)
        for (std::int64_t q = c.qb_offset; q < c.qb_offset + c.qb_count; ++q) ++seen[{p, q}];
    }
    CHECK(seen.size() == static_cast<std::size_t>(b.p.batch * b.p.q_heads * b.q_blocks));
    for (auto& [k, n] : seen) CHECK(n == 1);
  };
  {  // small: everything in one chunk
    const QuantBuffers b = quant_buffers({2, 8, 2, 1000, 1000, 128}, s);
    const std::size_t bytes = delta_s_workspace_bytes(b);
    CHECK(bytes == std::size_t(2 * 8) * b.q_blocks * b.kv_len_pad * 4);
    const auto chunks = attention_chunks(b, bytes);
    CHECK(chunks.size() == 1);
    check_cover(b, chunks);
  }
  {  // B=4, H=32, N=32K: 128 pairs × 256 blocks × 32K keys × 4 bytes = 4 GiB → capped
    const QuantBuffers b = quant_buffers({4, 32, 32, 32768, 32768, 128}, s);
    const std::size_t bytes = delta_s_workspace_bytes(b);
    CHECK(bytes <= kDeltaSWorkspaceCap);
    CHECK(bytes > kDeltaSWorkspaceCap / 2);
    const auto chunks = attention_chunks(b, bytes);
    CHECK(chunks.size() > 1);
    for (const auto& c : chunks)
      CHECK(std::size_t(c.bh_count) * c.qb_count * b.kv_len_pad * 4 <= bytes);
    check_cover(b, chunks);
  }
  {  // one pair alone exceeds the cap: chunks over query blocks
    const QuantBuffers b = quant_buffers({1, 3, 1, 5000, 7000, 64}, s);
    const std::size_t row = std::size_t(b.kv_len_pad) * 4;
    const std::size_t bytes = delta_s_workspace_bytes(b, 5 * row + 7);
    CHECK(bytes == 5 * row);
    const auto chunks = attention_chunks(b, bytes);
    for (const auto& c : chunks) {
      CHECK(c.bh_count == 1);
      CHECK(c.qb_count <= 5);
    }
    check_cover(b, chunks);
    CHECK_THROWS_AS(attention_chunks(b, row - 1), Error);  // cannot hold one row
  }
  {  // no smooth-Q: no ΔS workspace, one chunk
    KernelSpec n = s;
    n.smooth_q = false;
    const QuantBuffers b = quant_buffers({4, 32, 32, 32768, 32768, 128}, n);
    CHECK(delta_s_workspace_bytes(b) == 0);
    const auto chunks = attention_chunks(b, 0);
    CHECK(chunks.size() == 1);
    check_cover(b, chunks);
  }
}
