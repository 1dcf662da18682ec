// Specification (CPU): the per-Context cache of attention call plans (runtime/call_cache.hpp,
// runtime/call_plan.hpp; issue 15 item 2). A plan is keyed by the call's shapes, strides, dtypes
// and options, never its pointers; the per-call parameter structs built from a cached plan equal
// what the family's descriptor builds from scratch for any pointers.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/attention_family.hpp"
#include "kernels/quantize_shape.hpp"
#include "plan/attention_spec.hpp"
#include "plan/call_kernels.hpp"
#include "plan/candidates.hpp"
#include "runtime/attention_plan.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/call_cache.hpp"
#include "runtime/call_plan.hpp"
#include "runtime/quantize_stage.hpp"

using namespace sage2;
using runtime::call_signature;
using runtime::CallSignature;

namespace {

struct Call {
  TensorRef q, k, v, out;
  AttentionParams params;
};

// Fake, well-aligned, disjoint "device" addresses (nothing is dereferenced).
Call make_call(std::uintptr_t base, std::int64_t b = 1, std::int64_t hq = 2, std::int64_t hk = 1,
               std::int64_t nq = 128, std::int64_t nk = 128, std::int64_t d = 64) {
  auto ptr = [&](int i) { return reinterpret_cast<const void*>(base + static_cast<std::uintptr_t>(i) * (1u << 28)); };
  Call c;
  c.q = TensorRef::hnd(ptr(0), DType::F16, b, hq, nq, d);
  c.k = TensorRef::hnd(ptr(1), DType::F16, b, hk, nk, d);
  c.v = TensorRef::hnd(ptr(2), DType::F16, b, hk, nk, d);
  c.out = TensorRef::hnd(ptr(3), DType::F16, b, hq, nq, d);
  // These cases specify the quantized path's plan (few rows would take the direct one on Auto:
  // tests/cpu/kernels/test_direct.cpp).
  c.params.small_q_path = SmallQPath::Quantized;
  return c;
}

CallSignature sig(const Call& c) { return call_signature(c.q, c.k, c.v, c.out, c.params); }

}  // namespace

TEST_CASE("call cache: the signature ignores pointers and sees every shape, stride, dtype and option") {
  const Call a = make_call(0x10000000);
  Call b = make_call(0x7000000000);  // other q/k/v/out pointers
  b.params.workspace = reinterpret_cast<void*>(0x123400);
  b.params.workspace_bytes = 1 << 20;
  CHECK(sig(a) == sig(b));
  CHECK(runtime::CallSignatureHash{}(sig(a)) == runtime::CallSignatureHash{}(sig(b)));

  std::vector<Call> other;
  {
    Call c = a;
    c.k = TensorRef::nhd(c.k.data, DType::F16, 1, 1, 128, 64);  // same shape, NHD strides
    c.k.stride_seq = 128;                                       // (one head: make them differ)
    other.push_back(c);
  }
  { Call c = a; c.q.stride_head += 64; other.push_back(c); }
  { Call c = a; c.out.stride_batch += 8; other.push_back(c); }
  {
    Call c = a;
    c.q.dtype = c.k.dtype = c.v.dtype = c.out.dtype = DType::BF16;
    other.push_back(c);
  }
  { Call c = a; c.params.causal = CausalMode::TopLeft; other.push_back(c); }
  { Call c = a; c.params.causal = CausalMode::BottomRight; other.push_back(c); }
  { Call c = a; c.params.qk_bits = QkBits::Int4; other.push_back(c); }
  { Call c = a; c.params.smooth_q = Toggle::On; other.push_back(c); }
  { Call c = a; c.params.smooth_k = false; other.push_back(c); }
  { Call c = a; c.params.smooth_v = true; other.push_back(c); }
  { Call c = a; c.params.sm_scale = 0.125f; other.push_back(c); }
  { Call c = a; c.params.sm_scale = 0.25f; other.push_back(c); }
  { Call c = a; c.params.lse = reinterpret_cast<float*>(0x900000000); other.push_back(c); }
  { Call c = a; c.params.small_q_path = SmallQPath::Auto; other.push_back(c); }
  { Call c = a; c.params.small_q_path = SmallQPath::Direct; other.push_back(c); }
  { Call c = make_call(0x10000000, 1, 2, 1, 129, 128, 64); other.push_back(c); }
  { Call c = make_call(0x10000000, 1, 2, 1, 128, 256, 64); other.push_back(c); }
  { Call c = make_call(0x10000000, 2, 2, 1, 128, 128, 64); other.push_back(c); }
  { Call c = make_call(0x10000000, 1, 2, 2, 128, 128, 64); other.push_back(c); }
  { Call c = make_call(0x10000000, 1, 2, 1, 128, 128, 128); other.push_back(c); }
  for (std::size_t i = 0; i < other.size(); ++i) {
    CAPTURE(i);
    CHECK(sig(other[i]) != sig(a));
    for (std::size_t j = 0; j < i; ++j) CHECK(sig(other[i]) != sig(other[j]));
  }
}

