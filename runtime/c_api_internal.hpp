// Internal entry points of the C ABI's conversion layer (not installed; the public C header
// include/sage2/sage2.h is unchanged). For tests: sage2_attention() and sage2_workspace_size()
// refuse a NULL context before they convert anything, so without a GPU the conversion of C
// arguments (tensor pointers, dtype codes, smooth flags, enum codes) could not be exercised.
#pragma once

#include "kernels/kernel_spec.hpp"
#include "sage2/sage2.h"

// What sage2_attention() does with its arguments once it has a context on a device of `arch`,
// short of touching the device: converts each C argument (NULL tensor, dtype code, smooth_k /
// smooth_v flags checked here) then runs the attention argument validation. Returns its status
// (SAGE2_OK when the call would be accepted) and sets sage2_last_error() like any C entry point.
// Arguments are converted in order q, k, v, out, params, so with several bad ones the first is named.
sage2_status sage2_validate_attention_args(const sage2_tensor* q, const sage2_tensor* k, const sage2_tensor* v,
                                           const sage2_tensor* out, const sage2_attention_params* params,
                                           sage2::kernels::Arch arch);
