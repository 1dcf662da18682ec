// Specification of variable-length calls on the host (issue 17; include/sage2/sage2.hpp SeqLens):
//  - the packed quantize layout: one packed sequence of blocks per head, sized by a bound that
//    holds for any lengths of the same totals, plus the sequence table and block maps;
//  - the launches: the split quantize kernels (channel_stats's first CTA builds the table), the
//    others over the packed blocks, then ONE attention launch over the packed query blocks;
//  - what is refused, naming the argument: a missing or mixed form, smooth-Q on, the one-launch
//    quantize paths;
//  - every varlen kernel (both attention families, the quantize ops, the table) compiles for the
//    archs it runs on without spills; dense keys are unchanged.
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

KernelSpec attention_spec(KernelFamily f, Arch arch, int head_dim, CausalMode causal, bool lse = false) {
  KernelSpec s;
  s.family = f;
  s.arch = arch;
  s.head_dim = head_dim;
  s.causal = causal;
  s.return_lse = lse;
  s.varlen = true;
  s.qk_bits = 8;
  if (arch == Arch::Sm89) s.qk_bits = 4;
  s.tile = attention_family(f).default_tile(s, 227 * 1024);  // the heuristic's tile: a main configuration
  return s;
}

QuantBuffers packed_buffers(const KernelSpec& s, std::int64_t seqs, std::int64_t total_q, std::int64_t total_k) {
  QuantProblem p;
  p.batch = seqs;
  p.q_heads = 8;
  p.kv_heads = 2;
  p.q_len = total_q;
  p.kv_len = total_k;
  p.head_dim = s.head_dim;
  p.varlen = p.packed = true;
  p.total_q = total_q;
  p.total_k = total_k;
  return quant_buffers(p, s);
}

// A fake, aligned device pointer (nothing is dereferenced on the host).
template <class T>
T* fake(std::uintptr_t at) { return reinterpret_cast<T*>(at); }

}  // namespace

TEST_CASE("varlen layout: per-token buffers are packed per head with a bound that fits any lengths") {
  const KernelSpec s = attention_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 128, CausalMode::None);
  const QuantBuffers b = packed_buffers(s, 5, 1000, 3000);
  CHECK(b.token_batch() == 1);
  // Σ ceil(len / 128) <= ceil(total / 128) + B for every split of the total into B lengths.
  const int bq = s.tile.bq, bk = s.tile.bk;
  CHECK(b.q_blocks == (1000 + bq - 1) / bq + 5);
  CHECK(b.k_blocks == (3000 + bk - 1) / bk + 5);
  CHECK(b.q_len_pad == b.q_blocks * bq);
  CHECK(b.kv_len_pad == b.k_blocks * bk);
  CHECK(b.q_codes() == 8 * b.q_len_pad * b.row_bytes);
  CHECK(b.v_codes() == 2 * b.d_v * b.kv_len_pad);
  CHECK(b.k_stats() == 5 * 2 * 3 * b.d_qk);  // per (sequence, kv head)
  CHECK(b.v_scale() == 5 * 2 * b.d_v);
  CHECK(b.seqs() == 5 * 8);
  CHECK(b.q_map() == b.q_blocks);
  CHECK(b.k_map() == b.k_blocks);
  // channel_stats' chunk partials: per (kv head, K|V), every sequence's chunks from slot
  // b + first row / T, so B + ceil(total_k / T) + 1 slots hold any lengths of the total.
  const std::int64_t T = quantize_stats_chunk(s);
  CHECK(b.stats_part() == 2 * 2 * (5 + (3000 + T - 1) / T + 1) * 4 * b.d_v);
  CHECK(b.sync_words() == 1 + 4 * 5 * 2);  // arrival counters per (sequence, kv head)
  const QuantBuffers::Offsets o = b.offsets();
  CHECK(o.q_map >= o.seqs + 5 * 32);
  CHECK(o.total >= o.k_map + static_cast<std::size_t>(b.k_blocks) * 4);

  // A dense call's layout has none of it.
  QuantProblem d;
  d.batch = 2;
  d.q_len = d.kv_len = 1000;
  KernelSpec ds = s;
  ds.varlen = false;
  const QuantBuffers bd = quant_buffers(d, ds);
  CHECK(bd.token_batch() == 2);
  CHECK(bd.seqs() + bd.q_map() + bd.k_map() == 0);
}

