// sage2-bench-attention: throughput of sage2 attention on the GPU, end to end (everything the
// user's call does: quantize, ΔS, attention) and the attention kernel alone.
//   sage2-bench-attention [--head-dims 64,128] [--seq-lens 1024,...] [--causal 0,1] [--batch 4]
//                         [--heads 32] [--kv-heads H] [--bits 8] [--reps 20] [--json FILE] [--command "..."]
//                         [--run ID] [--modes e2e,kernel] [--flush-l2 MB] [--host-calls N]
// --kv-heads: K and V heads (GQA; default --heads, which it must divide).
// --run tags every record with a run id (bench/scoreboard_bench.py); --flush-l2 overwrites an MB-sized
// scratch buffer before each timed call so no problem is timed from a warm L2; --host-calls N adds
// a host_us record (method sage2_cpp): Context::attention at B=1, H=1, N=128, d=64, N back-to-back
// calls and one synchronise, median of 3 such loops ("rounds": 3). JSON records are written as they are
// measured; each carries "commit" (sage2::build_commit()).
// TOPS = 4·B·H·N²·d / time, halved when causal. Median of `reps` timed calls after warm-up,
// CUDA events around each call. Inputs are N(0,1)-like fp16 values (never zeros).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/quant_buffers.hpp"
#include "runtime/attention_plan.hpp"
#include "runtime/attention_stage.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/quantize_stage.hpp"
#include "bench_support.hpp"

using namespace sage2;
using bench::median_ms;
using bench::parse_list;


