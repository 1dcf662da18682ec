"""sage2 as a named attention implementation of Hugging Face transformers:

    import sage2.integrations.transformers                       # registers "sage2"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sage2")
    print(sage2.integrations.transformers.stats())               # calls served by sage2 / sent to torch

Importing this module registers "sage2" with transformers' ``AttentionInterface`` (the attention
function) and ``AttentionMaskInterface`` (the mask builder: transformers' own "sdpa" one, so sage2
gets the same boolean masks SDPA would — padding, causal, sliding windows — or None when the call
is plainly causal). ``register(name, **options)`` registers more names with sageattn options
(e.g. ``register("sage2_fp16", pv_precision="fp16")``).

What each call does (the rules of transformers' "sdpa" function, so outputs match it):
  * causal only when there is no mask and more than one query row (transformers' rule); GQA/MQA
    straight to sage2 (no repeat_kv); ``scaling`` is sm_scale; masks go to sage2 as given;
  * decode steps: without a mask, sage2's direct small-Nq path (no quantization); with a mask
    (a padded batch) and at most MASKED_DECODE_ROWS query rows, torch's SDPA — re-quantizing the
    whole KV cache for one row costs more than it saves; counted as "masked decode";
  * anything sage2 cannot take (dropout in training, fp32, CPU, autograd, a GPU older than Ampere,
    position_bias, ...) goes to transformers' own "sdpa" function unchanged, counted by reason;
  * ``softcap`` raises ValueError, as transformers' "sdpa" does.
Counters: ``stats(name)`` -> {"sage2": n, "fallback": {reason: n}}; ``reset_stats(name)``.
Works with transformers 4.5x (masking_utils) and 5.x.
"""
import threading

import torch

import transformers
from transformers import AttentionInterface

try:
    from transformers import AttentionMaskInterface
except ImportError:  # some 4.x releases export it from masking_utils only
    from transformers.masking_utils import AttentionMaskInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.integrations.sdpa_attention import sdpa_attention_forward as _hf_sdpa

from .. import _lib
from .._attention import sageattn
from ._counts import CallCounts
from ..sdpa import _unsupported

__all__ = ["register", "stats", "reset_stats", "attention_forward", "MASKED_DECODE_ROWS", "NAME"]

NAME = "sage2"
MASKED_DECODE_ROWS = 16

_lock = threading.Lock()
_stats = {}  # name -> CallCounts


def _counter(name):
    with _lock:
        return _stats.setdefault(name, CallCounts())


def _count(name, why=None):
    _counter(name).count(why)


def stats(name=NAME):
    """{"sage2": calls served by sage2, "fallback": {reason: calls sent to torch}} of a registered name."""
    return _counter(name).snapshot()


def reset_stats(name=NAME):
    with _lock:
        _stats.pop(name, None)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                      *, _sage2_name=NAME, _sage2_options=None, **kwargs):
    """transformers' attention-function signature: query [B, Hq, Nq, D], key/value [B, Hkv, Nk, D],
    attention_mask None / bool / additive [B, 1|Hq, Nq, Nk]; returns (out [B, Nq, Hq, D], None)."""
    if kwargs.get("softcap") is not None:
        raise ValueError("attn_implementation='%s' does not support `softcap` (neither does 'sdpa'); use 'eager' or "
                         "a FlashAttention implementation that has it" % _sage2_name)
    why = None
    if kwargs.get("position_bias") is not None:
        why = "position_bias"  # T5-style bias: transformers' sdpa folds it into a float mask
    q_len = query.shape[2]
    wants_causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    causal = bool(q_len > 1 and attention_mask is None and wants_causal)  # transformers' sdpa rule
    if why is None:
        why = _unsupported(query, key, value, attention_mask, dropout, True, causal)
    if why is None and attention_mask is not None and q_len <= MASKED_DECODE_ROWS:
        why = "masked decode"
    if why is None:
        k, v = key, value
        if causal and key.shape[2] > q_len:
            # prefill into an empty static cache: top-left causal sees only the first q_len keys
            k, v = key[:, :, :q_len], value[:, :, :q_len]
        try:
            out = sageattn(query, k, v, tensor_layout="HND", is_causal=causal, sm_scale=scaling,
                           attn_mask=attention_mask, **(_sage2_options or {}))
        except _lib.UnsupportedError:
            why = "unsupported on this GPU"  # e.g. an option this arch lacks: torch computes it
        else:
            _count(_sage2_name)
            return out.transpose(1, 2).contiguous(), None
    _count(_sage2_name, why)
    # is_causal as the model gave it (None included): transformers 4.x's sdpa treats an explicit
    # True with a mask differently from None
    return _hf_sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal,
                    **kwargs)


def register(name=NAME, **options):
    """Registers ``name`` (default "sage2") as an attention implementation of transformers, whose
    calls run sage2.sageattn with ``options`` (sageattn's: pv_precision, qk_bits, smooth_v ...).
    Returns the attention function."""
    if not isinstance(name, str) or not name or "sdpa" in name or "flash" in name or "/" in name:
        raise ValueError("sage2.integrations.transformers.register: name=%r; a plain name without 'sdpa', 'flash' "
                         "or '/' (transformers gives those their own meaning)" % (name,))
    opts = dict(options)
    if opts:  # checked now, not at the first model call
        from .. import _compat, _core

        if not _core._OPTION_KEYS.issuperset(opts):
            _, _, opts = _compat.translate(False, None, opts, _core._OPTION_KEYS,
                                           where="sage2.integrations.transformers.register")
        _core._normalize_scalars(False, None, False, opts, "sage2.integrations.transformers.register")

    def sage2_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                        **kwargs):
        return attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                                 _sage2_name=name, _sage2_options=opts, **kwargs)

    sage2_attention.__name__ = "sage2_attention_forward"
    AttentionInterface.register(name, sage2_attention)
    # transformers builds masks per implementation: sage2 takes what SDPA takes
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    _counter(name)
    return sage2_attention


TRANSFORMERS_VERSION = transformers.__version__
register()
