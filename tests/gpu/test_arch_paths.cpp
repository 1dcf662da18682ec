// Specification of the coverage paths (issue 23, DESIGN.md "GPU coverage") on a GPU newer than
// them: a Context with ContextOptions::target_arch generates PTX for that arch, which the driver
// JIT-compiles for the device — so an H100 runs
//  - the Ampere path (target sm_80: INT8 QKᵀ + FP16 P̃V with fp32 accumulation, INT4 opt-in) and
//  - the Ada / Blackwell mma.sync path (target sm_89: INT8 QKᵀ + FP8 P̃V, FP16 P̃V and INT4 as
//    options; Blackwell's cubins are this source with native e4m3 mma as well),
// over head dims 64/128/256 and an odd one, causal none / top-left / bottom-right, N up to 8K,
// fp16/bf16, HND/NHD, GQA; each call
//  - equals the CPU emulation of the spec the API planned, run on the very codes the kernels
//    read (same algorithm: only ex2.approx, reduction order and the final rounding differ);
//  - against fp64 attention is as accurate as that algorithm (and meets the targets of
//    accuracy_targets.hpp on diffuse inputs);
// and
//  - FP16 P̃V is more accurate than FP8 P̃V on the same channel-biased inputs (printed: rel-L1 of
//    each path, the numbers of docs/numerics.md's accuracy table);
//  - the FP16 P̃V option runs on the device's own target too (the mma family on sm_90a);
//  - fp16 accumulation of P̃V (SageAttention2++, PvAccum::Fp16, issue 31) on the sm_89 path (FP8
//    and FP16 P̃V) and the sm_80 path (FP16) equals the emulation with the fp16 accumulator
//    (printed: the share of bit-equal outputs for the emulation's k-steps of 16 and 32 keys — the
//    H100's ptxas may lower the e4m3 k32 mma into two k16 HMMAs — and rel-L1 against fp64 next to
//    the fp32-accumulation variant on the same inputs); sm_90a refuses it;
//  - the driver's JIT reports the PTX kernels' registers (printed) and no local memory (warned);
//  - a target the device cannot run (a newer arch) is refused when the Context is created, and
//    SAGE2_TARGET_ARCH sets the target like the option.
// Run alone: sage2_gpu_tests -tc="gpu arch paths*".
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accuracy_targets.hpp"
#include "device_tensor.hpp"
#include "gpu_env.hpp"
#include "kernels/attention_family.hpp"
#include "kernels/quant_buffers.hpp"
#include "plan/attention_validate.hpp"
#include "reference/kernel_config.hpp"
#include "runtime/attention_plan.hpp"
#include "sage2/reference.hpp"
#include "stage_download.hpp"

using namespace sage2;
namespace ref = sage2::reference;
using test::DeviceTensor;
using test::download_out;