int main(int argc, char** argv) {
  std::vector<long> dims = {64, 128}, lens = {1024, 2048, 4096, 8192, 16384, 32768}, causals = {0, 1};
  long batch = 4, heads = 32, kv_heads = 0, bits = 8;
  int reps = 20;
  std::string json_path, command = "sage2-bench-attention", run, modes = "e2e,kernel";
  long flush_mb = 0, host_calls = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--head-dims") dims = parse_list(next());
    else if (a == "--seq-lens") lens = parse_list(next());
    else if (a == "--causal") causals = parse_list(next());
    else if (a == "--batch") batch = std::stol(next());
    else if (a == "--heads") heads = std::stol(next());
    else if (a == "--kv-heads") kv_heads = std::stol(next());
    else if (a == "--bits") bits = std::stol(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--json") json_path = next();
    else if (a == "--command") command = next();
    else if (a == "--run") run = next();
    else if (a == "--modes") modes = next();
    else if (a == "--flush-l2") flush_mb = std::stol(next());
    else if (a == "--host-calls") host_calls = std::stol(next());
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  if (kv_heads == 0) kv_heads = heads;
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0) {
    std::fprintf(stderr, "--heads %ld must be a positive multiple of --kv-heads %ld\n", heads, kv_heads);
    return 2;
  }
  const bool do_e2e = ("," + modes + ",").find(",e2e,") != std::string::npos;
  const bool do_kernel = ("," + modes + ",").find(",kernel,") != std::string::npos;
  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  // Each record is flushed at once so a run cut short keeps what it measured.
  // Every record names the commit this binary's sage2 was built from (sage2::build_commit()).
  const std::string run_field = (run.empty() ? "" : "\"run\": \"" + run + "\", ") + "\"commit\": \"" +
                                sage2::build_commit() + "\", ";
  auto emit = [&](const char* rec) {
    std::string r(rec);
    r.insert(1, run_field);
    if (json.is_open()) json << r << "\n" << std::flush;
  };
  try {
    // A benchmark times the optimized kernels: no tiered compile (ContextOptions::tiered_compile).
    Context ctx(0, ContextOptions{.tiered_compile = false});
    auto& impl = runtime::context_impl(ctx);
    const auto& a = base::driver::api();
    base::driver::ScopedContext scope(impl.cu_context());
    CUstream stream;
    base::driver::check(a.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    CUdeviceptr scratch = 0;
    const std::size_t scratch_bytes = static_cast<std::size_t>(flush_mb) << 20;
    if (scratch_bytes) base::driver::check(a.cuMemAlloc_v2(&scratch, scratch_bytes), "cuMemAlloc");
    auto flush = [&] {
      if (scratch_bytes) base::driver::check(a.cuMemsetD8Async(scratch, 0, scratch_bytes, stream), "cuMemsetD8Async");
    };
    if (host_calls > 0) {
      const bench::DeviceInputs tiny(4, 128 * 64);
      auto t = [&](int i) { return TensorRef::hnd(tiny[i], DType::F16, 1, 1, 128, 64); };
      AttentionParams p;
      p.qk_bits = static_cast<QkBits>(bits);
      auto call = [&] { ctx.attention(t(0), t(1), t(2), t(3), p, stream); };
      for (int i = 0; i < 50; ++i) call();
      base::driver::check(a.cuStreamSynchronize(stream), "sync");
      std::vector<double> us;
      for (int r = 0; r < 3; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < host_calls; ++i) call();
        base::driver::check(a.cuStreamSynchronize(stream), "sync");
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                     double(host_calls));
      }
      std::sort(us.begin(), us.end());
      std::printf("sage2_cpp host_us: %.2f us per call (%ld calls x 3, median)\n", us[1], host_calls);
      // The host's own share: 100 calls enqueued after a synchronise (their launches stay below the
      // driver's queue depth, so the host never waits on the GPU); host_us above is bounded below by
      // the GPU time of the call's launches when that is larger.
      {
        std::vector<double> enq;
        for (int r = 0; r < 5; ++r) {
          base::driver::check(a.cuStreamSynchronize(stream), "sync");
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < 100; ++i) call();
          enq.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 100.0);
        }
        base::driver::check(a.cuStreamSynchronize(stream), "sync");
        std::sort(enq.begin(), enq.end());
        std::printf("sage2_cpp host enqueue only: %.2f us per call (100 calls after a sync, median of 5)\n", enq[2]);
      }
      char rec[1024];
      std::snprintf(rec, sizeof rec,
                    "{\"method\": \"sage2_cpp\", \"mode\": \"host_us\", \"us\": %.3f, \"ms\": %.6f, \"head_dim\": 64, "
                    "\"causal\": false, \"seq_len\": 128, \"batch\": 1, \"heads\": 1, \"dtype\": \"fp16\", "
                    "\"calls\": %ld, \"rounds\": 3, \"device\": \"%s\", \"command\": \"%s\"}",
                    us[1], us[1] * 1e-3, host_calls, ctx.device().name.c_str(), command.c_str());
      emit(rec);
    }
    if (!do_e2e && !do_kernel) lens.clear();

    // One allocation per tensor at the largest size; smaller problems use its prefix.
    const long max_n = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
    const long max_d = dims.empty() ? 0 : *std::max_element(dims.begin(), dims.end());
    const std::size_t elems = std::max<std::size_t>(1, static_cast<std::size_t>(batch * heads * max_n * max_d));
    const bench::DeviceInputs buf(4, elems, 0.0);  // q, k, v, out (distinct: validation checks overlap)
    std::printf("%-8s %-7s %4s %6s %6s %10s %9s\n", "method", "mode", "d", "causal", "N", "ms", "TOPS");
    for (long d : dims)
      for (long causal : causals)
        for (long n : lens) {
          auto t = [&](int i) { return TensorRef::hnd(buf[i], DType::F16, batch, i == 1 || i == 2 ? kv_heads : heads, n, d); };
          const TensorRef q = t(0), k = t(1), v = t(2), out = t(3);
          AttentionParams p;
          p.causal = causal ? CausalMode::TopLeft : CausalMode::None;
          p.qk_bits = static_cast<QkBits>(bits);
          const double ops = 4.0 * batch * heads * double(n) * double(n) * d / (causal ? 2.0 : 1.0);
          const double e2e = do_e2e ? median_ms([&] { ctx.attention(q, k, v, out, p, stream); }, reps, stream, flush) : 0;
          // Kernel alone: the same plan's attention stage over an already quantized workspace.
          const auto prob = plan::validate_attention(q, k, v, out, p, impl.arch());
          const auto spec = runtime::plan_attention(prob, impl.arch(), impl.facts());
          kernels::QuantProblem qp{{batch, heads, kv_heads, n, n, static_cast<int>(d)}};
          const auto qb = kernels::quant_buffers(qp, spec);
          const std::size_t qbytes = (qb.offsets().total + 255) / 256 * 256;
          const std::size_t dsb = runtime::delta_s_workspace_bytes(qb);
          double kern = 0;
          if (do_kernel) {
            char* ws = static_cast<char*>(impl.workspace().get(stream, qbytes + dsb));
            runtime::launch_quantize_stage(impl, spec, qb, q, k, v, ws, stream);
            kern = median_ms(
                [&] {
                  runtime::launch_attention_stage(impl, spec, qb, k, ws, out, nullptr, prob.sm_scale, ws + qbytes, dsb,
                                                  stream, &q);
                },
                reps, stream, flush);
          }
          for (int mode = do_e2e ? 0 : 1; mode < (do_kernel ? 2 : 1); ++mode) {
            const double ms = mode == 0 ? e2e : kern;
            const double tops = ops / (ms * 1e-3) / 1e12;
            std::printf("%-8s %-7s %4ld %6ld %6ld %10.3f %9.1f  %s bq%d.bk%d.w%d.s%d\n", "sage2", mode == 0 ? "e2e" : "kernel", d, causal, n,
                        ms, tops, kernels::family_name(spec.family), spec.tile.bq, spec.tile.bk, spec.tile.warps,
                        spec.tile.stages);
            char rec[1024];
            std::snprintf(rec, sizeof rec,
                          "{\"method\": \"sage2\", \"mode\": \"%s\", \"head_dim\": %ld, \"causal\": %s, \"seq_len\": %ld, "
                          "\"batch\": %ld, \"heads\": %ld, \"kv_heads\": %ld, \"dtype\": \"fp16\", \"qk_bits\": %ld, \"family\": \"%s\", "
                          "\"tile\": \"bq%d.bk%d.w%d.s%d\", "
                          "\"ms\": %.4f, \"tops\": %.2f, \"device\": \"%s\", \"command\": \"%s\"}",
                          mode == 0 ? "e2e" : "kernel", d, causal ? "true" : "false", n, batch, heads, kv_heads, bits,
                          kernels::family_name(spec.family), spec.tile.bq, spec.tile.bk, spec.tile.warps, spec.tile.stages, ms, tops,
                          ctx.device().name.c_str(), command.c_str());
            emit(rec);
          }
        }
    if (scratch) a.cuMemFree_v2(scratch);
    a.cuStreamDestroy_v2(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
