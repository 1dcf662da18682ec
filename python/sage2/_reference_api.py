"""The reference package's entry points under their own names, for the paths sage2 has: code that
calls ``sageattention.sageattn_qk_int8_pv_fp8_cuda(...)`` works with ``sage2.`` in front. Each
fixes the P~V precision its name says and passes everything else to sage2.sageattn, which maps or
refuses the reference's keywords (_compat.py); the reference's defaults are kept.

    name                                  sage2 path
    sageattn_qk_int8_pv_fp16_cuda         INT8 QK, FP16 P~V, fp32 accumulation (pv_precision='fp16')
    sageattn_qk_int8_pv_fp16_triton       the same (the reference's Triton kernel accumulates in fp16 first)
    sageattn_qk_int8_pv_fp8_cuda          INT8 QK, FP8 P~V, two-level fp32 accumulation (pv_precision='fp8')
    sageattn_qk_int8_pv_fp8_cuda_sm90     the same (on sm_90a sage2's wgmma family)
    sageattn, sageattn_varlen             sage2's own (same call form)
"""
from ._attention import sageattn
from ._compat import reference_pv_precision

__all__ = ["sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp8_cuda",
           "sageattn_qk_int8_pv_fp8_cuda_sm90"]


def sageattn_qk_int8_pv_fp16_cuda(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                  sm_scale=None, pv_accum_dtype="fp32", smooth_k=True, smooth_v=False,
                                  return_lse=False, **kwargs):
    """The reference's INT8-QK / FP16-PV entry point: sage2.sageattn with pv_precision='fp16'.
    pv_accum_dtype must be 'fp32' (sage2 has no fp16 accumulation: 'fp16' / 'fp16+fp32' raise)."""
    where = "sage2.sageattn_qk_int8_pv_fp16_cuda"
    if pv_accum_dtype != "fp32":
        reference_pv_precision(pv_accum_dtype, where)  # raises for the fp16 accumulators, naming the value
        raise ValueError("%s: pv_accum_dtype=%r; this path takes 'fp32' (FP16 P~V with fp32 accumulation)"
                         % (where, pv_accum_dtype))
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, qk_quant_gran=qk_quant_gran,
                    pv_precision="fp16", smooth_k=smooth_k, smooth_v=smooth_v, **kwargs)


def sageattn_qk_int8_pv_fp16_triton(q, k, v, tensor_layout="HND", quantization_backend="triton", is_causal=False,
                                    sm_scale=None, smooth_k=True, return_lse=False, **kwargs):
    """The reference's Triton path: sage2.sageattn with pv_precision='fp16' (fp32 accumulation)."""
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse,
                    quantization_backend=quantization_backend, pv_precision="fp16", smooth_k=smooth_k, **kwargs)


def _fp8(where, q, k, v, tensor_layout, is_causal, qk_quant_gran, sm_scale, pv_accum_dtype, smooth_k, smooth_v,
         return_lse, kwargs):
    reference_pv_precision(pv_accum_dtype, where, fp8_function=True)  # 'fp32' / 'fp32+fp32'; others raise
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, qk_quant_gran=qk_quant_gran,
                    pv_precision="fp8", smooth_k=smooth_k, smooth_v=smooth_v, **kwargs)


def sageattn_qk_int8_pv_fp8_cuda(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                 sm_scale=None, pv_accum_dtype="fp32+fp32", smooth_k=True, smooth_v=False,
                                 return_lse=False, **kwargs):
    """The reference's INT8-QK / FP8-PV entry point: sage2.sageattn with pv_precision='fp8'
    (two-level fp32 accumulation for 'fp32' and 'fp32+fp32'; 'fp32+fp16' raises). Not on Ampere
    (no FP8 there: sage2.UnsupportedError)."""
    return _fp8("sage2.sageattn_qk_int8_pv_fp8_cuda", q, k, v, tensor_layout, is_causal, qk_quant_gran, sm_scale,
                pv_accum_dtype, smooth_k, smooth_v, return_lse, kwargs)


def sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                      sm_scale=None, pv_accum_dtype="fp32+fp32", smooth_k=True, return_lse=False,
                                      **kwargs):
    """The reference's Hopper entry point: as sageattn_qk_int8_pv_fp8_cuda (sage2 picks its wgmma
    family on sm_90a by itself)."""
    smooth_v = kwargs.pop("smooth_v", False)
    return _fp8("sage2.sageattn_qk_int8_pv_fp8_cuda_sm90", q, k, v, tensor_layout, is_causal, qk_quant_gran,
                sm_scale, pv_accum_dtype, smooth_k, smooth_v, return_lse, kwargs)
