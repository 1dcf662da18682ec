// Specification (CPU / CI): a warm-up covers every call inside its selection (issue 43).
//
// What a call loads is plan::call_kernel_specs(its validated problem, its Context's settings): the
// list runtime::build_call_plan loads. What a warm-up compiles is plan::warmup_kernel_specs(the
// selection, the same settings). For every arch of the coverage table, random calls inside a
// selection — any batch, heads, GQA group, sequence lengths from 1 to 64K, both tensor layouts,
// causal modes, dtypes, LSE, every mask type with broadcast or full strides, packed and key-padding
// varlen, decode-sized calls that take the direct path — must ask for no kernel outside the
// warm-up's set, with no tuning database and with one whose tuned tiles differ by size.
// The tuner's side: the attention spec a candidate is timed with is the one a call with that
// shape and tile runs (Q quantized inside the kernel where calls do it), and its companions are
// the call's other kernels.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "autotune/prepare.hpp"
#include "plan/attention_spec.hpp"
#include "kernels/attention_family.hpp"
#include "plan/attention_validate.hpp"
#include "plan/call_kernels.hpp"
#include "plan/candidates.hpp"
#include "plan/planner.hpp"
#include "plan/tuning_db.hpp"
#include "plan/warmup.hpp"

using namespace sage2;

namespace {

const void* address(int slot, std::uint64_t offset = 0) {
  return reinterpret_cast<const void*>((std::uintptr_t(slot) << 40) + offset * 256);
}

std::set<std::string> keys_of(const std::vector<kernels::KernelSpec>& v) {
  std::set<std::string> s;
  for (const auto& k : v) s.insert(k.key());
  return s;
}

plan::CallSettings settings_for(kernels::Arch arch) {
  plan::CallSettings s;
  s.arch = arch;
  s.device.max_smem_optin = plan::default_max_smem_optin(arch);
  return s;
}

// The selection the random calls stay inside.
plan::WarmupSelection wide_selection() {
  plan::WarmupSelection w;
  w.head_dims = {64, 72, 128};
  w.dtypes = {DType::F16, DType::BF16};
  w.causal = {CausalMode::None, CausalMode::TopLeft, CausalMode::BottomRight};
  w.lse = {false, true};
  w.masks = {MaskType::None, MaskType::Bool, MaskType::F16, MaskType::BF16, MaskType::F32};
  w.varlen = true;
  return w;
}

// One random call inside `w`; validates it like the API and returns its problem (nullopt when
// validation refuses it: a combination no call can make, e.g. a mask with varlen).
struct RandomCall {
  std::mt19937_64 rng;
  explicit RandomCall(std::uint64_t seed) : rng(seed) {}
  template <class T>
  T pick(const std::vector<T>& v) {
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  }
  bool coin() { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; }
  std::int64_t length() {  // log-uniform 1 .. 65536, a third of them decode-sized (<= 16)
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) return std::uniform_int_distribution<std::int64_t>(1, 16)(rng);
    const double e = std::uniform_real_distribution<double>(0, 16)(rng);
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::exp2(e)));
  }

  std::optional<plan::AttentionProblem> draw(const plan::WarmupSelection& w, kernels::Arch arch, std::string& what) {
    const int hd = pick(w.head_dims);
    const DType dt = pick(w.dtypes);
    const std::int64_t kv_heads = std::uniform_int_distribution<std::int64_t>(1, 8)(rng);
    const std::int64_t group = std::int64_t(1) << std::uniform_int_distribution<int>(0, 4)(rng);
    const std::int64_t heads = kv_heads * group;
    const std::int64_t batch = std::uniform_int_distribution<std::int64_t>(1, 4)(rng);
    const std::int64_t q_len = length(), kv_len = coin() ? q_len : length();
    AttentionParams params;
    params.causal = pick(w.causal);
    params.qk_bits = pick(w.qk_bits);
    params.pv_precision = pick(w.pv);
    params.pv_accum = pick(w.pv_accum);
    params.smooth_q = pick(w.smooth_q);
    params.smooth_v = pick(w.smooth_v);
    if (pick(w.lse)) params.lse = static_cast<float*>(const_cast<void*>(address(6)));
    params.small_q_path = pick(w.small_q);
    const MaskType mask = pick(w.masks);
    const bool varlen = w.varlen && coin() && coin();
    const bool nhd = coin();
    auto tensor = [&](int slot, std::int64_t b, std::int64_t h, std::int64_t n) {
      return nhd ? TensorRef::nhd(address(slot), dt, b, h, n, hd) : TensorRef::hnd(address(slot), dt, b, h, n, hd);
    };
    what = "hd " + std::to_string(hd) + " " + dtype_name(dt) + " B " + std::to_string(batch) + " H " +
           std::to_string(heads) + "/" + std::to_string(kv_heads) + " N " + std::to_string(q_len) + "/" +
           std::to_string(kv_len) + " causal " + std::to_string(static_cast<int>(params.causal)) + " mask " +
           mask_type_name(mask) + (varlen ? " varlen" : "") + (params.lse ? " lse" : "");
    try {
      if (varlen) {
        SeqLens lens;
        lens.batch = batch;
        if (coin()) {  // packed: views with batch 1 of the total tokens
          lens.cu_seqlens_q = static_cast<const std::int32_t*>(address(7));
          lens.cu_seqlens_k = static_cast<const std::int32_t*>(address(8));
          lens.max_seqlen_q = q_len;
          lens.max_seqlen_k = kv_len;
          return plan::validate_attention_varlen(tensor(1, 1, heads, batch * q_len), tensor(2, 1, kv_heads, batch * kv_len),
                                                 tensor(3, 1, kv_heads, batch * kv_len), tensor(4, 1, heads, batch * q_len),
                                                 lens, params, arch);
        }
        lens.kv_lens = static_cast<const std::int32_t*>(address(7));
        return plan::validate_attention_varlen(tensor(1, batch, heads, q_len), tensor(2, batch, kv_heads, kv_len),
                                               tensor(3, batch, kv_heads, kv_len), tensor(4, batch, heads, q_len), lens,
                                               params, arch);
      }
      if (mask != MaskType::None) {
        params.mask.data = address(5);
        params.mask.type = mask;
        params.mask.stride_k = 1;
        params.mask.stride_q = kv_len;
        if (coin()) params.mask.stride_head = q_len * kv_len;
        if (coin()) params.mask.stride_batch = heads * q_len * kv_len;
      }
      return plan::validate_attention(tensor(1, batch, heads, q_len), tensor(2, batch, kv_heads, kv_len),
                                      tensor(3, batch, kv_heads, kv_len), tensor(4, batch, heads, q_len), params, arch);
    } catch (const Error&) {
      return std::nullopt;
    }
  }
};

