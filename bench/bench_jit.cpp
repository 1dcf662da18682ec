// sage2-bench-jit: times getting one quantize specialisation ready to launch, and the host
// overhead of one attention() call once everything is loaded.
//   sage2-bench-jit --cache-dir DIR [--device N]
// Run it twice on an empty DIR: the first process compiles with NVRTC (cold), the second finds
// the cubin on disk (warm). Prints one JSON object per line.
//   sage2-bench-jit --cache-dir DIR --first-call D [--shape B H N] [--device N]
// instead times the process's first attention() call at head dim D (B 1, H 4, N 1000 unless
// --shape says otherwise; fp16, not causal; the Context made before the clock starts) up to its completion, and lists every kernel
// that call loaded with its source (nvrtc / disk) and load time (compile or read + module load).
// With the tiered compile on (the default; SAGE2_TIERED_COMPILE=0 turns it off) it also reports the first call's tier and,
// polling the Context's plan every 5 ms after it, "optimized_after_ms": from the first call's
// start until the call's cached plan runs the optimized kernels (-1: not within 60 s); the second
// call then runs on that plan.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "kernels/quantize_shape.hpp"
#include "runtime/call_plan.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/quantize_stage.hpp"

using clk = std::chrono::steady_clock;
static double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

// A Context on `device` with its kernel cache in `dir`; `ms`: how long making it took.
static std::unique_ptr<sage2::Context> timed_context(const std::string& dir, int device, double& ms) {
  sage2::ContextOptions o;
  o.cache_dir = dir;
  const auto t0 = clk::now();
  auto ctx = std::make_unique<sage2::Context>(device, o);
  ms = ms_since(t0);
  return ctx;
}