TEST_CASE("call cache: same signature hits, another misses; a full cache clears without freeing plans in use") {
  struct Plan { int id; };
  runtime::CallCache<Plan> cache(3);
  const Call a = make_call(0x10000000);
  Call b = a;
  b.params.causal = CausalMode::TopLeft;
  CHECK(cache.find(sig(a)) == nullptr);
  auto pa = cache.insert(sig(a), std::make_shared<const Plan>(Plan{1}));
  CHECK(pa->id == 1);
  CHECK(cache.find(sig(make_call(0x50000000))) == pa);  // other pointers: the same plan
  CHECK(cache.find(sig(b)) == nullptr);
  CHECK(cache.hits() == 1);
  CHECK(cache.misses() == 2);
  // A racing insert for the same signature keeps the first plan.
  CHECK(cache.insert(sig(a), std::make_shared<const Plan>(Plan{2}))->id == 1);
  cache.insert(sig(b), std::make_shared<const Plan>(Plan{3}));
  Call c = a;
  c.params.smooth_v = true;
  cache.insert(sig(c), std::make_shared<const Plan>(Plan{4}));
  CHECK(cache.size() == 3);
  Call d = a;
  d.params.smooth_k = false;
  cache.insert(sig(d), std::make_shared<const Plan>(Plan{5}));  // full: cleared, then inserted
  CHECK(cache.size() == 1);
  CHECK(pa->id == 1);  // still alive for its holder
  CHECK(cache.find(sig(a)) == nullptr);
}

TEST_CASE("call cache: concurrent lookups and inserts agree on one plan per signature") {
  struct Plan { int id; };
  runtime::CallCache<Plan> cache;
  std::vector<std::thread> threads;
  std::vector<const Plan*> seen(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      const Call a = make_call(0x10000000 + static_cast<std::uintptr_t>(t) * 0x1000);
      std::shared_ptr<const Plan> p;
      for (int i = 0; i < 1000; ++i) {
        p = cache.find(sig(a));
        if (!p) p = cache.insert(sig(a), std::make_shared<const Plan>(Plan{t}));
      }
      seen[t] = p.get();
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < 8; ++t) CHECK(seen[t] == seen[0]);
  CHECK(cache.size() == 1);
}

namespace {

// A plan as build_call_plan lays it out, for a given arch (no Context, no kernels).
std::unique_ptr<runtime::CallPlan> layout(const Call& c, kernels::Arch arch) {
  const plan::AttentionProblem p = plan::validate_attention(c.q, c.k, c.v, c.out, c.params, arch);
  kernels::KernelSpec spec = plan::plan_attention_heuristic(p, arch, 232448);
  auto plan = std::make_unique<runtime::CallPlan>();
  runtime::layout_call_plan(p, spec, *plan);
  return plan;
}

template <class T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// What the stages build from scratch for these pointers (kernels::make_quantize_params, the family
// descriptor's write_params, kernels::make_delta_s_params), compared with build_call_params on the
// cached plan.
void check_params_match(const runtime::CallPlan& plan, const Call& c, char* ws) {
  runtime::CallParams cp;
  runtime::build_call_params(plan, c.q, c.k, c.v, c.out, c.params.lse, ws, cp);
  const kernels::QuantBuffers& b = plan.buffers;
  void* ds = ws + plan.quant_bytes;
  CHECK(same_bytes(cp.quantize, kernels::make_quantize_params(b, c.q, c.k, c.v, ws)));
  const kernels::AttentionFamilyDesc& family = kernels::attention_family(plan.spec.family);
  const std::vector<kernels::AttentionChunk> chunks = kernels::attention_chunks(b, plan.spec.smooth_q ? plan.delta_s_bytes : 0);
  REQUIRE(!chunks.empty());
  const std::size_t n = chunks.size();
  CHECK(cp.attention.attention.size() == n);
  CHECK(cp.attention.delta_s.size() == (plan.spec.smooth_q ? n : 0));
  const kernels::AttentionArgs args{ws, c.out, c.params.lse, plan.problem.sm_scale, ds, MaskRef{}, c.q};
  for (std::size_t i = 0; i < n; ++i) {
    kernels::AttentionParamStorage fresh{};
    family.write_params(plan.spec, b, args, chunks[i], fresh.bytes);
    CHECK(std::memcmp(cp.attention.attention[i].bytes, fresh.bytes, family.param_bytes) == 0);
    if (plan.spec.smooth_q)
      CHECK(same_bytes(cp.attention.delta_s[i], kernels::make_delta_s_params(b, ws, c.k, ds, chunks[i])));
  }
}

}  // namespace

TEST_CASE("call plan: parameter structs from a cached plan equal a fresh build, for any pointers") {
  for (kernels::Arch arch : {kernels::Arch::Sm90a, kernels::Arch::Sm89}) {
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(kernels::arch_name(arch));
      CAPTURE(variant);
      Call c = make_call(0x10000000, 2, 4, 2, 200, 333, 64);
      if (variant == 1) {
        c.params.causal = CausalMode::BottomRight;
        c.params.smooth_q = Toggle::On;
        c.params.lse = reinterpret_cast<float*>(0x900000000);
      }
      if (variant == 2) {
        c.params.sm_scale = 0.3f;
        c.params.smooth_v = true;
      }
      const auto plan = layout(c, arch);
      // The plan holds the spec's family descriptor and its kernel config, computed once.
      CHECK(plan->attention.family == &kernels::attention_family(plan->spec.family));
      CHECK(plan->attention.kernel.smem == kernels::attention_kernel_config(plan->spec).smem);
      CHECK(plan->attention.kernel.threads == kernels::attention_kernel_config(plan->spec).threads);
      // The plan was made for the first pointers; the next calls bring others.
      check_params_match(*plan, c, reinterpret_cast<char*>(0x200000000));
      Call d = make_call(0x30000000, 2, 4, 2, 200, 333, 64);
      d.params = c.params;
      if (d.params.lse) d.params.lse = reinterpret_cast<float*>(0xa00000000);
      check_params_match(*plan, d, reinterpret_cast<char*>(0x400000100));
    }
  }
}

