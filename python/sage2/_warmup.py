"""sage2.warmup(): compile (or load from the disk cache) the kernels that calls of given head dims,
dtypes and causal modes use, before the first real call pays for it (0.16 s per kernel on the
mma.sync family, up to 2 s on wgmma).

It asks the library (sage2_warmup, the same function sage2-autotune warms with) for every kernel a
call with these options can load at any batch, head count, GQA group and sequence length — the
quantized path's kernels with the planner's tiles (the tuning database's too), the direct path's
for decode-sized calls — compiled in parallel, then runs one small call of each combination as a
check. They stay in the process's module cache and in the disk cache (unless disabled), so later
processes load them in milliseconds. The argument checks need no GPU.
"""
import ctypes
import sys
import time

__all__ = ["warmup", "check_warmup_args"]

_DTYPE_NAMES = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}


def _as_tuple(value, name):
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError("sage2.warmup: %s is empty" % name)
        return tuple(value)
    return (value,)


def _dtype_name(d):
    if isinstance(d, str):
        n = _DTYPE_NAMES.get(d.lower())
        if n is None:
            raise ValueError("sage2.warmup: dtypes has %r; expected 'float16'/'fp16' or 'bfloat16'/'bf16' (or the "
                             "torch dtypes)" % (d,))
        return n
    s = str(d)  # torch.float16 -> "torch.float16"
    if s in ("torch.float16", "torch.bfloat16"):
        return s.split(".", 1)[1]
    raise ValueError("sage2.warmup: dtypes has %r; sage2 computes float16 and bfloat16" % (d,))


def check_warmup_args(head_dims, dtypes, causal, seq_lens, return_lse, options):
    """The normalized combinations [(head_dim, dtype name, causal, seq_len, return_lse)] of a warmup
    call; raises TypeError / ValueError naming the argument. Needs neither torch nor a GPU."""
    hds = _as_tuple(head_dims, "head_dims")
    for d in hds:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError("sage2.warmup: head_dims must be ints, got %r" % (d,))
        if not 1 <= d <= 512:
            raise ValueError("sage2.warmup: head dim %d is outside 1..512" % d)
    dts = tuple(dict.fromkeys(_dtype_name(d) for d in _as_tuple(dtypes, "dtypes")))
    cs = _as_tuple(causal, "causal")
    for c in cs:
        if not isinstance(c, bool):
            raise TypeError("sage2.warmup: causal must hold bools, got %r" % (c,))
    ns = _as_tuple(seq_lens, "seq_lens")
    for n in ns:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError("sage2.warmup: seq_lens must be positive ints, got %r" % (n,))
    lses = _as_tuple(return_lse, "return_lse")
    for x in lses:
        if not isinstance(x, bool):
            raise TypeError("sage2.warmup: return_lse must hold bools, got %r" % (x,))
    if "attn_mask" in options or "kv_lens" in options:
        raise ValueError("sage2.warmup: attn_mask / kv_lens are not warm-up options (dense calls only)")
    return [(d, t, c, n, x) for d in hds for t in dts for c in cs for n in ns for x in lses]


def _library_warmup(dev, combos, opts):
    """sage2_warmup for the combinations' head dims, dtypes, causal modes and LSE settings with the
    call options `opts`; nothing with a library that predates it (the calls then compile)."""
    from . import _core, _lib
    L = _lib.lib()
    if not hasattr(L, "sage2_warmup") or not hasattr(L, "sage2_warmup_options_init"):
        return
    _, _, _, bits, pv, acc, smooth_q, smooth_k, smooth_v = _core._normalize_scalars(False, None, False, opts,
                                                                                    "sage2.warmup")
    align = _core._ALIGNMENTS[opts.get("causal_alignment", "top_left")]
    causal_codes = sorted({align if c else _lib.SAGE2_CAUSAL_NONE for (_, _, c, _, _) in combos})
    lses = {x for (_, _, _, _, x) in combos}
    dtypes = {t for (_, t, _, _, _) in combos}
    dims = sorted({d for (d, _, _, _, _) in combos})
    ctx = _lib.context(dev.index)
    for causal in causal_codes:  # one call per causal mode: the C options name one or none+top-left
        o = _lib.WarmupOptions()
        L.sage2_warmup_options_init(ctypes.byref(o))
        arr = (ctypes.c_int32 * len(dims))(*dims)
        o.head_dims = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32))
        o.n_head_dims = len(dims)
        o.dtype = -1 if len(dtypes) > 1 else (_lib.SAGE2_DTYPE_F16 if "float16" in dtypes else _lib.SAGE2_DTYPE_BF16)
        o.causal = causal
        o.qk_bits = bits
        o.pv_precision = pv
        o.pv_accum = acc
        o.return_lse = -1 if len(lses) > 1 else int(next(iter(lses)))
        o.smooth_q = smooth_q
        o.smooth_k = int(smooth_k)
        o.smooth_v = int(smooth_v)
        o.small_q_path = _core._small_q_code(opts, "sage2.warmup")
        summary = _lib.WarmupSummary()
        _lib.check(L.sage2_warmup(ctx, ctypes.byref(o), ctypes.byref(summary)), "sage2_warmup")