// A tuning database whose tiles differ from the heuristic and between size buckets: two
// candidates of the family, at q/kv buckets 1024 and 16384, for every head dim and causal mode.
plan::TuningDb tuned_db(const plan::WarmupSelection& w, kernels::Arch arch) {
  std::vector<plan::TuningEntry> entries;
  const plan::CodeIdentity code = plan::CodeIdentity::current();
  for (int hd : w.head_dims)
    for (DType dt : w.dtypes)
      for (bool causal : {false, true}) {
        plan::Specialisation s = plan::Specialisation::defaults(arch, hd, causal ? CausalMode::TopLeft : CausalMode::None, dt);
        const kernels::KernelSpec base = s.attention_spec(arch, {});
        const auto& tiles = plan::tile_candidates(base.family, arch);
        std::vector<kernels::TileConfig> ok;
        for (const auto& t : tiles) {
          kernels::KernelSpec k = base;
          k.tile = t;
          if (!plan::static_reject_reason(k, plan::default_max_smem_optin(arch))) ok.push_back(t);
        }
        if (ok.size() < 2) continue;
        int i = 0;
        for (std::int64_t n : {1024, 16384}) {
          plan::TuningEntry e;
          e.key = s.key(arch, n, n, 32, 32);
          e.tile = ok[static_cast<std::size_t>(i++) % ok.size() == 0 ? ok.size() - 1 : 1];
          e.code_version = code.code_version;
          e.nvrtc_version = code.nvrtc_version;
          entries.push_back(e);
        }
      }
  return plan::TuningDb(entries);
}

}  // namespace

TEST_CASE("warm-up: 1,200 random calls per arch inside the selection load only kernels the warm-up compiles") {
  const plan::WarmupSelection w = wide_selection();
  for (const kernels::ArchInfo& info : kernels::arch_table()) {
    const std::string arch = info.name;
    CAPTURE(arch);
    for (bool tuned : {false, true}) {
      CAPTURE(tuned);
      plan::CallSettings s = settings_for(info.arch);
      const plan::Planner planner(tuned_db(w, info.arch), info.arch, s.device.max_smem_optin);
      if (tuned) s.planner = &planner;
      const plan::WarmupSet set = plan::warmup_kernel_specs(w, s);
      const std::set<std::string> warm = keys_of(set.specs);
      REQUIRE(!warm.empty());
      RandomCall calls(0x5A6E2 + info.cc * 2 + (tuned ? 1 : 0));
      int checked = 0, direct = 0, varlen = 0, masked = 0, tiles_differ = 0;
      std::set<std::string> tiles;
      while (checked < 1200) {
        std::string what;
        const auto p = calls.draw(w, info.arch, what);
        if (!p) continue;
        CAPTURE(what);
        std::vector<kernels::KernelSpec> call;
        try {
          call = plan::call_kernel_specs(*p, s);
        } catch (const Error& e) {
          // A call no kernel runs here (e.g. INT8 path limits): it loads nothing either.
          MESSAGE("refused: " << e.what());
          continue;
        }
        for (const auto& k : call) {
          CAPTURE(k.key());
          CHECK(warm.count(k.key()) == 1);
          if (k.family == kernels::KernelFamily::AttentionMma || k.family == kernels::KernelFamily::AttentionWgmma)
            tiles.insert(plan::tile_str(k.tile) + kernels::family_name(k.family) + std::to_string(k.head_dim));
        }
        ++checked;
        direct += p->direct;
        varlen += p->varlen;
        masked += p->mask != 0;
      }
      // The draw reached every kind of call the selection holds.
      CHECK(direct > 50);
      CHECK(varlen > 50);
      CHECK(masked > 50);
      if (tuned) tiles_differ = static_cast<int>(tiles.size());
      if (tuned) CHECK(tiles_differ > static_cast<int>(w.head_dims.size()));  // tuned tiles were drawn
    }
  }
}

