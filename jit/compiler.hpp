// kernels::KernelSpec → generated source → NVRTC → cubin.
#pragma once

#include <string>
#include <vector>

#include "jit/kernel_build.hpp"
#include "jit/source_builder.hpp"
#include "kernels/kernel_spec.hpp"

namespace sage2::jit {

// What ptxas reported for the compiled entry (parsed from the NVRTC log, --ptxas-options=-v).
struct PtxasFacts {
  int registers = -1;          // -1 when not reported
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_frame_bytes = 0;
  int static_shared_bytes = 0;
  int constant_bytes = 0;
};

struct CompiledKernel {
  std::string key;             // the KernelBuild's key (jit/kernel_build.hpp)
  kernels::Arch arch = kernels::Arch::Sm90a;
  std::string entry;           // spec.entry_name()
  std::vector<char> cubin;     // the cubin; for a PTX spec (KernelSpec::ptx) the PTX text with its NUL
  PtxasFacts facts;
  double compile_seconds = 0;
  int nvrtc_major = 0, nvrtc_minor = 0;  // the NVRTC that produced the cubin
  std::string log;             // the full NVRTC log (warnings + ptxas info)
};

// Compiles b.source with b.options and the embedded templates as headers; the result carries
// b.key. Throws Error(CompileError) carrying the key and the whole log on failure,
// Error(NvrtcMissing) when libnvrtc cannot be loaded, Error(Internal) when b was made for another
// NVRTC than the loaded one (its key would name the wrong compiler). Honors
// base::config::ProcessConfig::dump_dir (SAGE2_DUMP_DIR).
CompiledKernel compile(const KernelBuild& b);
// What compile() takes from b.spec besides the key: the entry, the arch and whether the output is
// PTX. A worker process that receives a build as text (runtime/jit_worker.hpp) gives them here.
struct CompileTarget {
  std::string entry;
  kernels::Arch arch = kernels::Arch::Sm90a;
  bool ptx = false;
};
CompileTarget compile_target(const kernels::KernelSpec& spec);
CompiledKernel compile(const KernelBuild& b, const CompileTarget& target);
// compile(make_build(spec)).
CompiledKernel compile(const kernels::KernelSpec& spec);
// compile(make_build(spec, source)): a caller's source with spec's options and entry name — for
// tests, probes and tools. The key covers that source.
CompiledKernel compile_source(const kernels::KernelSpec& spec, const std::string& source);

// NVRTC version of the loaded library; {0,0} when NVRTC is unavailable (never throws).
std::pair<int, int> nvrtc_version() noexcept;
// The real architectures the loaded NVRTC compiles for, as compute capabilities (75, 80, ...,
// 120, 121: nvrtcGetSupportedArchs); empty when NVRTC is unavailable or cannot say (never throws).
std::vector<int> nvrtc_supported_archs() noexcept;

// Parses ptxas -v output in an NVRTC log: the facts of the first entry function it reports.
PtxasFacts parse_ptxas_facts(const std::string& log);
// The facts reported for the function named `entry` (e.g. spec.entry_name()).
PtxasFacts parse_ptxas_facts(const std::string& log, const std::string& entry);

}  // namespace sage2::jit
