// The attention stage of one call, for any attention family: per chunk (kernels::attention_chunks),
// ΔS (smooth-Q only) then the family's attention kernel, on the caller's stream, reading the
// quantize stage's workspace. Everything family-specific comes from the spec's descriptor
// (kernels/attention_family.hpp): the checks, the launch shape, the parameter struct and the tensor
// maps it carries (encoded here, through the driver, for the maps the descriptor describes).
//
// The stage is planned once (AttentionStagePlan: a cached call plan keeps it, runtime/call_plan)
// and run per call with the call's pointers; launch_attention_stage() does both at once.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "kernels/attention_family.hpp"
#include "kernels/attention_shape.hpp"
#include "kernels/quant_buffers.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_loader.hpp"

namespace sage2::runtime {

// Bytes of ΔS workspace the stage needs for `b` (0 without smooth-Q), bounded by `cap` (see
// kernels::delta_s_workspace_bytes).
std::size_t delta_s_workspace_bytes(const kernels::QuantBuffers& b, std::size_t cap = kernels::kDeltaSWorkspaceCap);

// Encodes a 2-D u8 tiled tensor map through the driver. Throws DriverError (with the spec's
// numbers) when the driver rejects it.
void encode_tma_map(const kernels::TmaMapSpec& spec, kernels::TmaMap& out);

// One kernel launch of a plan: the loaded kernel and its shape.
struct KernelLaunch {
  LoadedKernel* kernel = nullptr;
  kernels::LaunchShape shape;
};

// The encoded tensor maps of the last few workspace base pointers (the maps depend on nothing
// else), so a call with a workspace seen before encodes none. Thread-safe.
class TmaMapCache {
 public:
  // Copies the maps for `workspace` into `out` (family.tma_maps of them), encoding them first
  // when this workspace is new. Call under the Context's driver scope.
  void get(const kernels::AttentionFamilyDesc& family, const kernels::KernelSpec& spec, const kernels::QuantBuffers& b,
           const void* workspace, kernels::TmaMap* out) const;

 private:
  struct Slot {
    const void* workspace = nullptr;
    kernels::TmaMap maps[kernels::kMaxTmaMaps];
  };
  static constexpr int kSlots = 4;
  mutable std::mutex mu_;
  mutable Slot slots_[kSlots];
  mutable int used_ = 0, next_ = 0;
};

// The attention stage of one (spec, buffers) pair: computed once, read by every later step.
struct AttentionStagePlan {
  kernels::KernelSpec spec;                         // arch = the Context's
  const kernels::AttentionFamilyDesc* family = nullptr;  // the spec's descriptor
  kernels::AttentionKernelConfig kernel;            // family->kernel_config(spec)
  std::size_t delta_s_bytes = 0;                // the ΔS workspace the chunks were cut for
  std::vector<kernels::AttentionChunk> chunks;
  std::vector<KernelLaunch> attention, delta_s;  // per chunk (load_attention_stage); delta_s empty without smooth-Q
  TmaMapCache tma;
};

// The pure-host part (no driver, no kernel): family, kernel config, chunks for a ΔS workspace of
// `delta_s_bytes`. Throws like kernels::attention_chunks.
void layout_attention_stage(const kernels::KernelSpec& spec, const kernels::QuantBuffers& b, std::size_t delta_s_bytes,
                            AttentionStagePlan& plan);

// Checks the spec against this device (the family's rules and shared memory: InvalidArgument /
// Unsupported), then loads (or compiles) the attention and ΔS kernels and computes the launch
// shapes. `plan` must have been laid out for `b`; the spec's arch must be the Context's.
// `attention` / `delta_s`: those kernels when the caller has loaded them already (KernelLoader::
// load_all), so that they are not asked for twice.
void load_attention_stage(Context::Impl& ctx, const kernels::QuantBuffers& b, AttentionStagePlan& plan,
                          LoadedKernel* attention = nullptr, LoadedKernel* delta_s = nullptr);
// The checks of load_attention_stage alone (nothing is loaded).
void check_attention_stage(Context::Impl& ctx, const AttentionStagePlan& plan);

// The parameter structs of one call's attention stage, per chunk: one storage block holding the
// family's struct (family->param_bytes; tensor maps added by add_tensor_maps), and ΔS's.
struct AttentionStageParams {
  std::vector<kernels::AttentionParamStorage> attention;
  std::vector<dev::DeltaSParams> delta_s;
};
// Pure host (no driver): fills `out` (reusing its capacity) for these pointers. `workspace` holds
// the quantize-stage buffers (b.offsets()); `k_input` is the device K the quantize stage read (ΔS
// is computed from the un-quantised γK); `out` [B, Hq, q_len, head_dim] in spec.out_dtype (HND/NHD
// strides, stride_dim 1); `lse` [B][Hq][q_len] fp32 when spec.return_lse (else ignored);
// `delta_s_workspace` holds plan.delta_s_bytes (16-byte aligned) when smooth-Q. Throws
// InvalidArgument naming the bad value.
// `q_input`: the caller's Q, read by a kernel that quantizes Q itself (spec.q_in_kernel).
void build_attention_stage_params(const AttentionStagePlan& plan, const kernels::QuantBuffers& b,
                                  const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                                  float sm_scale, void* delta_s_workspace, AttentionStageParams& params,
                                  const MaskRef* mask = nullptr, const TensorRef* q_input = nullptr);

// Encodes (or finds in plan.tma) the tensor maps of the family for this workspace and copies them
// into every chunk's parameters; nothing for a family without maps. Call under the Context's
// driver scope, before the call launches anything: a rejected map launches nothing.
void add_tensor_maps(const AttentionStagePlan& plan, const kernels::QuantBuffers& b, const void* workspace,
                     AttentionStageParams& params);
// Enqueues ΔS and attention for every chunk (after load_attention_stage and add_tensor_maps),
// under the Context's driver scope.
void enqueue_attention_stage(const AttentionStagePlan& plan, AttentionStageParams& params, CUstream stream);

// Plans, checks, builds every parameter struct (argument errors surface before anything is
// loaded or launched), loads and runs the stage in one go: the stage without a cached plan.
// `delta_s_workspace` holds `delta_s_bytes` bytes (>= one chunk row; 16-byte aligned) when
// smooth-Q. No host synchronisation.
// `q_input`: the caller's Q, required when attention_spec.q_in_kernel.
void launch_attention_stage(Context::Impl& ctx, const kernels::KernelSpec& attention_spec, const kernels::QuantBuffers& b,
                            const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                            float sm_scale, void* delta_s_workspace, std::size_t delta_s_bytes, CUstream stream,
                            const TensorRef* q_input = nullptr);

}  // namespace sage2::runtime
