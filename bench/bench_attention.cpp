// sage2-bench-attention: throughput of sage2 attention on the GPU, end to end (everything the
// user's call does: quantize, ΔS, attention) and the attention kernel alone.
//   sage2-bench-attention [--head-dims 64,128] [--seq-lens 1024,...] [--causal 0,1] [--batch 4]
//                         [--heads 32] [--bits 8] [--reps 20] [--json FILE] [--command "..."]
// TOPS = 4·B·H·N²·d / time, halved when causal. Median of `reps` timed calls after warm-up,
// CUDA events around each call. Inputs are N(0,1)-like fp16 values (never zeros).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "jit/quant_buffers.hpp"
#include "runtime/attention_plan.hpp"
#include "runtime/attention_stage.hpp"
#include "runtime/attention_validate.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/quantize_stage.hpp"
#include "bench_support.hpp"

using namespace sage2;
using bench::median_ms;
using bench::parse_list;


int main(int argc, char** argv) {
  std::vector<long> dims = {64, 128}, lens = {1024, 2048, 4096, 8192, 16384, 32768}, causals = {0, 1};
  long batch = 4, heads = 32, bits = 8;
  int reps = 20;
  std::string json_path, command = "sage2-bench-attention";
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
    else if (a == "--bits") bits = std::stol(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--json") json_path = next();
    else if (a == "--command") command = next();
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  try {
    Context ctx(0);
    auto& impl = runtime::context_impl(ctx);
    const auto& a = driver::api();
    driver::ScopedContext scope(impl.cu_context());
    CUstream stream;
    driver::check(a.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    // One allocation per tensor at the largest size; smaller problems use its prefix.
    const long max_n = *std::max_element(lens.begin(), lens.end());
    const long max_d = *std::max_element(dims.begin(), dims.end());
    const std::size_t elems = static_cast<std::size_t>(batch * heads * max_n * max_d);
    const bench::DeviceInputs buf(4, elems, 0.0);  // q, k, v, out (distinct: validation checks overlap)
    std::vector<std::string> records;
    std::printf("%-8s %-7s %4s %6s %6s %10s %9s\n", "method", "mode", "d", "causal", "N", "ms", "TOPS");
    for (long d : dims)
      for (long causal : causals)
        for (long n : lens) {
          auto t = [&](int i) { return TensorRef::hnd(buf[i], DType::F16, batch, heads, n, d); };
          const TensorRef q = t(0), k = t(1), v = t(2), out = t(3);
          AttentionParams p;
          p.causal = causal ? CausalMode::TopLeft : CausalMode::None;
          p.qk_bits = static_cast<QkBits>(bits);
          const double ops = 4.0 * batch * heads * double(n) * double(n) * d / (causal ? 2.0 : 1.0);
          const double e2e = median_ms([&] { ctx.attention(q, k, v, out, p, stream); }, reps, stream);
          // Kernel alone: the same plan's attention stage over an already quantized workspace.
          const auto prob = runtime::validate_attention(q, k, v, out, p, impl.arch());
          const auto spec = runtime::plan_attention(prob, impl.arch(), impl.facts());
          jit::QuantProblem qp{batch, heads, heads, n, n, static_cast<int>(d)};
          const auto qb = jit::quant_buffers(qp, spec);
          const std::size_t qbytes = (qb.offsets().total + 255) / 256 * 256;
          const std::size_t dsb = runtime::delta_s_workspace_bytes(qb);
          char* ws = static_cast<char*>(impl.workspace().get(stream, qbytes + dsb));
          runtime::launch_quantize_stage(impl, spec, qb, q, k, v, ws, stream);
          const double kern = median_ms(
              [&] {
                runtime::launch_attention_stage(impl, spec, qb, k, ws, out, nullptr, prob.sm_scale, ws + qbytes, dsb,
                                                stream);
              },
              reps, stream);
          for (int mode = 0; mode < 2; ++mode) {
            const double ms = mode == 0 ? e2e : kern;
            const double tops = ops / (ms * 1e-3) / 1e12;
            std::printf("%-8s %-7s %4ld %6ld %6ld %10.3f %9.1f  %s bq%d.bk%d.w%d.s%d\n", "sage2", mode == 0 ? "e2e" : "kernel", d, causal, n,
                        ms, tops, jit::family_name(spec.family), spec.tile.bq, spec.tile.bk, spec.tile.warps,
                        spec.tile.stages);
            char rec[1024];
            std::snprintf(rec, sizeof rec,
                          "{\"method\": \"sage2\", \"mode\": \"%s\", \"head_dim\": %ld, \"causal\": %s, \"seq_len\": %ld, "
                          "\"batch\": %ld, \"heads\": %ld, \"dtype\": \"fp16\", \"qk_bits\": %ld, \"family\": \"%s\", "
                          "\"tile\": \"bq%d.bk%d.w%d.s%d\", "
                          "\"ms\": %.4f, \"tops\": %.2f, \"device\": \"%s\", \"command\": \"%s\"}",
                          mode == 0 ? "e2e" : "kernel", d, causal ? "true" : "false", n, batch, heads, bits,
                          jit::family_name(spec.family), spec.tile.bq, spec.tile.bk, spec.tile.warps, spec.tile.stages, ms, tops,
                          ctx.device().name.c_str(), command.c_str());
            records.push_back(rec);
          }
        }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      for (const auto& r : records) f << r << "\n";
    }
    a.cuStreamDestroy_v2(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
