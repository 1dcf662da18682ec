"""Variable-length batches for torch tensors: sageattn_varlen() (the packed form of
FlashAttention's varlen API) and the key-padding form behind sageattn(kv_lens=...).

Both make one sage2_attention_varlen call on torch's current stream with a workspace from torch's
caching allocator, as sageattn does. Under torch.compile (and for fake, functional or subclass
tensors, or when autograd would record the call) the work runs behind the opaque custom op
``torch.ops.sage2.sageattn_varlen``, whose fake implementation gives the output shapes.

The length arrays are int32 CUDA tensors whose values are read on the GPU only: Python checks
their dtype, rank, size, device and strides, never their values (no host synchronisation, so a CUDA
graph captured once replays with new lengths of the same totals). Values that break the rules of
include/sage2/sage2.hpp (SeqLens) make every output element and LSE NaN.

Eager calls take sageattn's fast path (_core._FastCall) from the second call of a signature
on: no checks again, prebuilt ctypes structures (sage2_seqlens included) whose pointers are
patched, the kept workspace; see "the eager fast path" below.
"""
import ctypes

import torch

from . import _lib
from . import _op_util

from . import _compat
from . import _core as _C  # the helpers sageattn shares (never _attention: it imports this module)

__all__ = ["sageattn_varlen"]

_WHERE = "sage2.sageattn_varlen"
_PACKED = _C._PACKED  # the custom op's tensor_layout for the packed form ([total, H, D] tensors)
_RANK3 = "3-D ([total tokens, heads, head dim]: the sequences packed one after another)"
_SMOOTH_Q_OFF = 2  # sage2_attention_params.smooth_q: 0 auto, 1 on, 2 off
_SymInt = getattr(torch, "SymInt", int)
_Tensor = torch.Tensor
_fast = {}  # signature -> _core._FastCall of a varlen call (both forms; see _packed_key, _kv_key)


# ---- argument checks (metadata only: traceable by dynamo, no device synchronisation) ------------
def _check_lens(t, name, where, q, int64_too=False):
    """An int32, 1-D, contiguous CUDA tensor on q's device (int64_too: the caller converts int64
    ones first, so the message names both)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: %s must be a torch.Tensor (int32, on q's device), got %s"
                        % (where, name, type(t).__name__))
    if t.dtype != torch.int32:
        raise TypeError("%s: %s has dtype %s; it must be torch.int32%s"
                        % (where, name, t.dtype, " (or torch.int64, converted)" if int64_too else ""))
    if t.dim() != 1:
        raise ValueError("%s: %s must be 1-D, got %d-D with shape %s" % (where, name, t.dim(), tuple(t.shape)))
    if t.device.type != "cuda":
        raise ValueError("%s: %s is on device '%s'; it must be a CUDA tensor on q's device (its values are read "
                         "on the GPU)" % (where, name, t.device))
    if t.device != q.device:
        raise ValueError("%s: %s is on %s but q is on %s; all tensors must be on one device"
                         % (where, name, t.device, q.device))
    stride = t.stride()[0]
    if t.shape[0] > 1 and stride != 1:
        raise ValueError("%s: %s must be contiguous (stride 1), got stride %d; call .contiguous() first"
                         % (where, name, stride))


_INT32_MAX = 2 ** 31 - 1


def _int64_to_int32(t, name, where):
    """An int64 length tensor as the int32 tensor the library reads (FlashAttention-style callers
    and the reference accept int64 cu_seqlens). Eagerly the values are checked on the host first
    (a host synchronisation, only for int64: pass int32 to avoid it) and a value outside int32 is a
    ValueError naming it. Under torch.compile or CUDA graph capture, where the host cannot read them,
    such values become -1 on the device instead, which makes the lengths invalid (NaN outputs, as
    for any invalid lengths) rather than wrapping around into valid-looking ones."""
    if torch.compiler.is_compiling() or type(t) is not _Tensor or _C._capturing():
        return t.masked_fill((t < 0) | (t > _INT32_MAX), -1).to(torch.int32)
    if t.numel() > 0:
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi > _INT32_MAX:
            bad = lo if lo < 0 else hi
            raise ValueError("%s: %s is int64 and holds %d, which int32 cannot hold (sage2 reads int32 lengths; "
                             "valid cumulative lengths run from 0 to the tensor's token count)" % (where, name, bad))
    return t.to(torch.int32)


def _max_len(x, name):
    if x is None:
        return 0
    if isinstance(x, bool) or not isinstance(x, (int, _SymInt)):
        raise TypeError("%s: %s must be an int or None, got %s" % (_WHERE, name, type(x).__name__))
    if x < 0:
        raise ValueError("%s: %s=%d must be >= 0 (0 or None: unknown)" % (_WHERE, name, x))
    return x


def _smooth_q_off(options, where):
    """smooth_q of a varlen call: off. The library does not smooth Q in variable-length batches."""
    if options.get("smooth_q") is True:
        raise ValueError("%s: smooth_q=True is not supported with variable-length batches (sage2 does not smooth Q "
                         "there); leave smooth_q None or False" % where)
    return _SMOOTH_Q_OFF


def _smooth_q_off_in(scalars, options, where):
    """Normalized scalars (_core._SCALARS) with smooth_q set to _smooth_q_off's."""
    i = _C._SCALARS.index("smooth_q")
    return scalars[:i] + (_smooth_q_off(options, where),) + scalars[i + 1:]


