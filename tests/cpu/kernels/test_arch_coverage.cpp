// Specification (CPU / CI) of GPU coverage (issue 23, DESIGN.md "GPU coverage"):
//  - the arch table: every compute capability sage2 generates code for, its names, its path
//    (QK code width, P̃V precision, family) and what the families run there;
//  - device → code target: a cc of the table gets its own cubins, a newer one PTX of the newest
//    arch it can run (with a notice), an older one (< 8.0) a clear Unsupported error; an NVRTC too
//    old for the device falls back to PTX it knows; a requested target (ContextOptions::target_arch
//    / SAGE2_TARGET_ARCH) is PTX unless native, refused when the device cannot run it;
//  - every kernel family NVRTC-compiles for sm_80, sm_86, sm_89, sm_90a, sm_100 and sm_120 (quantize
//    ops incl. FP16 V̂, ΔS, mma attention with FP8 and FP16 P̃V and INT4 where the arch has it,
//    wgmma where it applies) and the default tiles do not spill; the PTX form compiles too;
//  - the FP16 V̂ layout (slot order, code bytes, buffer sizes, the quantize tile at wide heads);
//  - fp16 accumulation of P̃V (pv_acc16, issue 31) compiles for every arch that offers it (FP16
//    P̃V on sm_80/86/87, FP8 and FP16 on sm_89/100/103/120/121), cubin and PTX, with the
//    f16-accumulator mma in its code and no fp32-accumulating P̃V mma.
#include <doctest/doctest.h>

#include "jit_test_support.hpp"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kernels/attention_family.hpp"
#include "jit/compiler.hpp"
#include "kernels/family_mma.hpp"
#include "kernels/quantize_shape.hpp"
#include "kernels/quant_buffers.hpp"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

// The archs CI compiles every family for (the issue's list: one per path and smem size).
const Arch kCiArchs[] = {Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90a, Arch::Sm100, Arch::Sm120};

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

KernelSpec attention(Arch arch, int head_dim, int bits, bool pv16, CausalMode causal, DType dtype,
                     TileConfig tile = TileConfig{64, 64, 4, 2}) {
  KernelSpec s;
  s.family = KernelFamily::AttentionMma;
  s.consumer = s.family;
  s.arch = arch;
  s.head_dim = head_dim;
  s.qk_bits = bits;
  s.smooth_q = bits == 4;
  s.pv_fp16 = pv16;
  s.causal = causal;
  s.in_dtype = s.out_dtype = dtype;
  s.return_lse = true;
  s.tile = tile;
  return s;
}

}  // namespace

TEST_CASE("arch table: names, compute capabilities and what each arch offers") {
  std::set<int> ccs;
  int last = 0;
  for (const ArchInfo& a : arch_table()) {
    CAPTURE(a.name);
    CHECK(a.cc > last);  // compute capability order
    last = a.cc;
    CHECK(ccs.insert(a.cc).second);
    CHECK(std::string(arch_name(a.arch)) == a.name);
    CHECK(arch_cc(a.arch) == a.cc);
    CHECK(parse_arch(a.name) == a.arch);
    CHECK(parse_arch("compute_" + std::to_string(a.cc)) == a.arch);
    CHECK(default_qk_bits(a.arch) == 8);  // 8-bit QK on every arch; 4-bit only when asked
    CHECK(default_pv_fp16(a.arch) == (a.cc < 89));  // FP16 P̃V where FP8 does not exist
    CHECK(a.fp8_pv == (a.cc >= 89));
    CHECK(a.int4 == (a.cc < 100));  // no INT4 mma on Blackwell
    CHECK(a.arch_specific == (a.arch == Arch::Sm90a));
    CHECK(a.max_smem_optin >= 99 * 1024);
    CHECK_FALSE(arch_path(a.arch).empty());
  }
  for (int cc : {80, 86, 87, 89, 90, 100, 103, 120, 121}) CHECK(ccs.count(cc));
  CHECK(arch_path(Arch::Sm80).find("FP16 P̃V") != std::string::npos);
  CHECK(arch_path(Arch::Sm80).find("INT4 opt-in") != std::string::npos);
  CHECK(arch_path(Arch::Sm89).find("FP8 P̃V") != std::string::npos);
  CHECK(arch_path(Arch::Sm90a).find("wgmma") != std::string::npos);
  CHECK(arch_path(Arch::Sm120).find("INT4") == std::string::npos);
  CHECK(arch_path(Arch::Sm120).find("mma family") != std::string::npos);
  MESSAGE("arch table:");
  for (const ArchInfo& a : arch_table()) MESSAGE("  " << std::string(a.name) << " (" << std::string(a.gpus) << "): " << arch_path(a.arch));
}

