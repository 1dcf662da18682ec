"""What sageattn, sageattn(attn_mask=...) and the variable-length forms share: the argument
checks, the sage2_tensor descriptors, the workspace-size cache and workspaces, torch's raw stream
and the eager fast path (_FastCall and its signature caches' store).

_attention.py (dense calls), _mask.py (attention masks) and _varlen.py (variable-length batches)
import this module; it imports none of them (the package's imports go one way only,
python/tests/test_import_graph.py checks it). Tests that patch a shared helper (_normalize,
_raw_stream) patch it here: the three modules call them through this module.
"""
import ctypes
import functools
import math
import threading

import torch

from . import _lib
from ._options import OPTIONS  # options accepted through **options, with their defaults

__all__ = ["OPTIONS"]

_DTYPES = {torch.float16: _lib.SAGE2_DTYPE_F16, torch.bfloat16: _lib.SAGE2_DTYPE_BF16}
_LAYOUTS = ("HND", "NHD")
_ALIGNMENTS = {"top_left": _lib.SAGE2_CAUSAL_TOP_LEFT, "bottom_right": _lib.SAGE2_CAUSAL_BOTTOM_RIGHT}
_PV_PRECISIONS = {None: _lib.SAGE2_PV_AUTO, "auto": _lib.SAGE2_PV_AUTO, "fp8": _lib.SAGE2_PV_FP8,
                  "fp16": _lib.SAGE2_PV_FP16}
# sage2_pv_accum codes.
_PV_ACCUMS = {None: 0, "auto": 0, "fp32": 1, "fp16": 2, "prefer_fp16": 3}
# sage2_small_q_path codes.
_SMALL_Q = {"auto": 0, "quantized": 1, "direct": 2}
_OPTION_KEYS = frozenset(OPTIONS)
# The normalized scalars of a call, in the order _normalize_scalars returns them, the custom ops'
# schemas take them and _params reads them.
_SCALARS = ("causal", "sm_scale", "return_lse", "qk_bits", "pv_precision", "pv_accum", "smooth_q", "smooth_k",
            "smooth_v")


# ---- argument checks (pure Python on tensor metadata: traceable by dynamo) -------------------
def _dims(t, layout):
    """(batch, heads, seq, dim) of a 4-D tensor in the given layout."""
    s = t.shape
    if layout == "HND":
        return s[0], s[1], s[2], s[3]
    return s[0], s[2], s[1], s[3]


_RANK4 = "4-D ([B, H, N, D] for 'HND', [B, N, H, D] for 'NHD')"


def _check_tensors(q, k, v, where="sage2.sageattn", rank=4, rank_text=_RANK4):
    """Types, then ranks, then dtypes, then devices: the first problem found is named."""
    qkv = ((q, "q"), (k, "k"), (v, "v"))
    for t, name in qkv:
        if not isinstance(t, torch.Tensor):
            raise TypeError("%s: %s must be a torch.Tensor, got %s" % (where, name, type(t).__name__))
    for t, name in qkv:
        if t.dim() != rank:
            raise ValueError("%s: %s must be %s, got %d-D with shape %s" % (where, name, rank_text, t.dim(),
                                                                           tuple(t.shape)))
    for t, name in qkv:
        if t.dtype not in _DTYPES:
            raise TypeError("%s: %s has dtype %s; sage2 takes torch.float16 or torch.bfloat16" % (where, name, t.dtype))
    for t, name in qkv[1:]:
        if t.dtype != q.dtype:
            raise TypeError("%s: %s has dtype %s but q has %s; q, k and v must share one dtype"
                            % (where, name, t.dtype, q.dtype))
    for t, name in qkv:
        if t.device.type != "cuda":
            raise ValueError("%s: %s is on device '%s'; sage2 needs CUDA tensors" % (where, name, t.device))
    for t, name in qkv[1:]:
        if t.device != q.device:
            raise ValueError("%s: %s is on %s but q is on %s; all tensors must be on one device"
                             % (where, name, t.device, q.device))


def _check_strides(t, name, where="sage2.sageattn"):
    """A contiguous last dim, and no stride 0 (broadcast) on another dim of size > 1."""
    st = t.stride()
    sz = t.shape
    last = len(sz) - 1
    if sz[last] > 1 and st[last] != 1:
        raise ValueError("%s: %s must have a contiguous last dim (stride 1), got strides %s; "
                         "call .contiguous() first" % (where, name, tuple(st)))
    for i in range(last):
        if sz[i] > 1 and st[i] == 0:
            raise ValueError("%s: %s has stride 0 on dim %d of size %d (an expanded/broadcast view); "
                             "sage2 needs distinct memory per element: use .contiguous()" % (where, name, i, sz[i]))


