// Specification (CPU): the attention family descriptors (kernels/attention_family.hpp) and their
// registry. Every family is reachable by its KernelFamily and its names; the spec key, entry,
// template and quantization layout come from its descriptor; its launch shape, kernel config and
// parameter struct are what the kernels were launched with before the descriptors existed
// (values pinned from that code for a few specs), and the generic pieces agree with each other
// (launch shape = kernel config, parameters = the shared AttentionParams plus zeroed map slots).
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>
#include <string>

#include "kernels/attention_family.hpp"
#include "jit/compiler.hpp"
#include "kernels/quant_layout.hpp"
#include "templates/wgmma_params.cuh"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

KernelSpec spec_of(KernelFamily family, int head_dim, TileConfig tile, bool smooth_q = false) {
  KernelSpec s;
  s.family = family;
  s.consumer = family;
  s.arch = Arch::Sm90a;
  s.head_dim = head_dim;
  s.qk_bits = 8;
  s.smooth_q = smooth_q;
  s.return_lse = smooth_q;
  s.tile = tile;
  return s;
}

// A fake, 256-byte aligned workspace and output (nothing is dereferenced).
char* const kWorkspace = reinterpret_cast<char*>(std::uintptr_t(0x100000000));
const TensorRef kOut = TensorRef::hnd(reinterpret_cast<void*>(0x7000000000), DType::F16, 2, 8, 1000, 128);
const AttentionArgs kArgs{kWorkspace, kOut, reinterpret_cast<float*>(0x9000000000), 0.125f,
                          reinterpret_cast<void*>(0x5000000000)};

}  // namespace

TEST_CASE("attention family: the registry holds every attention family, once, by kind and name") {
  const auto all = attention_families();
  REQUIRE(all.size() == 2);
  CHECK(all[0]->family == KernelFamily::AttentionMma);  // KernelFamily order
  CHECK(all[1]->family == KernelFamily::AttentionWgmma);
  std::set<std::string> names;
  for (const AttentionFamilyDesc* d : all) {
    CAPTURE(d->name);
    CHECK(find_attention_family(d->family) == d);
    CHECK(&attention_family(d->family) == d);
    CHECK(names.insert(d->name).second);
    CHECK(names.insert(d->option_name).second);
    CHECK(std::string(family_name(d->family)) == d->name);
    CHECK(parse_attention_family(d->name) == d->family);
    CHECK(parse_attention_family(d->option_name) == d->family);
    CHECK(d->param_bytes <= kMaxAttentionParamBytes);
    CHECK(d->tma_maps <= kMaxTmaMaps);
    CHECK_FALSE(d->candidates().empty());
  }
  for (KernelFamily f : {KernelFamily::Quantize, KernelFamily::DeltaS, KernelFamily::Probe}) {
    CHECK(find_attention_family(f) == nullptr);
    CHECK_THROWS_AS(attention_family(f), Error);
  }
  CHECK_FALSE(parse_attention_family("quantize").has_value());
  CHECK_FALSE(parse_attention_family("").has_value());
}

TEST_CASE("attention family: the default family is the preferred one that runs the problem") {
  for (Arch arch : {Arch::Sm89, Arch::Sm90a})
    for (int bits : {4, 8})
      for (int hd : {1, 64, 128, 256, 257, 512}) {
        const AttentionFamilyDesc* best = nullptr;
        for (const AttentionFamilyDesc* d : attention_families())
          if (d->runs(arch, bits, hd) && (!best || d->preference > best->preference)) best = d;
        REQUIRE(best);
        CHECK(default_attention_family(arch, bits, hd) == best->family);
      }
  // What that means today: wgmma for 8-bit on sm_90a up to head dim 256, mma.sync otherwise.
  CHECK(default_attention_family(Arch::Sm90a, 8, 256) == KernelFamily::AttentionWgmma);
  CHECK(default_attention_family(Arch::Sm90a, 8, 257) == KernelFamily::AttentionMma);
  CHECK(default_attention_family(Arch::Sm90a, 4, 128) == KernelFamily::AttentionMma);
  CHECK(default_attention_family(Arch::Sm89, 8, 128) == KernelFamily::AttentionMma);
}

