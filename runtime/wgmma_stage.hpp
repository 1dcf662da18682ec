// The attention stage of one call on the wgmma family (sm_90a): per chunk (jit::attention_chunks),
// ΔS (smooth-Q only, the mma family's ΔS kernel and chunking) then the wgmma attention kernel, on
// the caller's stream, reading the quantize stage's workspace (laid out for the wgmma spec). The
// K and V tensor maps are encoded on the host (cuTensorMapEncodeTiled) and passed by value.
#pragma once

#include <cstddef>

#include "jit/quant_buffers.hpp"
#include "jit/wgmma_shape.hpp"
#include "runtime/context_impl.hpp"
#include "runtime/kernel_loader.hpp"

namespace sage2::runtime {

// Encodes a 2-D u8 tiled tensor map through the driver. Throws DriverError (with the spec's
// numbers) when the driver rejects it.
void encode_tma_map(const jit::TmaMapSpec& spec, dev::TmaDesc& out);

// An alternative compiled kernel for the same spec (experiments: a variant of the template
// compiled with extra macros) and its CTA size; used instead of the loader's kernel when given.

// Same contract as launch_attention_stage (runtime/attention_stage.hpp) for a spec of the wgmma
// family: `workspace` holds the quantize-stage buffers laid out for `attention_spec` (256-byte
// aligned), `k_input` is the device K the quantize stage read (ΔS), `out` [B, Hq, q_len, head_dim]
// in attention_spec.out_dtype, `lse` fp32 [B][Hq][q_len] when return_lse, `delta_s_workspace`
// (16-byte aligned) of `delta_s_bytes` when smooth-Q. Throws InvalidArgument / Unsupported before
// launching anything. No host synchronisation, no device allocation.
void launch_wgmma_attention_stage(Context::Impl& ctx, const jit::KernelSpec& attention_spec, const jit::QuantBuffers& b,
                                  const TensorRef& k_input, const void* workspace, const TensorRef& out, float* lse,
                                  float sm_scale, void* delta_s_workspace, std::size_t delta_s_bytes, CUstream stream);

}  // namespace sage2::runtime