def _normalize(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options):
    """Checks every argument and returns the scalar arguments of the C call."""
    _check_tensors(q, k, v)
    if not isinstance(tensor_layout, str):
        raise TypeError("sage2.sageattn: tensor_layout must be a str ('HND' or 'NHD'), got %s"
                        % type(tensor_layout).__name__)
    if tensor_layout not in _LAYOUTS:
        raise ValueError("sage2.sageattn: tensor_layout=%r; expected 'HND' ([B, H, N, D]) or 'NHD' ([B, N, H, D])"
                         % (tensor_layout,))
    bq, hq, nq, dq = _dims(q, tensor_layout)
    bk, hk, nk, dk = _dims(k, tensor_layout)
    bv, hv, nv, dv = _dims(v, tensor_layout)
    lay = tensor_layout
    if bk != bq or bv != bq:
        n, b = ("k", bk) if bk != bq else ("v", bv)
        raise ValueError("sage2.sageattn: %s has batch %d but q has %d (layout %s)" % (n, b, bq, lay))
    if dk != dq:
        raise ValueError("sage2.sageattn: k has head dim %d but q has %d" % (dk, dq))
    if dv != dq:
        raise ValueError("sage2.sageattn: v has head dim %d but q has %d (sage2 needs equal q/k/v head dims)"
                         % (dv, dq))
    if hv != hk or nv != nk:
        raise ValueError("sage2.sageattn: v has %d heads x %d tokens but k has %d x %d (layout %s); "
                         "k and v must match" % (hv, nv, hk, nk, lay))
    if hk == 0 or hq % hk != 0:
        raise ValueError("sage2.sageattn: q has %d heads, not a multiple of k/v's %d heads (GQA/MQA needs "
                         "q heads = g x kv heads; check tensor_layout=%r)" % (hq, hk, lay))
    if dq < 1:
        raise ValueError("sage2.sageattn: head dim must be at least 1, got %d" % dq)
    for t, n in ((q, "q"), (k, "k"), (v, "v")):
        _check_strides(t, n)
    return (tensor_layout,) + _normalize_scalars(is_causal, sm_scale, return_lse, options)


def _normalize_scalars(is_causal, sm_scale, return_lse, options, where="sage2.sageattn"):
    """The normalized scalars of the C call (_SCALARS: causal, sm_scale, return_lse, qk_bits,
    pv_precision, pv_accum, smooth_q, smooth_k, smooth_v, each the value of its own
    sage2_attention_params field) from the scalar arguments and **options; raises
    TypeError/ValueError naming the first bad one."""
    if not isinstance(is_causal, (bool, int)) or isinstance(is_causal, int) and is_causal not in (0, 1):
        raise TypeError("%s: is_causal must be a bool, got %r" % (where, is_causal))
    if sm_scale is None:
        scale = 0.0  # the C default: 1/sqrt(head dim)
    else:
        if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)):
            raise TypeError("%s: sm_scale must be a float or None, got %s" % (where, type(sm_scale).__name__))
        scale = float(sm_scale)
        if not (math.isfinite(scale) and scale > 0.0):
            raise ValueError("%s: sm_scale=%r must be finite and > 0" % (where, sm_scale))
    if not isinstance(return_lse, (bool, int)):
        raise TypeError("%s: return_lse must be a bool, got %r" % (where, return_lse))

    for key in options:
        if key not in OPTIONS:
            raise TypeError("%s: unexpected option %r (known: %s; the reference's keywords are mapped by "
                            "sage2.sageattn)" % (where, key, ", ".join(sorted(OPTIONS))))
    align = options.get("causal_alignment", "top_left")
    if align not in _ALIGNMENTS:
        raise ValueError("%s: causal_alignment=%r; expected 'top_left' (torch SDPA) or "
                         "'bottom_right' (FlashAttention)" % (where, align))
    causal = _ALIGNMENTS[align] if is_causal else _lib.SAGE2_CAUSAL_NONE
    qk_bits = options.get("qk_bits", None)
    if qk_bits is None:
        bits = 0
    elif not isinstance(qk_bits, bool) and isinstance(qk_bits, int) and qk_bits in (4, 8):
        bits = int(qk_bits)
    else:
        raise ValueError("%s: qk_bits=%r; expected None (auto), 4 or 8" % (where, qk_bits))
    pv = options.get("pv_precision", None)
    if pv not in _PV_PRECISIONS:
        raise ValueError("%s: pv_precision=%r; expected None or 'auto', 'fp8' or 'fp16'" % (where, pv))
    acc = options.get("pv_accum", None)
    if acc not in _PV_ACCUMS:
        raise ValueError("%s: pv_accum=%r; expected None or 'auto', 'fp32', 'fp16' or 'prefer_fp16'" % (where, acc))
    sq = options.get("smooth_q", None)
    if sq is None:
        smooth_q = 0
    elif isinstance(sq, bool):
        smooth_q = 1 if sq else 2
    else:
        raise TypeError("%s: smooth_q=%r; expected None (auto), True or False" % (where, sq))
    flags = []
    for name in ("smooth_k", "smooth_v"):
        val = options.get(name, OPTIONS[name])
        if not isinstance(val, bool):
            raise TypeError("%s: %s=%r; expected True or False" % (where, name, val))
        flags.append(val)
    if _small_q_code(options, where) == _SMALL_Q["direct"] and where != "sage2.sageattn":
        raise ValueError("%s: small_q_path='direct' is for dense sage2.sageattn calls only (no varlen, no "
                         "attn_mask)" % where)
    return causal, scale, bool(return_lse), bits, _PV_PRECISIONS[pv], _PV_ACCUMS[acc], smooth_q, flags[0], flags[1]


