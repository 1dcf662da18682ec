// Specification (CPU / CI) of the direct small-Nq path (kernels/direct.hpp, plan/direct_rule.hpp,
// runtime/direct_stage.hpp, templates/attention_direct.cuh):
//  - its split and merge kernels NVRTC-compile for sm_90a and sm_89 (and sm_80: the template is
//    arch-neutral, mma.sync f16/bf16 + cp.async + ldmatrix) over a covering set of head dims,
//    row counts (tiles), causal modes, dtypes and LSE; the default tiles never spill and the CTA
//    fits the register file at the CTAs per SM the layout assumes; registers are printed;
//  - which calls take the direct path (Auto: dense, head dim <= 256, R = Nq·Hq/Hkv <= 512 on sm_90a,
//    <= 64 elsewhere), the overrides (Quantized, Direct) and their refusals, also through the C ABI;
//  - the layout: tile within the device's shared memory, key splits that fill the device once,
//    the workspace (partials) size, the launch shapes; a direct call plan has no quantize stage and
//    its parameter struct carries the call's pointers and strides.
#include <doctest/doctest.h>

#include "jit_test_support.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "kernels/direct.hpp"
#include "plan/attention_validate.hpp"
#include "plan/direct_rule.hpp"
#include "runtime/c_api_internal.hpp"
#include "runtime/call_plan.hpp"
#include "sage2/sage2.h"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

const DirectDevice kH100{132, 232448, 233472};  // sm_90: 227 KB per block, 228 KB per SM
const DirectDevice kAda{128, 101376, 102400};   // sm_89 (RTX 4090): 99 KB per block, 100 KB per SM

DirectProblem problem(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk, int d,
                      CausalMode causal = CausalMode::None, DType dt = DType::F16, bool lse = false) {
  DirectProblem p;
  p.batch = b;
  p.q_heads = hq;
  p.kv_heads = hkv;
  p.q_len = nq;
  p.kv_len = nk;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = dt;
  p.return_lse = lse;
  p.sm_scale = 0.125f;
  return p;
}

const void* addr(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

struct Call {
  TensorRef q, k, v, out;
  AttentionParams p;
};
Call call(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk, std::int64_t d) {
  Call c;
  c.q = TensorRef::hnd(addr(0x100000000), DType::F16, b, hq, nq, d);
  c.k = TensorRef::hnd(addr(0x200000000), DType::F16, b, hkv, nk, d);
  c.v = TensorRef::hnd(addr(0x300000000), DType::F16, b, hkv, nk, d);
  c.out = TensorRef::hnd(addr(0x400000000), DType::F16, b, hq, nq, d);
  return c;
}
bool direct(const Call& c, Arch arch = Arch::Sm90a) {
  return plan::validate_attention(c.q, c.k, c.v, c.out, c.p, arch).direct;
}

// Every kernel the layout of `p` launches (split, and merge when it merges).
void add_kernels(sage2::test::SpecList& list, const DirectProblem& p, Arch arch, const DirectDevice& dev) {
  const DirectLayout l = direct_layout(p, arch, dev);
  list.add(l.split_spec, true);
  list.add(l.merge_spec, true);
}

}  // namespace

