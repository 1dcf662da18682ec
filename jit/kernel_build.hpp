// KernelBuild: everything NVRTC is given for one spec, and the cache key that names it.
//
// A cubin is a function of the generated source, the embedded templates it includes, the NVRTC
// options, the NVRTC that compiles it, and the library whose host code launches it. The cache key
// covers all of them, so a new libsage2 (other source generation, other launch code) or a new
// NVRTC never loads a cubin built from other inputs:
//
//   <spec.key()>|sage2:<SAGE2_VERSION>|code:<16 hex>|nvrtc:<major>.<minor>
//
// code = FNV-1a 64 over the library version, the entry name, the options, every embedded
// template and the complete generated source. The NVRTC version is a field of its own (last) so
// that a process without NVRTC, which cannot recompile anything, can still use an entry of the
// same code built by any NVRTC (cache::DiskCache::load_build).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel_spec.hpp"

namespace sage2::jit {

// What turns source into a cubin and launches it, besides the source: this library and NVRTC.
struct Toolchain {
  std::string library;                   // SAGE2_VERSION of the library
  int nvrtc_major = 0, nvrtc_minor = 0;  // 0.0: no NVRTC could be loaded

  // This process's: SAGE2_VERSION and the NVRTC loaded by nvrtc::try_api() (0.0 when none, no
  // error: a process without NVRTC may still load cached kernels).
  static Toolchain current();
  bool has_nvrtc() const { return nvrtc_major > 0; }
  std::string nvrtc_str() const;  // "13.0"; empty without NVRTC
  bool operator==(const Toolchain&) const = default;
};

struct KernelBuild {
  kernels::KernelSpec spec;
  std::string source;                // the complete generated source (or a caller's)
  std::vector<std::string> options;  // NVRTC options
  Toolchain toolchain;
  std::string stem;                  // the key up to and without "|nvrtc:..."
  std::string key;                   // stem + nvrtc_key_field(toolchain): the cache key
};

// generate_source(spec) and nvrtc_options(spec) under `tc`. Throws what generate_source throws.
KernelBuild make_build(const kernels::KernelSpec& spec, const Toolchain& tc = Toolchain::current());
// The quick tier of issue 40: the same source with NVRTC's fastest compile (--Ofast-compile=max).
// Its loops stay rolled and NVVM leaves contraction to ptxas, so its code (and possibly its bits)
// differ from make_build's; its key differs too (the options are hashed into the stem), and the
// kernel loader never puts it in the disk cache.
// NVRTC 13.0 keeps --Ofast-compile=max's effect for every later program of the process (the
// optimized builds after it spill: bench/NOTES.md, session 17), so the library compiles quick
// builds only in a worker process (runtime/jit_worker.hpp), never in its own.
inline constexpr const char* kQuickOption = "--Ofast-compile=max";
// Its ptxas compiles the functions --Ofast-compile=max leaves uninlined on as many threads as the
// host has: the same SASS (hd 320's five kernels compared on sm_90a), 15-28 % faster alone on 2
// cores (bench/NOTES.md, session 22).
inline constexpr const char* kQuickPtxasOption = "--ptxas-options=--split-compile=0";
KernelBuild make_quick_build(const kernels::KernelSpec& spec, const Toolchain& tc = Toolchain::current());
bool is_quick_build(const KernelBuild& b);
// A caller's source (tests, probes, template variants) with spec's options.
KernelBuild make_build(const kernels::KernelSpec& spec, std::string source, const Toolchain& tc = Toolchain::current());
// A caller's source and options.
KernelBuild make_build(const kernels::KernelSpec& spec, std::string source, std::vector<std::string> options,
                       const Toolchain& tc);

// "|nvrtc:13.0": the last field of every cache key.
std::string nvrtc_key_field(int major, int minor);
inline constexpr const char* kNvrtcKeyTag = "|nvrtc:";

// The identity of the code this library generates, for records that depend on the compiled
// kernels but not on one spec (the tuning database): "<library>+<16 hex>", the hex a hash of the
// build stems of a fixed set of reference specs (one per family and quantize op, both archs) —
// so it changes with the templates, the source generator or the options, not only with the
// version number. The NVRTC version is compared separately. Computed once per library string.
std::string code_version(const std::string& library);

}  // namespace sage2::jit
