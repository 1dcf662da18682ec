// Planning one attention call with a Context: the family its options force, and the tile from its
// tuning database (plan/planner.hpp: memoised per problem signature) or, without an entry, the
// heuristic default — chosen at once, never blocking on tuning. The spec itself and the heuristic
// alone need no Context: plan/attention_spec.hpp.
#pragma once

#include <optional>

#include "kernels/kernel_spec.hpp"
#include "plan/attention_spec.hpp"
#include "runtime/device.hpp"
#include "sage2/sage2.hpp"

namespace sage2::runtime {

// The kernel family a Context's option (ContextOptions::family, default SAGE2_ATTENTION_FAMILY)
// forces: nullopt for Auto. Throws Unsupported for a family with no kernel for the device's arch
// (wgmma off sm_90a).
std::optional<kernels::KernelFamily> attention_family_override(AttentionFamily family, const DeviceFacts& facts,
                                                           kernels::Arch arch);

// The spec Context::attention runs: the tuned tile of the Context's database when it has one
// for this problem (and the tile fits the device), else the heuristic default. Thread-safe;
// after the first call for a problem signature it costs one hash lookup. Throws Unsupported when
// no tile fits the device's shared memory.
kernels::KernelSpec plan_attention(const plan::AttentionProblem& p, const Context::Impl& ctx);

// What a Context created with default options (every setting from the environment) on this device
// plans:
// the same process-wide planner (plan::shared_planner), so tests and benchmarks that rebuild
// "the spec the API ran" from the device facts get the tuned tile when the API used one.
kernels::KernelSpec plan_attention(const plan::AttentionProblem& p, kernels::Arch arch, const DeviceFacts& facts);

// Throws InvalidArgument when a tensor's memory is not device memory of the context's device
// (host pointers, another GPU's memory), naming the tensor and the device it is on.
void check_pointers_on_device(Context::Impl& ctx, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                              const TensorRef& out, const float* lse, const SeqLens* lens = nullptr,
                              const MaskRef* mask = nullptr);

}  // namespace sage2::runtime