TEST_CASE("arch table: the families and the default family of each path") {
  const AttentionFamilyDesc& mma = attention_family(KernelFamily::AttentionMma);
  const AttentionFamilyDesc& wg = attention_family(KernelFamily::AttentionWgmma);
  for (const ArchInfo& a : arch_table()) {
    CAPTURE(a.name);
    // FP16 P̃V runs everywhere, on the mma family
    CHECK(family_runs(mma, a.arch, 8, 128, true));
    CHECK(default_attention_family(a.arch, 8, 128, true) == KernelFamily::AttentionMma);
    CHECK_FALSE(family_runs(wg, a.arch, 8, 128, true));
    CHECK(family_runs(mma, a.arch, 8, 128, false) == a.fp8_pv);
    CHECK(family_runs(mma, a.arch, 4, 128, default_pv_fp16(a.arch)) == a.int4);
    CHECK(family_runs(wg, a.arch, 8, 128, false) == (a.arch == Arch::Sm90a));
    const KernelFamily def = default_attention_family(a.arch, 8, 128);
    CHECK(def == (a.arch == Arch::Sm90a ? KernelFamily::AttentionWgmma : KernelFamily::AttentionMma));
  }
  // wgmma: 8-bit FP8 up to head dim 256; the mma family takes the rest on Hopper
  CHECK(default_attention_family(Arch::Sm90a, 8, 512, false) == KernelFamily::AttentionMma);
  CHECK(default_attention_family(Arch::Sm90a, 4, 128, false) == KernelFamily::AttentionMma);
  // spec rules: FP8 P̃V on Ampere, INT4 on Blackwell and FP16 on wgmma are refused by validate()
  KernelSpec s = attention(Arch::Sm86, 128, 8, false, CausalMode::None, DType::F16);
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("FP8 P̃V"), Error);
  s.pv_fp16 = true;
  CHECK_NOTHROW(s.validate());
  CHECK_THROWS_WITH_AS(quantize_spec_for(attention(Arch::Sm80, 64, 8, false, CausalMode::None, DType::F16),
                                         QuantOp::QuantizeV)
                           .validate(),
                       doctest::Contains("FP8 P̃V"), Error);
  CHECK_NOTHROW(quantize_spec_for(attention(Arch::Sm80, 64, 8, false, CausalMode::None, DType::F16), QuantOp::QuantizeK)
                    .validate());  // K/Q/statistics do not touch V̂
  s = attention(Arch::Sm120, 128, 4, false, CausalMode::None, DType::F16);
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("INT4"), Error);
  s = attention(Arch::Sm90a, 128, 8, true, CausalMode::None, DType::F16);
  s.family = s.consumer = KernelFamily::AttentionWgmma;
  s.tile = TileConfig{64, 128, 4, 2};
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("FP8 P̃V only"), Error);
}

