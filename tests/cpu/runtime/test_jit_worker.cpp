// Specification (CPU): quick builds compile in a worker process (runtime/jit_worker.hpp). NVRTC
// 13.0 keeps --Ofast-compile=max's effect for the rest of a process, so the library never runs a
// quick build itself: the worker (tools/sage2_jit_worker.cpp) compiles it and returns the kernel
// in the disk cache's entry format, and this process's later optimized builds stay as they were.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "jit/compiler.hpp"
#include "jit/kernel_build.hpp"
#include "runtime/jit_worker.hpp"
#include "sage2/sage2.hpp"

using namespace sage2;

namespace {
const std::string kWorker = std::string(SAGE2_TOOLS_DIR) + "/sage2-jit-worker";

// The default hd 128 wgmma attention spec whose optimized build spilled in a process that had
// compiled one Ofast-max build (bench/results/2026-11-29-session17/jit-ofast-leak-cpu).
kernels::KernelSpec wgmma_d128() {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionWgmma;
  s.consumer = s.family;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = 128;
  s.in_dtype = DType::F16;
  s.tile = kernels::TileConfig{128, 128, 8, 3};
  s.smooth_k = true;
  return s;
}
}  // namespace

TEST_CASE("jit worker: a quick build is the same source with --Ofast-compile=max under its own key, compiled in "
          "the worker; this process's optimized builds keep their code") {
  REQUIRE_MESSAGE(jit::Toolchain::current().has_nvrtc(), "NVRTC must be loadable for the CPU suite");
  const kernels::KernelSpec s = wgmma_d128();
  const jit::KernelBuild opt = jit::make_build(s);
  const jit::CompiledKernel before = jit::compile(opt);
  const jit::KernelBuild quick = jit::make_quick_build(s);
  CHECK(quick.source == opt.source);
  CHECK(quick.key != opt.key);
  CHECK(jit::is_quick_build(quick));
  CHECK_FALSE(jit::is_quick_build(opt));
  const jit::CompiledKernel k = runtime::compile_in_worker(quick, kWorker);
  CHECK(k.key == quick.key);
  CHECK(k.entry == s.entry_name());
  CHECK_FALSE(k.cubin.empty());
  CHECK(k.cubin != before.cubin);  // another program
  // The optimized build after it, in this process: the same spills and registers as before.
  const jit::CompiledKernel after = jit::compile(opt);
  CHECK(after.facts.spill_store_bytes == before.facts.spill_store_bytes);
  CHECK(after.facts.registers == before.facts.registers);
  CHECK(after.cubin == before.cubin);
}

TEST_CASE("jit worker: the quick tier's multi-threaded ptxas changes how fast it compiles, not the kernel") {
  REQUIRE_MESSAGE(jit::Toolchain::current().has_nvrtc(), "NVRTC must be loadable for the CPU suite");
  const jit::KernelBuild quick = jit::make_quick_build(wgmma_d128());
  REQUIRE(std::count(quick.options.begin(), quick.options.end(), std::string(jit::kQuickPtxasOption)) == 1);
  jit::KernelBuild one_thread = quick;
  one_thread.options.erase(std::find(one_thread.options.begin(), one_thread.options.end(), jit::kQuickPtxasOption));
  const jit::CompiledKernel a = runtime::compile_in_worker(quick, kWorker);
  const jit::CompiledKernel b = runtime::compile_in_worker(one_thread, kWorker);
  CHECK(a.cubin.size() == b.cubin.size());
  CHECK(a.facts.registers == b.facts.registers);
  CHECK(a.facts.spill_store_bytes == b.facts.spill_store_bytes);
  CHECK(a.facts.stack_frame_bytes == b.facts.stack_frame_bytes);
  CHECK(a.facts.static_shared_bytes == b.facts.static_shared_bytes);
}

TEST_CASE("jit worker: a failing build is a CompileError carrying the worker's message; a missing worker too") {
  jit::KernelBuild broken = jit::make_quick_build(wgmma_d128());
  broken.source += "\nthis is not C++;\n";
  CHECK_THROWS_WITH_AS(runtime::compile_in_worker(broken, kWorker), doctest::Contains("jit worker"), Error);
  CHECK_THROWS_WITH_AS(runtime::compile_in_worker(broken, "/nonexistent/sage2-jit-worker"),
                       doctest::Contains("cannot run"), Error);
}
