// The wgmma + TMA attention family (templates/attention_wgmma.cuh; sm_90a, 8-bit, head dims up to
// 256): its descriptor (jit::attention_family(KernelFamily::AttentionWgmma)) and the details of
// its plan. The CTA size, the P·V chunking and the shared-memory layout come from the constexpr
// functions of templates/wgmma_params.cuh, which the device template uses too (the kernel also
// traps on another blockDim).
#pragma once

#include <cstddef>

#include "kernels/kernel_spec.hpp"

namespace sage2::kernels {

class AttentionFamilyDesc;
// The family's descriptor (also reachable through the registry, jit/attention_family.hpp).
const AttentionFamilyDesc& wgmma_family() noexcept;

struct WgmmaKernelConfig {
  int threads = 0;              // CTA size: consumer warps · 32 (+ 128 for the producer warpgroup)
  int consumer_groups = 0;      // consumer warpgroups (64 query rows each)
  bool producer_group = false;  // a producer warpgroup issues the copies (warp specialisation)
  int panel = 0;                // K tile column panel = its swizzle span (32/64/128 bytes)
  int pv_chunks = 0, pv_n = 0;  // P̂·V̂ in pv_chunks wgmma chunks of pv_n channels
  bool q_in_smem = false;       // Q̂ read by wgmma from shared memory (wide heads, pipelined, 1 warpgroup)
  bool pipelined = false;       // softmax of tile j under P̂·V̂ (j−1) (>= 3 stages, d_v <= 128)
  int min_ctas = 1;             // CTAs per SM the registers are planned for (__launch_bounds__)
  std::size_t smem = 0;         // dynamic shared memory (bytes)
};
WgmmaKernelConfig wgmma_kernel_config(const KernelSpec& attention_spec);

}  // namespace sage2::kernels
