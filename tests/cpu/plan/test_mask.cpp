// Specification of tensor masks on the host (issue 17; include/sage2/sage2.hpp MaskRef):
//  - the class table: one [q_blocks][k_blocks] byte table per (batch, head) the mask varies over;
//  - the launches: mask_tiles first (grid: KV tiles × query blocks × mask pairs), then the path's
//    quantize kernels; the attention parameters carry the mask and the table's strides;
//  - what is refused, naming the argument: bad types, null data, negative strides, overlap with
//    the output, combination with varlen;
//  - every masked kernel (both families, every mask type, causal or not, and mask_tiles) compiles
//    for the archs it runs on, spilling at most 128 bytes (256 for the wide-head default above
//    head dim 192): the wgmma kernels keep the unmasked kernel's CTAs per SM, where the mask's
//    extra registers spill a little (measured faster than one CTA fewer without spills:
//    bench/NOTES.md "Tensor masks").
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "kernels/attention_family.hpp"
#include "kernels/quantize_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "jit_test_support.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/quantize_stage.hpp"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

KernelSpec masked_spec(KernelFamily f, Arch arch, int head_dim, CausalMode causal, int mask) {
  KernelSpec s;
  s.family = f;
  s.arch = arch;
  s.head_dim = head_dim;
  s.causal = causal;
  s.mask = mask;
  s.qk_bits = arch == Arch::Sm89 ? 4 : 8;
  s.smooth_q = s.qk_bits == 4;
  s.tile = attention_family(f).default_tile(s, 227 * 1024);
  return s;
}

template <class T>
T* fake(std::uintptr_t at) { return reinterpret_cast<T*>(at); }

}  // namespace

TEST_CASE("mask layout and launches: a class table per mask pair, mask_tiles first") {
  const KernelSpec s = masked_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 128, CausalMode::None, 1);
  QuantProblem p;
  p.batch = 3;
  p.q_heads = 8;
  p.kv_heads = 2;
  p.q_len = 1000;
  p.kv_len = 2000;
  p.mask = 1;
  p.mask_batch = 3;  // varies over batch, broadcast over heads
  p.mask_heads = 1;
  const QuantBuffers b = quant_buffers(p, s);
  CHECK(b.mask_tiles() == 3 * 1 * b.q_blocks * b.k_blocks);
  QuantProblem d = p;
  d.mask = 0;
  CHECK(quant_buffers(d, s).mask_tiles() == 0);

  const std::vector<QuantOp> ops = runtime::quantize_ops(QuantPath::Auto, s);
  REQUIRE(ops.size() == 5);
  CHECK(ops[0] == QuantOp::MaskTiles);
  CHECK(ops[1] == QuantOp::ChannelStats);
  const LaunchShape m = quantize_launch_shape(quantize_spec_for(s, QuantOp::MaskTiles), b);
  CHECK(m.grid[0] == b.k_blocks);
  CHECK(m.grid[1] == b.q_blocks);
  CHECK(m.grid[2] == 3);
  CHECK(m.block[0] == 256);
  // the quantize kernels' own specs do not depend on the mask (one cubin for masked and unmasked calls)
  KernelSpec u = s;
  u.mask = 0;
  CHECK(quantize_spec_for(s, QuantOp::QuantizeQ).key() == quantize_spec_for(u, QuantOp::QuantizeQ).key());
  CHECK(s.key().ends_with("|mask:bool"));

  AttentionArgs args;
  args.workspace = fake<char>(0x40000000);
  args.out = TensorRef::hnd(fake<void>(0x30000000), DType::F16, 3, 8, 1000, 128);
  args.sm_scale = 0.1f;
  args.mask = MaskRef{fake<void>(0x50000000), MaskType::Bool, 2000 * 1000, 0, 2000, 1};
  const AttentionChunk chunk = attention_chunks(b, 0).front();
  const dev::AttentionParams ap = make_attention_params(s, b, args, chunk);
  CHECK(ap.mask == args.mask.data);
  CHECK(ap.mask_stride_q == 2000);
  CHECK(reinterpret_cast<const char*>(ap.mask_tiles) == static_cast<const char*>(args.workspace) + b.offsets().mask_tiles);
  CHECK(ap.mask_tiles_stride_batch == b.q_blocks * b.k_blocks);
  CHECK(ap.mask_tiles_stride_head == 0);
  args.mask.type = MaskType::F16;  // the call's type must be the spec's
  CHECK_THROWS_AS(make_attention_params(s, b, args, chunk), Error);
}