def _small_q_code(options, where="sage2.sageattn"):
    """The sage2_small_q_path code of options["small_q_path"] (default "auto")."""
    val = options.get("small_q_path", "auto")
    if val is None:
        return 0
    if not isinstance(val, str) or val not in _SMALL_Q:
        raise ValueError("%s: small_q_path=%r; expected 'auto', 'quantized' or 'direct'" % (where, val))
    return _SMALL_Q[val]


# ---- the C call ---------------------------------------------------------------------------
def _desc(t, layout, dtype_code):
    return _lib.Tensor(t.data_ptr(), *_tensor_fields(t.shape, t.stride(), layout, dtype_code))


def _raw_stream_slow(index):
    return torch.cuda.current_stream(index).cuda_stream


# torch's current stream of a device as an int, without building a torch.cuda.Stream object
# (what torch.compile's generated code uses); the public API where this torch lacks it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _raw_stream_slow


_ws_lock = threading.Lock()
_ws_cache = {}  # problem key -> workspace bytes
_WS_CACHE_MAX = 4096


def _device_index(dev):
    return dev.index if dev.index is not None else torch.cuda.current_device()


def _workspace_bytes(key, query, function):
    """Bytes of workspace of a problem: cached by `key`, else query(c_size_t byref) -> status."""
    n = _ws_cache.get(key)
    if n is not None:
        return n
    out = ctypes.c_size_t(0)
    _lib.check(query(ctypes.byref(out)), function)
    n = out.value
    with _ws_lock:
        if len(_ws_cache) >= _WS_CACHE_MAX:
            _ws_cache.clear()
        _ws_cache[key] = n
    return n


def _attach_workspace(params, nbytes, dev):
    """A workspace of `nbytes` from torch's caching allocator, 256-byte aligned, set into params;
    returns the tensor, which the caller keeps alive until the C call is enqueued. torch's caching
    allocator owns it: stream-ordered reuse, and inside CUDA graph capture it comes from the graph's
    private pool, so replays see valid memory."""
    if not nbytes:
        return None
    ws = torch.empty((nbytes + 256,), dtype=torch.uint8, device=dev)
    params.workspace = (ws.data_ptr() + 255) // 256 * 256
    params.workspace_bytes = nbytes
    return ws


def _ws_key(q, k, layout, *scalars, v=None, small_q=0):
    """The workspace-size cache key of a normalized call (scalars: _SCALARS; v's strides and small_q
    given by keyword). sm_scale is left out: the workspace does not depend on it."""
    b, hq, nq, d = _dims(q, layout)
    _, hk, nk, _ = _dims(k, layout)
    index = _device_index(q.device)
    key = (index, layout, q.dtype, b, hq, hk, nq, nk, d, q.stride(), k.stride(), v.stride(), scalars[0]) + scalars[2:]
    return key + (small_q,) if small_q else key


