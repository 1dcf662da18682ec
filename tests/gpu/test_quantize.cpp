// Specification of the GPU quantize stage, every path (cluster: one launch of thread-block
// clusters, sm_90a; fused: one launch with device counters; onepass: K and V in one launch
// re-reading them from L2; split: the separate-launch baseline): for every variant it writes
// exactly the buffers the CPU reference (reference::quantize_stage) computes —
//  - K/V channel statistics: cluster, fused and onepass bit for bit (the reference follows their
//    fixed fp32 orders; onepass keeps split's), split to float rounding; means and scales to float
//    rounding (exactly, where they follow from the statistics alone, on the one-launch paths);
//  - onepass writes the same bytes as split in every output buffer;
//  - the split kernels with sampled statistics (KernelSpec::sampled_stats, Auto's) equal the
//    reference's sampled stage (QuantizeOptions::sample_statistics) the same way, V's amax
//    included, with the channel fix-up where a key exceeds the headroom (the spike cases), and
//    are deterministic;
//  - the one-launch paths are deterministic: two runs give identical bytes in every output buffer;
//  - codes exactly, except where the unrounded value sits within float rounding of a rounding
//    boundary (those are counted and reported; every other mismatch fails);
//  - the non-finite flags (q_bad, k_first_bad, v_first_bad) exactly (tests/gpu/test_nonfinite.cpp
//    plants NaN/Inf);
//  - every element written (outputs are poisoned before each run).
// The case list samples the full matrix deterministically so that every value of every axis
// appears; inputs are fresh random numbers each run (seed printed) or channel-biased activations.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <random>

#include "device_tensor.hpp"
#include "gpu_env.hpp"
#include "stage_download.hpp"
#include "kernels/attention_family.hpp"
#include "kernels/quantize_shape.hpp"
#include "runtime/quantize_stage.hpp"
#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

struct Case {
  std::int64_t seq;
  int head_dim;
  bool nhd;
  int gqa;
  int bits;
  DType dtype;
  bool smooth_q;
  bool smooth_k;
  bool smooth_v;
  bool wgmma;   // consumer = wgmma family (8-bit, sm_90a only)
  bool biased;  // channel-biased activations vs plain gaussian
  bool pv16 = false;  // FP16 V̂ (FP16 P̃V, the mma family)
  float v_gain = 1;   // V scaled by this (bf16 values beyond 2^15: FP16 V̂'s power-of-two scale)
  float v_spike = 0;  // nonzero: V channels 0-3 of the last unit's first key (no sample takes it) set to ±this
};

std::vector<Case> case_matrix() {
  const std::int64_t seqs[] = {1, 17, 127, 4096, 29040};
  const int dims[] = {1, 32, 40, 64, 80, 96, 128, 160, 256, 512};
  std::vector<Case> cases;
  for (int i = 0; i < 20; ++i) {
    Case c;
    c.head_dim = dims[i % 10];
    c.seq = seqs[(i * 3) % 5];
    // Keep the largest tensors moderate: 29040 tokens only up to head dim 160.
    if (c.seq == 29040 && c.head_dim > 160) c.seq = 4096;
    c.nhd = (i / 2) % 2;
    c.gqa = (i % 4 < 2) ? 1 : 4;
    c.bits = (i % 3 == 0) ? 4 : 8;
    c.dtype = (i % 5 < 3) ? DType::F16 : DType::BF16;
    c.smooth_q = (i % 2 == 0) || c.bits == 4;
    c.smooth_k = (i % 7 != 3);
    c.smooth_v = (i % 3 == 1);
    c.wgmma = c.bits == 8 && (i % 4 == 1);
    c.biased = (i % 2 == 1);
    c.pv16 = !c.wgmma && (i % 3 == 2);  // FP16 V̂ on a third of the mma cases, every head dim class
    cases.push_back(c);
  }
  // FP16 V̂ at the main head dims with smoothing of V, and bf16 V beyond fp16's range (δV = 2^k).
  cases.push_back({4096, 128, false, 1, 8, DType::F16, false, true, true, false, true, true});
  cases.push_back({1000, 64, true, 4, 8, DType::BF16, false, true, false, false, true, true, 65536.f});
  cases.push_back({777, 96, false, 1, 8, DType::BF16, false, true, true, false, false, true, 1.0e6f});
  // Keys beyond the sampled statistics' headroom in units no sample takes: the sampled stage's
  // fix-up of those channels (FP8 and FP16 V̂, with and without smoothing of V).
  cases.push_back({4096, 128, false, 1, 8, DType::F16, false, true, false, true, true, false, 1, 500.f});
  cases.push_back({3000, 64, true, 2, 8, DType::BF16, false, true, true, false, false, false, 1, -2000.f});
  cases.push_back({2048, 96, false, 1, 8, DType::F16, false, true, true, false, true, true, 1, 300.f});
  // Head dims 33-39 on the wgmma family: K's warp-group form loads their rows (not multiples of 8
  // elements) one element at a time, 5 real chunks over rows of 8 lanes; the sampled walk's one
  // pass at P = 16 row slots.
  cases.push_back({1000, 36, false, 1, 8, DType::F16, false, true, false, true, true});
  cases.push_back({300, 39, true, 2, 8, DType::BF16, false, true, true, true, false});
  // The longest sequence with the largest head dims that are still cheap, and head dim 512.
  cases.push_back({29040, 128, false, 4, 8, DType::BF16, true, true, true, false, true});
  cases.push_back({127, 512, true, 1, 4, DType::F16, true, true, false, false, true});
  // A long sequence at the widest head dim: 274 statistics chunks of K and of V per group.
  cases.push_back({70000, 512, false, 1, 8, DType::BF16, false, true, true, false, true});
  // Reduced suite (compute-sanitizer): the same variants on at most 600 tokens — still several
  // 256-token statistics chunks, so the fused stage's cross-block hand-offs are exercised.
  if (test::reduced())
    for (Case& c : cases) c.seq = std::min<std::int64_t>(c.seq, 600);
  return cases;
}