TEST_CASE("attention family: keys, entries, templates and layouts come from the descriptor") {
  for (const AttentionFamilyDesc* d : attention_families()) {
    CAPTURE(d->name);
    KernelSpec s = spec_of(d->family, 128, d->reference_tile);
    CHECK_NOTHROW(s.validate());
    CHECK(s.key().rfind(std::string(d->name) + "|", 0) == 0);
    CHECK(s.entry_name() == d->entry);
    const std::string src = generate_source(s);
    CHECK(src.find(std::string("#include \"") + d->template_file + "\"") != std::string::npos);
    CHECK(quant_layout(s).shape == d->mma_shape(s.qk_bits));
    // the quantize kernels feeding it write its layout
    CHECK(quant_layout(quantize_spec_for(s, QuantOp::QuantizeK)).shape == d->mma_shape(s.qk_bits));
    CHECK(quant_layout(delta_s_spec_for(s)).shape == d->mma_shape(s.qk_bits));
  }
}

TEST_CASE("attention family: every candidate validates; the default tile passes the check and fits") {
  for (const AttentionFamilyDesc* d : attention_families())
    for (int hd : {64, 128, 256}) {
      CAPTURE(d->name);
      CAPTURE(hd);
      KernelSpec s = spec_of(d->family, hd, {});
      for (const TileConfig& t : d->candidates()) {
        s.tile = t;
        CHECK_NOTHROW(s.validate());
      }
      for (int smem : {99 * 1024, 227 * 1024}) {
        s.tile = d->default_tile(s, smem);
        CHECK_NOTHROW(d->check(s, smem));
        CHECK(d->kernel_config(s).smem <= static_cast<std::size_t>(smem));
      }
    }
}

TEST_CASE("attention family: launch shapes, kernel configs and parameters as before the descriptors") {
  struct Pinned {
    KernelFamily family;
    TileConfig tile;
    bool smooth_q;
    int threads, min_ctas;
    std::size_t smem;
    std::size_t param_bytes;  // +184 since the descriptors: the varlen, mask, Q-in-kernel, division and causal-order fields appended to AttentionParams (wgmma: its maps 64-byte aligned after them)
    unsigned grid0;
    std::vector<unsigned> grid1;  // per chunk at a 1 MiB ΔS workspace
  };
  const Pinned pinned[] = {
      {KernelFamily::AttentionMma, {128, 128, 8, 2}, false, 256, 1, 92192, 400, 8, {16}},
      {KernelFamily::AttentionMma, {128, 128, 8, 2}, true, 256, 1, 93216, 400, 8, {10, 6}},
      {KernelFamily::AttentionMma, {64, 64, 4, 2}, true, 128, 1, 48672, 400, 16, {5, 5, 5, 1}},
      {KernelFamily::AttentionWgmma, {128, 128, 8, 2}, false, 384, 1, 66600, 832, 8, {16}},
      {KernelFamily::AttentionWgmma, {128, 128, 8, 2}, true, 384, 1, 66600, 832, 8, {10, 6}},
      {KernelFamily::AttentionWgmma, {64, 64, 4, 2}, false, 128, 3, 42024, 832, 16, {16}},
  };
  for (const Pinned& p : pinned) {
    const AttentionFamilyDesc& d = attention_family(p.family);
    const KernelSpec s = spec_of(p.family, 128, p.tile, p.smooth_q);
    CAPTURE(s.key());
    const AttentionKernelConfig k = d.kernel_config(s);
    CHECK(k.threads == p.threads);
    CHECK(k.min_ctas == p.min_ctas);
    CHECK(k.smem == p.smem);
    CHECK(d.param_bytes == p.param_bytes);
    const QuantBuffers b = quant_buffers({2, 8, 4, 1000, 3000, 128}, s);
    const auto chunks = attention_chunks(b, p.smooth_q ? delta_s_workspace_bytes(b, std::size_t(1) << 20) : 0);
    REQUIRE(chunks.size() == p.grid1.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const LaunchShape ls = d.launch_shape(s, b, chunks[i]);
      CHECK(ls.grid[0] == p.grid0);
      CHECK(ls.grid[1] == p.grid1[i]);
      CHECK(ls.grid[2] == 1);
      CHECK(ls.block[0] == static_cast<unsigned>(k.threads));
      CHECK(ls.block[1] == 1);
      CHECK(ls.dynamic_smem == k.smem);
      // The parameters: the shared AttentionParams, and tensor-map slots left zero.
      AttentionParamStorage st;
      std::memset(st.bytes, 0xAB, sizeof st.bytes);
      d.write_params(s, b, kArgs, chunks[i], st.bytes);
      const dev::AttentionParams a = make_attention_params(s, b, kArgs, chunks[i]);
      if (d.tma_maps == 0) {
        CHECK(d.param_bytes == sizeof a);
        CHECK(std::memcmp(st.bytes, &a, sizeof a) == 0);
      } else {
        dev::WgmmaAttentionParams w;
        REQUIRE(d.param_bytes == sizeof w);
        std::memcpy(&w, st.bytes, sizeof w);
        CHECK(std::memcmp(&w.a, &a, sizeof a) == 0);
        const TmaMap zero{};
        for (int m = 0; m < d.tma_maps; ++m)
          CHECK(std::memcmp(st.bytes + d.tma_offsets[m], &zero, sizeof zero) == 0);
        CHECK(d.tma_offsets[0] == offsetof(dev::WgmmaAttentionParams, tm_q));
        CHECK(d.tma_offsets[1] == offsetof(dev::WgmmaAttentionParams, tm_k));
        CHECK(d.tma_offsets[2] == offsetof(dev::WgmmaAttentionParams, tm_v));
      }
    }
  }
}