TEST_CASE("varlen launches: the split kernels over packed blocks, one attention launch") {
  const KernelSpec s = attention_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 128, CausalMode::TopLeft);
  const QuantBuffers b = packed_buffers(s, 7, 5000, 5000);
  const std::vector<QuantOp> ops = runtime::quantize_ops(QuantPath::Auto, s);
  REQUIRE(ops.size() == 4);
  CHECK(ops[0] == QuantOp::ChannelStats);
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::Fused, s), doctest::Contains("does not run varlen"), Error);
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::Cluster, s), doctest::Contains("does not run varlen"), Error);

  // channel_stats's first CTA numbers the Q blocks: its spec keeps the attention's bq (r10 on the
  // H100: a reset bq gave every sequence the wrong blocks)
  CHECK(quantize_spec_for(s, QuantOp::ChannelStats).tile.bq == s.tile.bq);
  const LaunchShape stats = quantize_launch_shape(quantize_spec_for(s, QuantOp::ChannelStats), b);
  // K and V chunks of the length bound (here the total: a longer sequence's CTAs take several)
  CHECK(stats.grid[0] == 2 * ((5000 + quantize_stats_chunk(s) - 1) / quantize_stats_chunk(s)));
  CHECK(stats.grid[1] * stats.grid[2] == 7 * 2);  // (sequence, kv head) pairs
  const LaunchShape q = quantize_launch_shape(quantize_spec_for(s, QuantOp::QuantizeQ), b);
  CHECK(q.grid[0] == b.q_blocks);
  CHECK(q.grid[1] == 8);
  const LaunchShape k = quantize_launch_shape(quantize_spec_for(s, QuantOp::QuantizeK), b);
  CHECK(k.grid[0] == b.k_blocks);
  CHECK(k.grid[1] == 2);
  const LaunchShape v = quantize_launch_shape(quantize_spec_for(s, QuantOp::QuantizeV), b);
  CHECK(v.grid[0] == b.kv_len_pad / quantize_v_split_tile(s.tile.bk, s.head_dim));

  const std::vector<AttentionChunk> chunks = attention_chunks(b, 0);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].bh_count == 8);
  CHECK(chunks[0].qb_count == b.q_blocks);
  const LaunchShape a = attention_launch_shape(s, b, chunks[0]);
  CHECK(a.grid[0] == b.q_blocks);
  CHECK(a.grid[1] == 8);

  // The varlen parameters point into the workspace; packed outputs and inputs ignore the batch stride.
  TensorRef t = TensorRef::nhd(fake<void>(0x10000000), DType::F16, 1, 8, 5000, 128);
  TensorRef tk = TensorRef::nhd(fake<void>(0x20000000), DType::F16, 1, 2, 5000, 128);
  const auto ws = fake<char>(0x40000000);
  const dev::QuantizeParams qp = make_quantize_params(b, t, tk, tk, ws);
  const QuantBuffers::Offsets o = b.offsets();
  CHECK(reinterpret_cast<char*>(qp.seqs) == ws + o.seqs);
  CHECK(reinterpret_cast<char*>(qp.q_map) == ws + o.q_map);
  CHECK(qp.q_map_len == b.q_blocks);
  CHECK(qp.q_stride_batch == 0);
  AttentionArgs args;
  args.workspace = ws;
  args.out = TensorRef::nhd(fake<void>(0x30000000), DType::F16, 1, 8, 5000, 128);
  args.sm_scale = 0.1f;
  const dev::AttentionParams ap = make_attention_params(s, b, args, chunks[0]);
  CHECK(reinterpret_cast<const char*>(ap.q_map) == ws + o.q_map);
  CHECK(ap.o_stride_batch == 0);
  CHECK(ap.lse_stride_head == 5000);  // LSE [Hq][total_q]
}

