// sage2-bench-quantize: time of the quantize stage (everything the attention stage reads is
// written), cluster (one launch of thread-block clusters; sm_90a) vs fused (memset of the sync
// words + one launch) vs split (the four-launch baseline), and what every launch of the split path
// costs on its own.
//   sage2-bench-quantize [--seq-lens 1024,4096,8192,32768] [--head-dim 128] [--batch 4]
//                        [--heads 32] [--bits 8] [--reps 30] [--json FILE] [--command "..."]
// The attention spec is the one a default Context plans for the problem (family, tile), so the
// layout is the one the attention kernel would read. CUDA events around each call, median of
// `reps` after 3 warm-up calls. GB/s = (bytes of Q, K, V read once + bytes of every output buffer
// written) / time: the floor the stage is measured against (the fused kernel re-reads K and V,
// from L2 when the schedule's lag works; that is not counted).
// One JSON line per measurement: {"method": "sage2-quantize", "path": "cluster"|"fused"|"split",
//   "launch": "stage"|"memset"|"channel_stats"|"quantize_k"|"quantize_v"|"quantize_q", ...}.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "jit/launch_shape.hpp"
#include "jit/quant_buffers.hpp"
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
    const auto& a = driver::api();
    driver::ScopedContext scope(impl.cu_context());
    CUstream stream;
    driver::check(a.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    const long max_n = *std::max_element(lens.begin(), lens.end());
    const std::size_t elems = static_cast<std::size_t>(batch * heads * max_n * d);
    const bench::DeviceInputs buf(4, elems, 0.5);  // q, k, v, out (distinct: validation checks overlap)
    std::vector<std::string> records;
    std::printf("%-7s %-14s %6s %10s %9s  %s\n", "path", "launch", "N", "ms", "GB/s", "attention spec");
    for (long n : lens) {
      auto t = [&](int i) { return TensorRef::hnd(buf[i], DType::F16, batch, heads, n, d); };
      const TensorRef q = t(0), k = t(1), v = t(2);
      TensorRef out = t(3);  // validation only: nothing is written to it
      AttentionParams p;
      p.qk_bits = static_cast<QkBits>(bits);
      const auto prob = runtime::validate_attention(q, k, v, out, p, impl.arch());
      const auto spec = runtime::plan_attention(prob, impl.arch(), impl.facts());
      jit::QuantProblem qp{batch, heads, heads, n, n, static_cast<int>(d)};
      const auto qb = jit::quant_buffers(qp, spec);
      const auto off = qb.offsets();
      char* ws = static_cast<char*>(impl.workspace().get(stream, off.total));
      const double bytes = 3.0 * batch * heads * double(n) * double(d) * 2.0 + double(off.stats_part);
      dev::QuantizeParams params = jit::make_quantize_params(qb, q, k, v, ws);
      char tile[64];
      std::snprintf(tile, sizeof tile, "%s bq%d.bk%d.w%d.s%d", jit::family_name(spec.family), spec.tile.bq, spec.tile.bk,
                    spec.tile.warps, spec.tile.stages);
      auto record = [&](const char* path, const char* launch, double ms) {
        const double gbps = bytes / (ms * 1e-3) / 1e9;
        std::printf("%-7s %-14s %6ld %10.4f %9.0f  %s\n", path, launch, n, ms, gbps, tile);
        char rec[1024];
        std::snprintf(rec, sizeof rec,
                      "{\"method\": \"sage2-quantize\", \"path\": \"%s\", \"launch\": \"%s\", \"head_dim\": %ld, "
                      "\"seq_len\": %ld, \"batch\": %ld, \"heads\": %ld, \"dtype\": \"fp16\", \"qk_bits\": %ld, "
                      "\"attention\": \"%s\", \"ms\": %.5f, \"bytes\": %.0f, \"gbps\": %.1f, \"reps\": %d, "
                      "\"device\": \"%s\", \"command\": \"%s\"}",
                      path, launch, d, n, batch, heads, bits, tile, ms, bytes, gbps, reps, ctx.device().name.c_str(),
                      command.c_str());
        records.push_back(rec);
      };
      if (impl.arch() == jit::Arch::Sm90a && jit::cluster_quantize_supported(spec))
        record("cluster", "stage", median_ms([&] {
                 runtime::launch_quantize_stage(impl, spec, qb, q, k, v, ws, stream, runtime::QuantPath::Cluster);
               }, reps, stream));
      record("fused", "stage",
             median_ms([&] { runtime::launch_quantize_stage(impl, spec, qb, q, k, v, ws, stream, runtime::QuantPath::Fused); },
                       reps, stream));
      record("fused", "memset", median_ms([&] {
               driver::check(a.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(ws + off.sync), 0, off.sync_bytes, stream),
                             "memset");
             }, reps, stream));
      record("split", "stage",
             median_ms([&] { runtime::launch_quantize_stage(impl, spec, qb, q, k, v, ws, stream, runtime::QuantPath::Split); },
                       reps, stream));
      // Each split launch alone (its inputs are in the workspace from the runs above).
      for (jit::QuantOp op : {jit::QuantOp::ChannelStats, jit::QuantOp::QuantizeK, jit::QuantOp::QuantizeV,
                              jit::QuantOp::QuantizeQ}) {
        const jit::KernelSpec qs = jit::quantize_spec_for(spec, op);
        runtime::LoadedKernel& kern = impl.kernels().get(qs);
        const jit::LaunchShape ls = jit::quantize_launch_shape(qs, qb);
        record("split", jit::quant_op_name(op), median_ms([&] { runtime::launch(kern, ls, &params, stream); }, reps, stream));
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
