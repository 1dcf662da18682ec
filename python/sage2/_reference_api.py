"""The reference package's entry points under their own names, for the paths sage2 has: code that
calls ``sageattention.sageattn_qk_int8_pv_fp8_cuda(...)`` works with ``sage2.`` in front. Each has
the reference's signature (parameter names, order and defaults), fixes the P~V precision its name
says and passes everything else to sage2.sageattn, which maps or refuses the reference's keywords
(_compat.py; docs/integrations.md's table "The reference's call form" lists every value).

    name                                  sage2 path
    sageattn_qk_int8_pv_fp16_cuda         INT8 QK, FP16 P~V (pv_precision='fp16'), accumulation per pv_accum_dtype
    sageattn_qk_int8_pv_fp16_triton       FP16 P~V, the arch's default accumulation (fp32 on Ampere)
    sageattn_qk_int8_pv_fp8_cuda          INT8 QK, FP8 P~V (pv_precision='fp8'), accumulation per pv_accum_dtype
    sageattn_qk_int8_pv_fp8_cuda_sm90     the same (on sm_90a sage2's wgmma family, fp32 accumulation)
    sageattn, sageattn_varlen             sage2's own (same call form)

A ``pv_accum_dtype`` naming an fp16 accumulator ("fp32+fp16", "fp16+fp32", "fp16") runs fp16
accumulation inside a KV tile, flushed into fp32 between tiles (pv_accum='prefer_fp16') where the
arch offers it (every mma.sync arch but sm_90a), and fp32 accumulation elsewhere, which is at
least as accurate; "fp32" / "fp32+fp32" run fp32 accumulation (logged at debug level).
"""
from ._attention import sageattn
from ._compat import reference_pv_options

__all__ = ["sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp8_cuda",
           "sageattn_qk_int8_pv_fp8_cuda_sm90"]


def sageattn_qk_int8_pv_fp16_cuda(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                  sm_scale=None, pv_accum_dtype="fp32", smooth_k=True, smooth_v=False,
                                  return_lse=False, **kwargs):
    """The reference's INT8-QK / FP16-PV entry point: sage2.sageattn with pv_precision='fp16'.
    pv_accum_dtype 'fp32' (fp32 accumulation), 'fp16' or 'fp16+fp32' (fp16 inside a KV tile, flushed
    into fp32, where offered); the FP8 values raise ValueError, as in the reference."""
    pv = reference_pv_options(pv_accum_dtype, "sage2.sageattn_qk_int8_pv_fp16_cuda", "fp16_cuda")
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, qk_quant_gran=qk_quant_gran,
                    **pv, smooth_k=smooth_k, smooth_v=smooth_v, **kwargs)


def sageattn_qk_int8_pv_fp16_triton(q, k, v, tensor_layout="HND", quantization_backend="triton", is_causal=False,
                                    attn_mask=None, sm_scale=None, smooth_k=True, return_lse=False, **kwargs):
    """The reference's Triton path: sage2.sageattn with pv_precision='fp16' (the arch's default
    accumulation: fp32 on Ampere).
    attn_mask as sage2.sageattn's (bool or additive, broadcastable to [B, Hq, Nq, Nk]); a
    pv_accum_dtype keyword (which the reference ignores here) must be one of the reference's values."""
    pv_accum_dtype = kwargs.pop("pv_accum_dtype", "fp32")
    pv = reference_pv_options(pv_accum_dtype, "sage2.sageattn_qk_int8_pv_fp16_triton", "fp16_triton")
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, attn_mask=attn_mask,
                    quantization_backend=quantization_backend, **pv, smooth_k=smooth_k, **kwargs)


def sageattn_qk_int8_pv_fp8_cuda(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                 sm_scale=None, pv_accum_dtype="fp32+fp16", smooth_k=True, smooth_v=False,
                                 return_lse=False, **kwargs):
    """The reference's INT8-QK / FP8-PV entry point: sage2.sageattn with pv_precision='fp8': FP8 P~V
    with fp16 accumulation inside a tile flushed into fp32 for 'fp32+fp16' (the default; fp32 on
    sm_90a), two-level fp32 accumulation for 'fp32+fp32' and 'fp32'. Not on Ampere (no FP8 there:
    sage2.UnsupportedError; sageattn_qk_int8_pv_fp16_cuda is the Ampere path)."""
    pv = reference_pv_options(pv_accum_dtype, "sage2.sageattn_qk_int8_pv_fp8_cuda", "fp8")
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, qk_quant_gran=qk_quant_gran,
                    **pv, smooth_k=smooth_k, smooth_v=smooth_v, **kwargs)


def sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                      sm_scale=None, pv_accum_dtype="fp32+fp32", smooth_k=True, return_lse=False,
                                      **kwargs):
    """The reference's Hopper entry point: as sageattn_qk_int8_pv_fp8_cuda (sage2 picks its wgmma
    family on sm_90a by itself; 'fp32', which the reference refuses here, runs the same path)."""
    pv = reference_pv_options(pv_accum_dtype, "sage2.sageattn_qk_int8_pv_fp8_cuda_sm90", "fp8")
    return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, qk_quant_gran=qk_quant_gran,
                    **pv, smooth_k=smooth_k, **kwargs)
