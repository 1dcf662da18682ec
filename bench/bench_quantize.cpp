// sage2-bench-quantize: time of the quantize stage (everything the attention stage reads is
// written) on each path — auto (statistics, K, V; Q quantized by the attention kernel where the
// family can), split (the four-launch baseline with quantize_q), cluster (one launch of
// thread-block clusters; sm_90a), fused (memset of the sync words + one launch) — and every launch
// on its own, each with the bytes it must move (inputs read once, outputs written once), its byte
// floor at 3 TB/s and its time over that floor.
//   sage2-bench-quantize [--seq-lens 1024,4096,8192,32768] [--head-dim 128] [--batch 4]
//                        [--heads 32] [--bits 8] [--reps 30] [--json FILE] [--command "..."]
// The attention spec is the one a default Context plans for the problem (family, tile), so the
// layout is the one the attention kernel would read. CUDA events around each call, median of
// `reps` after 3 warm-up calls. A stage's bytes are the sum of its launches' (the statistics pass
// reads K and V, the K and V launches read them again: that is the design's floor, not re-reads).
// One JSON line per measurement: {"method": "sage2-quantize", "path": "auto"|"split"|"cluster"|"fused",
//   "launch": "stage"|"channel_stats"|"quantize_k"|"quantize_v"|"quantize_q", "bytes", "floor_ms",
//   "floor_ratio", "commit", ...}.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/quantize_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "runtime/attention_plan.hpp"
#include "plan/attention_validate.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_loader.hpp"
#include "runtime/quantize_stage.hpp"
#include "bench_support.hpp"

using namespace sage2;
using bench::median_ms;
using bench::parse_list;