def _params(scalars, lse=None, small_q=0):
    """sage2_attention_params of normalized scalars (_SCALARS), with the LSE pointer (None: no LSE)."""
    causal, sm_scale, _, qk_bits, pv_precision, pv_accum, smooth_q, smooth_k, smooth_v = scalars
    return _lib.attention_params(causal, sm_scale, qk_bits, pv_precision, pv_accum, smooth_q, int(smooth_k),
                                 int(smooth_v), lse, small_q=small_q)


def _outputs(q, lse_shape, return_lse):
    """A new output like q and the LSE (lse_shape when return_lse, else empty), fp32."""
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(lse_shape if return_lse else (0,), dtype=torch.float32, device=q.device)
    return out, lse


def _no_keys(out, lse):
    """No key anywhere: every row sees nothing (sage2's convention: O = 0, LSE = -inf). The library
    takes no empty tensor, so the bindings answer this themselves."""
    out.zero_()
    lse.fill_(-math.inf)
    return out, lse


def _call_setup(q, k, v, layout, return_lse):
    """The start every dense C call shares (sageattn's and the masked one): (out, lse, None) when
    the outputs are final already (empty, or no key: _no_keys), else (out, lse, (device index,
    context, the tensor descriptors of q, k, v, out))."""
    b, hq, nq, _ = _dims(q, layout)
    nk = _dims(k, layout)[2]
    out, lse = _outputs(q, (b, hq, nq), return_lse)
    if out.numel() == 0:
        return out, lse, None
    if nk == 0:
        return _no_keys(out, lse) + (None,)
    index = _device_index(q.device)
    code = _DTYPES[q.dtype]
    return out, lse, (index, _lib.context(index), tuple(_desc(t, layout, code) for t in (q, k, v, out)))


def _run_dense(q, k, v, layout, scalars, key, L, function, extra=(), small_q=0):
    """Allocates the outputs and runs a dense C call on torch's current stream: `function`
    (sage2_attention, or sage2_attention_masked with `extra` = (byref of its sage2_mask,), the
    arguments between out and params), after its sage2_workspace_size* twin (cached by `key`) and
    with a workspace from torch's caching allocator. scalars: _SCALARS, already normalized."""
    out, lse, call = _call_setup(q, k, v, layout, scalars[2])
    if call is None:
        return out, lse
    index, ctx, descs = call
    params = _params(scalars, lse.data_ptr() if scalars[2] else None, small_q)
    br = ctypes.byref
    head = (ctx,) + tuple(br(t) for t in descs) + tuple(extra) + (br(params),)
    size = function.replace("sage2_attention", "sage2_workspace_size")
    size_fn = getattr(L, size)
    ws = _attach_workspace(params, _workspace_bytes(key, lambda n: size_fn(*head, n), size), q.device)
    _lib.check(getattr(L, function)(*head, ctypes.c_void_p(_raw_stream(index))), function)
    del ws  # back to the caching allocator; later users on this stream are ordered after the call
    return out, lse


# ---- the eager fast path: per-signature cached call (issue 15 item 2; varlen: issue 17) ---------
# A call whose tensors' metadata (shapes, strides, dtypes, devices) and scalar arguments equal
# those of an earlier successful call needs none of _normalize's checks again (they read only
# that metadata) nor the workspace size query: _FastCall keeps the normalized arguments, the
# library handles, the descriptors' shapes and strides and, per thread, the ctypes structures
# with their byref()s, so a call only allocates its outputs and workspace, patches the pointers
# of its tensors (q, k, v, out, LSE, workspace) and makes the C call. Scalars are keyed with their
# types (True == 1 == 1.0 for dict keys, but sm_scale=True is refused where 1.0 is not).
# The variable-length forms (_varlen.py: sageattn_varlen and sageattn(kv_lens=...)) use the same
# _FastCall with a prebuilt sage2_seqlens whose device pointers are patched too, and their own
# signature cache (_varlen._fast), keyed also by the length tensors' metadata and max_seqlen_q/k;
# masked calls likewise (_mask._fast); dense calls use _attention._fast.
_FAST_MAX = 1024
_fast_lock = threading.Lock()
_Tensor = torch.Tensor
_F32 = torch.float32
_U8 = torch.uint8
# A workspace up to this size is kept per thread for its next call: torch's allocation and free of
# one took ~4-6 µs of host time before the call's first kernel (bench/NOTES.md, sessions 27 and 30),
# and 64 MiB covers the workspaces of the shapes where that matters (B 4 H 32 hd 128 at 1K: 35 MB,
# Flux-1024: ~30 MB, BERT-large at B 32: 35 MB); a longer call's allocation is a small share of it.
_WS_KEEP_MAX = 64 << 20
_PACKED = "packed"  # the layout name of packed [total, H, D] tensors (sageattn_varlen's custom op)


