// The launch shape of one generated kernel: grid, block, shared memory and launch attributes. Every
// kernel's host half (quantize, attention, ΔS, direct) computes one; runtime::launch reads it.
#pragma once

#include <cstddef>

namespace sage2::kernels {

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::size_t dynamic_smem = 0;
  unsigned cluster_x = 1;  // CTAs per thread-block cluster along x (1: a plain launch)
  // Ask for the largest shared-memory carveout: the driver's own choice can be too small for the
  // CTAs per SM the kernel's registers allow (ncu, H100: the cluster quantize stage's 14 KB of
  // static shared memory got a 16 KB configuration, one CTA per SM). Kernels with more than 48 KB
  // of dynamic shared memory always get it (runtime::launch).
  bool max_shared_carveout = false;
  // Programmatic dependent launch (sm_90+): the kernel may start while the previous kernel on the
  // stream finishes; it waits (ptx::pdl_wait) before it touches what that kernel writes or reads.
  // Set by the call plan for the kernels whose templates wait (kernels::waits_for_previous_kernel).
  bool overlap_previous = false;
};

}  // namespace sage2::kernels