namespace {

// One Context per requested target ("" = the device's own), created on first use; nullptr (with
// the reason) when the device cannot run that target.
Context* target_context(const std::string& arch, std::string* why = nullptr) {
  static std::map<std::string, std::unique_ptr<Context>> contexts;
  static std::map<std::string, std::string> refused;
  if (arch.empty()) return &test::gpu_context();  // the suite's own context
  if (auto it = contexts.find(arch); it != contexts.end()) return it->second.get();
  if (auto it = refused.find(arch); it != refused.end()) {
    if (why) *why = it->second;
    return nullptr;
  }
  try {
    ContextOptions o;
    o.target_arch = arch;
    auto c = std::make_unique<Context>(0, o);
    Context* p = c.get();
    contexts[arch] = std::move(c);
    return p;
  } catch (const Error& e) {
    refused[arch] = e.what();
    if (why) *why = e.what();
    return nullptr;
  }
}

struct Case {
  std::string target;  // ContextOptions::target_arch ("" = the device's own)
  DType dtype = DType::F16;
  bool nhd = false;
  int head_dim = 128;
  std::int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 1, kv_len = 1;
  CausalMode causal = CausalMode::None;
  QkBits bits = QkBits::Auto;
  PvPrecision pv = PvPrecision::Auto;
  bool smooth_v = false;
  int model = 0;  // accuracy_targets.hpp: 0 diffuse, 1 sharp
  PvAccum acc = PvAccum::Auto;
  int acc16_step = 0;  // EmulationOptions::pv_acc16_step of the emulation compared against
};

std::string describe(const Case& c) {
  char b[260];
  std::snprintf(b, sizeof b, "target %s: %s %s d=%d B%lld Hq%lld Hkv%lld Nq=%lld Nk=%lld %s qk%d pv:%s acc:%s sv%d %s",
                c.target.empty() ? "native" : c.target.c_str(), dtype_name(c.dtype), c.nhd ? "NHD" : "HND",
                c.head_dim, (long long)c.batch, (long long)c.q_heads, (long long)c.kv_heads, (long long)c.q_len,
                (long long)c.kv_len, causal_mode_name(c.causal), static_cast<int>(c.bits), pv_precision_name(c.pv),
                pv_accum_name(c.acc), c.smooth_v, test::model_name(c.model));
  return b;
}

struct Outcome {
  bool ran = false;
  std::string skipped;
  kernels::KernelSpec spec;
  ref::Metrics vs_exact, vs_emul, emul_vs_exact;
  double max_abs_emul = 0, ref_max = 0;
  double lse_err_emul = 0;
  double equal_fraction = 0;  // outputs bit-equal to the emulation's (rounded to the dtype)
  std::int64_t unwritten = 0;
  int registers = -1, local_bytes = 0;
};

Outcome run_case(const Case& c, std::uint64_t seed) {
  Outcome r;
  Context* ctx = target_context(c.target, &r.skipped);
  if (!ctx) return r;
  Context::Impl& impl = runtime::context_impl(*ctx);
  const ref::AttentionInputs in = test::make_inputs(c.model, seed, c.dtype, c.batch, c.q_heads, c.kv_heads, c.q_len,
                                                    c.kv_len, c.head_dim, c.nhd);
  DeviceTensor q(in.q), k(in.k), v(in.v);
  DeviceTensor out(ref::HostTensor(c.dtype, c.batch, c.q_heads, c.q_len, c.head_dim, c.nhd));
  out.dev->poison(0xFF);  // NaN in f16 and bf16
  test::DeviceBuffer lse(static_cast<std::size_t>(c.batch * c.q_heads * c.q_len) * 4);
  lse.poison(0xFF);
  AttentionParams p;
  p.causal = c.causal;
  p.qk_bits = c.bits;
  p.pv_precision = c.pv;
  p.pv_accum = c.acc;
  p.smooth_v = c.smooth_v;
  p.small_q_path = SmallQPath::Quantized;  // the quantized paths are what this file compares
  p.lse = static_cast<float*>(lse.get());
  const std::size_t ws_bytes = ctx->workspace_size(q.ref(), k.ref(), v.ref(), out.ref(), p);
  test::DeviceBuffer ws(ws_bytes);
  p.workspace = ws.get();
  p.workspace_bytes = ws_bytes;
  ctx->attention(q.ref(), k.ref(), v.ref(), out.ref(), p);
  test::synchronize();
  r.ran = true;

  // The spec the API ran (the Context's own planner), its kernel as the driver JIT-compiled it.
  const plan::AttentionProblem prob = plan::validate_attention(q.ref(), k.ref(), v.ref(), out.ref(), p, impl.arch());
  r.spec = runtime::plan_attention(prob, impl);
  const runtime::LoadedKernel& lk = impl.kernels().get(r.spec);
  r.registers = lk.facts.registers;
  r.local_bytes = lk.facts.stack_frame_bytes + lk.facts.spill_store_bytes;

  const std::vector<float> got = download_out(out);
  ref::HostTensor probe = out.host;
  out.dev->download(probe.bits().data(), probe.bits().size() * 2);
  for (std::uint16_t b : probe.bits()) r.unwritten += b == 0xFFFFu;
  std::vector<float> got_lse(static_cast<std::size_t>(c.batch * c.q_heads * c.q_len));
  lse.download(got_lse.data(), got_lse.size() * 4);

  // (a kernel that quantized Q itself left no Q̂ behind: the reference's Q part stands in for it)
  std::optional<ref::QuantizedHost> q_part;
  if (r.spec.q_in_kernel) q_part = ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(r.spec),
                                                   test::stage_options(r.spec));
  const ref::QuantizedHost stage = test::download_stage(
      ws, kernels::quant_buffers(kernels::QuantProblem{{c.batch, c.q_heads, c.kv_heads, c.q_len, c.kv_len, c.head_dim}}, r.spec),
      r.spec, q_part ? &*q_part : nullptr);
  ref::EmulationOptions mo;
  mo.round_output = true;
  mo.stage = &stage;
  mo.sample_statistics = stage.sample_statistics;
  // the wgmma FP8 accumulator keeps 13 mantissa bits (tests/gpu/test_probe_wgmma.cpp); mma.sync's
  // f32 accumulation (FP16 P̃V, and FP8 run as f16 HMMA on Hopper) is modelled as fp32
  mo.accum_mantissa_bits = r.spec.family == kernels::KernelFamily::AttentionWgmma ? 13 : 23;
  mo.pv_acc16_step = c.acc16_step;
  const ref::EmulationResult emul = ref::emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(r.spec), mo);
  ref::AttentionOptions xo;
  xo.causal = c.causal;
  const ref::ExactResult exact = ref::exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), xo);

  r.vs_exact = ref::compare(exact.o, got);
  std::vector<double> emul_d(emul.o.begin(), emul.o.end());
  r.vs_emul = ref::compare(emul_d, got);
  r.emul_vs_exact = ref::compare(exact.o, emul_d);
  std::size_t equal = 0;
  for (std::size_t i = 0; i < got.size(); ++i) equal += got[i] == emul.o[i];
  r.equal_fraction = got.empty() ? 1.0 : static_cast<double>(equal) / static_cast<double>(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) continue;
    r.max_abs_emul = std::max(r.max_abs_emul, std::fabs(static_cast<double>(got[i]) - emul.o[i]));
    r.ref_max = std::max(r.ref_max, std::fabs(static_cast<double>(emul.o[i])));
  }
  for (std::size_t i = 0; i < got_lse.size(); ++i) {
    const double m = emul.lse[i], g = got_lse[i];
    if (std::isinf(m)) {
      if (!(std::isinf(g) && g < 0)) r.lse_err_emul = INFINITY;
      continue;
    }
    r.lse_err_emul = std::max(r.lse_err_emul, std::isfinite(g) ? std::fabs(g - m) : INFINITY);
  }
  return r;
}