std::string describe(const Case& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "N=%lld d=%d %s gqa=%d int%d %s sq%d sk%d sv%d %s %s%s v*%g spike %g", (long long)c.seq,
                c.head_dim, c.nhd ? "NHD" : "HND", c.gqa, c.bits, dtype_name(c.dtype), c.smooth_q, c.smooth_k,
                c.smooth_v, c.wgmma ? "wgmma" : "mma", c.biased ? "biased" : "gaussian", c.pv16 ? " pv16" : "",
                static_cast<double>(c.v_gain), static_cast<double>(c.v_spike));
  return buf;
}

using test::download;

// Floats equal up to float rounding of differently ordered reductions: relative `rel` of the
// larger magnitude, plus `abs` (for values that are sums with cancellation).
struct FloatCheck {
  std::int64_t bad = 0, checked = 0;
  double worst = 0;
  void run(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel, double abs) {
    REQUIRE(gpu.size() == cpu.size());
    for (std::size_t i = 0; i < gpu.size(); ++i) {
      ++checked;
      const double g = gpu[i], c = cpu[i];
      if (std::isnan(c) && std::isnan(g)) continue;
      const double err = std::fabs(g - c);
      const double tol = rel * std::max(std::fabs(g), std::fabs(c)) + abs;
      if (!(err <= tol)) {
        if (bad < 5) MESSAGE("index " << i << ": gpu " << g << " cpu " << c);
        ++bad;
      }
      worst = std::max(worst, err / (tol > 0 ? tol : 1));
    }
  }
};

// Codes: mismatches allowed only near a rounding boundary (margin below `near`).
struct CodeCheck {
  std::int64_t mismatches = 0, near_boundary = 0, checked = 0;
};

sage2::kernels::KernelSpec attention_spec_for(const Case& c, sage2::kernels::Arch arch) {
  sage2::kernels::KernelSpec s;
  s.family = c.wgmma ? sage2::kernels::KernelFamily::AttentionWgmma : sage2::kernels::KernelFamily::AttentionMma;
  s.arch = arch;
  s.head_dim = c.head_dim;
  s.qk_bits = c.bits;
  s.smooth_q = c.smooth_q;
  s.smooth_k = c.smooth_k;
  s.smooth_v = c.smooth_v;
  s.in_dtype = c.dtype;
  s.out_dtype = c.dtype;
  s.tile = c.wgmma ? sage2::kernels::TileConfig{128, 128, 8, 2} : sage2::kernels::TileConfig{128, 64, 4, 1};
  s.pv_fp16 = c.pv16 || sage2::kernels::default_pv_fp16(arch);  // FP8 V̂ does not exist on Ampere targets
  return s;
}

}  // namespace