int main(int argc, char** argv) {
  std::vector<long> lens = {1024, 4096, 8192, 32768};
  long batch = 4, heads = 32, d = 128, bits = 8;
  int reps = 30;
  std::string json_path, command = "sage2-bench-quantize";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--seq-lens") lens = parse_list(next());
    else if (a == "--head-dim") d = std::stol(next());
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
    const auto& a = base::driver::api();
    base::driver::ScopedContext scope(impl.cu_context());
    CUstream stream;
    base::driver::check(a.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    const long max_n = *std::max_element(lens.begin(), lens.end());
    const std::size_t elems = static_cast<std::size_t>(batch * heads * max_n * d);
    const bench::DeviceInputs buf(4, elems, 0.5);  // q, k, v, out (distinct: validation checks overlap)
    std::vector<std::string> records;
    std::printf("%-7s %-14s %6s %10s %9s %9s %7s  %s\n", "path", "launch", "N", "ms", "MB", "floor ms", "x floor",
                "attention spec");
    constexpr double kFloorBytesPerS = 3.0e12;  // the byte floor's bandwidth (DESIGN.md)
    for (long n : lens) {
      auto t = [&](int i) { return TensorRef::hnd(buf[i], DType::F16, batch, heads, n, d); };
      const TensorRef q = t(0), k = t(1), v = t(2);
      TensorRef out = t(3);  // validation only: nothing is written to it
      AttentionParams p;
      p.qk_bits = static_cast<QkBits>(bits);
      const auto prob = plan::validate_attention(q, k, v, out, p, impl.arch());
      // What a default Context runs (quant path auto: Q quantized by the attention kernel where the
      // family can), and the same spec with quantize_q (the split / fused / cluster stages).
      kernels::KernelSpec spec = runtime::plan_attention(prob, impl.arch(), impl.facts());
      plan::apply_quant_path(spec, QuantPath::Auto);
      kernels::KernelSpec spec_q = spec;
      spec_q.q_in_kernel = false;
      kernels::QuantProblem qp{{batch, heads, heads, n, n, static_cast<int>(d)}};
      const auto qb = kernels::quant_buffers(qp, spec), qb_q = kernels::quant_buffers(qp, spec_q);
      const auto off_q = qb_q.offsets();
      char* ws = static_cast<char*>(impl.workspace().get(stream, off_q.total));
      // Bytes each launch must move at least: its inputs read once, its outputs written once.
      const double T = double(batch) * heads * double(n) * double(d) * 2.0;  // one fp16 tensor
      auto out_bytes = [&](const kernels::QuantBuffers& b, kernels::QuantOp op) {
        switch (op) {
          case kernels::QuantOp::ChannelStats: return 4.0 * double(b.k_stats() + b.v_stats() + b.k_first_bad() + b.v_first_bad());
          case kernels::QuantOp::QuantizeK: return double(b.k_codes()) + 4.0 * double(b.k_scale() + b.k_mean());
          case kernels::QuantOp::QuantizeV: return double(b.v_codes()) + 4.0 * double(b.v_scale() + b.v_mean());
          case kernels::QuantOp::QuantizeQ:
            return double(b.q_codes() + b.q_bad()) + 4.0 * double(b.q_scale() + b.q_kbias() + b.q_mean());
          default: return 0.0;
        }
      };
      auto in_bytes = [&](kernels::QuantOp op) { return op == kernels::QuantOp::ChannelStats ? 2 * T : T; };
      char tile[80];
      std::snprintf(tile, sizeof tile, "%s bq%d.bk%d.w%d.s%d%s", kernels::family_name(spec.family), spec.tile.bq, spec.tile.bk,
                    spec.tile.warps, spec.tile.stages, spec.q_in_kernel ? " qin" : "");
      auto record = [&](const char* path, const char* launch, double ms, double bytes) {
        const double floor_ms = bytes / kFloorBytesPerS * 1e3;
        std::printf("%-7s %-14s %6ld %10.4f %9.1f %9.4f %7.2f  %s\n", path, launch, n, ms, bytes / 1e6, floor_ms,
                    ms / floor_ms, tile);
        char rec[1200];
        std::snprintf(rec, sizeof rec,
                      "{\"method\": \"sage2-quantize\", \"path\": \"%s\", \"launch\": \"%s\", \"head_dim\": %ld, "
                      "\"seq_len\": %ld, \"batch\": %ld, \"heads\": %ld, \"dtype\": \"fp16\", \"qk_bits\": %ld, "
                      "\"attention\": \"%s\", \"ms\": %.5f, \"bytes\": %.0f, \"floor_ms\": %.5f, \"floor_ratio\": %.3f, "
                      "\"gbps\": %.1f, \"reps\": %d, \"device\": \"%s\", \"commit\": \"%s\", \"command\": \"%s\"}",
                      path, launch, d, n, batch, heads, bits, tile, ms, bytes, floor_ms, ms / floor_ms,
                      bytes / (ms * 1e-3) / 1e9, reps, ctx.device().name.c_str(), sage2::build_commit().c_str(),
                      command.c_str());
        records.push_back(rec);
      };
      // Each launch alone: the auto path's (no quantize_q), then quantize_q of the split path.
      double auto_bytes = 0, split_bytes = 0;
      const auto ops = runtime::quantize_ops(runtime::QuantPath::Auto, spec);
      for (const kernels::KernelSpec* sp : {&spec, &spec_q}) {
        const kernels::QuantBuffers& b = sp == &spec ? qb : qb_q;
        dev::QuantizeParams params = kernels::make_quantize_params(b, q, k, v, ws);
        const auto these = runtime::quantize_ops(sp == &spec ? runtime::QuantPath::Auto : runtime::QuantPath::Split, *sp);
        for (kernels::QuantOp op : these) {
          const double bytes = in_bytes(op) + out_bytes(b, op);
          (sp == &spec ? auto_bytes : split_bytes) += bytes;
          if (sp == &spec_q && op != kernels::QuantOp::QuantizeQ) continue;  // timed once, above
          const kernels::KernelSpec qs = kernels::quantize_spec_for(*sp, op);
          runtime::LoadedKernel& kern = impl.kernels().get(qs);
          const kernels::LaunchShape ls = kernels::quantize_launch_shape(qs, b);
          // channel_stats counts its chunks' arrivals: the counters start at zero (as in a call)
          const bool clear = kernels::quantize_clears_sync({op}, *sp, b);
          const auto sync = reinterpret_cast<CUdeviceptr>(ws + b.offsets().sync);
          const std::size_t sync_bytes = b.offsets().sync_bytes;
          record(sp == &spec ? "auto" : "split", kernels::quant_op_name(op), median_ms([&] {
                   if (clear) base::driver::check(a.cuMemsetD8Async(sync, 0, sync_bytes, stream), "cuMemsetD8Async");
                   runtime::launch(kern, ls, &params, stream);
                 }, reps, stream), bytes);
        }
      }
      // Whole stages (plain launches, one after the other).
      record("auto", "stage",
             median_ms([&] { runtime::launch_quantize_stage(impl, spec, qb, q, k, v, ws, stream, runtime::QuantPath::Auto); },
                       reps, stream),
             auto_bytes);
      record("split", "stage",
             median_ms([&] { runtime::launch_quantize_stage(impl, spec_q, qb_q, q, k, v, ws, stream, runtime::QuantPath::Split); },
                       reps, stream),
             split_bytes);
      if (impl.arch() == kernels::Arch::Sm90a && kernels::cluster_quantize_supported(spec_q))
        record("cluster", "stage", median_ms([&] {
                 runtime::launch_quantize_stage(impl, spec_q, qb_q, q, k, v, ws, stream, runtime::QuantPath::Cluster);
               }, reps, stream), split_bytes);
      record("fused", "stage",
             median_ms([&] { runtime::launch_quantize_stage(impl, spec_q, qb_q, q, k, v, ws, stream, runtime::QuantPath::Fused); },
                       reps, stream), split_bytes);
      // The floors the design is judged by: one pass over K and V (read both, write INT8 K and
      // FP8 V: 3T) and this design's (statistics pass + K + V: 5T; Q read by the attention kernel).
      std::printf("  N %ld: byte floor of one pass over K/V %.4f ms; of the auto stage %.4f ms (%.2fx the one-pass floor)\n", n,
                  3 * T / kFloorBytesPerS * 1e3, auto_bytes / kFloorBytesPerS * 1e3, auto_bytes / (3 * T));
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