// The checks every case gets: written, same algorithm as the emulation, as accurate as it.
void check_case(const Case& c, const Outcome& r) {
  CHECK(r.unwritten == 0);
  CHECK(r.vs_exact.nonfinite == 0);
  // same algorithm (the PTX kernels included: the driver's ptxas must not change the numerics)
  // The wgmma family (the native default on sm_90a) gets its own suite's bounds
  // (tests/gpu/test_wgmma.cpp): its FP8 accumulator truncates each k32 step's products against
  // the largest one, which the emulation's 13-bit model sums exactly first (rel-L1 up to ~6e-4,
  // a few ulp); the mma.sync paths' fp32 accumulation is modelled exactly.
  const bool wg = r.spec.family == kernels::KernelFamily::AttentionWgmma;
  const double ulp = c.dtype == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;
  CHECK_MESSAGE(r.vs_emul.rel_l1 <= (wg ? 2e-3 : 2e-4), "rel-L1 vs emulation " << r.vs_emul.rel_l1);
  CHECK_MESSAGE(r.max_abs_emul <= (wg ? 8 : 4) * ulp * std::max(1.0, r.ref_max),
                "max abs vs emulation " << r.max_abs_emul << " (|emulation| max " << r.ref_max << ")");
  CHECK_MESSAGE(r.lse_err_emul <= 1e-3, "LSE vs emulation " << r.lse_err_emul);
  // as accurate as the algorithm against fp64
  CHECK(r.vs_exact.rel_l1 <= r.emul_vs_exact.rel_l1 * (wg ? 1.05 : 1.01) + (wg ? 1e-3 : 1e-4));
  CHECK(r.vs_exact.cos_sim >= r.emul_vs_exact.cos_sim - 1e-5);
  const int bits = r.spec.qk_bits;
  const test::Accuracy t = test::target(bits, c.model == 0 && c.kv_len < 1000 ? 1 : c.model);
  CHECK_MESSAGE(r.vs_exact.cos_sim >= t.cos_min, "cos vs exact " << r.vs_exact.cos_sim);
  CHECK_MESSAGE(r.vs_exact.rel_l1 <= t.rel_l1_max, "rel-L1 vs exact " << r.vs_exact.rel_l1);
  WARN_MESSAGE(r.local_bytes == 0, "the kernel uses " << r.local_bytes << " bytes of local memory (spills)");
}

