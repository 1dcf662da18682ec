// Specification: a KernelSpec has exactly one canonical key; fields that do not change the
// generated code do not change the key, and every field that does, does.
#include <doctest/doctest.h>

#include <set>

#include "kernels/kernel_spec.hpp"
#include "jit/compiler.hpp"
#include "kernels/quant_layout.hpp"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

TEST_CASE("equal specs give equal keys; the key names the arch and head dim") {
  KernelSpec a;
  a.family = KernelFamily::Quantize;
  a.op = QuantOp::QuantizeK;
  KernelSpec b = a;
  CHECK(a.key() == b.key());
  CHECK(a.key().find("sm_90a") != std::string::npos);
  CHECK(a.key().find("|d128|") != std::string::npos);
}

TEST_CASE("fields irrelevant to a family are normalised out of its key") {
  KernelSpec a;
  a.family = KernelFamily::Quantize;
  a.op = QuantOp::QuantizeK;
  KernelSpec b = a;
  b.causal = CausalMode::BottomRight;  // quantize does not mask
  b.return_lse = true;
  b.smooth_v = true;                   // K quantize ignores V smoothing
  CHECK(a.key() == b.key());
}

TEST_CASE("every code-relevant field changes the attention key") {
  KernelSpec base;
  base.family = KernelFamily::AttentionMma;
  std::set<std::string> keys{base.key()};
  auto add = [&](KernelSpec s) { CHECK(keys.insert(s.key()).second); };
  KernelSpec s = base; s.arch = Arch::Sm89; add(s);
  s = base; s.head_dim = 64; add(s);
  s = base; s.causal = CausalMode::TopLeft; add(s);
  s = base; s.causal = CausalMode::BottomRight; add(s);
  s = base; s.tile.bq = 64; add(s);
  s = base; s.tile.bk = 128; add(s);
  s = base; s.tile.warps = 8; add(s);
  s = base; s.tile.stages = 2; add(s);
  s = base; s.qk_bits = 4; add(s);
  s = base; s.smooth_q = true; add(s);
  s = base; s.smooth_k = false; add(s);
  s = base; s.smooth_v = true; add(s);
  s = base; s.in_dtype = DType::BF16; add(s);
  s = base; s.out_dtype = DType::BF16; add(s);
  s = base; s.two_level_accum = false; add(s);
  s = base; s.return_lse = true; add(s);
  s = base; s.family = KernelFamily::AttentionWgmma; add(s);
}

TEST_CASE("validate names the offending field and value") {
  KernelSpec s;
  s.head_dim = 600;
  try {
    s.validate();
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("head_dim=600") != std::string::npos);
  }
  s.head_dim = 128;
  s.qk_bits = 6;
  CHECK_THROWS_AS(s.validate(), Error);
  s.qk_bits = 4;
  s.family = KernelFamily::AttentionWgmma;
  CHECK_THROWS_AS(s.validate(), Error);  // wgmma family is 8-bit only
}

TEST_CASE("unsupported arch strings are rejected with the list of supported ones") {
  CHECK(parse_arch("sm_90") == Arch::Sm90a);
  CHECK(parse_arch("sm_89") == Arch::Sm89);
  CHECK(parse_arch("sm_80") == Arch::Sm80);
  CHECK(parse_arch("compute_120") == Arch::Sm120);
  CHECK(parse_arch("103") == Arch::Sm103);
  for (const char* bad : {"sm_75", "sm_70", "sm_88", "sm_110", "gfx90a", ""}) {
    try {
      parse_arch(bad);
      FAIL("expected an error for " << bad);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      for (const char* known : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120"})
        CHECK(std::string(e.what()).find(known) != std::string::npos);
    }
  }
}

TEST_CASE("padded head dims follow the mma k of the code width") {
  CHECK(qk_dim_padded(1, 8) == 32);
  CHECK(qk_dim_padded(80, 8) == 96);
  CHECK(qk_dim_padded(80, 4) == 128);
  CHECK(qk_row_bytes(80, 4) == 64);
  CHECK(qk_row_bytes(128, 8) == 128);
  CHECK(v_dim_padded(80) == 96);
}

#include "jit/compiler.hpp"

TEST_CASE("jit: the accumulator probe compiles for sm_89 and sm_90a; its key ignores other fields") {
  KernelSpec p;
  p.family = KernelFamily::Probe;
  KernelSpec q = p;
  q.head_dim = 64;
  q.qk_bits = 4;
  CHECK(p.key() == q.key());
  for (Arch a : {Arch::Sm89, Arch::Sm90a}) {
    p.arch = a;
    const CompiledKernel k = compile(p);
    CHECK(!k.cubin.empty());
    CHECK(k.facts.spill_store_bytes == 0);
  }
}

#include "kernels/family_quantize.hpp"

TEST_CASE("quantize family descriptor: every op has one; its name makes the key and the entry; V̂ writers read the P̃V precision") {
  const QuantOp ops[] = {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV,
                         QuantOp::Fused,        QuantOp::Cluster,   QuantOp::QuantizeKV, QuantOp::MaskTiles};
  CHECK(find_quant_op(QuantOp::None) == nullptr);
  std::set<std::string> names;
  for (QuantOp op : ops) {
    const QuantOpDesc* d = find_quant_op(op);
    REQUIRE(d != nullptr);
    CHECK(d->op == op);
    CHECK(std::string(d->name) == quant_op_name(op));
    names.insert(d->name);
    KernelSpec s;
    s.family = KernelFamily::Quantize;
    s.op = op;
    s.arch = Arch::Sm90a;
    s.mask = op == QuantOp::MaskTiles ? 1 : 0;
    CHECK(s.entry_name() == std::string("sage2_") + d->name);
    CHECK(s.key().rfind(std::string("quantize.") + d->name + "|", 0) == 0);
    const bool v_writer = op == QuantOp::QuantizeV || op == QuantOp::Fused || op == QuantOp::Cluster || op == QuantOp::QuantizeKV;
    CHECK(d->writes_v == v_writer);
    s.pv_fp16 = true;
    CHECK(s.canonical().pv_fp16 == v_writer);  // other ops do not read it: it leaves their key
    CHECK(d->reads_mask == (op == QuantOp::MaskTiles));
  }
  CHECK(names.size() == std::size(ops));
  for (KernelFamily f : {KernelFamily::DeltaS, KernelFamily::Probe, KernelFamily::DirectSplit, KernelFamily::DirectMerge}) {
    const AuxFamilyDesc* d = aux_family(f);
    REQUIRE(d != nullptr);
    CHECK(std::string(d->name) == family_name(f));
  }
  CHECK(aux_family(KernelFamily::Quantize) == nullptr);
  CHECK(aux_family(KernelFamily::AttentionMma) == nullptr);
}