class _KeptWorkspace(threading.local):
    ws, where, bytes = None, None, 0  # where: (device index, raw stream); 0 is every device's default stream


_kept_ws = _KeptWorkspace()
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing


def _fast_key(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, options):
    """The signature of a call (raises TypeError for unhashable arguments: no fast path)."""
    opts = tuple(sorted((n, type(x), x) for n, x in options.items())) if options else ()
    return (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype,
            q.device, k.device, v.device, tensor_layout, type(is_causal), is_causal, type(sm_scale), sm_scale,
            type(return_lse), return_lse, opts)


def _tensor_fields(shape, strides, layout, code):
    """(dtype, batch, heads, seq, dim, stride_batch, stride_head, stride_seq, stride_dim) of a
    sage2_tensor for a 4-D torch shape/stride in the given layout (the fields after `data`)."""
    if layout == "HND":
        b, h, n, d = shape
        sb, sh, sn = strides[0], strides[1], strides[2]
    else:
        b, n, h, d = shape
        sb, sn, sh = strides[0], strides[1], strides[2]
    return (code, b, h, n, d, sb, sh, sn, 1)


def _packed_fields(shape, strides, code):
    """The sage2_tensor fields after `data` of a packed [total, H, D] tensor: its NHD view with
    batch 1 (the form sage2_attention_varlen takes for cu_seqlens)."""
    total, h, d = shape
    return (code, 1, h, total, d, total * strides[0], strides[1], strides[0], 1)


def _contiguous_strides(shape):
    st, acc = [], 1
    for n in reversed(tuple(shape)):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


class _Structs:
    """One thread's ctypes arguments of a _FastCall: built once, pointers patched per call."""

    __slots__ = ("q", "k", "v", "o", "p", "lens", "mask", "call")

    def __init__(self, fc):
        T = _lib.Tensor
        self.q, self.k, self.v, self.o = T(None, *fc.fq), T(None, *fc.fk), T(None, *fc.fv), T(None, *fc.fo)
        self.p = _params(fc.scalars, None, fc.small_q)
        br = ctypes.byref
        self.lens = self.mask = None
        if fc.mask is not None:  # sage2_attention_masked(ctx, q, k, v, out, mask, params, stream)
            self.mask = _lib.Mask(*fc.mask)
            args = (br(self.q), br(self.k), br(self.v), br(self.o), br(self.mask), br(self.p))
        elif fc.lens is None:  # sage2_attention(ctx, q, k, v, out, params, stream)
            args = (br(self.q), br(self.k), br(self.v), br(self.o), br(self.p))
        else:  # sage2_attention_varlen(ctx, q, k, v, out, lens, params, stream)
            self.lens = _lib.SeqLens(*fc.lens)
            args = (br(self.q), br(self.k), br(self.v), br(self.o), br(self.lens), br(self.p))
        self.call = functools.partial(fc.fn, fc.ctx, *args)  # call(stream) -> status


