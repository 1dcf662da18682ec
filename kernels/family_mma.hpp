// The mma.sync attention family (templates/attention_mma.cuh; every arch of the table, 4- and 8-bit,
// head dims 1..512): its descriptor (kernels::attention_family(KernelFamily::AttentionMma)) and the
// details of its plan. The CTA size, the V-channel passes and the shared-memory layout come from
// the constexpr functions of templates/attention_params.cuh, which the device template uses too,
// so the launch and the kernel cannot disagree (the kernel also traps on another blockDim).
#pragma once

#include <cstddef>

#include "kernels/kernel_spec.hpp"

namespace sage2::kernels {

class AttentionFamilyDesc;
// The family's descriptor (also reachable through the registry, kernels/attention_family.hpp).
const AttentionFamilyDesc& mma_family() noexcept;

struct MmaKernelConfig {
  int threads = 0;        // CTA size (warps · 32)
  int m_tiles = 0;        // 16-row tiles per warp
  int v_slices = 0;       // passes over the KV sequence (head dims whose O exceeds the registers)
  int v_slice = 0;        // V channels per pass
  std::size_t smem = 0;   // dynamic shared memory (bytes)
};
MmaKernelConfig mma_kernel_config(const KernelSpec& attention_spec);

}  // namespace sage2::kernels