void print(const Case& c, const Outcome& r) {
  std::printf("arch path %-100s | %s %s%s regs %d local %d | exact: cos %.6f relL1 %.5f | emul: relL1 %.2e maxabs %.2e | "
              "lse %.2e\n",
              describe(c).c_str(), kernels::family_name(r.spec.family), kernels::arch_name(r.spec.arch),
              r.spec.pv_fp16 ? " pv16" : "", r.registers, r.local_bytes, r.vs_exact.cos_sim, r.vs_exact.rel_l1,
              r.vs_emul.rel_l1, r.max_abs_emul, r.lse_err_emul);
  std::fflush(stdout);
}

// The matrix of one target: head dims 64/128/256 and an odd one, the causal modes, N up to 8K,
// both dtypes and layouts, GQA, smoothing of V, INT4 (opt-in) and, where FP8 is the default, the
// FP16 option.
std::vector<Case> matrix(const std::string& target, bool fp8_default) {
  const auto F16 = DType::F16, BF16 = DType::BF16;
  const auto NONE = CausalMode::None, TL = CausalMode::TopLeft, BR = CausalMode::BottomRight;
  std::vector<Case> v;
  auto add = [&](DType dt, bool nhd, int d, std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t nq,
                 std::int64_t nk, CausalMode cm, QkBits bits, PvPrecision pv, bool sv, int model) {
    Case c;
    c.target = target;
    c.dtype = dt;
    c.nhd = nhd;
    c.head_dim = d;
    c.batch = b;
    c.q_heads = hq;
    c.kv_heads = hkv;
    c.q_len = nq;
    c.kv_len = nk;
    c.causal = cm;
    c.bits = bits;
    c.pv = pv;
    c.smooth_v = sv;
    c.model = model;
    v.push_back(c);
  };
  const auto A = QkBits::Auto, I4 = QkBits::Int4;
  const auto PA = PvPrecision::Auto;
  //  dtype nhd   d   B  Hq Hkv  Nq    Nk   causal bits pv  sv  model
  add(F16, false, 64, 2, 4, 2, 1024, 1024, TL, A, PA, false, 0);
  add(BF16, true, 128, 1, 2, 1, 2048, 2048, NONE, A, PA, true, 1);
  add(F16, false, 128, 1, 1, 1, 8192, 8192, BR, A, PA, false, 0);
  add(BF16, false, 65, 1, 2, 2, 300, 1000, BR, A, PA, false, 0);  // odd head dim: padded Q/K/V
  add(F16, true, 256, 1, 2, 1, 1024, 1024, TL, A, PA, true, 0);   // two V passes
  add(BF16, false, 64, 1, 2, 1, 4096, 4096, NONE, A, PA, false, 0);
  add(F16, false, 128, 1, 2, 1, 2048, 2048, NONE, I4, PA, false, 0);  // INT4 opt-in (smooth Q, ΔS)
  if (fp8_default) add(BF16, false, 128, 1, 2, 2, 2048, 2048, TL, A, PvPrecision::Fp16, false, 0);  // FP16 option
  if (test::reduced())
    for (Case& c : v) {
      c.q_len = std::min<std::int64_t>(c.q_len, 200);
      c.kv_len = std::min<std::int64_t>(c.kv_len, 200);
    }
  return v;
}

