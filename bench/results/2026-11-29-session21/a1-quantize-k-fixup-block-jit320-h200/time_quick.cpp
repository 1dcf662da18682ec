// CPU: how long each quick build of an hd-320 call takes in the worker process (spawn + NVRTC),
// alone and all at once (as a first call runs them), and the same builds in-process (optimized).
#include <chrono>
#include <cstdio>
#include <future>
#include <vector>
#include "jit/compiler.hpp"
#include "jit/kernel_build.hpp"
#include "plan/call_kernels.hpp"
#include "runtime/jit_worker.hpp"
using namespace sage2;
using clk = std::chrono::steady_clock;
static double ms(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }
int main(int argc, char** argv) {
  const int hd = argc > 1 ? std::atoi(argv[1]) : 320;
  plan::AttentionProblem p{};
  p.batch = 1; p.q_heads = 4; p.kv_heads = 4; p.q_len = 1000; p.kv_len = 1000; p.head_dim = hd;
  plan::CallSettings s;
  s.arch = kernels::Arch::Sm90a;
  p.smooth_k = true;
  const std::vector<kernels::KernelSpec> specs = plan::call_kernel_specs(p, s);
  const std::string worker = runtime::jit_worker_path().empty() ? "build/tools/sage2-jit-worker" : runtime::jit_worker_path();
  std::printf("worker %s, %zu kernels\n", worker.c_str(), specs.size());
  for (const auto& k : specs) {
    const auto b = jit::make_quick_build(k);
    auto t = clk::now();
    runtime::compile_in_worker(b, worker);
    std::printf("quick alone %-60.60s %8.1f ms\n", k.key().c_str(), ms(t));
  }
  auto t = clk::now();
  std::vector<std::future<double>> fs;
  for (const auto& k : specs)
    fs.push_back(std::async(std::launch::async, [k, worker] { auto t0 = clk::now(); runtime::compile_in_worker(jit::make_quick_build(k), worker); return ms(t0); }));
  for (auto& f : fs) std::printf("  concurrent %8.1f ms\n", f.get());
  std::printf("all quick at once: %.1f ms (2 cores here)\n", ms(t));
}