TEST_CASE("code target: device compute capability → arch, cubin or PTX") {
  struct Row {
    int cc;
    Arch arch;
    bool ptx;
  };
  for (const Row& r : {Row{80, Arch::Sm80, false}, Row{86, Arch::Sm86, false}, Row{87, Arch::Sm87, false},
                       Row{88, Arch::Sm87, true}, Row{89, Arch::Sm89, false}, Row{90, Arch::Sm90a, false},
                       Row{91, Arch::Sm89, true},  // a hypothetical 9.1: sm_90a code runs on 9.0 only
                       Row{100, Arch::Sm100, false}, Row{101, Arch::Sm100, true}, Row{103, Arch::Sm103, false},
                       Row{110, Arch::Sm103, true}, Row{120, Arch::Sm120, false}, Row{121, Arch::Sm121, false},
                       Row{130, Arch::Sm121, true}, Row{200, Arch::Sm121, true}}) {
    CAPTURE(r.cc);
    const CodeTarget t = code_target(r.cc);
    CHECK(t.arch == r.arch);
    CHECK(t.ptx == r.ptx);
    CHECK(t.note.empty() == !r.ptx);
    if (r.cc > 121) CHECK(contains(t.note, "newer than sage2's arch table"));
    if (r.ptx) CHECK(contains(t.note, "compute_" + std::to_string(arch_cc(r.arch)) + " PTX"));
  }
  for (int cc : {75, 70, 61, 0}) {
    CAPTURE(cc);
    try {
      (void)code_target(cc);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(contains(e.what(), "8.0"));
      CHECK(contains(e.what(), "sm_80"));
      CHECK(contains(e.what(), "sm_120"));
    }
  }
}

TEST_CASE("code target: an NVRTC too old for the device falls back to PTX it knows") {
  const std::vector<int> cuda124 = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};
  const std::vector<int> cuda128 = {75, 80, 86, 87, 89, 90, 100, 101, 120};
  CodeTarget t = code_target(120, cuda124);  // RTX 50 with CUDA 12.4's NVRTC
  CHECK(t.arch == Arch::Sm89);               // the INT8 + FP8 mma path, as compute_89 PTX (not sm_90a)
  CHECK(t.ptx);
  CHECK(contains(t.note, "cannot compile for sm_120"));
  CHECK(contains(t.note, "12.8"));
  t = code_target(100, cuda124);
  CHECK(t.arch == Arch::Sm89);
  CHECK(t.ptx);
  t = code_target(103, cuda128);  // B300 with CUDA 12.8 (sm_103 came in 12.9)
  CHECK(t.arch == Arch::Sm100);
  CHECK(t.ptx);
  t = code_target(90, cuda124);
  CHECK(t.arch == Arch::Sm90a);
  CHECK_FALSE(t.ptx);
  t = code_target(86, cuda124);
  CHECK(t.arch == Arch::Sm86);
  CHECK_FALSE(t.ptx);
  CHECK_THROWS_AS(code_target(86, std::vector<int>{75}), Error);  // nothing the device can run
}

TEST_CASE("code target: a requested target arch is PTX, refused when the device cannot run it") {
  CodeTarget t = code_target(90, {}, Arch::Sm80);
  CHECK(t.arch == Arch::Sm80);
  CHECK(t.ptx);
  CHECK(contains(t.note, "compute_80"));
  t = code_target(90, {}, Arch::Sm89);
  CHECK(t.arch == Arch::Sm89);
  CHECK(t.ptx);
  t = code_target(90, {}, Arch::Sm90a);  // the device's own: native cubins
  CHECK(t.arch == Arch::Sm90a);
  CHECK_FALSE(t.ptx);
  CHECK(t.note.empty());
  t = code_target(120, {}, Arch::Sm89);
  CHECK(t.ptx);
  for (const auto& pair : {std::pair{90, Arch::Sm100}, std::pair{90, Arch::Sm120}, std::pair{89, Arch::Sm90a},
                           std::pair{100, Arch::Sm90a}, std::pair{86, Arch::Sm89}}) {
    // Plain locals: clang before 16 cannot capture structured bindings in CAPTURE's lambda.
    const int cc = pair.first;
    const Arch want = pair.second;
    CAPTURE(cc);
    CAPTURE(arch_name(want));
    try {
      (void)code_target(cc, {}, want);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(contains(e.what(), arch_name(want)));
      CHECK(contains(e.what(), "cannot run"));
    }
  }
  CHECK_THROWS_WITH_AS(code_target(90, std::vector<int>{75, 80, 86, 90}, Arch::Sm89), doctest::Contains("NVRTC"),
                       Error);
}