TEST_CASE("direct path: split and merge kernels compile for sm_90a and sm_89; default tiles do not spill") {
  sage2::test::SpecList list;
  const int dims[] = {1, 16, 40, 64, 80, 96, 128, 160, 200, 256, 272, 320, 512};
  const std::int64_t rows[] = {1, 4, 24, 64, 512};  // tiles bq 16 / 16 / 32 / 64 / 128
  const CausalMode modes[] = {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight};
  for (int ai = 0; ai < 2; ++ai) {
    const Arch arch = ai ? Arch::Sm89 : Arch::Sm90a;
    const DirectDevice& dev = ai ? kAda : kH100;
    for (int di = 0; di < 13; ++di) {
      const std::int64_t r = rows[(di + ai) % 5];
      const DType dt = ((di % 2) ^ ai) ? DType::BF16 : DType::F16;
      // group 4 where the rows allow it, the queries are rows / group
      const std::int64_t g = r % 4 == 0 ? 4 : 1;
      add_kernels(list, problem(2, 8 * g, 8, r / g, 5000, dims[di], modes[(di + 2 * ai) % 3], dt, (di / 2) % 2 == 1),
                  arch, dev);
    }
  }
  // The scoreboard's decode cells (GQA 32/8, hd 128) on sm_90a, and hd 64.
  for (std::int64_t nq : {1, 16, 128})
    for (int d : {64, 128}) add_kernels(list, problem(4, 32, 8, nq, 8192, d), Arch::Sm90a, kH100);
  // Dedupe (the merge kernel is shared by many problems).
  sage2::test::SpecList unique;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < list.specs.size(); ++i) {
    const std::string k = list.specs[i].key();
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    keys.push_back(k);
    unique.add(list.specs[i], list.main[i]);
  }
  std::vector<std::string> tiles;
  for (const KernelSpec& s : unique.specs)
    if (s.family == KernelFamily::DirectSplit) {
      const std::string t = std::to_string(s.tile.bq) + "." + std::to_string(s.tile.bk) + "." +
                            std::to_string(s.tile.warps) + "." + std::to_string(s.tile.stages);
      if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
    }
  CHECK(tiles.size() >= 5);  // several tile shapes (row warps × key warps, smaller-smem fallbacks)
  sage2::test::compile_and_check(
      unique, "direct split/merge", [](const KernelSpec&) { return false; },
      [](const sage2::test::Outcome& r) {
        if (r.spec.family == KernelFamily::DirectSplit) {
          const int threads = dev::direct_threads(r.spec.tile.warps);
          // The layout assumes 2 CTAs per SM for CTAs of <= 128 threads (__launch_bounds__ min 2).
          const int ctas = threads <= 128 ? 2 : 1;
          CHECK(r.k.facts.registers * threads * ctas <= 65536);
          CHECK(direct_smem_bytes(r.spec) <= std::size_t(232448));
          if (r.spec.arch == Arch::Sm89) CHECK(direct_smem_bytes(r.spec) <= std::size_t(101376));
        } else {
          CHECK(r.k.facts.registers <= 128);  // 8 (4) partials in flight per round
        }
      });
}

TEST_CASE("direct path: the template is arch-neutral — it compiles for sm_80 (Ampere) too") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  std::vector<KernelSpec> specs;
  for (int d : {64, 128, 256}) {
    const DirectLayout l = direct_layout(problem(1, 8, 2, 1, 4096, d, CausalMode::BottomRight, DType::BF16, true),
                                         Arch::Sm89, DirectDevice{108, 166912, 167936});  // A100 shared memory
    specs.push_back(l.split_spec);
    if (d == 128) specs.push_back(l.merge_spec);
  }
  for (const KernelSpec& s : specs) {
    std::vector<std::string> opts = nvrtc_options(s);
    for (auto& o : opts)
      if (o.rfind("--gpu-architecture=", 0) == 0) o = "--gpu-architecture=sm_80";
    const CompiledKernel k = compile(make_build(s, generate_source(s), opts, Toolchain::current()));
    MESSAGE("sm_80 " << s.key() << " regs " << k.facts.registers << " spill " << k.facts.spill_store_bytes << "/"
                     << k.facts.spill_load_bytes);
    CHECK(k.facts.registers > 0);
    CHECK(k.facts.spill_store_bytes == 0);
    CHECK(k.facts.stack_frame_bytes == 0);
  }
}