TEST_CASE("warm-up: the set is what a call needs, no more than the selection's kernels") {
  plan::WarmupSelection w;
  w.head_dims = {128};
  w.dtypes = {DType::F16};
  w.causal = {CausalMode::None};
  const plan::CallSettings s = settings_for(kernels::Arch::Sm90a);
  const plan::WarmupSet set = plan::warmup_kernel_specs(w, s);
  // The quantized path: channel_stats in both forms (the walk and the at-once form: a call's head
  // count picks one), quantize_k, quantize_v and the attention kernel with Q quantized inside (no
  // quantize_q); the direct path: split kernels for 16/32/64/128 rows per CTA and the merge kernel.
  int attention = 0, quantize = 0, split = 0, merge = 0;
  for (const auto& k : set.specs) {
    attention += k.family == kernels::KernelFamily::AttentionWgmma;
    quantize += k.family == kernels::KernelFamily::Quantize;
    split += k.family == kernels::KernelFamily::DirectSplit;
    merge += k.family == kernels::KernelFamily::DirectMerge;
    if (k.family == kernels::KernelFamily::AttentionWgmma) CHECK(k.q_in_kernel);
    if (k.family == kernels::KernelFamily::Quantize) CHECK(k.op != kernels::QuantOp::QuantizeQ);
  }
  CHECK(attention == 1);
  CHECK(quantize == 4);
  CHECK(split == 4);
  CHECK(merge == 1);
  CHECK(set.specs.size() == 10);
  CHECK(set.combinations == 1);
  CHECK(set.left_out.empty());
  // A selection the arch cannot run is left out with the reason, not silently dropped.
  w.pv = {PvPrecision::Fp8};
  const plan::WarmupSet ampere = plan::warmup_kernel_specs(w, settings_for(kernels::Arch::Sm80));
  CHECK(ampere.specs.empty());
  REQUIRE(!ampere.left_out.empty());
  CHECK(ampere.left_out.front().find("FP8") != std::string::npos);
}

TEST_CASE("tuner: the kernels a candidate is timed with are those a call of that shape and tile loads") {
  for (kernels::Arch arch : {kernels::Arch::Sm90a, kernels::Arch::Sm89, kernels::Arch::Sm80}) {
    const std::string name = kernels::arch_name(arch);
    CAPTURE(name);
    for (QuantPath path : {QuantPath::Auto, QuantPath::Split}) {
      autotune::PrepareOptions o;
      o.arch = arch;
      o.quant_path = path;
      for (int hd : {64, 128}) {
        const plan::Specialisation sp = plan::Specialisation::defaults(arch, hd, CausalMode::TopLeft, DType::BF16);
        const plan::CallSettings s = autotune::call_settings(o, sp);
        // A call of the shape the tuner times (B 4, H 32, N 4096), through the API's validation.
        AttentionParams params;
        params.causal = CausalMode::TopLeft;
        const auto t = [&](int slot, std::int64_t n) { return TensorRef::hnd(address(slot), DType::BF16, 4, 32, n, hd); };
        const plan::AttentionProblem p = plan::validate_attention(t(1, 4096), t(2, 4096), t(3, 4096), t(4, 4096), params, arch);
        const std::vector<kernels::KernelSpec> call = plan::call_kernel_specs(p, s);
        // The tuner's candidate with the heuristic tile (what it times first and keeps without a
        // measured gain): its attention spec and companions.
        const auto plans = autotune::plan_candidates({sp}, o);
        REQUIRE(plans.size() == 1);
        const autotune::Candidate* h = plans[0].heuristic_candidate();
        REQUIRE(h != nullptr);
        const kernels::KernelSpec timed = h->spec;
        std::set<std::string> tuner = keys_of(plan::companion_specs(timed, path));
        tuner.insert(timed.key());
        // and channel_stats' other form (the head count picks one per call)
        for (const std::string& key : keys_of(call)) CHECK(tuner.count(key) == 1);
        CHECK(tuner.size() == keys_of(call).size() + (plan::quantized_call_kernels(timed, path).stats_at_once ? 1 : 0));
        CHECK(timed.q_in_kernel == (path == QuantPath::Auto && kernels::attention_family(timed.family).q_in_kernel_ok(timed)));
      }
    }
  }
}
