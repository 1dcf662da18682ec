"""sageattn() for torch tensors: argument checks in Python, then one sage2_attention call on
torch's current stream with a workspace owned by torch's caching allocator.

Eager calls go straight to the C library. Under torch.compile (and for any tracing with fake or
functional tensors, or when autograd would record the call) the same work runs behind the opaque
custom op ``torch.ops.sage2.sageattn``, whose fake implementation gives the output shapes.
A call with kv_lens (key padding) goes to _varlen.py (sage2_attention_varlen), which has its own
signature cache for the same fast path (_core._FastCall); attn_mask goes to _mask.py. The pieces
the three share live in _core.py, which imports none of them.
"""

import torch

from . import _lib
from . import _core as _C  # what the three entry modules share: argument checks, workspaces, the fast path
from . import _op_util
from . import _varlen  # sageattn(kv_lens=...) runs there; it registers torch.ops.sage2.sageattn_varlen
from . import _mask  # sageattn(attn_mask=...) runs there; it registers torch.ops.sage2.sageattn_masked
from . import _compat  # the reference's / FlashAttention's keywords (mapped or refused)

__all__ = ["sageattn", "OPTIONS"]

OPTIONS = _C.OPTIONS  # options accepted through **options, with their defaults
_Tensor = torch.Tensor


# ---- the C call ---------------------------------------------------------------------------
def _run(q, k, v, layout, *scalars, small_q=0):
    """Allocates the outputs and runs sage2_attention. scalars: _core._SCALARS, already normalized;
    small_q: the sage2_small_q_path code."""
    key = _C._ws_key(q, k, layout, *scalars, v=v, small_q=small_q)
    return _C._run_dense(q, k, v, layout, scalars, key, _lib.lib(), "sage2_attention", small_q=small_q)


# ---- the eager fast path of dense calls: _core._FastCall in a signature cache --------------------
_fast = {}  # signature -> _core._FastCall (dense calls)


def _fast_insert(key, q, k, v, args, small_q=0):
    """Caches the signature of a call that just succeeded eagerly (not the empty-output and
    no-key cases, which _run handles without the library)."""
    if q.numel() == 0 or _C._dims(k, args[0])[2] == 0:
        return
    ws_bytes = _C._ws_cache.get(_C._ws_key(q, k, *args, v=v, small_q=small_q))
    if ws_bytes is None:
        return
    _C._fast_store(_fast, key, _C._FastCall(q, k, v, args[0], args[1:], ws_bytes, small_q=small_q))


# ---- the custom op (torch.compile, tracing, autograd guard) -------------------------------------
_SCHEMA = ("(Tensor q, Tensor k, Tensor v, str tensor_layout, int causal, float sm_scale, bool return_lse, "
           "int qk_bits, int pv_precision, int pv_accum, int smooth_q, bool smooth_k, bool smooth_v, "
           "int small_q_path=0) -> (Tensor, Tensor)")


@torch.library.custom_op("sage2::sageattn", mutates_args=(), schema=_SCHEMA)
def _sageattn_op(q, k, v, tensor_layout, causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q,
                 smooth_k, smooth_v, small_q_path=0):
    return _run(q, k, v, tensor_layout, causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q,
                smooth_k, smooth_v, small_q=small_q_path)


@_sageattn_op.register_fake
def _sageattn_fake(q, k, v, tensor_layout, causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q,
                   smooth_k, smooth_v, small_q_path=0):
    b, hq, nq, _ = _C._dims(q, tensor_layout)
    out = q.new_empty(q.shape)
    if return_lse:
        lse = q.new_empty((b, hq, nq), dtype=torch.float32)
    else:
        lse = q.new_empty((0,), dtype=torch.float32)
    return out, lse


_op_util.inference_only(_sageattn_op, "sage2.sageattn")


