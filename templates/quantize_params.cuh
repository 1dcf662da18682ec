// Kernel parameters of the quantize family (templates/quantize.cuh). Plain C++: included by
// NVRTC-compiled device code AND by host code (jit/launch_shape.hpp), so both sides share this
// one definition. Every entry of the family (sage2_channel_stats, sage2_quantize_q,
// sage2_quantize_k, sage2_quantize_v) takes one QuantizeParams by value.
//
// Shapes and buffer layouts are those of jit::QuantBuffers (jit/quant_buffers.hpp); the padded
// sizes (d_qk, row_bytes, d_v, bq, bk, the group tables) are compile-time constants of the
// kernel, the runtime sizes below are the only dynamic ones. The block counts and padded lengths
// are derived inside the kernels (ceil(len / tile)) — they are not passed.
//
// Requirements on the pointers (the runtime's workspace satisfies them: 256-byte aligned):
//  - every output pointer is 16-byte aligned;
//  - inputs may have any alignment and any strides (16-byte vector loads are used when the base
//    pointer and all three strides allow it, scalar loads otherwise); the dim stride is 1.
//  - a buffer a variant does not write may be null (q_mean without smooth_q, q_kbias without
//    smooth_k); the inputs a launch does not read may be null too.
#pragma once

#include "types.cuh"

namespace sage2 {
namespace dev {

struct QuantizeParams {
  // ---- inputs: fp16 or bf16 (spec.in_dtype), [batch, heads, seq, dim] with element strides
  const void* q;
  const void* k;
  const void* v;
  i64 q_stride_batch, q_stride_head, q_stride_seq;
  i64 k_stride_batch, k_stride_head, k_stride_seq;
  i64 v_stride_batch, v_stride_head, v_stride_seq;

  // ---- problem sizes (q_heads must be a multiple of kv_heads: GQA group = q_heads / kv_heads)
  i64 batch;
  i64 q_heads;
  i64 kv_heads;
  i64 q_len;   // >= 1
  i64 kv_len;  // >= 1

  // ---- outputs (jit::QuantBuffers; element types as listed there)
  i8* q_codes;     // [B][Hq][q_len_pad][row_bytes]      int8, or int4 packed two per byte
  float* q_scale;  // [B][Hq][q_blocks][q_groups]
  float* q_mean;   // [B][Hq][q_blocks][d_qk]            smooth_q only
  float* q_kbias;  // [B][Hq][q_len_pad]                 smooth_k only
  i8* k_codes;     // [B][Hkv][kv_len_pad][row_bytes]
  float* k_scale;  // [B][Hkv][k_blocks][4]
  float* k_mean;   // [B][Hkv][d_qk]                     zeros when !smooth_k
  float* k_stats;  // [B][Hkv][3][d_qk]                  sum, min, max
  u8* v_codes;     // [B][Hkv][d_v][kv_len_pad]          FP8 E4M3, transposed
  float* v_scale;  // [B][Hkv][d_v]
  float* v_mean;   // [B][Hkv][d_v]                      zeros when !smooth_v
  float* v_stats;  // [B][Hkv][3][d_v]                   sum, min, max

  // ---- non-finite input flags (appended; see jit/quant_buffers.hpp)
  u8* q_bad;         // [B][Hq][q_len_pad]   1: Q row has a NaN/Inf (quantize_q; padded rows 0)
  i32* k_first_bad;  // [B][Hkv]             first key with a NaN/Inf, INT32_MAX if none (stats)
  i32* v_first_bad;  // [B][Hkv][d_v]        per channel: first key with a NaN/Inf (stats)
};

}  // namespace dev
}  // namespace sage2
