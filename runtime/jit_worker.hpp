// Quick builds in a child process (issue 40's first tier). NVRTC 13.0 keeps --Ofast-compile=max's
// effect for every later compile of a process (bench/NOTES.md, session 17: the optimized builds
// after it spill), so the library never compiles a quick build itself: it writes the build to a
// request file, runs the sage2-jit-worker program (tools/sage2_jit_worker.cpp) on it, and reads
// back the compiled kernel in the disk cache's entry format. The worker's NVRTC state ends with it.
#pragma once

#include <string>

#include "jit/compiler.hpp"
#include "jit/kernel_build.hpp"

namespace sage2::runtime {

// The worker program: $SAGE2_JIT_WORKER when set (empty: none), else sage2-jit-worker beside the
// library that holds this code — <dir>/tools/, <dir>/_bin/ (the wheel), <dir>/../bin/ (an
// install), <dir>/../tools/ (a build tree's test programs). "" when none exists: the tiered
// compile is then unavailable (a Context waits for the optimized kernels, after one warning).
const std::string& jit_worker_path();

// Compiles `b` in a run of `worker`. Throws Error(CompileError) with the worker's output when it
// fails, as compile() would.
jit::CompiledKernel compile_in_worker(const jit::KernelBuild& b, const std::string& worker);

// The worker's side: `sage2-jit-worker REQUEST OUT` compiles the build in REQUEST and writes the
// kernel (or nothing, exit status 1 and the error on stderr) to OUT. Returns the exit status.
int jit_worker_main(int argc, char** argv);

}  // namespace sage2::runtime
