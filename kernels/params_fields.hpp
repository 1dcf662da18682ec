// Fields that several device parameter structs (templates/*_params.cuh, compiled by NVRTC, so
// plain fields and no host types) name alike, filled from the host's descriptions in one place:
// the output tensor and the tensor mask (the sizes: ProblemShape::copy_sizes_to).
#pragma once

#include "sage2/sage2.hpp"

namespace sage2::kernels {

// The output tensor's address and element strides (the dim stride is 1, checked by the caller).
template <class Params>
void set_output(const TensorRef& out, Params& p) {
  p.out = const_cast<void*>(out.data);
  p.o_stride_batch = out.stride_batch;
  p.o_stride_head = out.stride_head;
  p.o_stride_seq = out.stride_seq;
}

// The tensor mask's address and element strides (0: broadcast).
template <class Params>
void set_mask(const MaskRef& mask, Params& p) {
  p.mask = mask.data;
  p.mask_stride_batch = mask.stride_batch;
  p.mask_stride_head = mask.stride_head;
  p.mask_stride_q = mask.stride_q;
  p.mask_stride_k = mask.stride_k;
}

}  // namespace sage2::kernels
