// sage2-bench-jit: times getting one quantize specialisation ready to launch.
//   sage2-bench-jit --cache-dir DIR [--device N]
// Run it twice on an empty DIR: the first process compiles with NVRTC (cold), the second finds
// the cubin on disk (warm). Prints one JSON object per line.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "jit/launch_shape.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/quantize_stage.hpp"

using clk = std::chrono::steady_clock;
static double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

int main(int argc, char** argv) {
  const auto t_start = clk::now();
  std::string dir;
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cache-dir") && i + 1 < argc) dir = argv[++i];
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = std::atoi(argv[++i]);
    else { std::fprintf(stderr, "usage: sage2-bench-jit --cache-dir DIR [--device N]\n"); return 2; }
  }
  if (dir.empty()) { std::fprintf(stderr, "--cache-dir is required\n"); return 2; }
  try {
    sage2::ContextOptions o;
    o.cache_dir = dir;
    const auto t0 = clk::now();
    sage2::Context ctx(device, o);
    const double context_ms = ms_since(t0);
    sage2::jit::KernelSpec attn;
    attn.family = sage2::jit::KernelFamily::AttentionMma;
    attn.head_dim = 128;
    attn.qk_bits = 8;
    attn.smooth_q = false;
    const auto spec = sage2::jit::quantize_spec_for(attn, sage2::jit::QuantOp::QuantizeQ);
    const auto t1 = clk::now();
    auto& k = ctx.impl().kernels().get(spec);
    const double get_ms = ms_since(t1);
    const auto t2 = clk::now();
    auto& k2 = ctx.impl().kernels().get(spec);  // in-memory hit
    const double memory_hit_us = ms_since(t2) * 1e3;
    (void)k2;
    std::printf("{\"what\": \"jit_load\", \"device\": \"%s\", \"key\": \"%s\", \"source\": \"%s\", "
                "\"get_ms\": %.3f, \"context_ms\": %.3f, \"memory_hit_us\": %.3f, \"process_to_ready_ms\": %.3f, "
                "\"registers\": %d, \"spill_bytes\": %d}\n",
                ctx.device().name.c_str(), k.key.c_str(),
                k.source == sage2::runtime::KernelSource::DiskCache ? "disk" : "nvrtc", get_ms, context_ms,
                memory_hit_us, ms_since(t_start), k.facts.registers,
                k.facts.spill_store_bytes + k.facts.spill_load_bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