def _normalize_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
                      return_lse, options):
    """Checks every argument of sageattn_varlen and returns the scalar arguments of the C call:
    (max_seqlen_q, max_seqlen_k) + the scalars (_core._SCALARS)."""
    W = _WHERE
    _C._check_tensors(q, k, v, W, 3, _RANK3)
    tq, hq, dq = q.shape
    tk, hk, dk = k.shape
    tv, hv, dv = v.shape
    if dk != dq:
        raise ValueError("%s: k has head dim %d but q has %d" % (W, dk, dq))
    if dv != dq:
        raise ValueError("%s: v has head dim %d but q has %d (sage2 needs equal q/k/v head dims)" % (W, dv, dq))
    if hv != hk or tv != tk:
        raise ValueError("%s: v has %d tokens x %d heads but k has %d x %d; k and v must match" % (W, tv, hv, tk, hk))
    if hk == 0 or hq % hk != 0:
        raise ValueError("%s: q has %d heads, not a multiple of k/v's %d heads (GQA/MQA needs q heads = g x kv heads)"
                         % (W, hq, hk))
    if dq < 1:
        raise ValueError("%s: head dim must be at least 1, got %d" % (W, dq))
    for t, n in ((q, "q"), (k, "k"), (v, "v")):
        _C._check_strides(t, n, W)
    _check_lens(cu_seqlens_q, "cu_seqlens_q", W, q, int64_too=True)
    _check_lens(cu_seqlens_k, "cu_seqlens_k", W, q, int64_too=True)
    nq, nk = cu_seqlens_q.shape[0], cu_seqlens_k.shape[0]
    if nq < 2:
        raise ValueError("%s: cu_seqlens_q has %d entries; it needs B + 1 >= 2 (0, then the running total of the "
                         "query lengths)" % (W, nq))
    if nk != nq:
        raise ValueError("%s: cu_seqlens_k has %d entries but cu_seqlens_q has %d; both need B + 1" % (W, nk, nq))
    mq = _max_len(max_seqlen_q, "max_seqlen_q")
    mk = _max_len(max_seqlen_k, "max_seqlen_k")
    scalars = _C._normalize_scalars(is_causal, sm_scale, return_lse, options, W)
    return (mq, mk) + _smooth_q_off_in(scalars, options, W)


# ---- the C call ---------------------------------------------------------------------------------
def _packed_desc(t, code):
    """sage2_tensor of a packed [total, H, D] tensor: the NHD view with batch 1."""
    return _lib.Tensor(t.data_ptr(), *_C._packed_fields(t.shape, t.stride(), code))


def _packed_ws_key(q, k, v, batch, max_seqlen_q, max_seqlen_k, scalars):
    """The workspace-size cache key of a normalized packed call (scalars: _core._SCALARS): shapes,
    strides and options, never the lengths' values nor sm_scale (the workspace depends on neither)."""
    return ("varlen-packed", _C._device_index(q.device), q.dtype, q.shape, k.shape, q.stride(), k.stride(), v.stride(),
            batch, max_seqlen_q, max_seqlen_k, scalars[0]) + tuple(scalars[2:])


def _kv_ws_key(q, k, v, layout, scalars):
    """The workspace-size cache key of a normalized key-padding call."""
    return ("varlen-kv",) + _C._ws_key(q, k, layout, *scalars, v=v)