TEST_CASE("mask validation: type, data, strides, overlap, varlen") {
  using plan::validate_attention;
  const TensorRef q = TensorRef::hnd(fake<void>(0x10000000), DType::F16, 2, 4, 100, 64);
  const TensorRef k = TensorRef::hnd(fake<void>(0x20000000), DType::F16, 2, 4, 120, 64);
  const TensorRef v = TensorRef::hnd(fake<void>(0x28000000), DType::F16, 2, 4, 120, 64);
  const TensorRef o = TensorRef::hnd(fake<void>(0x30000000), DType::F16, 2, 4, 100, 64);
  AttentionParams a;
  a.mask = MaskRef{fake<void>(0x50000000), MaskType::F32, 100 * 120, 0, 120, 1};
  const plan::AttentionProblem p = validate_attention(q, k, v, o, a, Arch::Sm90a);
  CHECK(p.mask == 4);
  CHECK(p.mask_per_batch);
  CHECK_FALSE(p.mask_per_head);

  AttentionParams bad = a;
  bad.mask.data = nullptr;
  CHECK_THROWS_WITH_AS(validate_attention(q, k, v, o, bad, Arch::Sm90a), doctest::Contains("params.mask: data pointer is null"), Error);
  bad = a;
  bad.mask.stride_q = -1;
  CHECK_THROWS_WITH_AS(validate_attention(q, k, v, o, bad, Arch::Sm90a), doctest::Contains("params.mask.stride_q=-1"), Error);
  bad = a;
  bad.mask.type = static_cast<MaskType>(7);
  CHECK_THROWS_WITH_AS(validate_attention(q, k, v, o, bad, Arch::Sm90a), doctest::Contains("params.mask.type=7"), Error);
  bad = a;
  bad.mask.data = fake<void>(0x50000002);  // f32 needs 4-byte alignment
  CHECK_THROWS_WITH_AS(validate_attention(q, k, v, o, bad, Arch::Sm90a), doctest::Contains("aligned"), Error);
  bad = a;
  bad.mask.data = o.data;
  CHECK_THROWS_WITH_AS(validate_attention(q, k, v, o, bad, Arch::Sm90a), doctest::Contains("overlaps out"), Error);

  SeqLens lens;
  lens.batch = 2;
  lens.kv_lens = fake<const std::int32_t>(0x60000000);
  CHECK_THROWS_WITH_AS(plan::validate_attention_varlen(q, k, v, o, lens, a, Arch::Sm90a),
                       doctest::Contains("cannot be combined with varlen"), Error);
  KernelSpec s = masked_spec(KernelFamily::AttentionMma, Arch::Sm90a, 64, CausalMode::None, 2);
  s.varlen = true;
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("mask"), Error);
}

TEST_CASE("masked kernels compile for their archs, spilling at most 128 bytes (256 above head dim 192)") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  std::vector<KernelSpec> specs;
  for (int mask = 1; mask <= 4; ++mask) {
    for (CausalMode c : {CausalMode::None, CausalMode::TopLeft}) {
      specs.push_back(masked_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 128, c, mask));
      specs.push_back(masked_spec(KernelFamily::AttentionMma, mask % 2 ? Arch::Sm89 : Arch::Sm90a, 64, c, mask));
    }
    specs.push_back(quantize_spec_for(masked_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 128, CausalMode::None, mask),
                                      QuantOp::MaskTiles));
    specs.push_back(quantize_spec_for(masked_spec(KernelFamily::AttentionMma, Arch::Sm89, 64, CausalMode::None, mask),
                                      QuantOp::MaskTiles));
  }
  specs.push_back(masked_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 64, CausalMode::BottomRight, 2));
  specs.push_back(masked_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 256, CausalMode::None, 1));
  for (const test::Outcome& r : test::compile_all(specs)) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    // r12: at most 116 bytes; the wide-head default (two consumer warpgroups at 240 registers,
    // O at d_v 256 taking 128 of them) 160 with a mask (tests/cpu/jit/test_wgmma_kernels.cpp)
    const int allowed = r.spec.family == KernelFamily::Quantize ? 0 : (r.spec.head_dim > 192 ? 256 : 128);
    CHECK(r.k.facts.spill_store_bytes <= allowed);
    CHECK(r.k.facts.spill_load_bytes <= allowed);
  }
}