TEST_CASE("FP16 V̂: the slot order is the m16n8k16 fragment's, codes take two bytes") {
  KernelSpec s = attention(Arch::Sm80, 128, 8, true, CausalMode::None, DType::F16);
  const QuantLayout l = quant_layout(s);
  CHECK(l.v_fp16);
  CHECK(l.v_permuted());
  for (int t = 0; t < 4; ++t)
    for (int e = 0; e < 2; ++e) {
      CHECK(l.v_key_of_slot(2 * t + e) == 4 * t + e);
      CHECK(l.v_key_of_slot(8 + 2 * t + e) == 4 * t + 2 + e);
    }
  for (int key = 0; key < 64; ++key) {
    CHECK(l.v_key_of_slot(l.v_slot(key)) == key);
    CHECK(l.v_slot(key) / 16 == key / 16);
  }
  const QuantBuffers b16 = quant_buffers(QuantProblem{{2, 4, 2, 100, 300, 128}}, s);
  s.pv_fp16 = false;
  s.arch = Arch::Sm89;
  const QuantBuffers b8 = quant_buffers(QuantProblem{{2, 4, 2, 100, 300, 128}}, s);
  CHECK(b16.v_codes() == 2 * b8.v_codes());  // bytes
  CHECK_FALSE(quant_layout(s).v_permuted());
  // the quantize_v tile keeps its codes within 48 KiB of static shared memory
  CHECK(quantize_v_tile(64, 128, true) == 64);
  CHECK(quantize_v_tile(64, 352, true) == 64);
  CHECK(quantize_v_tile(64, 384, true) == 32);
  CHECK(quantize_v_tile(64, 512, true) == 32);
  CHECK(quantize_v_tile(64, 512, false) == 64);
  CHECK(quantize_v_tile(32, 512, true) == 32);
  // keys: pv16 and ptx appear only when set
  KernelSpec a = attention(Arch::Sm80, 64, 8, true, CausalMode::None, DType::F16);
  CHECK(contains(a.key(), "|pv16"));
  CHECK_FALSE(contains(a.key(), "|ptx"));
  a.ptx = true;
  CHECK(contains(a.key(), "|pv16|ptx"));
  CHECK_FALSE(contains(quantize_spec_for(a, QuantOp::QuantizeK).key(), "pv16"));  // K does not read V̂
  CHECK(contains(quantize_spec_for(a, QuantOp::QuantizeV).key(), "pv16"));
  CHECK(contains(quantize_spec_for(a, QuantOp::Fused).key(), "pv16"));
  CHECK(contains(quantize_spec_for(a, QuantOp::QuantizeK).key(), "|ptx"));
  // options: PTX specs name the virtual arch and run no ptxas
  const auto o = nvrtc_options(a);
  CHECK(o[0] == "--gpu-architecture=compute_80");
  CHECK(std::find(o.begin(), o.end(), "--ptxas-options=-v") == o.end());
  a.ptx = false;
  CHECK(nvrtc_options(a)[0] == "--gpu-architecture=sm_80");
  a.arch = Arch::Sm90a;
  CHECK(nvrtc_options(a)[0] == "--gpu-architecture=sm_90a");
  // shared memory: the V̂ rows of the FP16 path are 2·bk + 16 bytes
  const KernelSpec m16 = attention(Arch::Sm86, 128, 8, true, CausalMode::None, DType::F16);
  CHECK(mma_kernel_config(m16).smem == std::size_t(64 * 144 + 2 * (64 * 144 + 128 * 144 + 16)));
  const KernelSpec m8 = attention(Arch::Sm89, 128, 8, false, CausalMode::None, DType::F16);
  CHECK(mma_kernel_config(m8).smem == std::size_t(64 * 144 + 2 * (64 * 144 + 128 * 80 + 16)));
}

