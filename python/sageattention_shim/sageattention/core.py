"""The reference's public functions with the reference's signatures (names, order, defaults),
each handing its arguments by keyword to the sage2 function of the same name. sage2 maps the
reference's keywords onto its own paths or refuses them naming the value (docs/integrations.md's table "The
reference's call form" lists every value); sage2 is looked up at each call, so whatever sage2 is
imported serves it.

Differences from the reference, all in the direction of doing what the caller asked:
- keywords the reference's ``**kwargs`` would swallow unread and sage2 does not know are dropped
  with one warning per function and keyword (the reference ignores them silently);
- ``attn_mask`` given to ``sageattn`` is applied (the reference's ``sageattn`` ignores it);
- a ``pv_accum_dtype`` naming an fp16 accumulator runs sage2's fp16 accumulation inside a KV tile
  (flushed into fp32) where the arch offers it and fp32 accumulation elsewhere (sm_90a), and Q/K
  are quantized per thread: at least as accurate as the kernel the value names (logged at debug
  level on the "sage2" logger);
- FP8 entry points need an FP8 GPU (not Ampere), as the reference's FP8 kernels do.
"""
import warnings

from . import __version__

try:
    import sage2
    from sage2._compat import REFERENCE_KEYWORDS as _REFERENCE_KEYWORDS
    from sage2._options import OPTIONS as _SAGE2_OPTIONS
except ImportError as e:  # pragma: no cover - exercised only without the sage2 wheel
    raise ImportError("sageattention %s (sage2's drop-in) needs the sage2 package of version %s; install the "
                      "sage2 wheel beside it (%s)" % (__version__, __version__.partition("+sage2.")[2], e)) from e

SAGE2_VERSION = __version__.partition("+sage2.")[2]  # the sage2 this drop-in was made with
if sage2.__version__ not in (SAGE2_VERSION, "unknown"):
    warnings.warn("sageattention %s was made with sage2 %s but sage2 %s is installed; install the two wheels of one "
                  "build" % (__version__, SAGE2_VERSION, sage2.__version__), RuntimeWarning, stacklevel=2)

__all__ = ["sageattn", "sageattn_varlen", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp16_cuda",
           "sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90"]

# What sage2's functions take through **kwargs: their options, the keyword-only arguments of
# sage2.sageattn, return_lse of sage2.sageattn_varlen, and the reference / FlashAttention keywords
# sage2 maps or refuses.
_PASSED = frozenset(_SAGE2_OPTIONS) | frozenset(_REFERENCE_KEYWORDS) | {"attn_mask", "kv_lens", "return_lse"}
_warned = set()


def _kwargs(function, kwargs):
    """kwargs without the keywords sage2 does not know (one warning per function and keyword)."""
    unknown = [k for k in kwargs if k not in _PASSED]
    if not unknown:
        return kwargs
    for key in unknown:
        if (function, key) not in _warned:
            _warned.add((function, key))
            warnings.warn("sageattention.%s: keyword %r is not one sage2 knows; ignored, as the reference's "
                          "**kwargs ignores it" % (function, key), UserWarning, stacklevel=3)
    return {k: v for k, v in kwargs.items() if k not in unknown}


def sageattn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, **kwargs):
    """sage2.sageattn: the P~V precision the GPU's default path uses (FP16 on Ampere, FP8 elsewhere),
    as the reference picks its kernel by arch."""
    return sage2.sageattn(q, k, v, tensor_layout=tensor_layout, is_causal=is_causal, sm_scale=sm_scale,
                          return_lse=return_lse, **_kwargs("sageattn", kwargs))


def sageattn_qk_int8_pv_fp16_triton(q, k, v, tensor_layout="HND", quantization_backend="triton", is_causal=False,
                                    attn_mask=None, sm_scale=None, smooth_k=True, return_lse=False, **kwargs):
    """sage2.sageattn_qk_int8_pv_fp16_triton: FP16 P~V with fp32 accumulation."""
    return sage2.sageattn_qk_int8_pv_fp16_triton(q, k, v, tensor_layout=tensor_layout,
                                                 quantization_backend=quantization_backend, is_causal=is_causal,
                                                 attn_mask=attn_mask, sm_scale=sm_scale, smooth_k=smooth_k,
                                                 return_lse=return_lse,
                                                 **_kwargs("sageattn_qk_int8_pv_fp16_triton", kwargs))


def sageattn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False, sm_scale=None,
                    smooth_k=True, **kwargs):
    """sage2.sageattn_varlen (int32 or int64 cu_seqlens; return_lse=True also gives the LSE)."""
    return sage2.sageattn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                                 max_seqlen_k=max_seqlen_k, is_causal=is_causal, sm_scale=sm_scale, smooth_k=smooth_k,
                                 **_kwargs("sageattn_varlen", kwargs))


def sageattn_qk_int8_pv_fp16_cuda(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                  sm_scale=None, pv_accum_dtype="fp32", smooth_k=True, smooth_v=False,
                                  return_lse=False, **kwargs):
    """sage2.sageattn_qk_int8_pv_fp16_cuda: FP16 P~V with fp32 accumulation."""
    return sage2.sageattn_qk_int8_pv_fp16_cuda(q, k, v, tensor_layout=tensor_layout, is_causal=is_causal,
                                               qk_quant_gran=qk_quant_gran, sm_scale=sm_scale,
                                               pv_accum_dtype=pv_accum_dtype, smooth_k=smooth_k, smooth_v=smooth_v,
                                               return_lse=return_lse,
                                               **_kwargs("sageattn_qk_int8_pv_fp16_cuda", kwargs))


def sageattn_qk_int8_pv_fp8_cuda(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                 sm_scale=None, pv_accum_dtype="fp32+fp16", smooth_k=True, smooth_v=False,
                                 return_lse=False, **kwargs):
    """sage2.sageattn_qk_int8_pv_fp8_cuda: FP8 P~V with two-level fp32 accumulation."""
    return sage2.sageattn_qk_int8_pv_fp8_cuda(q, k, v, tensor_layout=tensor_layout, is_causal=is_causal,
                                              qk_quant_gran=qk_quant_gran, sm_scale=sm_scale,
                                              pv_accum_dtype=pv_accum_dtype, smooth_k=smooth_k, smooth_v=smooth_v,
                                              return_lse=return_lse,
                                              **_kwargs("sageattn_qk_int8_pv_fp8_cuda", kwargs))


def sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                      sm_scale=None, pv_accum_dtype="fp32+fp32", smooth_k=True, return_lse=False,
                                      **kwargs):
    """sage2.sageattn_qk_int8_pv_fp8_cuda_sm90: FP8 P~V with two-level fp32 accumulation."""
    return sage2.sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout=tensor_layout, is_causal=is_causal,
                                                   qk_quant_gran=qk_quant_gran, sm_scale=sm_scale,
                                                   pv_accum_dtype=pv_accum_dtype, smooth_k=smooth_k,
                                                   return_lse=return_lse,
                                                   **_kwargs("sageattn_qk_int8_pv_fp8_cuda_sm90", kwargs))