void run_matrix(const std::string& target, bool fp8_default) {
  std::string why;
  if (!target_context(target, &why)) {
    MESSAGE("skipped: target " << target << " refused on this device: " << why);
    return;
  }
  const DeviceInfo& info = target_context(target)->device();
  // (doctest prints a const char* as an address: the conditional literal goes in as a std::string)
  MESSAGE("target " << target << ": arch " << info.arch << std::string(info.ptx ? " (PTX, driver JIT)" : "") << "; " << info.path
                    << (info.target_note.empty() ? "" : "; " + info.target_note));
  CHECK(info.arch == std::string(kernels::arch_name(kernels::parse_arch(target))));
  const std::uint64_t seed = test::base_seed();
  MESSAGE("base seed " << seed);
  int n = 0;
  for (const Case& c : matrix(target, fp8_default)) {
    const std::string name = describe(c);
    CAPTURE(name);
    const Outcome r = run_case(c, seed + static_cast<std::uint64_t>(++n));
    REQUIRE(r.ran);
    print(c, r);
    CHECK(r.spec.family == kernels::KernelFamily::AttentionMma);
    CHECK(r.spec.pv_fp16 == (c.pv == PvPrecision::Fp16 || (c.pv == PvPrecision::Auto && !fp8_default)));
    check_case(c, r);
  }
}

}  // namespace

TEST_CASE("gpu arch paths: the Ampere path (target sm_80: INT8 QK + FP16 P̃V) as PTX equals the emulation") {
  run_matrix("sm_80", /*fp8_default=*/false);
}

TEST_CASE("gpu arch paths: the Ada/Blackwell mma path (target sm_89: INT8 QK + FP8 P̃V) as PTX equals the emulation") {
  run_matrix("sm_89", /*fp8_default=*/true);
}

TEST_CASE("gpu arch paths: FP16 P̃V is more accurate than FP8 on channel-biased inputs, on every path") {
  // Same inputs through: the device's default path, the FP16 option on the device's own target
  // (the mma family), the sm_89 path with FP8 and with FP16, and the sm_80 path.
  const std::uint64_t base = test::base_seed();
  MESSAGE("base seed " << base << " (SAGE2_TEST_SEED=" << base << " replays it)");
  const std::uint64_t seed = base + 1000;
  struct Run {
    const char* what;
    std::string target;
    PvPrecision pv;
  };
  const Run runs[] = {{"native default", "", PvPrecision::Auto},
                      {"native FP16 option", "", PvPrecision::Fp16},
                      {"sm_89 FP8", "sm_89", PvPrecision::Fp8},
                      {"sm_89 FP16 option", "sm_89", PvPrecision::Fp16},
                      {"sm_80 FP16", "sm_80", PvPrecision::Auto}};
  for (int model : {0, 1}) {
    for (CausalMode causal : {CausalMode::None, CausalMode::TopLeft}) {
      std::map<std::string, Outcome> got;
      for (const Run& run : runs) {
        Case c;
        c.target = run.target;
        c.dtype = DType::F16;
        c.head_dim = 128;
        c.q_heads = 2;
        c.kv_heads = 2;
        c.q_len = c.kv_len = test::reduced() ? 256 : 4096;
        c.causal = causal;
        c.pv = run.pv;
        c.model = model;
        const std::string name = std::string(run.what) + ": " + describe(c);
        CAPTURE(name);
        const Outcome r = run_case(c, seed + static_cast<std::uint64_t>(model));  // the same inputs
        if (!r.ran) {
          MESSAGE("skipped " << run.what << ": " << r.skipped);
          continue;
        }
        print(c, r);
        check_case(c, r);
        if (run.pv == PvPrecision::Fp16) CHECK(r.spec.pv_fp16);
        if (run.pv == PvPrecision::Fp16) CHECK(r.spec.family == kernels::KernelFamily::AttentionMma);
        got[run.what] = r;
      }
      auto rel = [&](const char* k) { return got.count(k) ? got[k].vs_exact.rel_l1 : -1.0; };
      std::printf("arch path accuracy (%s, %s, hd 128, N %lld, fp16): rel-L1 vs fp64 — native default %.5f, native FP16 %.5f, "
                  "sm_89 FP8 %.5f, sm_89 FP16 %.5f, sm_80 FP16 %.5f\n",
                  test::model_name(model), causal_mode_name(causal), (long long)(test::reduced() ? 256 : 4096),
                  rel("native default"), rel("native FP16 option"), rel("sm_89 FP8"), rel("sm_89 FP16 option"),
                  rel("sm_80 FP16"));
      std::fflush(stdout);
      if (got.count("sm_89 FP8") && got.count("sm_89 FP16 option"))
        CHECK(got["sm_89 FP16 option"].vs_exact.rel_l1 < got["sm_89 FP8"].vs_exact.rel_l1);
      if (got.count("native default") && got.count("native FP16 option") && !got["native default"].spec.pv_fp16)
        CHECK(got["native FP16 option"].vs_exact.rel_l1 < got["native default"].vs_exact.rel_l1);
      // the two FP16 paths compute the same contract on the same codes' kind: alike to fp64
      if (got.count("sm_80 FP16") && got.count("sm_89 FP16 option"))
        CHECK(std::fabs(got["sm_80 FP16"].vs_exact.rel_l1 - got["sm_89 FP16 option"].vs_exact.rel_l1) <=
              0.1 * got["sm_89 FP16 option"].vs_exact.rel_l1 + 1e-5);
    }
  }
}

