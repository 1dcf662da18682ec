// The bridge between the reference's public KernelConfig / StageLayout (sage2/reference.hpp) and
// the kernels' own spec and buffer layout (jit/): the reference converts at its entry points, so
// its groups, padding and sum orders are the generated kernels'. Internal (not installed): the
// library, its tools and tests convert with it.
#pragma once

#include "kernels/kernel_spec.hpp"
#include "kernels/quant_buffers.hpp"
#include "sage2/reference.hpp"

namespace sage2::reference {

// The kernels' spec of `config` (family Auto resolved with kernels::default_attention_family). Throws
// InvalidArgument naming the field for an unknown arch or family, or a spec that does not validate.
kernels::KernelSpec kernel_spec(const KernelConfig& config);
// The public config of an attention kernel spec (InvalidArgument for another kind of spec).
KernelConfig kernel_config(const kernels::KernelSpec& attention_spec);

// The public description of the quantize-stage buffers `b` laid out for `config`.
StageLayout stage_layout(const kernels::QuantBuffers& b, const KernelConfig& config);
// The kernels' layout of the buffers `layout` describes (their offsets in one workspace included).
kernels::QuantBuffers quant_buffers(const StageLayout& layout);

}  // namespace sage2::reference