TEST_CASE("every family compiles for sm_80, 86, 89, 90a, 100 and 120; the default tiles do not spill") {
  // Per arch: the mma attention at the default tile for head dims 64/128 (f16 and bf16, causal
  // and not) with FP16 P̃V everywhere, FP8 where the arch has it, INT4 (smooth Q → ΔS) where it
  // has it, an odd head dim; the quantize ops feeding them (FP16 and FP8 V̂), fused; ΔS; the mask
  // tiles; wgmma and the cluster stage on sm_90a. Main = the default tile (no spills allowed).
  sage2::test::SpecList list;
  const TileConfig def{64, 64, 4, 2};
  for (Arch arch : kCiArchs) {
    const ArchInfo& ai = arch_info(arch);
    std::vector<KernelSpec> attn;
    for (bool pv16 : {true, false}) {
      if (!pv16 && !ai.fp8_pv) continue;
      attn.push_back(attention(arch, 64, 8, pv16, CausalMode::TopLeft, DType::F16, def));
      attn.push_back(attention(arch, 128, 8, pv16, CausalMode::None, DType::BF16, def));
    }
    if (ai.int4) {
      const KernelSpec a4 = attention(arch, 128, 4, default_pv_fp16(arch), CausalMode::BottomRight, DType::F16, def);
      attn.push_back(a4);
      list.add(quantize_spec_for(a4, QuantOp::QuantizeQ), true);  // 4-bit codes, smooth Q
      list.add(delta_s_spec_for(a4), true);
    }
    for (const KernelSpec& a : attn) list.add(a, true);
    // an odd head dim on another tile (not a default: may spill; on sm_100 ptxas keeps it at 128
    // registers with an 8-byte spill)
    list.add(attention(arch, 72, 8, true, CausalMode::BottomRight, DType::BF16, TileConfig{128, 64, 8, 2}), false);
    // the quantize ops and ΔS of the defaults (FP16 and, where there is one, FP8 V̂)
    for (const KernelSpec& a : {attn[0], attn[1]}) {
      for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV,
                         QuantOp::Fused})
        list.add(quantize_spec_for(a, op), true);
    }
    KernelSpec wide = attention(arch, 512, 8, true, CausalMode::None, DType::F16, TileConfig{64, 64, 4, 1});
    list.add(quantize_spec_for(wide, QuantOp::QuantizeV), true);  // FP16 V̂ at 32 rows a tile
    KernelSpec masked = attn[0];
    masked.mask = 1;
    list.add(quantize_spec_for(masked, QuantOp::MaskTiles), true);
    KernelSpec sq = attention(arch, 128, 8, true, CausalMode::None, DType::F16, def);
    sq.smooth_q = true;
    list.add(delta_s_spec_for(sq), true);
    if (arch == Arch::Sm90a) {
      KernelSpec w = attention(arch, 128, 8, false, CausalMode::None, DType::F16, TileConfig{64, 128, 4, 2});
      w.family = w.consumer = KernelFamily::AttentionWgmma;
      w.tile = attention_family(KernelFamily::AttentionWgmma).default_tile(w, ai.max_smem_optin);
      list.add(w, true);
      list.add(quantize_spec_for(w, QuantOp::QuantizeV), true);
      list.add(quantize_spec_for(w, QuantOp::Cluster), true);
    }
  }
  // dedupe (the canonical keys of several quantize ops coincide)
  sage2::test::SpecList unique;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < list.specs.size(); ++i)
    if (seen.insert(list.specs[i].canonical().key()).second) unique.add(list.specs[i], list.main[i]);
  std::set<Arch> archs_done;
  // The one known exception: ptxas for sm_120/121 (CUDA 13.0) allocates 128 registers to the FP16
  // P̃V kernel with LSE and no causal mask and spills 16 bytes (129-130 registers and no spill with
  // a causal mask, without LSE, or with --register-usage-level=2). Bounded below, reported here.
  auto blackwell_fp16_lse = [](const KernelSpec& s) {
    return arch_cc(s.arch) >= 120 && s.pv_fp16 && s.return_lse && s.causal == CausalMode::None &&
           s.family == KernelFamily::AttentionMma;
  };
  sage2::test::compile_and_check(
      unique, "arch-coverage", blackwell_fp16_lse,
      [&](const sage2::test::Outcome& r) {
        if (blackwell_fp16_lse(r.spec)) {
          CHECK(r.k.facts.spill_store_bytes <= 32);
          if (r.k.facts.spill_store_bytes > 0)
            MESSAGE("known ptxas spill (sm_12x, FP16 P̃V, LSE): " << r.k.facts.spill_store_bytes << " bytes, " << r.spec.key());
        }
        archs_done.insert(r.spec.arch);
        if (const AttentionFamilyDesc* f = find_attention_family(r.spec.family))
          CHECK(static_cast<long long>(r.k.facts.registers) * f->kernel_config(r.spec).threads <= 65536);
        // no e4m3 instruction where the arch has none (the FP16 path never emits one)
        if (!arch_info(r.spec.arch).fp8_pv) CHECK_FALSE(contains(r.k.log, "e4m3"));
      });
  CHECK(archs_done.size() == std::size(kCiArchs));
}