# ---- public entry point -------------------------------------------------------------------
def sageattn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, *, kv_lens=None,
             attn_mask=None, **options):
    """SageAttention2 attention of torch tensors (fp16/bf16, CUDA).

    q: [B, Hq, Nq, D] ("HND") or [B, Nq, Hq, D] ("NHD"); k, v: [B, Hkv, Nk, D] / [B, Nk, Hkv, D] with
    Hq a multiple of Hkv (GQA/MQA). Any strides with a contiguous last dim. Runs on q's device, on
    torch's current stream there. Returns ``out`` (input dtype and layout, contiguous) or
    ``(out, lse)`` when return_lse (lse: fp32 [B, Hq, Nq], natural log, -inf for rows that see no key).

    is_causal uses torch SDPA's top-left alignment when Nq != Nk (query i sees keys j <= i);
    ``causal_alignment="bottom_right"`` gives FlashAttention's (j <= i + Nk - Nq).
    sm_scale: default 1/sqrt(D). Options: qk_bits (None/4/8), smooth_q (None/True/False),
    smooth_k (True), smooth_v (False), causal_alignment, pv_precision (None/"auto", "fp8", "fp16":
    P~V in FP16 is about 2x more accurate than FP8, slower; auto is fp16 on Ampere, fp8 elsewhere),
    pv_accum (None/"auto": fp16 with FP8 P~V on sm_89/120/121 as the reference, fp32 elsewhere;
    "fp32", "fp16": accumulated in fp16 inside a KV tile and flushed into fp32, faster on GeForce
    cards, not on sm_90a; "prefer_fp16": fp16 where offered), small_q_path ("auto"/"quantized"/"direct").

    small_q_path: "auto" (default) computes calls with few query rows per kv head R = Nq·Hq/Hkv
    where that is faster (sm_90: R <= 160, or R <= 256 over Nk >= 2R keys, or B·Hq·Nq·Nk·D <= 2e9 over
    at most 65536 query rows B·Hq·Nq, and R <= 512; elsewhere R <= 64; head dim <= 256; no attn_mask, no kv_lens) WITHOUT quantization:
    split-KV attention straight from the fp16/bf16 inputs (fp16/bf16 P, fp32 accumulation; the
    quantization options do not apply), which is what decode (Nq = 1 over a long KV cache) needs.
    "quantized" always quantizes; "direct" always takes the direct path (head dim <= 512, dense
    calls only: ValueError with attn_mask or kv_lens).

    kv_lens (keyword): an int32 CUDA tensor [B] on q's device; query rows of batch b then see keys
    [0, kv_lens[b]) only (key padding; causal masks use kv_lens[b] as that batch's key length). The
    values are read on the GPU, never on the host: values outside [0, Nk] make every output (and
    LSE) NaN. smooth_q must stay None or False with it (None means off here). Needs a libsage2 with
    sage2_attention_varlen (else UnsupportedError).

    attn_mask (keyword): torch SDPA's mask — bool (True: the key takes part) or float16/bfloat16/
    float32 (added to the scaled scores; -inf masks out), broadcastable to [B, Hq, Nq, Nk], on q's
    device; combined with is_causal when both are given. Masked keys take no part in the softmax; a
    row that sees no key gives 0 (LSE -inf). Not together with kv_lens (key padding is kv_lens).

    The reference package's keywords (qk_quant_gran, pv_accum_dtype, quantization_backend) and
    FlashAttention's (softmax_scale, causal, dropout_p, window_size, softcap, alibi_slopes,
    deterministic, return_attn_probs) are mapped onto these options or refused with a ValueError
    naming the value (sage2._compat.REFERENCE_KEYWORDS; docs/integrations.md, "The reference's call form").

    Bad input raises TypeError/ValueError naming the argument before anything runs on the GPU;
    errors from the library raise sage2.Sage2Error subclasses carrying sage2_last_error()."""
    if options and not _C._OPTION_KEYS.issuperset(options):
        is_causal, sm_scale, options = _compat.translate(is_causal, sm_scale, options, _C._OPTION_KEYS)
    small_q = _C._small_q_code(options) if options else 0
    if small_q == _C._SMALL_Q["direct"] and (attn_mask is not None or kv_lens is not None):
        raise ValueError("sage2.sageattn: small_q_path='direct' takes dense calls only (no attn_mask, no kv_lens)")
    if attn_mask is not None:
        if kv_lens is not None:
            raise ValueError("sage2.sageattn: give attn_mask or kv_lens, not both (kv_lens is key padding)")
        return _mask.masked(q, k, v, attn_mask, tensor_layout, is_causal, sm_scale, return_lse, options)
    if kv_lens is not None:  # key padding: sage2_attention_varlen (its fast path is in _varlen)
        return _varlen.kv_padded(q, k, v, kv_lens, tensor_layout, is_causal, sm_scale, return_lse, options)
    key = None
    if not torch.compiler.is_compiling() and type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor:
        try:
            key = _C._fast_key(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options)
            fc = _fast.get(key)
        except TypeError:  # an unhashable argument: the checks below name it
            key = fc = None
        if fc is not None and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                                                v.requires_grad)):
            return fc(q, k, v)
    args = _C._normalize(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options)
    if _C._use_op(q, k, v):
        out, lse = torch.ops.sage2.sageattn(q, k, v, *args, small_q)
    else:
        out, lse = _run(q, k, v, *args, small_q=small_q)
        if key is not None:
            _fast_insert(key, q, k, v, args, small_q)
    return (out, lse) if return_lse else out
