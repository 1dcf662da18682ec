// Planning one attention call: which kernel family and tile configuration run it. Until the
// autotuner's database exists this is the heuristic default, chosen at once (never blocking).
#pragma once

#include <vector>

#include "jit/kernel_spec.hpp"
#include "runtime/attention_validate.hpp"
#include "runtime/device.hpp"
#include "sage2/sage2.hpp"

namespace sage2::runtime {

// Tile configurations of the mma.sync family, most preferred first.
const std::vector<jit::TileConfig>& mma_tile_candidates();

// The attention KernelSpec for a validated problem on a device: the first candidate tile config
// that fits the device's shared memory. Throws Unsupported when none does.
jit::KernelSpec plan_attention(const AttentionProblem& p, jit::Arch arch, const DeviceFacts& facts);

// Throws InvalidArgument when a tensor's memory is not device memory of the context's device
// (host pointers, another GPU's memory), naming the tensor and the device it is on.
void check_pointers_on_device(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                              const TensorRef& out, const float* lse);

}  // namespace sage2::runtime