TEST_CASE("pv_acc16: fp16 P̃V accumulation compiles on every arch that offers it; default tiles do not spill") {
  // the archs NVRTC knows (sm_103 / sm_121 need CUDA 12.9; reported when skipped)
  const std::vector<int> known = jit::nvrtc_supported_archs();
  auto knows = [&](Arch a) { return known.empty() || std::find(known.begin(), known.end(), arch_cc(a)) != known.end(); };
  sage2::test::SpecList list;
  const TileConfig def{64, 64, 4, 2};
  std::set<Arch> expected;
  for (const ArchInfo& ai : arch_table()) {
    if (!ai.pv_acc16) continue;
    if (!knows(ai.arch)) {
      MESSAGE("NVRTC does not know " << ai.name << ": its pv_acc16 kernels are not compiled here");
      continue;
    }
    expected.insert(ai.arch);
    for (bool pv16 : {false, true}) {
      if (!pv16 && !ai.fp8_pv) continue;
      KernelSpec a = attention(ai.arch, 128, 8, pv16, CausalMode::None, DType::F16, def);
      a.pv_acc16 = true;
      list.add(a, true);
      list.add(quantize_spec_for(a, QuantOp::QuantizeV), true);
      list.add(quantize_spec_for(a, QuantOp::Fused), true);
      KernelSpec b = attention(ai.arch, 64, 8, pv16, CausalMode::TopLeft, DType::BF16, def);
      b.pv_acc16 = true;
      list.add(b, true);
      // bk 128: two 64-key segments per tile (not a default tile)
      KernelSpec c = attention(ai.arch, 128, 8, pv16, CausalMode::BottomRight, DType::F16, TileConfig{64, 128, 4, 1});
      c.pv_acc16 = true;
      list.add(c, false);
    }
  }
  std::set<Arch> archs_done;
  sage2::test::compile_and_check(
      list, "pv-acc16", [](const KernelSpec&) { return false; },
      [&](const sage2::test::Outcome& r) {
        CHECK(r.spec.pv_acc16);
        archs_done.insert(r.spec.arch);
        if (!arch_info(r.spec.arch).fp8_pv) CHECK_FALSE(contains(r.k.log, "e4m3"));
      });
  CHECK(archs_done == expected);
  CHECK(expected.count(Arch::Sm80));
  CHECK(expected.count(Arch::Sm89));
  CHECK(expected.count(Arch::Sm120));
  // PTX of compute_80 (FP16) and compute_89 (FP8, FP16): the f16-accumulator mma, and no P̃V mma
  // accumulating in fp32 (with FP16 P̃V the row sums of P̂ are f32 mmas against ones: B is one
  // register twice, where a P̃V mma reads two V̂ fragments)
  std::vector<KernelSpec> ptx;
  for (Arch arch : {Arch::Sm80, Arch::Sm89})
    for (bool pv16 : {false, true}) {
      if (!pv16 && !arch_info(arch).fp8_pv) continue;
      KernelSpec a = attention(arch, 128, 8, pv16, CausalMode::TopLeft, DType::F16);
      a.pv_acc16 = true;
      a.ptx = true;
      ptx.push_back(a);
    }
  for (const auto& r : sage2::test::compile_all(ptx)) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    const std::string text(r.k.cubin.data());
    CHECK(contains(text, ".target sm_" + std::to_string(arch_cc(r.spec.arch))));
    if (r.spec.pv_fp16) {
      CHECK(contains(text, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"));
      const std::regex f32_mma(R"(mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32\s*\{[^}]*\},\s*\{[^}]*\},\s*\{([^,}]+),\s*([^}]+)\})");
      int f32_mmas = 0, ones = 0;
      for (std::sregex_iterator it(text.begin(), text.end(), f32_mma), end; it != end; ++it) {
        ++f32_mmas;
        ones += (*it)[1].str() == (*it)[2].str();
      }
      CHECK(f32_mmas > 0);        // the row sums
      CHECK(ones == f32_mmas);    // and nothing else
    } else {
      CHECK(contains(text, "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"));
      CHECK_FALSE(contains(text, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"));
    }
  }
}

TEST_CASE("PTX: the mma family and its quantize ops compile to PTX of compute_80 and compute_89") {
  std::vector<KernelSpec> specs;
  for (Arch arch : {Arch::Sm80, Arch::Sm89}) {
    KernelSpec a = attention(arch, 128, 8, default_pv_fp16(arch), CausalMode::TopLeft, DType::F16);
    a.ptx = true;
    specs.push_back(a);
    specs.push_back(quantize_spec_for(a, QuantOp::QuantizeV));
    if (arch == Arch::Sm89) {
      a.pv_fp16 = true;  // the FP16 option on Ada
      specs.push_back(a);
    }
  }
  const auto out = sage2::test::compile_all(specs);
  for (const auto& r : out) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    const std::string text(r.k.cubin.data());
    CHECK(r.k.cubin.size() == text.size() + 1);  // NUL-terminated text, as cuModuleLoadData wants PTX
    CHECK(contains(text, ".target sm_" + std::to_string(arch_cc(r.spec.arch))));
    CHECK(contains(text, ".entry " + r.spec.entry_name()));
    CHECK(r.k.facts.registers == -1);  // no ptxas ran: the driver reports them after its JIT
    if (r.spec.family == KernelFamily::AttentionMma) {
      CHECK(contains(text, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
      CHECK(contains(text, "e4m3") == !r.spec.pv_fp16);
      if (r.spec.pv_fp16) CHECK(contains(text, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    }
  }
}

TEST_CASE("sage2-info --archs prints the arch table and the path of each arch") {
  const std::string cmd = std::string("'") + SAGE2_TOOLS_DIR + "/sage2-info' --archs 2>&1";
  std::FILE* f = ::popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  CHECK(::pclose(f) == 0);
  INFO(out);
  for (const ArchInfo& a : arch_table()) {
    CHECK(contains(out, a.name));
    CHECK(contains(out, arch_path(a.arch)));
  }
  CHECK(contains(out, "PTX"));
}