TEST_CASE("call plan: host cost per cached call without the driver (validation, lookup, parameter structs)") {
  // Not a timed test (nothing is asserted about time): prints ns per call for the record.
  runtime::CallCache<runtime::CallPlan> cache;
  const Call c = make_call(0x10000000, 1, 1, 1, 128, 128, 64);
  {
    auto plan = layout(c, kernels::Arch::Sm90a);
    cache.insert(sig(c), std::shared_ptr<const runtime::CallPlan>(plan.release()));
  }
  runtime::CallParams cp;
  char* ws = reinterpret_cast<char*>(0x200000000);
  const int n = 20000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    const auto p = plan::validate_attention(c.q, c.k, c.v, c.out, c.params, kernels::Arch::Sm90a);
    const auto plan = cache.find(sig(c));
    if (!plan) FAIL("cache miss");
    runtime::build_call_params(*plan, c.q, c.k, c.v, c.out, c.params.lse, ws, cp);
    (void)p;
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  // For comparison, what the uncached path paid on top per call: the layout, and one
  // KernelSpec::key() string per loaded kernel (6: 4 quantize ops, ΔS-free attention... as a floor).
  const auto plan = cache.find(sig(c));
  const auto t1 = std::chrono::steady_clock::now();
  std::size_t sink = 0;
  for (int i = 0; i < n; ++i) {
    runtime::CallPlan fresh;
    runtime::layout_call_plan(plan->problem, plan->spec, fresh);
    for (int j = 0; j < 5; ++j) sink += plan->spec.key().size();
  }
  const double old_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t1).count() / n;
  MESSAGE("host path without driver calls: " << ns << " ns per call; the uncached layout + 5 spec keys alone: "
                                             << old_ns << " ns");
  CHECK(sink > 0);
  CHECK(ns > 0);
}

TEST_CASE("quantize paths: the launches each path makes; auto is split; onepass and cluster only where they run") {
  using runtime::QuantPath;
  using kernels::QuantOp;
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionWgmma;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = 128;
  const std::vector<QuantOp> split = {QuantOp::ChannelStats, QuantOp::QuantizeK, QuantOp::QuantizeV, QuantOp::QuantizeQ};
  const std::vector<QuantOp> onepass = {QuantOp::QuantizeKV, QuantOp::QuantizeQ};  // Q not in the attention kernel
  CHECK(runtime::quantize_ops(QuantPath::Split, s) == split);
  CHECK(runtime::quantize_ops(QuantPath::Auto, s) == split);
  CHECK(runtime::quantize_ops(QuantPath::OnePass, s) == onepass);
  CHECK(runtime::quantize_ops(QuantPath::Fused, s) == std::vector<QuantOp>{QuantOp::Fused});
  CHECK(runtime::quantize_ops(QuantPath::Cluster, s) == std::vector<QuantOp>{QuantOp::Cluster});
  s.q_in_kernel = true;
  CHECK(runtime::quantize_ops(QuantPath::OnePass, s) == std::vector<QuantOp>{QuantOp::QuantizeKV});
  s.mask = 1;
  CHECK(runtime::quantize_ops(QuantPath::OnePass, s) ==
        std::vector<QuantOp>{QuantOp::MaskTiles, QuantOp::QuantizeKV});
  s.mask = 0;
  s.q_in_kernel = false;
  // Wide heads: onepass when asked; the cluster stage's shared memory holds no head dim 512.
  s.head_dim = 512;
  s.family = kernels::KernelFamily::AttentionMma;
  CHECK(runtime::quantize_ops(QuantPath::Auto, s) == split);
  CHECK(runtime::quantize_ops(QuantPath::OnePass, s) == onepass);
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::Cluster, s), doctest::Contains("head_dim=512"), Error);
  // Varlen calls: split (their sequences' chunks start anywhere).
  s.head_dim = 128;
  s.varlen = true;
  CHECK(runtime::quantize_ops(QuantPath::Auto, s) == std::vector<QuantOp>{QuantOp::ChannelStats, QuantOp::QuantizeK,
                                                                            QuantOp::QuantizeV, QuantOp::QuantizeQ});
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::OnePass, s), doctest::Contains("varlen"), Error);
  s.varlen = false;
  // Other arches: onepass when asked (its cp.async exists from sm_80).
  s.arch = kernels::Arch::Sm89;
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::Cluster, s), doctest::Contains("sm_89"), Error);
  CHECK(runtime::quantize_ops(QuantPath::Auto, s) == split);
  CHECK(runtime::quantize_ops(QuantPath::OnePass, s) == onepass);
}