TEST_CASE("direct path: spec keys name what the code depends on and ignore the quantization options") {
  const DirectProblem p = problem(1, 8, 2, 1, 1000, 128);
  const TileConfig t{16, 64, 4, 3};
  const KernelSpec a = direct_split_spec(p, Arch::Sm90a, t);
  CHECK(a.key().rfind("direct_split|sm_90a|d128|", 0) == 0);
  CHECK(a.entry_name() == "sage2_direct_split");
  CHECK(direct_merge_spec(p, Arch::Sm90a).entry_name() == "sage2_direct_merge");
  KernelSpec b = a;
  b.qk_bits = 4;
  b.smooth_q = true;
  b.smooth_v = true;
  b.two_level_accum = false;
  CHECK(b.key() == a.key());
  std::vector<std::string> keys = {a.key()};
  auto differs = [&](KernelSpec s) {
    const std::string k = s.key();
    CHECK_MESSAGE(std::find(keys.begin(), keys.end(), k) == keys.end(), k);
    keys.push_back(k);
  };
  { KernelSpec s = a; s.causal = CausalMode::TopLeft; differs(s); }
  { KernelSpec s = a; s.causal = CausalMode::BottomRight; differs(s); }
  { KernelSpec s = a; s.return_lse = true; differs(s); }
  { KernelSpec s = a; s.in_dtype = s.out_dtype = DType::BF16; differs(s); }
  { KernelSpec s = a; s.head_dim = 64; differs(s); }
  { KernelSpec s = a; s.tile.stages = 2; differs(s); }
  { KernelSpec s = a; s.arch = Arch::Sm89; differs(s); }
  // the merge kernel has no tile
  KernelSpec m = direct_merge_spec(p, Arch::Sm90a), m2 = m;
  m2.tile = TileConfig{64, 32, 2, 2};
  CHECK(m2.canonical().key() == m.key());
  // validation names the field
  auto refused = [](KernelSpec s, const char* what) {
    try {
      s.validate();
      FAIL("accepted " << s.key());
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, std::string(e.what()));
    }
  };
  { KernelSpec s = a; s.head_dim = 513; refused(s, "head_dim=513"); }
  { KernelSpec s = a; s.tile.bq = 48; refused(s, "bq=48"); }
  { KernelSpec s = a; s.tile.bq = 32; s.tile.warps = 3; refused(s, "warps=3"); }  // 2 row warps
  { KernelSpec s = a; s.tile.bk = 48; refused(s, "bk=48"); }  // 4 key warps need 16 keys each
  { KernelSpec s = a; s.tile.stages = 1; refused(s, "stages=1"); }
}