TEST_CASE("gpu quantize: every variant equals the CPU reference; every output written") {
  Context& ctx = test::gpu_context();
  const auto arch = runtime::context_impl(ctx).arch();
  const std::uint64_t base_seed = test::base_seed();
  MESSAGE("base seed " << base_seed);
  std::int64_t total_codes = 0, total_near = 0;
  int case_no = 0;
  // SAGE2_TEST_QUANT_CASE=text: only the cases whose description contains it (replaying one case
  // of a failing seed; the case numbers, and so the per-case seeds, stay those of the full run).
  const char* only = std::getenv("SAGE2_TEST_QUANT_CASE");
  if (only && *only) MESSAGE("only the cases containing \"" << only << "\" (SAGE2_TEST_QUANT_CASE)");
  for (const Case& c : case_matrix()) {
    if (c.wgmma && arch != sage2::kernels::Arch::Sm90a) continue;
    ++case_no;
    const std::string name = describe(c);
    if (only && *only && name.find(only) == std::string::npos) continue;
    CAPTURE(name);
    const std::int64_t kv_heads = 2, q_heads = kv_heads * c.gqa, batch = 1;
    const std::uint64_t seed = base_seed + static_cast<std::uint64_t>(case_no);
    ref::AttentionInputs in =
        c.biased ? ref::make_activation_like(seed, c.dtype, batch, q_heads, kv_heads, c.seq, c.seq, c.head_dim, {}, c.nhd)
                 : ref::make_gaussian(seed, c.dtype, batch, q_heads, kv_heads, c.seq, c.seq, c.head_dim, c.nhd);
    if (c.v_gain != 1)
      for (std::int64_t h = 0; h < kv_heads; ++h)
        for (std::int64_t n = 0; n < c.seq; ++n)
          for (int ch = 0; ch < c.head_dim; ++ch) in.v.set(0, h, n, ch, in.v.get(0, h, n, ch) * c.v_gain);
    const auto spec = attention_spec_for(c, arch);
    // The spike at the first key of the last unit of 64 keys, which no sample takes (units
    // ⌊i·T/4⌋, i < 4, of T > 4 units), whatever the length (the reduced suite's 600 tokens too).
    const std::int64_t spike_at = (c.seq - 1) / sage2::kernels::kSampleUnit * sage2::kernels::kSampleUnit;
    if (c.v_spike != 0)
      for (int ch = 0; ch < std::min(4, c.head_dim); ++ch) in.v.set(0, 0, spike_at, ch, ch % 2 ? -c.v_spike : c.v_spike);
    // Auto's split stage: the statistics over a sample of 64-key units (KernelSpec::sampled_stats)
    kernels::KernelSpec spec_s = spec;
    spec_s.sampled_stats = true;
    ref::QuantizeOptions qs_opt = test::stage_options(spec_s);
    qs_opt.margins = true;
    const ref::QuantizedHost cpu_sampled =
        ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec_s), qs_opt);
    std::int64_t fixups = 0;  // channels whose amax is every key's (a key above the headroom)
    for (std::size_t i = 0; i < cpu_sampled.v_amax.size(); ++i) {
      const std::size_t dv = static_cast<std::size_t>(cpu_sampled.layout.d_v), bh = i / dv, ch = i % dv;
      const float mn = cpu_sampled.v_stats[(bh * 3 + 1) * dv + ch], mx = cpu_sampled.v_stats[(bh * 3 + 2) * dv + ch];
      const float mu = cpu_sampled.v_mean[i];
      const float a_s = c.smooth_v ? std::max(mx - mu, mu - mn) : std::max(std::fabs(mx), std::fabs(mn));
      fixups += cpu_sampled.v_amax[i] > 16.f * a_s;
    }
    if (c.v_spike != 0) CHECK_MESSAGE(fixups > 0, "the spike case must exceed the sampled headroom");
    ref::QuantizeOptions qo;
    qo.margins = true;
    const ref::QuantizedHost cpu_split = ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), qo);
    // The long onepass case (beyond 30000 tokens) runs onepass and split only: the one-launch
    // stages' own orders are covered by the other cases, and its references cost the suite time.
    const bool only_onepass_split = c.seq > 30000 && c.head_dim > 160;
    qo.fused_stats_order = true;
    const ref::QuantizedHost cpu_fused =
        only_onepass_split ? ref::QuantizedHost{}
                           : ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), qo);
    const bool clusters = !only_onepass_split && sage2::kernels::cluster_quantize_supported(spec);  // sm_90a, head dim <= 256
    qo.fused_stats_order = false;
    qo.cluster_stats_order = true;
    const ref::QuantizedHost cpu_cluster =
        clusters ? ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), qo)
                 : ref::QuantizedHost{};
    const sage2::kernels::QuantBuffers b_all = ref::quant_buffers(cpu_split.layout);
    const auto off_all = b_all.offsets();

    // Device inputs with the same strides as the host tensors.
    auto upload = [](const ref::HostTensor& t) {
      auto buf = std::make_unique<test::DeviceBuffer>(t.ref().numel() * 2);
      buf->upload(t.ref().data, t.ref().numel() * 2);
      return buf;
    };
    auto dq = upload(in.q), dk = upload(in.k), dv = upload(in.v);
    auto device_ref = [](const ref::HostTensor& t, const test::DeviceBuffer& d) {
      TensorRef r = t.ref();
      r.data = d.get();
      return r;
    };
    test::DeviceBuffer ws_all(off_all.total);
    const sage2::kernels::QuantBuffers b_s = sage2::kernels::quant_buffers(b_all.p, spec_s);
    test::DeviceBuffer ws_s(b_s.offsets().total);
    using QP = runtime::QuantPath;
    // output bytes of the first fused / cluster / onepass / sampled split run
    std::vector<std::uint8_t> first_run[4];
    struct Run {
      QP path;
      bool sampled;       // the split kernels of spec_s (Auto's), into b_s
      int sm_count = -1;  // (sampled) the SMs its launches plan for (-1: the device's)
    };
    // The sampled stage's channel_stats in its forms, which must write the same bytes: these 2
    // heads take the at-once form on the device and when planned for 2 SMs
    // (kernels::stats_spec_for), the one-pass walk in one CTA per (head, K|V) when planned for 0
    // (kernels::stats_units_groups; head dims 1-8 and above 256 walk one unit at a time, in
    // clusters on sm_90a where kernels::stats_cluster_size says so).
    for (const Run run : {Run{QP::Cluster, false}, Run{QP::Cluster, false}, Run{QP::Fused, false}, Run{QP::Fused, false},
                          Run{QP::OnePass, false}, Run{QP::OnePass, false}, Run{QP::Split, false}, Run{QP::Split, true},
                          Run{QP::Split, true}, Run{QP::Split, true, 2}, Run{QP::Split, true, 0}}) {
      const QP path = run.path;
      if (path == QP::Cluster && !clusters) continue;
      if (path == QP::Fused && only_onepass_split) continue;
      // `fused` below: a one-launch path, whose statistics have a fixed order the reference follows
      const bool fused = path != QP::Split;
      // (the sampled stage: its atomics are order-free, so it is deterministic too)
      std::vector<std::uint8_t>& first = first_run[run.sampled ? 3 : path == QP::Cluster ? 1 : path == QP::OnePass ? 2 : 0];
      const bool repeat = (fused || run.sampled) && !first.empty();
      const char* path_name = run.sm_count == 0 ? "sampled, one CTA per head"
                              : run.sm_count > 0 ? "sampled, planned for 2 SMs"
                              : run.sampled      ? "sampled"
                                                 : quant_path_name(path);
      CAPTURE(path_name);
      const ref::QuantizedHost& cpu =  // the sum order of that path (onepass: split's)
          run.sampled ? cpu_sampled : path == QP::Cluster ? cpu_cluster : (path == QP::Fused ? cpu_fused : cpu_split);
      const sage2::kernels::QuantBuffers& b = run.sampled ? b_s : b_all;
      const auto off = b.offsets();
      test::DeviceBuffer& ws = run.sampled ? ws_s : ws_all;
      ws.poison();
      runtime::launch_quantize_stage(runtime::context_impl(ctx), run.sampled ? spec_s : spec, b, device_ref(in.q, *dq),
                                     device_ref(in.k, *dk), device_ref(in.v, *dv), ws.get(), nullptr, path,
                                     run.sm_count);
      test::synchronize();
      if (path == QP::Split && !run.sampled && !first_run[2].empty()) {
        // The one-pass kernel computes split's numbers in split's order: the same bytes.
        CHECK_MESSAGE(download<std::uint8_t>(ws, 0, static_cast<std::int64_t>(off.stats_part)) == first_run[2],
                      "onepass and split wrote different bytes");
      }
      if (fused || run.sampled) {
        // Determinism: every output buffer (everything before the fused scratch) byte for byte.
        std::vector<std::uint8_t> bytes = download<std::uint8_t>(ws, 0, static_cast<std::int64_t>(off.stats_part));
        if (run.sampled) {  // and V's amax (appended)
          const std::vector<std::uint8_t> amax = download<std::uint8_t>(ws, off.v_amax, b.v_amax() * 4);
          bytes.insert(bytes.end(), amax.begin(), amax.end());
        }
        if (repeat) {
          CHECK_MESSAGE(bytes == first, "two runs of a deterministic path (one launch; the sampled stage in either statistics form) wrote different bytes");
          continue;
        }
        first = std::move(bytes);
      }

      // Statistics, means, scales: float rounding. Sums over up to 29040 tokens of O(10) values.
      const double max_in = 64.0;  // generous bound of |input| for the absolute part of sums
      FloatCheck stats;
      const double srel = fused ? 0 : 1e-5, sabs = fused ? 0 : 1e-6 * max_in * std::sqrt(double(c.seq));
      stats.run(download<float>(ws, off.k_stats, b.k_stats()), cpu.k_stats, srel, sabs);
      stats.run(download<float>(ws, off.v_stats, b.v_stats()), cpu.v_stats, srel, sabs);
      CHECK_MESSAGE(stats.bad == 0, "channel statistics differ beyond float rounding");
      FloatCheck means;
      means.run(download<float>(ws, off.k_mean, b.k_mean()), cpu.k_mean, 1e-5, 1e-6 * max_in);
      means.run(download<float>(ws, off.v_mean, b.v_mean()), cpu.v_mean, 1e-5, 1e-6 * max_in);
      means.run(download<float>(ws, off.q_mean, b.q_mean()), cpu.q_mean, 1e-5, 1e-6 * max_in);
      means.run(download<float>(ws, off.q_kbias, b.q_kbias()), cpu.q_kbias, 1e-5, 1e-5 * max_in * c.head_dim);
      CHECK_MESSAGE(means.bad == 0, "means / q·k̄ differ beyond float rounding");
      FloatCheck scales;
      scales.run(download<float>(ws, off.q_scale, b.q_scale()), cpu.q_scale, 1e-5, 1e-7);
      scales.run(download<float>(ws, off.k_scale, b.k_scale()), cpu.k_scale, 1e-5, 1e-7);
      scales.run(download<float>(ws, off.v_scale, b.v_scale()), cpu.v_scale, 1e-5, 1e-7);
      if (run.sampled) scales.run(download<float>(ws, off.v_amax, b.v_amax()), cpu.v_amax, 1e-5, 1e-7);
      CHECK_MESSAGE(scales.bad == 0, "scales differ beyond float rounding");

      // Codes: compare unpacked, counting near-boundary disagreements.
      const auto gq = download<std::int8_t>(ws, off.q_codes, b.q_codes());
      const auto gk = download<std::int8_t>(ws, off.k_codes, b.k_codes());
      const auto gv = download<std::uint8_t>(ws, off.v_codes, b.v_codes());
      CodeCheck cc;
      const float near = 0.02f;  // in code steps: what fp32 reduction-order differences can move
      std::vector<int> grow(b.d_qk), crow(b.d_qk);
      auto qk_rows = [&](const std::vector<std::int8_t>& g, const std::vector<std::int8_t>& cpu_codes,
                         const std::vector<float>& margin, std::int64_t rows) {
        for (std::int64_t r = 0; r < rows; ++r) {
          ref::unpack_codes(g.data() + r * b.row_bytes, b.qk_bits, b.d_qk, grow.data());
          ref::unpack_codes(cpu_codes.data() + r * b.row_bytes, b.qk_bits, b.d_qk, crow.data());
          for (int ch = 0; ch < b.d_qk; ++ch) {
            ++cc.checked;
            if (grow[ch] == crow[ch]) continue;
            const float m = margin[static_cast<std::size_t>(r * b.d_qk + ch)];
            if (m < near && std::abs(grow[ch] - crow[ch]) == 1) {
              ++cc.near_boundary;
            } else {
              if (cc.mismatches < 5) MESSAGE("Q/K code row " << r << " ch " << ch << ": gpu " << grow[ch] << " cpu " << crow[ch] << " margin " << m);
              ++cc.mismatches;
            }
          }
        }
      };
      qk_rows(gq, cpu.q_codes, cpu.q_margin, b.p.batch * b.p.q_heads * b.q_len_pad);
      qk_rows(gk, cpu.k_codes, cpu.k_margin, b.p.batch * b.p.kv_heads * b.kv_len_pad);
      const std::size_t vb = static_cast<std::size_t>(cpu.layout.v_code_bytes);  // 2: FP16 V̂
      for (std::size_t i = 0; i < gv.size() / vb; ++i) {
        ++cc.checked;
        const int g = vb == 2 ? gv[2 * i] | (gv[2 * i + 1] << 8) : gv[i];
        const int w = vb == 2 ? cpu.v_codes[2 * i] | (cpu.v_codes[2 * i + 1] << 8) : cpu.v_codes[i];
        if (g == w) continue;
        const float m = cpu.v_margin[i];
        if (m < near) {
          ++cc.near_boundary;
        } else {
          if (cc.mismatches < 5) {
            // the channel's constants on both sides, as bits (a code off by one ulp away from a
            // boundary means an input of the code differs: μ, the scale or the rounding)
            const std::int64_t row = static_cast<std::int64_t>(i) / b.kv_len_pad, ch = row % b.d_v, bh = row / b.d_v;
            const auto g_mean = download<float>(ws, off.v_mean, b.v_mean());
            const auto g_stats = download<float>(ws, off.v_stats, b.v_stats());
            const auto g_scale = download<float>(ws, off.v_scale, b.v_scale());
            auto bits = [](float f) {
              std::uint32_t u;
              std::memcpy(&u, &f, 4);
              char t[16];
              std::snprintf(t, sizeof t, "%08x", u);
              return std::string(t);
            };
            const std::size_t cm = static_cast<std::size_t>(bh * b.d_v + ch), cs = static_cast<std::size_t>(bh * 3 * b.d_v + ch);
            MESSAGE("V code " << i << " (head " << bh << " channel " << ch << " key slot " << i % b.kv_len_pad << "): gpu "
                              << g << " cpu " << w << " margin " << m << "; mean gpu " << bits(g_mean[cm]) << " cpu "
                              << bits(cpu.v_mean[cm]) << ", sum gpu " << bits(g_stats[cs]) << " cpu " << bits(cpu.v_stats[cs])
                              << ", scale gpu " << bits(g_scale[cm]) << " cpu " << bits(cpu.v_scale[cm]));
          }
          ++cc.mismatches;
        }
      }
      CHECK_MESSAGE(cc.mismatches == 0, "codes differ away from rounding boundaries");
      // Non-finite flags (clear for these finite inputs; every entry written over the poison).
      CHECK(download<std::uint8_t>(ws, off.q_bad, b.q_bad()) == cpu.q_bad);
      CHECK(download<std::int32_t>(ws, off.k_first_bad, b.k_first_bad()) == cpu.k_first_bad);
      CHECK(download<std::int32_t>(ws, off.v_first_bad, b.v_first_bad()) == cpu.v_first_bad);
      if (fused) {  // k̄, μ and the V scales follow from the (bit-equal) statistics alone
        FloatCheck exact;
        exact.run(download<float>(ws, off.k_mean, b.k_mean()), cpu.k_mean, 0, 0);
        exact.run(download<float>(ws, off.v_mean, b.v_mean()), cpu.v_mean, 0, 0);
        exact.run(download<float>(ws, off.v_scale, b.v_scale()), cpu.v_scale, 0, 0);
        CHECK_MESSAGE(exact.bad == 0, "fused k̄ / μ / V scales differ from the reference");
      }
      total_codes += cc.checked;
      total_near += cc.near_boundary;
      std::printf("quantize %-7s %-70s codes %10lld near-boundary %4lld mismatches %lld\n", path_name,
                  name.c_str(), (long long)cc.checked, (long long)cc.near_boundary, (long long)cc.mismatches);
    }
  }
  std::printf("quantize: %d cases, %lld codes compared, %lld near-boundary differences (%.2e)\n", case_no,
              (long long)total_codes, (long long)total_near, total_codes ? double(total_near) / total_codes : 0.0);
  CHECK(total_near <= total_codes / 10000 + 10);
}