TEST_CASE("quantize_kv launch: one CTA per item (statistics chunks, K blocks and V tiles of every group), the "
          "largest item's shared memory") {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionWgmma;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = 128;
  s.tile = kernels::TileConfig{128, 128, 8, 2};
  const kernels::KernelSpec kv = kernels::quantize_spec_for(s, kernels::QuantOp::QuantizeKV);
  const kernels::QuantProblem qp{2, 8, 4, 1000, 4608, 128};
  const kernels::QuantBuffers b = kernels::quant_buffers(qp, s);
  const kernels::LaunchShape ls = kernels::quantize_launch_shape(kv, b);
  // per group: 2 x 18 chunks of 256 tokens, 36 K blocks of 128, 36 V tiles of 128 (4608 keys)
  CHECK(ls.grid[0] == 2u * 4 * (2 * 18 + 36 + 36));
  CHECK(kernels::kv_quantize_schedule(kv, b).total() == ls.grid[0]);
  CHECK(ls.block[0] == 256u);
  const kernels::KvQuantizeConfig cfg = kernels::kv_quantize_config(kv);
  CHECK(ls.dynamic_smem == static_cast<std::size_t>(cfg.dynamic_smem));
  CHECK(cfg.stats.stats_ring >= 2);  // sm_90a: rows in flight beside three CTAs per SM
  CHECK(cfg.v.rows == 128);          // the split V tile
  CHECK(kernels::quantize_clears_sync({kernels::QuantOp::QuantizeKV}, s, b));
  // The statistics use channel_stats's mapping (the split path's sum order, the reference's).
  CHECK(cfg.stats.tpr ==
        kernels::quantize_kernel_config(kernels::quantize_spec_for(s, kernels::QuantOp::ChannelStats)).tpr);
  CHECK(cfg.threads ==
        kernels::quantize_kernel_config(kernels::quantize_spec_for(s, kernels::QuantOp::ChannelStats)).threads);
}

namespace {
// The attention spec of problem p on an H100/H200 (sm_90a, 227 KiB of shared memory) with Auto.
kernels::KernelSpec auto_sm90a_spec(const plan::AttentionProblem& p) {
  kernels::KernelSpec s = plan::attention_spec_for(p, kernels::Arch::Sm90a);
  s.tile = plan::heuristic_tile(s, 232448);
  plan::apply_quant_path(s, runtime::QuantPath::Auto);
  return s;
}
}  // namespace

TEST_CASE("quantize paths: with auto, a wgmma plan quantizes Q in the attention kernel: no quantize_q, no Q̂ buffers") {
  using runtime::QuantPath;
  using kernels::QuantOp;
  const Call c = make_call(0x10000000, 2, 4, 2, 200, 333, 128);
  const plan::AttentionProblem p = plan::validate_attention(c.q, c.k, c.v, c.out, c.params, kernels::Arch::Sm90a);
  kernels::KernelSpec s = auto_sm90a_spec(p);
  REQUIRE(s.family == kernels::KernelFamily::AttentionWgmma);
  CHECK(s.q_in_kernel);
  const std::vector<QuantOp> ops = runtime::quantize_ops(QuantPath::Auto, s);
  CHECK(std::find(ops.begin(), ops.end(), QuantOp::QuantizeQ) == ops.end());
  CHECK(std::find(ops.begin(), ops.end(), QuantOp::QuantizeK) != ops.end());
  CHECK(std::find(ops.begin(), ops.end(), QuantOp::QuantizeV) != ops.end());
  CHECK(runtime::quantize_ops(QuantPath::OnePass, s) == std::vector<QuantOp>{QuantOp::QuantizeKV});
  // the one-launch stages write Q̂: refused for such a spec rather than writing past the buffers
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::Fused, s), doctest::Contains("quantizes Q itself"), Error);
  CHECK_THROWS_WITH_AS(runtime::quantize_ops(QuantPath::Cluster, s), doctest::Contains("quantizes Q itself"), Error);
  // its workspace holds no Q̂, q_scale, q·k̄ or q_bad
  const kernels::QuantProblem qp{2, 4, 2, 200, 333, 128};
  const kernels::QuantBuffers with = kernels::quant_buffers(qp, s);
  CHECK(with.q_codes() == 0);
  CHECK(with.q_scale() == 0);
  CHECK(with.q_kbias() == 0);
  CHECK(with.q_bad() == 0);
  kernels::KernelSpec split = s;
  plan::apply_quant_path(split, QuantPath::Split);  // the explicit path keeps its quantize_q
  CHECK_FALSE(split.q_in_kernel);
  CHECK(runtime::quantize_ops(QuantPath::Split, split).back() == QuantOp::QuantizeQ);
  const kernels::QuantBuffers without = kernels::quant_buffers(qp, split);
  kernels::KernelSpec s_all = s;  // (the sampled statistics' own buffers aside: compared in their spec)
  s_all.sampled_stats = false;
  CHECK(kernels::quant_buffers(qp, s_all).offsets().total + std::size_t(2 * 4 * 256 * 128) <= without.offsets().total);
  // the attention parameters need the caller's Q, of the right shape and dtype
  char* ws = reinterpret_cast<char*>(0x20000000);
  kernels::AttentionArgs args{ws, c.out, nullptr, p.sm_scale, nullptr};
  const kernels::AttentionChunk chunk = kernels::attention_chunks(with, 0).front();
  CHECK_THROWS_WITH_AS(kernels::make_attention_params(s, with, args, chunk), doctest::Contains("q is null"), Error);
  args.q = c.k;  // [2, 2, 333, 128]: not Q's shape
  CHECK_THROWS_WITH_AS(kernels::make_attention_params(s, with, args, chunk), doctest::Contains("q shape"), Error);
  args.q = c.q;
  const sage2::dev::AttentionParams ap = kernels::make_attention_params(s, with, args, chunk);
  CHECK(ap.q_in == c.q.data);
  CHECK(ap.q_stride_seq == c.q.stride_seq);
  CHECK(ap.k_mean != nullptr);
  // smooth-Q keeps Q̂ from the quantize stage (its block mean)
  kernels::KernelSpec sq = s;
  sq.smooth_q = true;
  plan::apply_quant_path(sq, QuantPath::Auto);
  CHECK_FALSE(sq.q_in_kernel);
}