TEST_CASE("gpu arch paths: fp16 P̃V accumulation (SageAttention2++) on the sm_89 and sm_80 paths equals the emulation") {
  // Each case runs with fp32 accumulation and with fp16 accumulation on the same inputs; the fp16
  // run is compared with the emulation at k-steps of 16 and of 32 keys (the closer one is checked
  // as every case is; both printed), and against fp64 next to the fp32 run.
  struct Path {
    const char* target;
    PvPrecision pv;
  };
  const Path paths[] = {{"sm_89", PvPrecision::Fp8}, {"sm_89", PvPrecision::Fp16}, {"sm_80", PvPrecision::Auto}};
  const std::uint64_t base = test::base_seed();
  MESSAGE("base seed " << base << " (SAGE2_TEST_SEED=" << base << " replays it)");
  const std::uint64_t seed = base + 2000;
  int n = 0;
  for (const Path& path : paths) {
    std::string why;
    if (!target_context(path.target, &why)) {
      MESSAGE("skipped: target " << path.target << " refused on this device: " << why);
      continue;
    }
    for (int d : {64, 128}) {
      for (int model : {0, 1}) {
        for (CausalMode causal : {CausalMode::None, CausalMode::TopLeft}) {
          Case c;
          c.target = path.target;
          c.pv = path.pv;
          c.dtype = DType::F16;
          c.head_dim = d;
          c.q_heads = 2;
          c.kv_heads = 1;
          c.q_len = c.kv_len = test::reduced() ? 200 : 2048;
          c.causal = causal;
          c.model = model;
          const std::uint64_t s = seed + static_cast<std::uint64_t>(++n);
          c.acc = PvAccum::Fp32;
          const std::string name32 = describe(c);
          CAPTURE(name32);
          const Outcome r32 = run_case(c, s);
          REQUIRE(r32.ran);
          print(c, r32);
          CHECK_FALSE(r32.spec.pv_acc16);
          check_case(c, r32);
          c.acc = PvAccum::Fp16;
          Outcome best;
          double best_err = INFINITY;
          for (int step : {16, 32}) {
            c.acc16_step = step;
            const std::string name = describe(c) + " emulation k-step " + std::to_string(step);
            CAPTURE(name);
            const Outcome r = run_case(c, s);
            REQUIRE(r.ran);
            CHECK(r.spec.pv_acc16);
            CHECK(r.spec.family == kernels::KernelFamily::AttentionMma);
            std::printf("arch path acc16 %-100s | emulation k-step %d: bit-equal %.4f, relL1 %.2e maxabs %.2e\n",
                        describe(c).c_str(), step, r.equal_fraction, r.vs_emul.rel_l1, r.max_abs_emul);
            if (r.vs_emul.rel_l1 < best_err) {
              best_err = r.vs_emul.rel_l1;
              best = r;
            }
          }
          c.acc16_step = 0;
          print(c, best);
          check_case(c, best);
          // fp16 accumulation costs little accuracy: within 10 % of the fp32 run's rel-L1
          CHECK_MESSAGE(best.vs_exact.rel_l1 <= 1.10 * r32.vs_exact.rel_l1 + 1e-4,
                        "rel-L1 vs fp64: fp16-acc " << best.vs_exact.rel_l1 << ", fp32-acc " << r32.vs_exact.rel_l1);
          std::printf("arch path acc16 accuracy (%s %s, hd %d, %s, %s, N %lld): rel-L1 vs fp64 fp32-acc %.5f, fp16-acc %.5f\n",
                      path.target, pv_precision_name(path.pv), d, test::model_name(model), causal_mode_name(causal),
                      (long long)c.q_len, r32.vs_exact.rel_l1, best.vs_exact.rel_l1);
          std::fflush(stdout);
        }
      }
    }
  }
  // the device's own target (sm_90a on an H100): no fp16 accumulation there
  Context& native = test::gpu_context();
  if (native.device().arch == std::string("sm_90a")) {
    const ref::AttentionInputs in = test::make_inputs(0, seed, DType::F16, 1, 1, 1, 64, 64, 64, false);
    DeviceTensor q(in.q), k(in.k), v(in.v);
    DeviceTensor out(ref::HostTensor(DType::F16, 1, 1, 64, 64, false));
    AttentionParams p;
    p.pv_accum = PvAccum::Fp16;
    p.small_q_path = SmallQPath::Quantized;
    try {
      native.attention(q.ref(), k.ref(), v.ref(), out.ref(), p);
      FAIL("pv_accum=fp16 ran on sm_90a");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(std::string(e.what()).find("pv_accum") != std::string::npos);
    }
  }
}