TEST_CASE("attention params: the block coordinates divide by the head counts exactly (one multiply and a shift)") {
  // dev::div_u31: n / d for every n < 2^31 and 1 <= d < 2^31; the divisors of real calls, every
  // power of two and its neighbours, and the largest; numerators at and around multiples of d,
  // the largest, and a spread in between.
  std::vector<dev::u32> divisors;
  for (dev::u32 d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 9; k <= 30; ++k)
    for (long long e : {-1LL, 0LL, 1LL}) divisors.push_back(static_cast<dev::u32>((1LL << k) + e));
  divisors.push_back(0x7fffffffu);
  std::uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (dev::u32 d : divisors) {
    const dev::DivU31 f = dev::div_u31_of(d);
    CAPTURE(d);
    std::vector<dev::u32> ns = {0u, 1u, d - 1, d, d + 1, 0x7fffffffu, 0x7ffffffeu};
    for (dev::u32 q : {1u, 2u, 3u, 1000u, 0x7fffffffu / d, 0x7fffffffu / d - 1})
      for (long long e : {-1LL, 0LL, 1LL}) {
        const long long n = static_cast<long long>(q) * d + e;
        if (n >= 0 && n < (1LL << 31)) ns.push_back(static_cast<dev::u32>(n));
      }
    for (int i = 0; i < 200; ++i) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      ns.push_back(static_cast<dev::u32>(rng >> 33));
    }
    bool all = true;
    for (dev::u32 n : ns)
      if (n < (1u << 31) && dev::div_u31(n, f) != n / d) {
        all = false;
        CAPTURE(n);
        CHECK(dev::div_u31(n, f) == n / d);
        break;
      }
    CHECK(all);
  }
  static_assert(dev::div_u31(4095u, dev::div_u31_of(28u)) == 146u && dev::div_u31(27u, dev::div_u31_of(7u)) == 3u);
  // the launch refuses what the divisions cannot hold
  const KernelSpec s = spec_of(KernelFamily::AttentionMma, 64, {64, 64, 4, 2});
  const QuantBuffers big = quant_buffers({1 << 20, 1 << 11, 1 << 11, 16, 16, 64}, s);
  AttentionArgs args = kArgs;
  args.out.batch = 1 << 20;
  args.out.heads = 1 << 11;
  args.out.seq = 16;
  args.out.dim = 64;
  CHECK_THROWS_WITH_AS(make_attention_params(s, big, args, attention_chunks(big, 0)[0]), doctest::Contains("2^31"), Error);
}

