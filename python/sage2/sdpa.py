"""A torch.nn.functional.scaled_dot_product_attention replacement that sends what sage2 can do to
sage2 (attention masks included) and everything else (dropout, fp32, CPU, autograd, other ranks,
a mask together with is_causal, which torch documents as an error, a GPU sage2 cannot run — older
than Ampere — or an option that GPU lacks) to torch unchanged, counting each fallback's reason.

    with sage2.patch_sdpa() as p:       # models calling F.scaled_dot_product_attention use sage2
        y = model(x)
    print(p.stats)                       # {'sage2': 24, 'fallback': {}}
"""
import collections
import threading

import torch
import torch.nn.functional as F

from . import _lib
from ._attention import sageattn

__all__ = ["scaled_dot_product_attention", "patch_sdpa", "SdpaPatch"]

_TORCH_SDPA = F.scaled_dot_product_attention  # the original, captured at import


_MASK_DTYPES = tuple(getattr(torch, n) for n in ("bool", "float16", "bfloat16", "float32") if hasattr(torch, n))

_device_lock = threading.Lock()
_device_reasons = {}  # device ordinal -> None (sage2 runs it) or why not


def _device_unsupported(device):
    """Why sage2 cannot run on this CUDA device (None when it can), decided once per device: a GPU
    older than the arch table (sage2_context_create answers SAGE2_ERROR_UNSUPPORTED). A missing
    library or driver still raises (a broken install is no reason to fall back silently)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index in _device_reasons:
        return _device_reasons[index]
    with _device_lock:
        if index not in _device_reasons:
            try:
                _lib.context(index)
                _device_reasons[index] = None
            except _lib.UnsupportedError:
                _device_reasons[index] = "unsupported GPU"
        return _device_reasons[index]


def _unsupported(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal=False):
    """Why sage2 cannot take this call (None when it can)."""
    if attn_mask is not None:
        if is_causal:
            return "attn_mask with is_causal"  # torch's rules for the pair apply
        if not isinstance(attn_mask, torch.Tensor) or attn_mask.dtype not in _MASK_DTYPES:
            return "attn_mask dtype"
        if not 2 <= attn_mask.dim() <= 4 or (isinstance(query, torch.Tensor) and attn_mask.device != query.device):
            return "attn_mask shape or device"
    if dropout_p and dropout_p > 0.0:
        return "dropout"
    if not all(isinstance(t, torch.Tensor) for t in (query, key, value)):
        return "not tensors"
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return "rank != 4"
    if query.dtype not in (torch.float16, torch.bfloat16) or key.dtype != query.dtype or value.dtype != query.dtype:
        return "dtype"
    if query.device.type != "cuda" or key.device != query.device or value.device != query.device:
        return "device"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return "autograd"
    d = query.shape[-1]
    if key.shape[-1] != d or value.shape[-1] != d or d > 512:
        return "head dim"
    if key.shape[1] != query.shape[1] and not enable_gqa:
        return "heads differ without enable_gqa"  # torch raises its own error for this
    if query.shape[1] % key.shape[1] != 0 or key.shape[:3] != value.shape[:3] or key.shape[0] != query.shape[0]:
        return "shapes"
    if query.stride(-1) != 1 or key.stride(-1) != 1 or value.stride(-1) != 1:
        return "strides"
    for t in (query, key, value):
        if any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape)):
            return "strides"
    if not torch.compiler.is_compiling():  # (traced calls: decided by the eager calls before them)
        why = _device_unsupported(query.device)
        if why is not None:
            return why
    return None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, _stats=None, **options):
    """Same signature and semantics as torch's ([B, H, N, D] inputs, top-left causal mask); calls
    sage2.sageattn when it can, torch's own SDPA otherwise. ``options`` go to sageattn."""
    why = _unsupported(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal)
    if why is None:
        try:
            out = sageattn(query, key, value, tensor_layout="HND", is_causal=bool(is_causal), sm_scale=scale,
                           attn_mask=attn_mask, **options)
        except _lib.UnsupportedError:
            # a valid request this GPU cannot serve (e.g. qk_bits=4 on Blackwell, pv_precision='fp8'
            # on Ampere): torch computes it instead
            why = "unsupported on this GPU"
        else:
            if _stats is not None and not torch.compiler.is_compiling():
                _stats.count_sage2()
            return out
    if _stats is not None and not torch.compiler.is_compiling():
        _stats.count_fallback(why)
    kw = {"attn_mask": attn_mask, "dropout_p": dropout_p, "is_causal": is_causal, "scale": scale}
    if enable_gqa:
        kw["enable_gqa"] = enable_gqa
    return _TORCH_SDPA(query, key, value, **kw)


class _Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self.sage2 = 0
        self.fallback = collections.Counter()

    def count_sage2(self):
        with self._lock:
            self.sage2 += 1

    def count_fallback(self, why):
        with self._lock:
            self.fallback[why] += 1

    def as_dict(self):
        return {"sage2": self.sage2, "fallback": dict(self.fallback)}

    def __repr__(self):
        return repr(self.as_dict())


class SdpaPatch:
    """Replaces torch.nn.functional.scaled_dot_product_attention while active (context manager,
    or call .restore()). ``stats`` counts calls served by sage2 and fallbacks by reason."""

    def __init__(self, **options):
        self.options = options
        self.stats = _Stats()
        self._saved = None

        def patched(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                    enable_gqa=False):
            return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                enable_gqa, _stats=self.stats, **self.options)

        self._patched = patched

    def apply(self):
        if self._saved is None:
            self._saved = F.scaled_dot_product_attention
            F.scaled_dot_product_attention = self._patched
        return self

    def restore(self):
        if self._saved is not None:
            F.scaled_dot_product_attention = self._saved
            self._saved = None

    def __enter__(self):
        return self.apply()

    def __exit__(self, *exc):
        self.restore()
        return False


def patch_sdpa(**options):
    """An active SdpaPatch (use as a context manager, or call .restore() later)."""
    return SdpaPatch(**options).apply()