TEST_CASE("gpu arch paths: targets the device cannot run are refused; SAGE2_TARGET_ARCH sets the target") {
  const auto facts = runtime::device_facts(0);
  const int cc = facts.cc();
  for (const kernels::ArchInfo& a : kernels::arch_table()) {
    CAPTURE(a.name);
    ContextOptions o;
    o.target_arch = a.name;
    const bool runs = a.arch_specific ? a.cc == cc : a.cc <= cc;
    try {
      Context ctx(0, o);
      CHECK(runs);
      CHECK(ctx.device().arch == a.name);
      CHECK(ctx.device().ptx == (a.cc != cc));
      CHECK_FALSE(ctx.device().path.empty());
    } catch (const Error& e) {
      CHECK_FALSE(runs);
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(std::string(e.what()).find(a.name) != std::string::npos);
    }
  }
  {
    ContextOptions o;
    o.target_arch = "sm_75";
    CHECK_THROWS_WITH_AS(Context(0, o), doctest::Contains("sm_75"), Error);
  }
  if (cc >= 89) {
    ::setenv("SAGE2_TARGET_ARCH", "sm_89", 1);
    {
      Context ctx(0);
      CHECK(ctx.device().arch == "sm_89");
      CHECK(ctx.device().ptx == (cc != 89));
      CHECK(ctx.options().target_arch == "sm_89");
    }
    ::unsetenv("SAGE2_TARGET_ARCH");
  }
  Context plain(0);
  CHECK(plain.device().arch == std::string(kernels::arch_name(*facts.arch)));
  CHECK(plain.device().ptx == facts.ptx);
  MESSAGE("device " << facts.name << " (" << facts.cc_string() << "): target " << plain.device().arch
                    << (plain.device().ptx ? " (PTX)" : "") << "; path: " << plain.device().path);
}