TEST_CASE("quantize paths: auto's split stage samples the statistics (dense calls); split, varlen and the one-launch stages take every key") {
  using runtime::QuantPath;
  using kernels::QuantOp;
  const Call c = make_call(0x10000000, 2, 4, 2, 200, 1000, 128);
  const plan::AttentionProblem p = plan::validate_attention(c.q, c.k, c.v, c.out, c.params, kernels::Arch::Sm90a);
  kernels::KernelSpec s = auto_sm90a_spec(p);
  CHECK(s.sampled_stats);
  // the attention kernel's code does not read it: the same key as the split path's
  kernels::KernelSpec every_key = s;
  plan::apply_quant_path(every_key, QuantPath::Split);
  CHECK_FALSE(every_key.sampled_stats);
  every_key.q_in_kernel = s.q_in_kernel;
  CHECK(s.key() == every_key.key());
  // the split ops take it (their keys say so); mask tiles and the one-launch stages never
  for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV}) {
    const kernels::KernelSpec q = kernels::quantize_spec_for(s, op);
    CHECK(q.sampled_stats);
    CHECK(q.key().find("|ss4x64") != std::string::npos);
    CHECK(q.key() != kernels::quantize_spec_for(every_key, op).key());
    CHECK_NOTHROW(q.validate());
  }
  for (QuantOp op : {QuantOp::Fused, QuantOp::QuantizeKV, QuantOp::MaskTiles})
    CHECK_FALSE(kernels::quantize_spec_for(s, op).sampled_stats);
  kernels::KernelSpec bad = kernels::quantize_spec_for(every_key, QuantOp::Fused);
  bad.sampled_stats = true;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("every key"), Error);
  // varlen: every key (the sample is per dense (batch, kv head))
  kernels::KernelSpec v = s;
  v.varlen = true;
  plan::apply_quant_path(v, QuantPath::Auto);
  CHECK_FALSE(v.sampled_stats);
  kernels::KernelSpec vq = kernels::quantize_spec_for(every_key, QuantOp::QuantizeK);
  vq.varlen = true;
  vq.sampled_stats = true;
  CHECK_THROWS_WITH_AS(vq.validate(), doctest::Contains("varlen"), Error);

  // The buffers: one statistics chunk of 64 keys per sampled unit (4 of T = 16 units), V's
  // amax, and V's overflow maxima in the cleared sync region. V before K: quantize_k's block 0 of
  // each head fixes the channels quantize_v found above the headroom.
  CHECK(runtime::quantize_ops(QuantPath::Auto, s) ==
        std::vector<QuantOp>{QuantOp::ChannelStats, QuantOp::QuantizeV, QuantOp::QuantizeK});
  CHECK(kernels::uses_v_codes(kernels::quantize_spec_for(s, QuantOp::QuantizeK)));
  CHECK_FALSE(kernels::uses_v_codes(kernels::quantize_spec_for(every_key, QuantOp::QuantizeK)));
  const kernels::QuantProblem qp{2, 4, 2, 200, 1000, 128};
  const kernels::QuantBuffers bs = kernels::quant_buffers(qp, s), ba = kernels::quant_buffers(qp, every_key);
  REQUIRE(s.tile.bk == 128);
  CHECK(bs.sampled_stats);
  CHECK(bs.stats_chunk == ba.stats_chunk);
  CHECK(bs.stats_chunks == 4);
  CHECK(ba.stats_chunks == 4);  // (every key: ceil(1000 / 256))
  CHECK(bs.v_amax() == 2 * 2 * 128);
  CHECK(ba.v_amax() == 0);
  CHECK(bs.sync_words() == ba.sync_words() + 2 * 2 * 128);
  const auto o = bs.offsets();
  CHECK(o.v_over == o.sync + (1 + 4 * 2 * 2) * 4);
  CHECK(o.v_over + 2 * 2 * 128 * 4 == o.sync + o.sync_bytes);
  CHECK(o.v_amax >= o.mask_bias);
  CHECK(o.total >= o.v_amax + std::size_t(bs.v_amax()) * 4);
  // Every arch: one CTA walks a sampled head's units and combines them (no counter), and V's
  // statistics zero the overflow maxima, so auto's stage clears no sync words; split (every key)
  // counts its chunks' arrivals.
  CHECK(kernels::stats_sampled(bs));
  CHECK(kernels::stats_whole_head(kernels::quantize_spec_for(s, QuantOp::ChannelStats)));
  CHECK_FALSE(kernels::quantize_clears_sync(runtime::quantize_ops(QuantPath::Auto, s), s, bs));
  CHECK(kernels::quantize_clears_sync(runtime::quantize_ops(QuantPath::Split, every_key), every_key, ba));
  {
    kernels::KernelSpec s89 = s;
    s89.arch = kernels::Arch::Sm89;
    CHECK(kernels::stats_whole_head(kernels::quantize_spec_for(s89, QuantOp::ChannelStats)));
    CHECK_FALSE(kernels::quantize_clears_sync(runtime::quantize_ops(QuantPath::Auto, s89), s89, bs));
  }
  // L2 eviction priorities: the sampled stage's K and V (2 x 2 x 2 x 1000 x 128 x 2 = 2,048,000
  // bytes) within twice the L2; never every key's stage, nor a device whose L2 is unknown.
  CHECK(kernels::quantize_l2_hints(bs, 1024000));
  CHECK_FALSE(kernels::quantize_l2_hints(bs, 1023999));
  CHECK_FALSE(kernels::quantize_l2_hints(ba, 50 << 20));
  CHECK_FALSE(kernels::quantize_l2_hints(bs, 0));
  const sage2::dev::QuantizeParams qpar = kernels::make_quantize_params(bs, c.q, c.k, c.v, reinterpret_cast<void*>(0x40000000));
  CHECK(reinterpret_cast<std::uintptr_t>(qpar.v_amax) == 0x40000000 + o.v_amax);
  CHECK(reinterpret_cast<std::uintptr_t>(qpar.v_over) == 0x40000000 + o.v_over);
  // channel_stats: one CTA per (sampled head, K|V) takes the head's 4 units in one pass
  // (kernels::stats_units_groups); a short sequence takes every key in one chunk. Never in clusters.
  const kernels::KernelSpec stats_spec = kernels::quantize_spec_for(s, QuantOp::ChannelStats);
  const kernels::LaunchShape ls = kernels::quantize_launch_shape(stats_spec, bs);
  CHECK(ls.grid[0] == 2);
  CHECK(ls.cluster_x == 1u);
  CHECK(kernels::stats_cluster_size(stats_spec, bs, 132) == 0);
  CHECK(kernels::quantize_launch_shape(stats_spec, bs, 132).grid[0] == 2);
  CHECK(kernels::quantize_launch_shape(stats_spec, bs, 132).cluster_x == 1u);
  {
    // Head dims without a one-pass form (1-8 and above 256: kernels::stats_units_groups 0) walk
    // the units one at a time. On sm_90a a device that holds every cluster at once takes one
    // cluster of 4 CTAs per (sampled head, K|V), one CTA per unit: 2 x 2 heads need 32 CTAs
    // against 7/8 of 132 SMs x 8; with more heads, clusters of 2 CTAs (two units each), then one
    // CTA per head. (batch, kv head) pairs x 2 x S CTAs within 7/8 x 1056: 115 pairs take 4, 116
    // and 231 take 2, 232 none.
    kernels::KernelSpec s8 = s;
    s8.head_dim = 8;
    const kernels::KernelSpec stats8 = kernels::quantize_spec_for(s8, QuantOp::ChannelStats);
    CHECK(kernels::stats_units_groups(stats8) == 0);
    auto pairs = [&](std::int64_t batch, std::int64_t heads) {
      return kernels::quant_buffers(kernels::QuantProblem{batch, heads, heads, 512, 1000, 8}, s8);
    };
    CHECK(kernels::stats_cluster_size(stats8, pairs(2, 2), 132) == 4);
    const kernels::LaunchShape lc = kernels::quantize_launch_shape(stats8, pairs(2, 2), 132);
    CHECK(lc.grid[0] == 8);
    CHECK(lc.cluster_x == 4u);
    CHECK(lc.grid[1] * lc.grid[2] >= 4u);
    CHECK(kernels::stats_cluster_size(stats8, pairs(5, 23), 132) == 4);
    CHECK(kernels::stats_cluster_size(stats8, pairs(4, 29), 132) == 2);
    CHECK(kernels::stats_cluster_size(stats8, pairs(3, 77), 132) == 2);
    CHECK(kernels::stats_cluster_size(stats8, pairs(8, 29), 132) == 0);
    const kernels::LaunchShape l2 = kernels::quantize_launch_shape(stats8, pairs(4, 29), 132);
    CHECK(l2.grid[0] == 4);
    CHECK(l2.cluster_x == 2u);
    CHECK(kernels::quantize_launch_shape(stats8, pairs(8, 29), 132).grid[0] == 2);
    CHECK(kernels::quantize_launch_shape(stats8, pairs(8, 29), 132).cluster_x == 1u);
    CHECK(kernels::stats_cluster_size(stats8, pairs(1, 2), 2) == 2);
    CHECK(kernels::stats_cluster_size(stats8, pairs(1, 2), 3) == 4);
    // no SM count, no sample, or another arch: never clusters
    CHECK(kernels::stats_cluster_size(stats8, pairs(2, 2), 0) == 0);
    CHECK(kernels::stats_cluster_size(stats8, kernels::quant_buffers(kernels::QuantProblem{2, 4, 2, 200, 256, 8}, s8), 132) == 0);
    kernels::KernelSpec s89 = s8;
    s89.arch = kernels::Arch::Sm89;
    CHECK(kernels::stats_cluster_size(kernels::quantize_spec_for(s89, QuantOp::ChannelStats), pairs(2, 2), 132) == 0);
    // the other quantize ops keep their grids whatever the SM count
    const kernels::KernelSpec kq = kernels::quantize_spec_for(s, QuantOp::QuantizeK);
    CHECK(kernels::quantize_launch_shape(kq, bs, 132).grid[0] == kernels::quantize_launch_shape(kq, bs).grid[0]);
    CHECK(kernels::quantize_launch_shape(kq, bs, 132).cluster_x == 1u);
  }
  // It walks with 128 threads planned for 6 CTAs per SM at hd 128 (one pass over the head, two
  // batches of rows in registers: 80 registers), no ring; its shared memory holds the slot sums of
  // every unit ([4][P][d] floats, P = 8) and the packed extremes of its P slots, within the 48 KB a
  // launch may use without asking for the largest shared carveout (runtime::launch): the V and K
  // kernels behind it ran 15-20 % slower with one (bench/NOTES.md, session 22).
  const kernels::QuantizeKernelConfig stats_cfg = kernels::quantize_kernel_config(kernels::quantize_spec_for(s, QuantOp::ChannelStats));
  CHECK(kernels::stats_units_groups(kernels::quantize_spec_for(s, QuantOp::ChannelStats)) == 1);
  CHECK(stats_cfg.threads == 128);
  CHECK(stats_cfg.rows == 8);
  CHECK(stats_cfg.min_ctas == 6);
  CHECK(stats_cfg.stats_ring == 0);
  CHECK(ls.dynamic_smem == std::size_t(4 * 8 * 128 * 4 + 8 * 128 * 4 + 128 * 4 + 16));
  CHECK(6 * (ls.dynamic_smem + 1024) <= 228 * 1024);  // 6 fit an H100/H200 SM
  CHECK(ls.dynamic_smem <= 48 * 1024);
  // The one-launch stages' statistics items keep the chunk walk's configuration (8 CTAs per SM).
  CHECK(kernels::fused_quantize_config(s).stats.min_ctas == 8);
  // Every split quantize launch asks for the carveout of its planned CTAs (kernels/launch.hpp).
  CHECK(ls.planned_ctas_per_sm == stats_cfg.min_ctas);
  for (QuantOp op : {QuantOp::QuantizeV, QuantOp::QuantizeK}) {
    const kernels::KernelSpec qs = kernels::quantize_spec_for(s, op);
    CHECK(kernels::quantize_launch_shape(qs, bs).planned_ctas_per_sm == kernels::quantize_kernel_config(qs).min_ctas);
  }
  // at most four units (256 keys): every key in the split stage's own chunks (ceil(256 / 256));
  // one key more samples 4 units of 64 whatever the KV tile (here 3 tiles of 128)
  const kernels::QuantBuffers short_b = kernels::quant_buffers(kernels::QuantProblem{2, 4, 2, 200, 256, 128}, s);
  CHECK(short_b.stats_chunk == 256);
  CHECK(short_b.stats_chunks == 1);
  CHECK_FALSE(kernels::stats_sampled(short_b));
  CHECK(kernels::quantize_launch_shape(kernels::quantize_spec_for(s, QuantOp::ChannelStats), short_b).grid[0] == 2);
  // (one chunk is its own last arriver: no counter, so no cleared sync words either)
  CHECK_FALSE(kernels::quantize_clears_sync(runtime::quantize_ops(QuantPath::Auto, s), s, short_b));
  CHECK(kernels::quant_buffers(kernels::QuantProblem{2, 4, 2, 200, 257, 128}, s).stats_chunks == 4);
  {
    // channel_stats' at-once form (the same statistics): one CTA per (sampled head, K|V) of 4
    // groups of the walk's 128 threads (its P = 8 row slots at hd 128), 2 per SM at 64 registers,
    // the slot values in dynamic shared memory, no ring, no clusters. A call takes it where its
    // 2·B·H_kv CTAs fit one wave at 2 per SM, else the walk; never over a head without a sample.
    const std::optional<kernels::KernelSpec> at_once = kernels::stats_at_once_spec(s);
    REQUIRE(at_once);
    CHECK(at_once->stats_at_once);
    CHECK(kernels::stats_units_at_once(*at_once));
    CHECK(at_once->key() == stats_spec.key() + "|su");
    CHECK_FALSE(stats_spec.stats_at_once);
    const kernels::QuantizeKernelConfig ac = kernels::quantize_kernel_config(*at_once);
    CHECK(ac.threads == 4 * 128);
    CHECK(ac.rows == stats_cfg.rows);  // the same row slots: the same sums
    CHECK(ac.min_ctas == 2);
    CHECK(ac.stats_ring == 0);
    const kernels::LaunchShape la = kernels::quantize_launch_shape(*at_once, bs, 132);
    CHECK(la.grid[0] == 2);
    CHECK(la.cluster_x == 1u);
    CHECK(la.dynamic_smem == std::size_t(4 * 8 * 128 * 8 + 128 * 4 + 16));
    auto pairs = [&](std::int64_t batch, std::int64_t heads) {
      return kernels::quant_buffers(kernels::QuantProblem{batch, heads, heads, 512, 1000, 128}, s);
    };
    CHECK(kernels::stats_spec_for(s, bs, 132) == *at_once);
    CHECK(kernels::stats_spec_for(s, pairs(4, 33), 132) == *at_once);  // 264 CTAs: one wave
    CHECK(kernels::stats_spec_for(s, pairs(1, 133), 132) == stats_spec);  // 266: the walk
    CHECK(kernels::stats_spec_for(s, bs, 0) == stats_spec);  // SMs unknown: the walk
    CHECK(kernels::stats_spec_for(s, short_b, 132) == stats_spec);  // no sample: the walk
    CHECK_THROWS_WITH_AS(kernels::quantize_launch_shape(*at_once, short_b, 132), doctest::Contains("stats_at_once"), Error);
    CHECK(kernels::stats_spec_for(every_key, ba, 132) == kernels::quantize_spec_for(every_key, QuantOp::ChannelStats));
    // the attention and the other quantize kernels never carry it
    kernels::KernelSpec a = s;
    a.stats_at_once = true;
    CHECK(a.canonical() == s.canonical());
    CHECK(kernels::quantize_spec_for(a, QuantOp::QuantizeK) == kernels::quantize_spec_for(s, QuantOp::QuantizeK));
    // head dims 9-256 (one 8-channel chunk per thread; P divides a 64-key unit)
    for (const auto& [hd, ok] : {std::pair{8, false}, {9, true}, {256, true}, {264, false}}) {
      CAPTURE(hd);
      kernels::KernelSpec w = s;
      w.head_dim = hd;
      CHECK(kernels::stats_at_once_spec(w).has_value() == ok);
    }
    // the call's kernels: the chosen form in place of the walk, warm-ups take both
    plan::QuantizedCallKernels k = plan::quantized_call_kernels(s, QuantPath::Auto);
    REQUIRE(k.stats_at_once);
    CHECK(k.quantize.front() == stats_spec);
    CHECK(k.with_alternatives().size() == k.all().size() + 1);
    k.choose_stats_form(bs, 132);
    CHECK(k.quantize.front() == *at_once);
  }
  // the sampled kernels refuse buffers laid out for every key, and the other way round
  CHECK_THROWS_WITH_AS(kernels::quantize_launch_shape(kernels::quantize_spec_for(s, QuantOp::QuantizeV), ba),
                       doctest::Contains("sampled_stats"), Error);
  CHECK_THROWS_WITH_AS(kernels::quantize_launch_shape(kernels::quantize_spec_for(every_key, QuantOp::QuantizeV), bs),
                       doctest::Contains("sampled_stats"), Error);
}