def _call(dev, tq, tk, tv, to, lens, params, key):
    """sage2_workspace_size_varlen (cached by key), then sage2_attention_varlen on torch's current
    stream with a workspace from torch's caching allocator."""
    index = _C._device_index(dev)
    L = _lib.require_varlen()
    ctx = _lib.context(index)
    br = ctypes.byref

    def query(n):
        return L.sage2_workspace_size_varlen(ctx, br(tq), br(tk), br(tv), br(to), br(lens), br(params), n)

    nbytes = _C._workspace_bytes(key, query, "sage2_workspace_size_varlen")
    ws = _C._attach_workspace(params, nbytes, dev)
    stream = _C._raw_stream(index)
    _lib.check(L.sage2_attention_varlen(ctx, br(tq), br(tk), br(tv), br(to), br(lens), br(params),
                                        ctypes.c_void_p(stream)),
               "sage2_attention_varlen")
    del ws  # back to the caching allocator; later users on this stream are ordered after the call


def _run_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *scalars):
    """Allocates the outputs ([total_q, Hq, D], LSE [Hq, total_q]) and runs the packed form.
    Arguments are already normalized (scalars: _core._SCALARS)."""
    _lib.require_varlen()  # an older library fails every call alike, empty ones included
    return_lse = scalars[2]
    tq, hq, d = q.shape
    out, lse = _C._outputs(q, (hq, tq), return_lse)
    if out.numel() == 0:
        return out, lse
    if k.shape[0] == 0:
        return _C._no_keys(out, lse)  # (invalid lengths are not looked at: nothing runs)
    code = _C._DTYPES[q.dtype]
    batch = cu_seqlens_q.shape[0] - 1
    lens = _lib.SeqLens(batch, cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr(), None, max_seqlen_q, max_seqlen_k)
    params = _C._params(scalars, lse.data_ptr() if return_lse else None)
    key = _packed_ws_key(q, k, v, batch, max_seqlen_q, max_seqlen_k, scalars)
    _call(q.device, _packed_desc(q, code), _packed_desc(k, code), _packed_desc(v, code), _packed_desc(out, code), lens,
          params, key)
    return out, lse


def _run_kv_padded(q, k, v, kv_lens, layout, *scalars):
    """Allocates the outputs (like q, LSE [B, Hq, Nq]) and runs the key-padding form. Arguments are
    already normalized (scalars: _core._SCALARS)."""
    _lib.require_varlen()
    return_lse = scalars[2]
    b, hq, nq, _ = _C._dims(q, layout)
    out, lse = _C._outputs(q, (b, hq, nq), return_lse)
    if out.numel() == 0:
        return out, lse
    if _C._dims(k, layout)[2] == 0:
        return _C._no_keys(out, lse)
    code = _C._DTYPES[q.dtype]
    lens = _lib.SeqLens(b, None, None, kv_lens.data_ptr(), 0, 0)
    params = _C._params(scalars, lse.data_ptr() if return_lse else None)
    key = _kv_ws_key(q, k, v, layout, scalars)
    _call(q.device, _C._desc(q, layout, code), _C._desc(k, layout, code), _C._desc(v, layout, code),
          _C._desc(out, layout, code), lens, params, key)
    return out, lse


# ---- the eager fast path (as sageattn's: _core._FastCall with a prebuilt sage2_seqlens) -----
# The second call of a signature skips the checks and the workspace query: the cached _FastCall
# allocates the outputs, takes the kept workspace, patches the data pointers of q, k, v, out, LSE
# and of the length arrays, and calls sage2_attention_varlen. A signature is everything the
# checks read, i.e. all but memory: sageattn's (shapes, strides, dtypes, devices, layout, scalars
# with their types, options), plus the length tensors' shape (B), stride, dtype and device and, for
# the packed form, max_seqlen_q/k with their types. The lengths' values are never part of it (and
# never read). Entries are made only after a call succeeded through the normal path.
def _packed_key(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale, return_lse,
                options):
    """The signature of a packed call (TypeError for unhashable arguments: no fast path)."""
    cq, ck = cu_seqlens_q, cu_seqlens_k
    return (_C._fast_key(q, k, v, _PACKED, is_causal, sm_scale, return_lse, options),
            cq.shape, cq.stride(), cq.dtype, cq.device, ck.shape, ck.stride(), ck.dtype, ck.device,
            type(max_seqlen_q), max_seqlen_q, type(max_seqlen_k), max_seqlen_k)


def _kv_key(q, k, v, kv_lens, tensor_layout, is_causal, sm_scale, return_lse, options):
    """The signature of a key-padding call (TypeError for unhashable arguments: no fast path)."""
    return (_C._fast_key(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options),
            kv_lens.shape, kv_lens.stride(), kv_lens.dtype, kv_lens.device)