class _FastCall:
    """Everything of one call signature that does not depend on the tensors' memory: a dense
    sage2_attention call, or (lens given) a sage2_attention_varlen call."""

    def __init__(self, q, k, v, layout, params, ws_bytes, lens=None, mask=None, small_q=0):
        """q, k, v: the tensors of a call that just succeeded (only their metadata is kept);
        layout: "HND", "NHD" or _PACKED ([total, H, D] tensors, LSE [H, total]); params: the
        normalized scalars (_SCALARS); ws_bytes: the workspace size; lens: None for sage2_attention, else the sage2_seqlens fields with NULL
        pointers (batch, None, None, None, max_seqlen_q, max_seqlen_k) for sage2_attention_varlen;
        mask: None, else the sage2_mask fields with a NULL pointer (None, type, strides...) for
        sage2_attention_masked; small_q: the sage2_small_q_path code (dense calls)."""
        self.small_q = small_q
        self.scalars = tuple(params)
        self.return_lse = params[2]
        dev = q.device
        self.device = dev
        self.index = dev.index if dev.index is not None else torch.cuda.current_device()
        self.shape = q.shape
        self.dtype = q.dtype
        code = _DTYPES[q.dtype]
        out_strides = _contiguous_strides(q.shape)
        if layout == _PACKED:
            total, hq, _ = q.shape
            self.lse_shape = (hq, total)
            self.fq, self.fk, self.fv, self.fo = (_packed_fields(q.shape, q.stride(), code),
                                                  _packed_fields(k.shape, k.stride(), code),
                                                  _packed_fields(v.shape, v.stride(), code),
                                                  _packed_fields(q.shape, out_strides, code))
        else:
            b, hq, nq, _ = _dims(q, layout)
            self.lse_shape = (b, hq, nq)
            self.fq, self.fk, self.fv, self.fo = (_tensor_fields(q.shape, q.stride(), layout, code),
                                                  _tensor_fields(k.shape, k.stride(), layout, code),
                                                  _tensor_fields(v.shape, v.stride(), layout, code),
                                                  _tensor_fields(q.shape, out_strides, layout, code))
        self.lens = lens
        self.mask = mask
        self.ws_bytes = ws_bytes
        self.lib = _lib.lib()
        self.function = ("sage2_attention_masked" if mask is not None else
                         "sage2_attention" if lens is None else "sage2_attention_varlen")
        self.fn = getattr(self.lib, self.function)
        self.ctx = _lib.context(self.index)
        self.tls = threading.local()

    def structs(self):
        try:
            return self.tls.s
        except AttributeError:
            s = self.tls.s = _Structs(self)
            return s

    def __call__(self, q, k, v, lens_a=None, lens_b=None, mask=None):
        """A call of this signature. lens_a, lens_b: the length tensors of a varlen call
        (cu_seqlens_q, cu_seqlens_k for the packed form; kv_lens, None for key padding): only
        their device pointers are taken, never their values. mask: a masked call's attn_mask."""
        dev = self.device
        out = torch.empty(self.shape, dtype=self.dtype, device=dev)
        s = self.structs()
        s.q.data = q.data_ptr()
        s.k.data = k.data_ptr()
        s.v.data = v.data_ptr()
        s.o.data = out.data_ptr()
        if mask is not None:
            s.mask.data = mask.data_ptr()
        if lens_a is not None:
            ln = s.lens
            if lens_b is None:
                ln.kv_lens = lens_a.data_ptr()
            else:
                ln.cu_seqlens_q = lens_a.data_ptr()
                ln.cu_seqlens_k = lens_b.data_ptr()
        p = s.p
        lse = None
        if self.return_lse:
            lse = torch.empty(self.lse_shape, dtype=_F32, device=dev)
            p.lse = lse.data_ptr()
        ws = None
        n = self.ws_bytes
        stream = _raw_stream(self.index)
        if n:
            # torch's caching allocator owns the workspace (stream-ordered reuse; the graph's
            # private pool under CUDA graph capture), as in _run. One small workspace per thread is
            # kept for the thread's next call on the same device and stream, whatever its signature
            # (that call is ordered after this one's kernels): an allocation less where the host
            # time per call matters, at most _WS_KEEP_MAX bytes held per thread; never while
            # capturing.
            capturing = _capturing()
            kept = _kept_ws
            where = (self.index, stream)
            if not capturing and kept.where == where and kept.bytes >= n:
                ws = kept.ws
            else:
                ws = torch.empty((n + 256,), dtype=_U8, device=dev)
                if not capturing and n <= _WS_KEEP_MAX:
                    kept.ws, kept.where, kept.bytes = ws, where, n
            p.workspace = (ws.data_ptr() + 255) // 256 * 256
            p.workspace_bytes = n
        status = s.call(stream)
        if status:
            _lib.check(status, self.function)
        del ws
        return (out, lse) if self.return_lse else out


def _fast_store(cache, key, fc):
    """Puts a _FastCall into a signature cache (emptied when it reaches _FAST_MAX entries)."""
    with _fast_lock:
        if len(cache) >= _FAST_MAX:
            cache.clear()
        cache[key] = fc


def _use_op(*tensors):
    """Whether a call on these tensors (None ignored) goes through its custom op rather than
    straight to the C library: under torch.compile, for fake / functional / subclass tensors, and
    when autograd would record it."""
    if torch.compiler.is_compiling():
        return True
    ts = [t for t in tensors if t is not None]
    if any(type(t) is not torch.Tensor for t in ts):
        return True  # fake / functional / subclass tensors: let the dispatcher handle them
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts)