TEST_CASE("gpu quantize: groups of tiny values (an infinite inverse scale) get the contract's clamped codes") {
  // A group whose amax is below R / FLT_MAX has inv = R / amax = +Inf. The kernels' fast code path
  // (cvt.rni of x·inv, exact whenever inv is finite) would turn x·inv = ±Inf into wrapped bytes;
  // such groups take quant_int (NaN → 0, clamp to ±R): nonzero values get ±R, zeros 0.
  // (On Hopper also the wgmma family's layout: its split K kernel's warp-group form.)
  Context& ctx = test::gpu_context();
  const bool hopper = runtime::context_impl(ctx).arch() == kernels::Arch::Sm90a;
  for (const bool wg : {false, true})
  for (const int bits : {8, 4}) {
    if (wg && (!hopper || bits != 8)) continue;
    CAPTURE(bits);
    CAPTURE(wg);
    ref::AttentionInputs in = ref::make_gaussian(11, DType::BF16, 1, 2, 2, 128, 128, 64, false);
    std::int64_t tiny = 0;
    for (ref::HostTensor* t : {&in.q, &in.k})
      for (std::int64_t n = 0; n < 64; ++n)  // the first block of head 0: normal bf16 values near 1.5e-38
        for (int ch = 0; ch < 64; ++ch) {
          const int r = static_cast<int>((n * 7 + ch) % 5);
          t->set(0, 0, n, ch, r == 0 ? 0.f : (r % 2 ? 1.5e-38f : -1.5e-38f));
          tiny += r != 0;
        }
    kernels::KernelSpec spec;
    spec.family = wg ? kernels::KernelFamily::AttentionWgmma : kernels::KernelFamily::AttentionMma;
    spec.arch = runtime::context_impl(ctx).arch();
    spec.pv_fp16 = !wg && kernels::default_pv_fp16(spec.arch);
    spec.head_dim = 64;
    spec.qk_bits = bits;
    spec.smooth_q = spec.smooth_k = spec.smooth_v = false;  // x = the input: no mean to round
    spec.in_dtype = spec.out_dtype = DType::BF16;
    spec.tile = wg ? kernels::TileConfig{128, 128, 8, 2} : kernels::TileConfig{64, 64, 4, 2};
    const ref::QuantizedHost cpu = ref::quantize_stage(in.q.ref(), in.k.ref(), in.v.ref(), ref::kernel_config(spec), {});
    const kernels::QuantBuffers b = ref::quant_buffers(cpu.layout);
    const auto off = b.offsets();
    test::DeviceTensor q(in.q), k(in.k), v(in.v);
    test::DeviceBuffer ws(off.total);
    ws.poison();
    runtime::launch_quantize_stage(runtime::context_impl(ctx), spec, b, q.ref(), k.ref(), v.ref(), ws.get(), nullptr);
    test::synchronize();
    ref::QuantizedHost g = cpu;
    ws.download(g.q_codes.data(), g.q_codes.size(), off.q_codes);
    ws.download(g.k_codes.data(), g.k_codes.size(), off.k_codes);
    CHECK(g.q_codes == cpu.q_codes);
    CHECK(g.k_codes == cpu.k_codes);
    const int R = bits == 8 ? 127 : 7;
    std::int64_t clamped = 0;
    for (std::int64_t n = 0; n < 64; ++n)
      for (int ch = 0; ch < 64; ++ch) {
        const float x = in.q.get(0, 0, n, ch), y = in.k.get(0, 0, n, ch);
        CHECK(cpu.q_code(0, 0, n, ch) == (x > 0 ? R : x < 0 ? -R : 0));  // the contract, as the reference has it
        clamped += std::abs(g.q_code(0, 0, n, ch)) == R && x != 0;
        clamped += std::abs(g.k_code(0, 0, n, ch)) == R && y != 0;
      }
    CHECK(clamped == tiny);  // every nonzero tiny value of Q and of K
  }
}