TEST_CASE("direct path: which calls take the direct path (Auto), and the overrides") {
  using plan::validate_attention;
  // sm_90a, R = Nq · Hq / Hkv rows per kv head (plan/direct_rule.hpp, from measurements): decode
  // and small-Nq shapes take the direct path ...
  CHECK(direct(call(4, 32, 8, 1, 4096, 128)));
  CHECK(direct(call(4, 32, 8, 1, 32768, 128)));
  CHECK(direct(call(4, 32, 8, 16, 4096, 128)));     // R = 64
  CHECK(direct(call(4, 32, 8, 40, 16384, 128)));    // R = 160, any keys
  CHECK(direct(call(4, 32, 8, 64, 16384, 128)));    // R = 256 over Nk >= 2 R
  CHECK(direct(call(1, 8, 1, 16, 100000, 256)));    // MQA, hd 256, R = 128
  CHECK(direct(call(4, 32, 8, 96, 1024, 128)));     // R = 384, a small call: W = 1.6e9
  // ... but R 384-512 over long keys, where the quantize stage pays (measured 1.08-1.18x faster),
  CHECK_FALSE(direct(call(4, 32, 8, 96, 4096, 128)));
  CHECK_FALSE(direct(call(4, 32, 8, 128, 8192, 128)));  // the scoreboard's (128, 8K) decode cell
  CHECK_FALSE(direct(call(4, 32, 8, 129, 8192, 128)));  // R = 516: beyond direct_max_rows
  CHECK_FALSE(direct(call(1, 8, 1, 64, 100000, 256)));   // MQA, R = 512
  // and encoder self-attention from a few hundred tokens unless the call is small: BERT-large and
  // ViT-B at batch 64 quantize, a 4 × 16-head call at N 512 / hd 64 (W = 1.1e9) does not.
  CHECK_FALSE(direct(call(32, 16, 16, 512, 512, 64)));
  CHECK_FALSE(direct(call(64, 12, 12, 256, 256, 64)));
  CHECK(direct(call(64, 12, 12, 128, 128, 64)));
  CHECK(direct(call(4, 16, 16, 512, 512, 64)));
  // ViT-B/16 at N 197 (W <= 2e9): direct for a few heads, quantized from 65536 query rows (session
  // 27: the quantized path 1.08x faster at 384 heads, 1.20-1.26x at 512-768, 0.73x at 192).
  CHECK(direct(call(16, 12, 12, 197, 197, 64)));
  CHECK_FALSE(direct(call(32, 12, 12, 197, 197, 64)));
  CHECK_FALSE(direct(call(32, 16, 16, 197, 197, 64)));
  CHECK_FALSE(direct(call(64, 12, 12, 197, 197, 64)));
  CHECK_FALSE(direct(call(1, 32, 32, 513, 513, 64)));
  CHECK_FALSE(direct(call(4, 32, 32, 1024, 1024, 128)));  // the e2e cells stay quantized
  CHECK_FALSE(direct(call(1, 8, 1, 1, 4096, 257)));  // Auto above hd 256 (not measured): quantized
  CHECK_FALSE(direct(call(1, 8, 8, 1, 4096, 512)));
  // The rule on its numbers: every branch and each bound.
  const std::int64_t many = 1 << 30;  // query rows: the first two branches never look at them
  CHECK(plan::auto_prefers_direct(160, 1, 1e12, many, Arch::Sm90a));
  CHECK_FALSE(plan::auto_prefers_direct(161, 321, 1e12, many, Arch::Sm90a));
  CHECK(plan::auto_prefers_direct(161, 322, 1e12, many, Arch::Sm90a));
  CHECK(plan::auto_prefers_direct(256, 512, 1e12, many, Arch::Sm90a));
  CHECK_FALSE(plan::auto_prefers_direct(257, 1 << 20, 1e12, many, Arch::Sm90a));
  CHECK(plan::auto_prefers_direct(512, 1, 2e9, 65536, Arch::Sm90a));
  CHECK_FALSE(plan::auto_prefers_direct(512, 1, 2e9, 65537, Arch::Sm90a));
  CHECK_FALSE(plan::auto_prefers_direct(512, 1, 2.1e9, 1, Arch::Sm90a));
  CHECK_FALSE(plan::auto_prefers_direct(513, 1, 1, 1, Arch::Sm90a));
  // Other archs: decode-sized R only.
  CHECK(direct(call(4, 32, 8, 16, 4096, 128), Arch::Sm89));   // R = 64
  CHECK_FALSE(direct(call(4, 32, 8, 17, 4096, 128), Arch::Sm89));
  CHECK(plan::direct_max_rows(Arch::Sm90a) == 512);
  CHECK(plan::direct_max_rows(Arch::Sm89) == 64);

  // Masks stay quantized on Auto; Direct with a mask is refused.
  Call m = call(1, 8, 2, 1, 4096, 128);
  m.p.mask.data = addr(0x500000000);
  m.p.mask.type = MaskType::Bool;
  m.p.mask.stride_k = 1;
  CHECK_FALSE(direct(m));
  m.p.small_q_path = SmallQPath::Direct;
  try {
    validate_attention(m.q, m.k, m.v, m.out, m.p, Arch::Sm90a);
    FAIL("Direct with a mask accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("small_q_path=direct") != std::string::npos);
  }
  // Overrides.
  Call c = call(4, 32, 8, 1, 4096, 128);
  c.p.small_q_path = SmallQPath::Quantized;
  CHECK_FALSE(direct(c));
  Call big = call(2, 8, 8, 4000, 4000, 64);
  CHECK_FALSE(direct(big));
  big.p.small_q_path = SmallQPath::Direct;
  CHECK(direct(big));
  CHECK(direct(big, Arch::Sm89));
  // Head dims above 256 run on the direct path when asked (O's channels in parts), not on Auto.
  Call wide = call(1, 8, 8, 1, 64, 320);
  CHECK_FALSE(direct(wide));
  wide.p.small_q_path = SmallQPath::Direct;
  CHECK(direct(wide));
  Call widest = call(1, 8, 8, 1, 64, 512);
  widest.p.small_q_path = SmallQPath::Direct;
  CHECK(direct(widest));
  for (int bad : {-1, 3, 100}) {
    Call x = call(1, 8, 2, 1, 64, 64);
    x.p.small_q_path = static_cast<SmallQPath>(bad);
    try {
      validate_attention(x.q, x.k, x.v, x.out, x.p, Arch::Sm90a);
      FAIL("small_q_path=" << bad << " accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find("params.small_q_path=" + std::to_string(bad)) != std::string::npos);
    }
  }
  // Varlen never takes it; Direct with varlen is refused.
  Call vl = call(2, 8, 2, 4, 64, 64);
  SeqLens lens;
  lens.batch = 2;
  lens.kv_lens = reinterpret_cast<const std::int32_t*>(0x600000000);
  CHECK_FALSE(plan::validate_attention_varlen(vl.q, vl.k, vl.v, vl.out, lens, vl.p, Arch::Sm90a).direct);
  vl.p.small_q_path = SmallQPath::Direct;
  CHECK_THROWS_WITH_AS(plan::validate_attention_varlen(vl.q, vl.k, vl.v, vl.out, lens, vl.p, Arch::Sm90a),
                       doctest::Contains("small_q_path=direct"), Error);
  // The names.
  CHECK(std::string(small_q_path_name(SmallQPath::Auto)) == "auto");
  CHECK(std::string(small_q_path_name(SmallQPath::Quantized)) == "quantized");
  CHECK(std::string(small_q_path_name(SmallQPath::Direct)) == "direct");
}

TEST_CASE("direct path: the C ABI passes small_q_path through; sage2_attention_params_init sets auto") {
  sage2_attention_params p;
  p.small_q_path = 7;
  sage2_attention_params_init(&p);
  CHECK(p.small_q_path == SAGE2_SMALL_Q_AUTO);
  const sage2_tensor q = sage2_tensor_hnd(addr(0x100000000), SAGE2_DTYPE_F16, 1, 4, 1, 320);
  const sage2_tensor k = sage2_tensor_hnd(addr(0x200000000), SAGE2_DTYPE_F16, 1, 4, 64, 320);
  const sage2_tensor v = sage2_tensor_hnd(addr(0x300000000), SAGE2_DTYPE_F16, 1, 4, 64, 320);
  const sage2_tensor o = sage2_tensor_hnd(addr(0x400000000), SAGE2_DTYPE_F16, 1, 4, 1, 320);
  CHECK(sage2_validate_attention_args(&q, &k, &v, &o, &p, Arch::Sm90a) == SAGE2_OK);  // hd 320: quantized
  p.small_q_path = SAGE2_SMALL_Q_DIRECT;
  CHECK(sage2_validate_attention_args(&q, &k, &v, &o, &p, Arch::Sm90a) == SAGE2_OK);  // the direct path runs hd 320
  p.small_q_path = SAGE2_SMALL_Q_QUANTIZED;
  CHECK(sage2_validate_attention_args(&q, &k, &v, &o, &p, Arch::Sm90a) == SAGE2_OK);
  for (int bad : {-1, 3, INT32_MAX}) {
    p.small_q_path = bad;
    CHECK(sage2_validate_attention_args(&q, &k, &v, &o, &p, Arch::Sm90a) == SAGE2_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(sage2_last_error()).find("params.small_q_path=" + std::to_string(bad)) != std::string::npos);
  }
}

TEST_CASE("direct path: tile, splits, workspace and launch shapes of the scoreboard cells on the H100") {
  struct Cell {
    std::int64_t nq, nk;
    int bq, key_warps, splits, partials;
  };
  // GQA 32/8, hd 128, B 4: B·Hkv = 32 (row blocks) CTAs before splitting; 2 CTAs per SM of 4 warps
  // (109 KB of shared memory each) → 264 slots → 8 splits; 64 rows: 1 CTA per SM (122 KB) → 4.
  const Cell cells[] = {{1, 4096, 16, 4, 8, 32}, {1, 32768, 16, 4, 8, 32}, {16, 4096, 64, 1, 4, 4},
                        {128, 8192, 128, 1, 1, 1}, {1, 1024, 16, 4, 4, 16}, {1, 131072, 16, 4, 8, 32}};
  for (const Cell& c : cells) {
    CAPTURE(c.nq);
    CAPTURE(c.nk);
    const DirectProblem p = problem(4, 32, 8, c.nq, c.nk, 128, CausalMode::None, DType::F16, true);
    const DirectLayout l = direct_layout(p, Arch::Sm90a, kH100);
    CHECK(l.split_spec.tile.bq == c.bq);
    CHECK(l.key_warps == c.key_warps);
    CHECK(l.splits == c.splits);
    CHECK(l.partials == c.partials);
    const std::int64_t tiles = (c.nk + l.split_spec.tile.bk - 1) / l.split_spec.tile.bk;
    CHECK(static_cast<std::int64_t>(l.splits) * l.tiles_per_split >= tiles);  // every tile in a split
    CHECK(static_cast<std::int64_t>(l.splits - 1) * l.tiles_per_split < tiles);  // no empty split
    // One wave: every CTA resident at once.
    CHECK(std::int64_t(l.split_shape.grid[0]) * l.split_shape.grid[1] * l.split_shape.grid[2] <=
          std::int64_t(132) * l.ctas_per_sm);
    CHECK(l.split_shape.grid[1] == 8);
    CHECK(l.split_shape.grid[2] == 4);
    CHECK(l.split_shape.block[0] == unsigned(l.threads));
    CHECK(l.split_shape.dynamic_smem == l.smem);
    CHECK(l.smem <= std::size_t(kH100.max_smem_optin));
    const std::size_t parts = std::size_t(4 * 8) * l.partials * std::size_t(l.rows);
    if (l.merge()) {
      CHECK(l.ml_offset >= parts * 128 * 4);
      CHECK(l.ml_offset % 256 == 0);
      CHECK(l.workspace_bytes >= l.ml_offset + parts * 8);
      CHECK(l.workspace_bytes < l.ml_offset + parts * 8 + 256);
      CHECK(l.merge_shape.grid[0] == (4u * 32u * unsigned(c.nq) + 3u) / 4u);
      CHECK(l.merge_shape.block[0] == 128u);
    } else {
      CHECK(l.workspace_bytes == 0);
    }
    MESSAGE("Nq " << c.nq << " Nk " << c.nk << ": tile bq" << l.split_spec.tile.bq << ".bk" << l.split_spec.tile.bk
                  << ".w" << l.split_spec.tile.warps << ".s" << l.split_spec.tile.stages << ", " << l.ctas_per_sm
                  << " CTAs/SM, " << l.splits << " splits x " << l.tiles_per_split << " tiles, " << l.partials
                  << " partials, workspace " << l.workspace_bytes << " B, smem " << l.smem << " B");
  }
  // Short keys: few splits (at least kDirectMinTilesPerSplit tiles each), none at all below that.
  CHECK(direct_layout(problem(4, 32, 8, 1, 200, 128), Arch::Sm90a, kH100).splits == 1);
  CHECK(direct_layout(problem(4, 32, 8, 1, 1, 128), Arch::Sm90a, kH100).splits == 1);
  // Many (batch, kv head) pairs fill the device alone: no split.
  CHECK(direct_layout(problem(64, 32, 8, 1, 65536, 128), Arch::Sm90a, kH100).splits == 1);
  // Causal top-left with Nq << Nk: only min(Nq, Nk) keys are visible to anyone.
  {
    const DirectLayout l = direct_layout(problem(1, 8, 8, 3, 100000, 64, CausalMode::TopLeft), Arch::Sm90a, kH100);
    CHECK(l.kv_limit == 3);
    CHECK(l.causal_offset == 0);
    CHECK(l.splits == 1);
  }
  {
    const DirectLayout l = direct_layout(problem(1, 8, 8, 3, 1000, 64, CausalMode::BottomRight), Arch::Sm90a, kH100);
    CHECK(l.kv_limit == 1000);
    CHECK(l.causal_offset == 997);
  }
  {  // q_len > kv_len, bottom-right: the first rows see nothing, the limit is still kv_len
    const DirectLayout l = direct_layout(problem(1, 8, 8, 50, 17, 64, CausalMode::BottomRight), Arch::Sm90a, kH100);
    CHECK(l.kv_limit == 17);
    CHECK(l.causal_offset == -33);
  }
  // Large forced problems: one split, one key warp → no workspace, no merge.
  {
    const DirectLayout l = direct_layout(problem(2, 16, 4, 8192, 8192, 128), Arch::Sm90a, kH100);
    CHECK(l.partials == 1);
    CHECK(l.workspace_bytes == 0);
    CHECK_FALSE(l.merge());
  }
  // Smaller shared memory (sm_89): the tile shrinks to fit; hd 256 at 128 rows falls back to 64.
  for (int d : {64, 128, 256})
    for (std::int64_t nq : {1, 8, 16, 128}) {
      const DirectLayout l = direct_layout(problem(1, 32, 8, nq, 4096, d), Arch::Sm89, kAda);
      CAPTURE(d);
      CAPTURE(nq);
      CHECK(l.smem <= std::size_t(kAda.max_smem_optin));
    }
  CHECK(direct_layout(problem(1, 32, 8, 128, 4096, 256), Arch::Sm89, kAda).split_spec.tile.bq == 64);
  // Heads above 256: O's channels in direct_o_parts CTAs (2 up to 512), which the grid's x counts
  // (x = part + parts · (row block + row blocks · split)) and the one-wave split choice too.
  CHECK(dev::direct_o_parts(256) == 1);
  CHECK(dev::direct_o_part_dim(256) == 256);
  CHECK(dev::direct_o_parts(272) == 2);
  CHECK(dev::direct_o_part_dim(272) == 144);  // a multiple of 16; the second part stops at 272
  CHECK(dev::direct_o_parts(320) == 2);
  CHECK(dev::direct_o_part_dim(320) == 160);
  CHECK(dev::direct_o_parts(512) == 2);
  CHECK(dev::direct_o_part_dim(512) == 256);
  for (int d : {320, 512}) {
    const DirectLayout l = direct_layout(problem(4, 32, 8, 1, 8192, d), Arch::Sm90a, kH100);
    CAPTURE(d);
    CHECK(l.split_shape.grid[0] == unsigned(2 * l.row_blocks * l.splits));
    CHECK(std::int64_t(l.split_shape.grid[0]) * l.split_shape.grid[1] * l.split_shape.grid[2] <=
          std::int64_t(132) * l.ctas_per_sm);
    CHECK(l.smem <= std::size_t(kH100.max_smem_optin));
    CHECK(direct_layout(problem(1, 32, 8, 128, 4096, d), Arch::Sm89, kAda).smem <= std::size_t(kAda.max_smem_optin));
  }
  // Limits.
  CHECK_THROWS_AS(direct_default_tile(513, 4, 232448), Error);
  CHECK_THROWS_AS(direct_default_tile(128, 4, 20000), Error);
}

TEST_CASE("direct path: a direct call plan skips the quantize stage; its parameters carry the call's pointers") {
  Call c = call(2, 8, 2, 3, 5000, 96);
  c.p.causal = CausalMode::BottomRight;
  c.p.lse = reinterpret_cast<float*>(0x700000000);
  const plan::AttentionProblem prob = plan::validate_attention(c.q, c.k, c.v, c.out, c.p, Arch::Sm90a);
  REQUIRE(prob.direct);
  runtime::CallPlan plan;
  runtime::layout_direct_call_plan(prob, Arch::Sm90a, kH100, plan);
  CHECK(plan.quantize.empty());
  CHECK(plan.quant_bytes == 0);
  CHECK(plan.delta_s_bytes == 0);
  CHECK(plan.total() == plan.direct_stage.layout.workspace_bytes);
  CHECK(plan.total() > 0);  // 12 rows per kv head: 4 key warps, so partials are merged
  CHECK(plan.spec.family == KernelFamily::DirectSplit);

  char* ws = reinterpret_cast<char*>(0x800000000);
  runtime::CallParams cp;
  runtime::build_call_params(plan, c.q, c.k, c.v, c.out, c.p.lse, ws, cp);
  const dev::DirectParams& d = cp.direct;
  CHECK(d.q == c.q.data);
  CHECK(d.k == c.k.data);
  CHECK(d.v == c.v.data);
  CHECK(d.out == c.out.data);
  CHECK(d.lse == c.p.lse);
  CHECK(reinterpret_cast<char*>(d.part_o) == ws);
  CHECK(reinterpret_cast<char*>(d.part_ml) == ws + plan.direct_stage.layout.ml_offset);
  CHECK(d.q_sn == 96);
  CHECK(d.k_sh == 5000 * 96);
  CHECK(d.o_sb == 8 * 3 * 96);
  CHECK(d.group == 4);
  CHECK(d.rows == 12);
  CHECK(d.kv_len == 5000);
  CHECK(d.causal_offset == 4997);
  CHECK(d.vec_mask == 7u);
  CHECK(d.scale_log2 == doctest::Approx(1.4426950408889634 / std::sqrt(96.0)).epsilon(1e-6));
  CHECK(cp.attention.attention.empty());

  // Rows that are not 16-byte aligned take element loads: an NHD view with an odd head count.
  Call u = c;
  u.k = TensorRef::nhd(addr(0x200000000), DType::F16, 2, 2, 5000, 96);
  u.k.stride_seq = 2 * 96 + 4;  // padded token stride, not a multiple of 8 elements
  u.v = TensorRef::hnd(addr(0x300000008), DType::F16, 2, 2, 5000, 96);  // base 8-byte aligned
  runtime::build_call_params(plan, u.q, u.k, u.v, u.out, u.p.lse, ws, cp);
  CHECK(cp.direct.vec_mask == 1u);
  CHECK(direct_rows_16b_aligned(u.q));
  CHECK_FALSE(direct_rows_16b_aligned(u.k));
  CHECK_FALSE(direct_rows_16b_aligned(u.v));

  // Errors: a merging plan without workspace, a mask or lengths on a direct plan.
  CHECK_THROWS_AS(runtime::build_call_params(plan, c.q, c.k, c.v, c.out, c.p.lse, nullptr, cp), Error);
  SeqLens lens;
  lens.batch = 2;
  CHECK_THROWS_AS(runtime::build_call_params(plan, c.q, c.k, c.v, c.out, c.p.lse, ws, cp, &lens), Error);
}