def _may_record(q, k, v):
    """Whether autograd would record a call on q, k, v (the int32 lengths cannot require grad)."""
    return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)


def _fast_insert_packed(key, q, k, v, cu_seqlens_q, args):
    """Caches a packed call that just succeeded eagerly; args: _normalize_packed's. Not the empty
    and no-key cases (answered without the library)."""
    max_q, max_k, scalars = args[0], args[1], args[2:]
    if q.numel() == 0 or k.shape[0] == 0:
        return
    batch = cu_seqlens_q.shape[0] - 1
    ws_bytes = _C._ws_cache.get(_packed_ws_key(q, k, v, batch, max_q, max_k, scalars))
    if ws_bytes is None:
        return
    fc = _C._FastCall(q, k, v, _PACKED, scalars, ws_bytes, lens=(batch, None, None, None, max_q, max_k))
    _C._fast_store(_fast, key, fc)


def _fast_insert_kv(key, q, k, v, layout, params):
    """Caches a key-padding call that just succeeded eagerly; params: the scalars (_core._SCALARS)
    as passed to _run_kv_padded."""
    if q.numel() == 0 or _C._dims(k, layout)[2] == 0:
        return
    ws_bytes = _C._ws_cache.get(_kv_ws_key(q, k, v, layout, params))
    if ws_bytes is None:
        return
    fc = _C._FastCall(q, k, v, layout, params, ws_bytes, lens=(_C._dims(q, layout)[0], None, None, None, 0, 0))
    _C._fast_store(_fast, key, fc)


# ---- the custom op (torch.compile, tracing, autograd guard) -------------------------------------
# One op for both forms, like the C function: packed when cu_seqlens_q is given (tensor_layout
# "packed"), key padding when kv_lens is (tensor_layout "HND" or "NHD").
_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, Tensor? kv_lens, "
           "str tensor_layout, int max_seqlen_q, int max_seqlen_k, int causal, float sm_scale, bool return_lse, "
           "int qk_bits, int pv_precision, int pv_accum, int smooth_q, bool smooth_k, bool smooth_v) "
           "-> (Tensor, Tensor)")


@torch.library.custom_op("sage2::sageattn_varlen", mutates_args=(), schema=_SCHEMA)
def _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, kv_lens, tensor_layout, max_seqlen_q, max_seqlen_k, causal,
               sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q, smooth_k, smooth_v):
    scalars = (causal, sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q, smooth_k, smooth_v)
    if cu_seqlens_q is not None:
        return _run_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *scalars)
    return _run_kv_padded(q, k, v, kv_lens, tensor_layout, *scalars)


@_varlen_op.register_fake
def _varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, kv_lens, tensor_layout, max_seqlen_q, max_seqlen_k, causal,
                 sm_scale, return_lse, qk_bits, pv_precision, pv_accum, smooth_q, smooth_k, smooth_v):
    out = q.new_empty(q.shape)
    if not return_lse:
        lse_shape = (0,)
    elif cu_seqlens_q is not None:
        lse_shape = (q.shape[1], q.shape[0])
    else:
        lse_shape = _C._dims(q, tensor_layout)[:3]
    return out, q.new_empty(lse_shape, dtype=torch.float32)


_op_util.inference_only(_varlen_op, "sage2.sageattn_varlen")


# ---- entry points -------------------------------------------------------------------------------
def kv_padded(q, k, v, kv_lens, tensor_layout, is_causal, sm_scale, return_lse, options):
    """sageattn(q, k, v, ..., kv_lens=kv_lens): the key-padding form."""
    key = None
    if (not torch.compiler.is_compiling() and type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor
            and type(kv_lens) is _Tensor):
        try:
            key = _kv_key(q, k, v, kv_lens, tensor_layout, is_causal, sm_scale, return_lse, options)
            fc = _fast.get(key)
        except TypeError:  # an unhashable argument: the checks below name it
            key = fc = None
        if fc is not None and not _may_record(q, k, v):
            return fc(q, k, v, kv_lens)
    W = "sage2.sageattn"
    args = _C._normalize(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options)
    layout = args[0]
    _check_lens(kv_lens, "kv_lens", W, q)
    b = _C._dims(q, layout)[0]
    if kv_lens.shape[0] != b:
        raise ValueError("%s: kv_lens has %d entries but q has batch %d; it needs one key length per batch entry"
                         % (W, kv_lens.shape[0], b))
    scalars = _smooth_q_off_in(args[1:], options, W)
    if _C._use_op(q, k, v, kv_lens):
        out, lse = torch.ops.sage2.sageattn_varlen(q, k, v, None, None, kv_lens, layout, 0, 0, *scalars)
    else:
        out, lse = _run_kv_padded(q, k, v, kv_lens, layout, *scalars)
        if key is not None:
            _fast_insert_kv(key, q, k, v, layout, scalars)
    return (out, lse) if scalars[2] else out