// The --first-call mode (header comment).
static int first_call(const std::string& dir, int device, int hd, std::int64_t b, std::int64_t h, std::int64_t n) {
  try {
    double context_ms = 0;
    const auto owned = timed_context(dir, device, context_ms);
    sage2::Context& ctx = *owned;
    auto& impl = sage2::runtime::context_impl(ctx);
    const auto& a = sage2::base::driver::api();
    sage2::base::driver::ScopedContext scope(impl.cu_context());
    const std::int64_t bytes = b * h * n * hd * 2;
    CUdeviceptr buf;
    sage2::base::driver::check(a.cuMemAlloc_v2(&buf, 4 * bytes), "cuMemAlloc");
    sage2::base::driver::check(a.cuMemsetD8_v2(buf, 0x3c, 4 * bytes), "cuMemset");  // 1.05 in f16
    sage2::base::driver::check(a.cuCtxSynchronize(), "sync");
    auto view = [&](int i) {
      return sage2::TensorRef::hnd(reinterpret_cast<void*>(buf + i * bytes), sage2::DType::F16, b, h, n, hd);
    };
    const auto t1 = clk::now();
    ctx.attention(view(0), view(1), view(2), view(3));
    sage2::base::driver::check(a.cuCtxSynchronize(), "sync");
    const double first_ms = ms_since(t1);
    const sage2::TensorRef v0 = view(0);
    const auto sig = sage2::runtime::call_signature(v0, view(1), view(2), view(3), sage2::AttentionParams{});
    auto tier_now = [&] {
      const auto plan = impl.call_cache().find(sig);
      return plan ? plan->tier : sage2::runtime::BuildTier::Optimized;
    };
    const bool first_quick = tier_now() == sage2::runtime::BuildTier::Quick;
    double optimized_after_ms = first_quick ? -1.0 : first_ms;
    while (first_quick && ms_since(t1) < 60e3) {
      if (tier_now() == sage2::runtime::BuildTier::Optimized) {
        optimized_after_ms = ms_since(t1);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto t2 = clk::now();
    ctx.attention(view(0), view(1), view(2), view(3));
    sage2::base::driver::check(a.cuCtxSynchronize(), "sync");
    const double second_ms = ms_since(t2);
    a.cuMemFree_v2(buf);
    std::string kernels;
    for (const auto& k : impl.kernels().loaded())
      kernels += std::string(kernels.empty() ? "" : ", ") + "{\"key\": \"" + k.key + "\", \"source\": \"" +
                 (k.source == sage2::runtime::KernelSource::DiskCache ? "disk" : "nvrtc") +
                 "\", \"tier\": \"" +
                 (k.tier == sage2::runtime::BuildTier::Quick ? "quick" : "optimized") + "\", \"load_ms\": " +
                 std::to_string(k.load_seconds * 1e3) + "}";
    std::printf("{\"what\": \"first_call\", \"device\": \"%s\", \"head_dim\": %d, \"batch\": %lld, \"heads\": %lld, "
                "\"seq_len\": %lld, \"context_ms\": %.3f, "
                "\"first_call_ms\": %.3f, \"first_call_tier\": \"%s\", \"optimized_after_ms\": %.3f, "
                "\"second_call_ms\": %.3f, \"kernels\": [%s]}\n",
                ctx.device().name.c_str(), hd, static_cast<long long>(b), static_cast<long long>(h),
                static_cast<long long>(n), context_ms, first_ms, first_quick ? "quick" : "optimized",
                optimized_after_ms, second_ms, kernels.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const auto t_start = clk::now();
  std::string dir;
  int device = 0, first_call_hd = 0;
  long long fb = 1, fh = 4, fn = 1000;  // --first-call's shape (--shape B H N)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cache-dir") && i + 1 < argc) dir = argv[++i];
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--first-call") && i + 1 < argc) first_call_hd = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--shape") && i + 3 < argc) {
      fb = std::atoll(argv[i + 1]), fh = std::atoll(argv[i + 2]), fn = std::atoll(argv[i + 3]);
      i += 3;
    } else {
      std::fprintf(stderr, "usage: sage2-bench-jit --cache-dir DIR [--first-call D [--shape B H N]] [--device N]\n");
      return 2;
    }
  }
  if (fb < 1 || fh < 1 || fn < 1) {
    std::fprintf(stderr, "--shape B H N: each at least 1\n");
    return 2;
  }
  if (dir.empty()) { std::fprintf(stderr, "--cache-dir is required\n"); return 2; }
  if (first_call_hd > 0) return first_call(dir, device, first_call_hd, fb, fh, fn);
  try {
    double context_ms = 0;
    const auto owned = timed_context(dir, device, context_ms);
    sage2::Context& ctx = *owned;
    sage2::kernels::KernelSpec attn;
    attn.family = sage2::kernels::KernelFamily::AttentionMma;
    attn.head_dim = 128;
    attn.qk_bits = 8;
    attn.smooth_q = false;
    const auto spec = sage2::kernels::quantize_spec_for(attn, sage2::kernels::QuantOp::QuantizeQ);
    const auto t1 = clk::now();
    auto& k = sage2::runtime::context_impl(ctx).kernels().get(spec);
    const double get_ms = ms_since(t1);
    const auto t2 = clk::now();
    auto& k2 = sage2::runtime::context_impl(ctx).kernels().get(spec);  // in-memory hit
    const double memory_hit_us = ms_since(t2) * 1e3;
    (void)k2;

    // Per-call host overhead of attention() on a tiny problem, kernels already loaded: the CPU
    // time to validate, plan and enqueue (the GPU work is not waited for inside the loop).
    const auto& a = sage2::base::driver::api();
    sage2::base::driver::ScopedContext scope(sage2::runtime::context_impl(ctx).cu_context());
    CUdeviceptr buf;
    const std::int64_t n = 128, d = 64;
    sage2::base::driver::check(a.cuMemAlloc_v2(&buf, 4 * n * d * 2), "cuMemAlloc");
    sage2::base::driver::check(a.cuMemsetD8_v2(buf, 0x3c, 4 * n * d * 2), "cuMemset");  // 1.0 in f16
    auto view = [&](int i) {
      return sage2::TensorRef::hnd(reinterpret_cast<void*>(buf + i * n * d * 2), sage2::DType::F16, 1, 1, n, d);
    };
    for (int i = 0; i < 5; ++i) ctx.attention(view(0), view(1), view(2), view(3));
    sage2::base::driver::check(a.cuCtxSynchronize(), "sync");
    double best_us = 1e30;
    for (int round = 0; round < 5; ++round) {
      const int calls = 100;
      const auto t3 = clk::now();
      for (int i = 0; i < calls; ++i) ctx.attention(view(0), view(1), view(2), view(3));
      best_us = std::min(best_us, ms_since(t3) * 1e3 / calls);
      sage2::base::driver::check(a.cuCtxSynchronize(), "sync");
    }
    a.cuMemFree_v2(buf);
    std::printf("{\"what\": \"jit_load\", \"device\": \"%s\", \"key\": \"%s\", \"source\": \"%s\", "
                "\"get_ms\": %.3f, \"context_ms\": %.3f, \"memory_hit_us\": %.3f, \"process_to_ready_ms\": %.3f, "
                "\"registers\": %d, \"spill_bytes\": %d, \"attention_call_host_us\": %.2f}\n",
                ctx.device().name.c_str(), k.key.c_str(),
                k.source == sage2::runtime::KernelSource::DiskCache ? "disk" : "nvrtc", get_ms, context_ms,
                memory_hit_us, ms_since(t_start), k.facts.registers,
                k.facts.spill_store_bytes + k.facts.spill_load_bytes, best_us);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
