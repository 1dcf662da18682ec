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
  // The CTAs per SM the kernel is planned for (its descriptor's min_ctas): > 0 asks for the
  // smallest shared-memory carveout that holds them, so that the rest of the SM's unified memory
  // stays L1, where a streaming kernel's loads in flight are held. Without a preference a kernel can
  // run in the carveout an earlier launch asked for (the driver API's notes on cache configs): the
  // quantize kernels behind a 64 KB statistics ring ran 15-20 % slower (bench/NOTES.md, session 22).
  // 0: the driver's choice. Ignored where the largest carveout is asked for.
  int planned_ctas_per_sm = 0;
  // Programmatic dependent launch (sm_90+): the kernel may start while the previous kernel on the
  // stream finishes; it waits (ptx::pdl_wait) before it touches what that kernel writes or reads.
  // Set by the call plan for the kernels whose templates wait (kernels::waits_for_previous_kernel).
  bool overlap_previous = false;
};

}  // namespace sage2::kernels