def sageattn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, is_causal=False,
                    sm_scale=None, return_lse=False, **options):
    """SageAttention2 over a batch of sequences of their own lengths, packed one after another
    (FlashAttention's varlen form); fp16/bf16 CUDA tensors.

    q: [total_q, Hq, D]; k, v: [total_k, Hkv, D] with Hq a multiple of Hkv (GQA/MQA); any strides
    with a contiguous last dim (e.g. views of a packed qkv tensor). cu_seqlens_q / cu_seqlens_k:
    int32 CUDA tensors [B + 1] on q's device (int64 ones are converted to int32 on each call, their
    values checked to fit first: a host synchronisation); sequence b holds query tokens
    [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and key tokens [cu_seqlens_k[b], cu_seqlens_k[b + 1]).
    Lengths 0 and 1 are valid. max_seqlen_q / max_seqlen_k: optional upper bounds of the lengths
    (help choose the tile; None or 0: unknown; a longer sequence is still computed correctly).

    The lengths are read on the GPU, never on the host (no synchronisation; a CUDA graph replays
    with new lengths of the same totals): cu arrays must start at 0, never decrease and end at most
    at the tensor's token count, else every output element and LSE is NaN. Query rows after
    cu_seqlens_q[B] are not written.

    Returns ``out`` (new contiguous tensor [total_q, Hq, D] in q's dtype) or ``(out, lse)`` when
    return_lse (lse: fp32 [Hq, total_q], natural log, -inf for rows that see no key).

    Each sequence is quantized and masked on its own: is_causal with causal_alignment "top_left"
    (torch's, the default: query i sees keys j <= i) or "bottom_right" (FlashAttention's:
    j <= i + len_k - len_q of the sequence). sm_scale: default 1/sqrt(D). Options as sageattn:
    qk_bits, smooth_k, smooth_v, causal_alignment; smooth_q must stay None or False (Q is not
    smoothed in variable-length batches). Runs on torch's current stream; under torch.compile it is
    the custom op torch.ops.sage2.sageattn_varlen.

    Bad input raises TypeError/ValueError naming the argument before anything runs on the GPU; a
    libsage2 without sage2_attention_varlen raises sage2.UnsupportedError. The reference's and
    FlashAttention's keywords are mapped or refused as in sageattn."""
    if options and not _C._OPTION_KEYS.issuperset(options):
        is_causal, sm_scale, options = _compat.translate(is_causal, sm_scale, options, _C._OPTION_KEYS,
                                                            where="sage2.sageattn_varlen")
    if isinstance(cu_seqlens_q, torch.Tensor) and cu_seqlens_q.dtype == torch.int64:
        cu_seqlens_q = _int64_to_int32(cu_seqlens_q, "cu_seqlens_q", _WHERE)
    if isinstance(cu_seqlens_k, torch.Tensor) and cu_seqlens_k.dtype == torch.int64:
        cu_seqlens_k = _int64_to_int32(cu_seqlens_k, "cu_seqlens_k", _WHERE)
    key = None
    if (not torch.compiler.is_compiling() and type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor
            and type(cu_seqlens_q) is _Tensor and type(cu_seqlens_k) is _Tensor):
        try:
            key = _packed_key(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
                              return_lse, options)
            fc = _fast.get(key)
        except TypeError:  # an unhashable argument: the checks below name it
            key = fc = None
        if fc is not None and not _may_record(q, k, v):
            return fc(q, k, v, cu_seqlens_q, cu_seqlens_k)
    args = _normalize_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
                             return_lse, options)
    if _C._use_op(q, k, v, cu_seqlens_q, cu_seqlens_k):
        out, lse = torch.ops.sage2.sageattn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, None, _PACKED, *args)
    else:
        out, lse = _run_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, *args)
        if key is not None:
            _fast_insert_packed(key, q, k, v, cu_seqlens_q, args)
    return (out, lse) if args[4] else out