TEST_CASE("varlen validation: one form, matching batches, no smooth-Q; dense keys unchanged") {
  using plan::validate_attention_varlen;
  const TensorRef q = TensorRef::nhd(fake<void>(0x10000000), DType::F16, 1, 8, 300, 64);
  const TensorRef k = TensorRef::nhd(fake<void>(0x20000000), DType::F16, 1, 2, 400, 64);
  const TensorRef v = TensorRef::nhd(fake<void>(0x28000000), DType::F16, 1, 2, 400, 64);
  const TensorRef o = TensorRef::nhd(fake<void>(0x30000000), DType::F16, 1, 8, 300, 64);
  SeqLens lens;
  lens.batch = 3;
  lens.cu_seqlens_q = fake<const std::int32_t>(0x50000000);
  lens.cu_seqlens_k = fake<const std::int32_t>(0x50001000);
  const plan::AttentionProblem p = validate_attention_varlen(q, k, v, o, lens, {}, Arch::Sm90a);
  CHECK(p.varlen);
  CHECK(p.packed);
  CHECK(p.batch == 3);
  CHECK(p.total_q == 300);
  CHECK(p.total_k == 400);
  CHECK_FALSE(p.smooth_q);

  SeqLens half = lens;
  half.cu_seqlens_k = nullptr;
  CHECK_THROWS_WITH_AS(validate_attention_varlen(q, k, v, o, half, {}, Arch::Sm90a),
                       doctest::Contains("cu_seqlens_q and cu_seqlens_k go together"), Error);
  SeqLens none;
  none.batch = 3;
  CHECK_THROWS_WITH_AS(validate_attention_varlen(q, k, v, o, none, {}, Arch::Sm90a),
                       doctest::Contains("give cu_seqlens_q and cu_seqlens_k"), Error);
  SeqLens mixed = lens;
  mixed.kv_lens = fake<const std::int32_t>(0x50002000);
  CHECK_THROWS_WITH_AS(validate_attention_varlen(q, k, v, o, mixed, {}, Arch::Sm90a),
                       doctest::Contains("kv_lens"), Error);
  SeqLens zero = lens;
  zero.batch = 0;
  CHECK_THROWS_WITH_AS(validate_attention_varlen(q, k, v, o, zero, {}, Arch::Sm90a),
                       doctest::Contains("lens.batch=0"), Error);
  AttentionParams sq;
  sq.smooth_q = Toggle::On;
  CHECK_THROWS_WITH_AS(validate_attention_varlen(q, k, v, o, lens, sq, Arch::Sm90a),
                       doctest::Contains("smooth_q"), Error);
  // Key padding: the tensors' batch is the sequences'.
  const TensorRef q4 = TensorRef::hnd(fake<void>(0x10000000), DType::F16, 4, 8, 100, 64);
  const TensorRef k4 = TensorRef::hnd(fake<void>(0x20000000), DType::F16, 4, 2, 120, 64);
  const TensorRef v4 = TensorRef::hnd(fake<void>(0x28000000), DType::F16, 4, 2, 120, 64);
  const TensorRef o4 = TensorRef::hnd(fake<void>(0x30000000), DType::F16, 4, 8, 100, 64);
  SeqLens kp;
  kp.batch = 4;
  kp.kv_lens = fake<const std::int32_t>(0x50000000);
  const plan::AttentionProblem pk = validate_attention_varlen(q4, k4, v4, o4, kp, {}, Arch::Sm90a);
  CHECK_FALSE(pk.packed);
  CHECK(pk.total_k == 4 * 120);
  kp.batch = 3;
  CHECK_THROWS_WITH_AS(validate_attention_varlen(q4, k4, v4, o4, kp, {}, Arch::Sm90a),
                       doctest::Contains("must equal q batch 4"), Error);

  KernelSpec s = attention_spec(KernelFamily::AttentionMma, Arch::Sm90a, 64, CausalMode::None);
  CHECK(s.key().ends_with("|varlen"));
  s.varlen = false;
  CHECK(s.key().find("varlen") == std::string::npos);
  s.varlen = true;
  s.smooth_q = true;
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("smooth_q"), Error);
}

TEST_CASE("varlen kernels compile for their archs without spills (bounded above head dim 192)") {
  REQUIRE_MESSAGE(nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  std::vector<KernelSpec> specs;
  for (Arch arch : {Arch::Sm89, Arch::Sm90a}) {
    for (int hd : {64, 80, 128}) {
      for (CausalMode c : {CausalMode::None, CausalMode::BottomRight}) {
        specs.push_back(attention_spec(KernelFamily::AttentionMma, arch, hd, c, c != CausalMode::None));
        if (arch == Arch::Sm90a) specs.push_back(attention_spec(KernelFamily::AttentionWgmma, arch, hd, c, c != CausalMode::None));
      }
    }
  }
  specs.push_back(attention_spec(KernelFamily::AttentionWgmma, Arch::Sm90a, 256, CausalMode::TopLeft, true));
  const std::size_t n_attention = specs.size();
  for (std::size_t i = 0; i < n_attention; i += 3)
    for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV})
      specs.push_back(quantize_spec_for(specs[i], op));
  for (const test::Outcome& r : test::compile_all(specs)) {
    INFO(r.spec.key());
    REQUIRE_MESSAGE(r.ok, r.error);
    // the wide-head default spills a few bytes above head dim 192 (tests/cpu/jit/test_wgmma_kernels.cpp)
    const int allowed = r.spec.head_dim > 192 && r.spec.family == KernelFamily::AttentionWgmma ? 128 : 0;
    CHECK(r.k.facts.spill_store_bytes <= allowed);
    CHECK(r.k.facts.spill_load_bytes <= allowed);
  }
}