class _Progress:
    """A one-line progress bar on stderr (only when asked, or when stderr is a terminal)."""

    def __init__(self, total, enabled):
        self.total, self.enabled, self.t0 = total, enabled, time.monotonic()

    def show(self, done, what):
        if not self.enabled:
            return
        width = 24
        fill = int(width * done / max(self.total, 1))
        sys.stderr.write("\rsage2 warmup [%s%s] %d/%d %-40s %5.1fs" % ("#" * fill, "." * (width - fill), done,
                                                                       self.total, what[:40],
                                                                       time.monotonic() - self.t0))
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def warmup(head_dims=(64, 128), dtypes=("float16", "bfloat16"), causal=(False, True), seq_lens=(4096,),
           return_lse=(False,), device=None, heads=1, progress=None, **options):
    """Compiles the kernels that sage2.sageattn calls of these head dims × dtypes × causal modes ×
    sequence lengths × return_lse use on `device` (default: torch's current CUDA device), so the
    first real call does not wait for NVRTC. ``options`` are sageattn's (qk_bits, pv_precision,
    smooth_k, smooth_v, causal_alignment, small_q_path ...) and select the same kernels a call with
    them would. A progress bar goes to stderr when it is a terminal (progress=True forces it,
    False hides it).

    Which kernels a combination warms follows sageattn's rules: a call whose query rows per kv
    head (seq_len x heads here) are at most the direct small-Nq path's limit (512 on sm_90, 64
    elsewhere; small_q_path="auto") warms the direct path's decode kernels, a longer one the
    quantized path's (the default seq_lens=(4096,) does); pass small_q_path="quantized" or
    "direct" to choose.

    Returns one dict per combination: head_dim, dtype, causal, seq_len, return_lse and seconds (the
    wall time of that call: compile or disk-cache load plus the run). Raises TypeError/ValueError
    naming a bad argument before touching the GPU."""
    combos = check_warmup_args(head_dims, dtypes, causal, seq_lens, return_lse, options)
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ValueError("sage2.warmup: heads must be a positive int, got %r" % (heads,))
    try:
        import torch
    except ImportError as e:
        raise ImportError("sage2.warmup needs PyTorch (it runs one call of each combination): %s" % e) from e
    if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
        raise ImportError("sage2.warmup needs torch >= 2.4, got %s" % getattr(torch, "__version__", "?"))

    from . import _compat, _core
    from ._attention import sageattn

    # sageattn's own checks of the options, before any GPU work (names the bad one)
    opts = options
    if opts and not _core._OPTION_KEYS.issuperset(opts):
        _, _, opts = _compat.translate(False, None, opts, _core._OPTION_KEYS, where="sage2.warmup")
    _core._normalize_scalars(False, None, False, opts, "sage2.warmup")
    if not torch.cuda.is_available():
        raise RuntimeError("sage2.warmup: torch sees no CUDA device (torch %s, CUDA %s)" % (torch.__version__,
                                                                                              torch.version.cuda))
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if dev.type != "cuda":
        raise ValueError("sage2.warmup: device=%r is not a CUDA device" % (device,))
    bar = _Progress(len(combos), sys.stderr.isatty() if progress is None else bool(progress))
    out = []
    bar.show(0, "compiling for every size")
    # The library's warm-up first (sage2_warmup: every kernel these options need at any batch,
    # heads and sequence lengths, compiled in parallel); the calls below then load and check them.
    _library_warmup(dev, combos, opts)
    bar.show(0, "")
    with torch.no_grad(), torch.cuda.device(dev):
        for i, (d, dt, c, n, lse) in enumerate(combos):
            what = "hd %d %s %s N %d%s" % (d, dt, "causal" if c else "full", n, " lse" if lse else "")
            g = torch.Generator(device=dev).manual_seed(i)
            q, k, v = (torch.randn((1, heads, n, d), dtype=getattr(torch, dt), device=dev, generator=g)
                       for _ in range(3))
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            sageattn(q, k, v, "HND", c, None, lse, **options)
            torch.cuda.synchronize(dev)
            out.append({"head_dim": d, "dtype": dt, "causal": c, "seq_len": n, "return_lse": lse,
                        "seconds": time.perf_counter() - t0})
            bar.show(i + 1, what)
    return out
