"""Attention masks for torch tensors: sageattn(q, k, v, attn_mask=...) — one
sage2_attention_masked call on torch's current stream with a workspace from torch's caching
allocator, as sageattn does. Under torch.compile (and for fake, functional or subclass tensors, or
when autograd would record the call) the work runs behind the opaque custom op
``torch.ops.sage2.sageattn_masked``, whose fake implementation gives the output shapes.

The mask follows torch SDPA: bool (True: the key takes part) or additive float (added to the scaled
scores; -inf masks out), of any shape broadcastable to [B, Hq, Nq, Nk] (2-D [Nq, Nk], 3-D, 4-D). It
is passed as a broadcast view (stride 0 on broadcast dims): nothing is copied.
"""
import ctypes

import torch

from . import _lib
from . import _op_util

from . import _core as _C  # the helpers sageattn shares (never _attention: it imports this module)

_MASK_TYPE_NAMES = (("bool", 1), ("float16", 2), ("bfloat16", 3), ("float32", 4))  # sage2_mask_type


def _mask_types():
    """torch dtype -> sage2_mask_type (built at first use: the tests' fake torch has few dtypes)."""
    global _MASK_TYPES
    if _MASK_TYPES is None:
        _MASK_TYPES = {getattr(torch, n): c for n, c in _MASK_TYPE_NAMES if hasattr(torch, n)}
    return _MASK_TYPES


_MASK_TYPES = None


def mask_view(attn_mask, q, k, layout, where="sage2.sageattn"):
    """The mask as a 4-D view [B, Hq, Nq, Nk] of its memory (broadcast dims: stride 0); raises
    TypeError/ValueError naming attn_mask."""
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError("%s: attn_mask must be a torch.Tensor or None, got %s" % (where, type(attn_mask).__name__))
    if attn_mask.dtype not in _mask_types():
        raise TypeError("%s: attn_mask has dtype %s; it must be torch.bool (True: the key takes part) or "
                        "float16/bfloat16/float32 (added to the scores)" % (where, attn_mask.dtype))
    if attn_mask.device != q.device:
        raise ValueError("%s: attn_mask is on %s but q is on %s; it must be on q's device"
                         % (where, attn_mask.device, q.device))
    b, hq, nq, _ = _C._dims(q, layout)
    nk = _C._dims(k, layout)[2]
    if not 2 <= attn_mask.dim() <= 4:
        raise ValueError("%s: attn_mask must be 2-D to 4-D, broadcastable to [B, Hq, Nq, Nk] = [%d, %d, %d, %d]; "
                         "got shape %s" % (where, b, hq, nq, nk, tuple(attn_mask.shape)))
    m = attn_mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    want = (b, hq, nq, nk)
    if any(s != w and s != 1 for s, w in zip(m.shape, want)):
        raise ValueError("%s: attn_mask of shape %s is not broadcastable to [B, Hq, Nq, Nk] = %s"
                         % (where, tuple(attn_mask.shape), list(want)))
    return m.expand(*want)


def _run(q, k, v, mask, layout, *scalars):
    """Allocates the outputs and runs sage2_attention_masked; `mask` is mask_view()'s, scalars
    _core._SCALARS (already normalized)."""
    L = _lib.require_masked()  # an older library fails every call alike, empty ones included
    st = mask.stride()
    m = _lib.Mask(mask.data_ptr(), _mask_types()[mask.dtype], st[0], st[1], st[2], st[3])
    key = ("masked", mask.dtype, st) + _C._ws_key(q, k, layout, *scalars, v=v)
    return _C._run_dense(q, k, v, layout, scalars, key, L, "sage2_attention_masked", extra=(ctypes.byref(m),))


_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor mask, str tensor_layout, int causal, float sm_scale, "
           "bool return_lse, int qk_bits, int pv_precision, int pv_accum, int smooth_q, bool smooth_k, "
           "bool smooth_v) -> (Tensor, Tensor)")


@torch.library.custom_op("sage2::sageattn_masked", mutates_args=(), schema=_SCHEMA)
def _masked_op(q, k, v, mask, tensor_layout, causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q,
               smooth_k, smooth_v):
    return _run(q, k, v, mask, tensor_layout, causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q,
                smooth_k, smooth_v)


@_masked_op.register_fake
def _masked_fake(q, k, v, mask, tensor_layout, causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q,
                 smooth_k, smooth_v):
    b, hq, nq, _ = _C._dims(q, tensor_layout)
    return q.new_empty(q.shape), q.new_empty((b, hq, nq) if return_lse else (0,), dtype=torch.float32)


_op_util.inference_only(_masked_op, "sage2.sageattn")


# The eager fast path of masked calls: _core._FastCall with a prebuilt sage2_mask whose data
# pointer is patched per call, keyed by the dense signature plus the mask's metadata (its expanded
# view's strides follow from its shape and strides).
_fast = {}


def _fast_key(q, k, v, attn_mask, tensor_layout, is_causal, sm_scale, return_lse, options):
    return (_C._fast_key(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options), attn_mask.shape,
            attn_mask.stride(), attn_mask.dtype, attn_mask.device)


def masked(q, k, v, attn_mask, tensor_layout, is_causal, sm_scale, return_lse, options):
    """sageattn(q, k, v, ..., attn_mask=attn_mask)."""
    key = None
    T = _C._Tensor
    if (not torch.compiler.is_compiling() and type(q) is T and type(k) is T and type(v) is T and
            type(attn_mask) is T):
        try:
            key = _fast_key(q, k, v, attn_mask, tensor_layout, is_causal, sm_scale, return_lse, options)
            fc = _fast.get(key)
        except TypeError:  # an unhashable argument: the checks below name it
            key = fc = None
        if fc is not None and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                                                v.requires_grad)):
            return fc(q, k, v, mask=attn_mask)
    args = _C._normalize(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options)
    mask = mask_view(attn_mask, q, k, args[0])
    if _C._use_op(q, k, v, attn_mask):
        out, lse = torch.ops.sage2.sageattn_masked(q, k, v, mask, *args)
    else:
        out, lse = _run(q, k, v, mask, *args)
        if key is not None and q.numel() and _C._dims(k, args[0])[2]:
            st = mask.stride()
            ws = _C._ws_cache.get(("masked", mask.dtype, st) + _C._ws_key(q, k, *args, v=v))
            if ws is not None:
                fields = (None, _mask_types()[mask.dtype], st[0], st[1], st[2], st[3])
                _C._fast_store(_fast, key, _C._FastCall(q, k, v, args[0], args[1:], ws, mask=fields))
    return (out, lse) if args[3] else out