TEST_CASE("attention params: dense causal CTAs start band by band, each band's longest query blocks first") {
  // The order of block_coords (templates/attention_blocks.cuh) from the parameters: linear block
  // index lin = x + y·qb_count (the order CTAs start in) → band lin / (G·nb), then within the band
  // xq = r / (its pairs), pair r mod (its pairs); query block nb - 1 - xq.
  auto order = [](const dev::AttentionParams& a, dev::u32 lin, dev::u32& pair, dev::u32& qb) {
    const dev::u32 nb = static_cast<dev::u32>(a.qb_count), G = a.band_pairs;
    const dev::u32 band = lin / (G * nb), r = lin - band * G * nb;
    const dev::u32 rest = static_cast<dev::u32>(a.bh_count) - band * G;
    const dev::u32 here = rest <= G ? rest : G;
    const dev::u32 xq = r / here;
    pair = band * G + (r - xq * here);
    qb = nb - 1 - xq;
  };
  struct Shape {
    std::int64_t batch, q_heads, kv_heads, n, head_dim;
  };
  // every (pair, block) of the chunk started once; within a band the blocks start from the longest
  auto check_chunk = [&](const KernelSpec& s, const QuantBuffers& b, const dev::AttentionParams& a, const AttentionChunk& c) {
    const std::int64_t group = b.p.q_heads / b.p.kv_heads;
    const std::int64_t per_kv = b.kv_len_pad * (b.row_bytes + b.d_v * v_code_bytes(s.pv_fp16));
    CHECK(a.band_pairs == static_cast<dev::u32>(causal_band_pairs(s, b, c)));
    // whole kv heads whose K̂ and V̂ fit kCausalBandBytes (at least one), at most the chunk's pairs
    CHECK(a.band_pairs == std::min<std::int64_t>(c.bh_count, std::max<std::int64_t>(1, kCausalBandBytes / per_kv) * group));
    CHECK((a.band_pairs % group == 0 || a.band_pairs == c.bh_count));
    const dev::u32 nb = static_cast<dev::u32>(c.qb_count), pairs = static_cast<dev::u32>(c.bh_count);
    std::vector<char> seen(static_cast<std::size_t>(nb) * pairs, 0);
    bool once = true, longest_first = true;
    dev::u32 prev_band = 0, prev_xq = 0;
    for (dev::u32 lin = 0; lin < nb * pairs; ++lin) {
      dev::u32 pair = 0, qb = 0;
      order(a, lin, pair, qb);
      if (pair >= pairs || qb >= nb || seen[static_cast<std::size_t>(pair) * nb + qb]++) once = false;
      const dev::u32 band = pair / a.band_pairs, xq = nb - 1 - qb;
      if (band == prev_band && xq < prev_xq) longest_first = false;
      if (band != prev_band && (band != prev_band + 1 || xq != 0)) longest_first = false;
      prev_band = band;
      prev_xq = xq;
    }
    CHECK(once);
    CHECK(longest_first);
  };
  for (const Shape& sh : {Shape{4, 32, 32, 1024, 128}, Shape{1, 28, 4, 4096, 128}, Shape{1, 28, 4, 3000, 128},
                          Shape{4, 32, 32, 8192, 64}, Shape{2, 5, 5, 700, 96}, Shape{1, 1, 1, 64, 64}}) {
    for (const bool smooth_q : {false, true}) {
      KernelSpec s = spec_of(KernelFamily::AttentionWgmma, static_cast<int>(sh.head_dim), TileConfig{64, 128, 4, 2}, smooth_q);
      s.causal = CausalMode::TopLeft;
      const QuantBuffers b = quant_buffers({sh.batch, sh.q_heads, sh.kv_heads, sh.n, sh.n, sh.head_dim}, s);
      AttentionArgs args = kArgs;
      args.out = TensorRef::hnd(kOut.data, DType::F16, sh.batch, sh.q_heads, sh.n, sh.head_dim);
      // smooth Q: chunks of pairs or of query blocks (ΔS in a 1 MiB workspace), each its own order
      const auto chunks = attention_chunks(b, smooth_q ? delta_s_workspace_bytes(b, std::size_t(1) << 20) : 0);
      CAPTURE(s.key());
      CAPTURE(sh.n);
      CHECK((smooth_q || chunks.size() == 1));
      for (const AttentionChunk& c : chunks) check_chunk(s, b, make_attention_params(s, b, args, c), c);
    }
  }
  // non-causal, varlen and masked launches keep the pair-by-pair order, and so does the mma family
  // (it recomputes the coordinates for every KV tile)
  KernelSpec s = spec_of(KernelFamily::AttentionWgmma, 128, {64, 128, 4, 2});
  const QuantBuffers b = quant_buffers({2, 8, 4, 1000, 3000, 128}, s);
  CHECK(causal_band_pairs(s, b, attention_chunks(b, 0)[0]) == 0);
  CHECK(make_attention_params(s, b, kArgs, attention_chunks(b, 0)[0]).band_pairs == 0u);
  s.causal = CausalMode::TopLeft;
  CHECK(causal_band_pairs(s, b, attention_chunks(b, 0)[0]) > 0);
  s.mask = 1;
  CHECK(causal_band_pairs(s, b, attention_chunks(b, 0)[0]) == 0);
  s.mask = 0;
  s.varlen = true;
  CHECK(causal_band_pairs(s, b, attention_chunks(b, 0)[0]) == 0);
  KernelSpec m = spec_of(KernelFamily::AttentionMma, 128, {64, 64, 4, 2});
  m.causal = CausalMode::TopLeft;
  const QuantBuffers bm = quant_buffers({2, 8, 4, 1000, 3000, 128}, m);
  CHECK(causal_band_pairs(m, bm, attention_chunks(bm, 0)[0]) == 0);
}

