"""sage2 as an attention backend of diffusers' attention dispatcher:

    import sage2.integrations.diffusers                    # registers the backend "sage2"
    pipe.transformer.set_attention_backend("sage2")        # or: with attention_backend("sage2"): ...
    print(sage2.integrations.diffusers.stats())            # calls served by sage2 / sent to "native"

diffusers names its backends in an Enum (``AttentionBackendName``) that has no registration call,
so importing this module adds the member ``SAGE2 = "sage2"`` to it (the same member object for
every lookup: ``AttentionBackendName("sage2")``, ``set_attention_backend("sage2")``, the
``attention_backend`` context manager) and registers the backend function with
``_AttentionBackendRegistry`` — diffusers' own registry, the one its built-in backends use.

The backend takes diffusers' [B, N, H, D] tensors as they are (sage2's "NHD" layout, no copies),
masks as diffusers' "native" backend does (a [B, Nk] key mask becomes [B, 1, 1, Nk]; bool or
additive, broadcast like torch SDPA), GQA/MQA, ``scale``, ``is_causal`` and ``return_lse`` (LSE
[B, H, N], as the "sage" backend returns it). What sage2 cannot take (fp32, CPU, dropout,
autograd, a mask together with is_causal, a GPU older than Ampere) goes to the "native" backend
unchanged, counted by reason; diffusers' context parallelism (``_parallel_config``) is refused
with a ValueError (use sage2.integrations.yunchang for sequence parallelism).
"""
import inspect

import torch

import diffusers
from diffusers.models import attention_dispatch as _dispatch
from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

from .. import _lib
from .._attention import sageattn
from ..sdpa import _unsupported
from ._counts import CallCounts

__all__ = ["BACKEND", "stats", "reset_stats", "sage2_attention"]

_counts = CallCounts()


def _count(why=None):
    _counts.count(why)


def stats():
    """{"sage2": calls served by sage2, "fallback": {reason: calls sent to the native backend}}."""
    return _counts.snapshot()


def reset_stats():
    _counts.reset()


def _enum_member(cls, name, value):
    """The member `value` of the str Enum `cls`, added when missing (Enum has no public way to
    extend a class; these are the attributes Enum's own lookups read, on Python 3.9 .. 3.13)."""
    found = cls._value2member_map_.get(value)
    if found is not None:
        return found
    member = str.__new__(cls, value)
    member._name_ = name
    member._value_ = value
    try:
        member.__objclass__ = cls
    except AttributeError:
        pass
    member.__init__(value)
    cls._member_map_[name] = member
    cls._value2member_map_[value] = member
    cls._member_names_.append(name)
    type.__setattr__(cls, name, member)
    return member


BACKEND = _enum_member(AttentionBackendName, "SAGE2", "sage2")
_native = _AttentionBackendRegistry._backends[AttentionBackendName.NATIVE]
_NATIVE_HAS_GQA = "enable_gqa" in inspect.signature(_native).parameters


def sage2_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
                    return_lse=False, _parallel_config=None):
    """diffusers' backend signature: query [B, Nq, Hq, D], key/value [B, Nk, Hkv, D]; returns the
    output [B, Nq, Hq, D] (and the LSE [B, Hq, Nq] with return_lse)."""
    if _parallel_config is not None:
        raise ValueError("the 'sage2' attention backend does not take diffusers' context parallelism "
                         "(_parallel_config); use sage2.integrations.yunchang for sequence parallelism")
    if (attn_mask is not None and attn_mask.ndim == 2 and attn_mask.shape[0] == query.shape[0]
            and attn_mask.shape[1] == key.shape[1]):
        attn_mask = attn_mask[:, None, None, :]  # [B, Nk] key mask, as the native backend reads it
    hnd = [t.permute(0, 2, 1, 3) if isinstance(t, torch.Tensor) and t.dim() == 4 else t for t in (query, key, value)]
    why = _unsupported(hnd[0], hnd[1], hnd[2], attn_mask, dropout_p, enable_gqa, is_causal)
    if why is None:
        try:
            res = sageattn(query, key, value, tensor_layout="NHD", is_causal=bool(is_causal), sm_scale=scale,
                           return_lse=bool(return_lse), attn_mask=attn_mask)
        except _lib.UnsupportedError:
            why = "unsupported on this GPU"
        else:
            _count()
            return res
    _count(why)
    if return_lse:
        raise ValueError("the 'sage2' backend sent this call to torch (%s), and diffusers' native backend has no "
                         "return_lse" % why)
    kw = {"enable_gqa": enable_gqa} if _NATIVE_HAS_GQA else {}
    return _native(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                   **kw)


_AttentionBackendRegistry.register(BACKEND, constraints=[_dispatch._check_device, _dispatch._check_shape])(
    sage2_attention)

DIFFUSERS_VERSION = diffusers.__version__
