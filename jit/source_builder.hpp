// kernels::KernelSpec → the CUDA source and the NVRTC options of its kernel (the first step of the
// compile pipeline; jit/kernel_build.hpp names the result, jit/compiler.hpp compiles it).
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel_spec.hpp"

namespace sage2::jit {

// The complete CUDA source NVRTC compiles for `spec`: a preamble of constexpr values derived
// from the spec (including the quantization layout tables) followed by #include of the family
// template. The embedded templates are handed to NVRTC as headers.
std::string generate_source(const kernels::KernelSpec& spec);
// The NVRTC options for `spec` (arch, std, fast-math policy, ptxas verbosity).
std::vector<std::string> nvrtc_options(const kernels::KernelSpec& spec);

}  // namespace sage2::jit