TEST_CASE("attention family: a family's descriptor refuses the other family's specs and buffers") {
  const AttentionFamilyDesc& mma = attention_family(KernelFamily::AttentionMma);
  const AttentionFamilyDesc& wg = attention_family(KernelFamily::AttentionWgmma);
  const KernelSpec ms = spec_of(KernelFamily::AttentionMma, 128, {128, 128, 8, 2});
  const KernelSpec ws = spec_of(KernelFamily::AttentionWgmma, 128, {128, 128, 8, 2});
  CHECK_THROWS_AS(mma.check(ws, INT_MAX), Error);
  CHECK_THROWS_AS(wg.check(ms, INT_MAX), Error);
  // Buffers laid out for one family's quantization groups cannot feed the other's kernel.
  const QuantBuffers mb = quant_buffers({1, 2, 2, 256, 256, 128}, ms);
  const auto chunks = attention_chunks(mb, 0);
  CHECK_THROWS_AS(wg.launch_shape(ws, mb, chunks[0]), Error);
  AttentionParamStorage st;
  CHECK_THROWS_AS(wg.write_params(ws, mb, kArgs, chunks[0], st.bytes), Error);
  // The wgmma family runs 8-bit on sm_90a up to head dim 256; the mma family everywhere.
  CHECK(wg.runs(Arch::Sm90a, 8, 256));
  CHECK_FALSE(wg.runs(Arch::Sm90a, 8, 257));
  CHECK_FALSE(wg.runs(Arch::Sm90a, 4, 64));
  CHECK_FALSE(wg.runs(Arch::Sm89, 8, 64));
  for (Arch arch : {Arch::Sm89, Arch::Sm90a})
    for (int bits : {4, 8}) CHECK(mma.runs(arch, bits, 512));
}