TEST_CASE("call plan: kernels after the first overlap their predecessor's end where they wait for it (sm_90a)") {
  using kernels::QuantOp;
  auto plan = [](kernels::Arch arch, kernels::KernelFamily family, bool smooth_q) {
    auto p = std::make_unique<runtime::CallPlan>();
    p->spec.family = family;
    p->spec.arch = arch;
    p->spec.smooth_q = smooth_q;
    p->quantize_ops = {QuantOp::ChannelStats, QuantOp::QuantizeK, QuantOp::QuantizeV};
    p->quantize.resize(3);
    p->attention.attention.resize(2);  // two chunks
    if (smooth_q) p->attention.delta_s.resize(2);
    return p;
  };
  auto p = plan(kernels::Arch::Sm90a, kernels::KernelFamily::AttentionWgmma, false);
  runtime::mark_overlapping_launches(*p, true);
  CHECK_FALSE(p->quantize[0].shape.overlap_previous);  // after the caller's own kernels: a plain launch
  CHECK(p->quantize[1].shape.overlap_previous);
  CHECK(p->quantize[2].shape.overlap_previous);
  CHECK(p->attention.attention[0].shape.overlap_previous);
  CHECK(p->attention.attention[1].shape.overlap_previous);
  runtime::mark_overlapping_launches(*p, false);  // SAGE2_DISABLE_LAUNCH_OVERLAP
  CHECK_FALSE(p->quantize[1].shape.overlap_previous);
  CHECK_FALSE(p->attention.attention[0].shape.overlap_previous);
  // ΔS does not wait for its predecessor: launched plainly; the attention after it overlaps it
  p = plan(kernels::Arch::Sm90a, kernels::KernelFamily::AttentionWgmma, true);
  runtime::mark_overlapping_launches(*p, true);
  CHECK_FALSE(p->attention.delta_s[0].shape.overlap_previous);
  CHECK(p->attention.attention[0].shape.overlap_previous);
  // the mma family's kernel does not wait; sm_89 has no programmatic dependent launch
  p = plan(kernels::Arch::Sm90a, kernels::KernelFamily::AttentionMma, false);
  runtime::mark_overlapping_launches(*p, true);
  CHECK(p->quantize[2].shape.overlap_previous);
  CHECK_FALSE(p->attention.attention[0].shape.overlap_previous);
  p = plan(kernels::Arch::Sm89, kernels::KernelFamily::AttentionMma, false);
  runtime::mark_overlapping_launches(*p, true);
  for (const auto& l : p->quantize) CHECK_FALSE(l.shape.overlap_previous);
}

TEST_CASE("call cache: replace() sets a signature's plan whatever was there; holders of the old plan keep it") {
  runtime::CallCache<int> cache;
  const Call c = make_call(0x10000000, 1, 2, 2, 64, 64, 64);
  const CallSignature sig = call_signature(c.q, c.k, c.v, c.out, c.params);
  const auto quick = std::make_shared<const int>(1);
  CHECK(cache.insert(sig, quick) == quick);
  const std::shared_ptr<const int> held = cache.find(sig);
  cache.replace(sig, std::make_shared<const int>(2));
  CHECK(*cache.find(sig) == 2);
  CHECK(*held == 1);
  CHECK(cache.size() == 1);
  // insert() after a replace keeps the replacement (the first inserter wins, as before)
  CHECK(*cache.insert(sig, std::make_shared<const int>(3)) == 2);
}
