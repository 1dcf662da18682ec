"""sage2.tune(): the C entry point sage2_tune (include/sage2/sage2.h) for Python.

Times the candidate tiles of the selected specialisations on one device and records the fastest
in the tuning database beside the kernel cache, which later processes' sageattn calls on that
device read (the sage2-autotune tool does the same from the command line). Every argument is checked here, in pure
Python, before the library is loaded or the GPU touched; torch is not needed (a torch dtype or
device is understood when given).
"""
import ctypes
import math
import numbers
import sys

from . import _lib

__all__ = ["tune"]

_WHERE = "sage2.tune"
_INT32_MAX = 2 ** 31 - 1
_INT64_MAX = 2 ** 63 - 1
_DTYPE_NAMES = {"float16": _lib.SAGE2_DTYPE_F16, "fp16": _lib.SAGE2_DTYPE_F16, "half": _lib.SAGE2_DTYPE_F16,
                "bfloat16": _lib.SAGE2_DTYPE_BF16, "bf16": _lib.SAGE2_DTYPE_BF16}
_CAUSAL_NAMES = {"none": _lib.SAGE2_CAUSAL_NONE, "top_left": _lib.SAGE2_CAUSAL_TOP_LEFT,
                 "bottom_right": _lib.SAGE2_CAUSAL_BOTTOM_RIGHT}
_PV_PRECISIONS = {None: _lib.SAGE2_PV_AUTO, "auto": _lib.SAGE2_PV_AUTO, "fp8": _lib.SAGE2_PV_FP8,
                  "fp16": _lib.SAGE2_PV_FP16}
_SUMMARY_FIELDS = tuple(name for name, _ in _lib.TuneSummary._fields_)


def _as_list(value, name):
    """A scalar as a one-element list, an iterable (not a str) as a list; never empty."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return [value]
    items = list(value)
    if not items:
        raise ValueError("%s: %s is empty; give at least one value or None (the defaults)" % (_WHERE, name))
    return items


def _int(value, name, lo, hi, where=_WHERE):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: %s must be an int, got %s" % (where, name, type(value).__name__))
    if not lo <= value <= hi:
        raise ValueError("%s: %s=%d outside %d..%d" % (where, name, value, lo, hi))
    return int(value)


def _float(value, name, positive):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: %s must be a float, got %s" % (_WHERE, name, type(value).__name__))
    v = float(value)
    if not math.isfinite(v) or (v <= 0.0 if positive else v < 0.0):
        raise ValueError("%s: %s=%r must be finite and %s" % (_WHERE, name, value, "> 0" if positive else ">= 0"))
    return v


def _dtype_code(d):
    if isinstance(d, str):
        code = _DTYPE_NAMES.get(d.lower())
        if code is not None:
            return code
    else:
        torch = sys.modules.get("torch")  # a torch dtype: compared, torch never imported here
        for name, code in (("float16", _lib.SAGE2_DTYPE_F16), ("bfloat16", _lib.SAGE2_DTYPE_BF16)):
            if torch is not None and getattr(torch, name, None) is d:
                return code
    raise ValueError("%s: dtypes: %r; expected torch.float16 / 'float16' or torch.bfloat16 / 'bfloat16'"
                     % (_WHERE, d))


def _dtype_field(dtypes):
    """sage2_tune_options.dtype: -1 (both) or one sage2_dtype."""
    if dtypes is None:
        return -1
    codes = {_dtype_code(d) for d in _as_list(dtypes, "dtypes")}
    return codes.pop() if len(codes) == 1 else -1


def _causal_field(causal):
    """sage2_tune_options.causal: -1 (none and top-left) or one sage2_causal."""
    if causal is None:
        return -1
    codes = set()
    for c in _as_list(causal, "causal"):
        if isinstance(c, bool):
            codes.add(_lib.SAGE2_CAUSAL_TOP_LEFT if c else _lib.SAGE2_CAUSAL_NONE)
        elif isinstance(c, str) and c in _CAUSAL_NAMES:
            codes.add(_CAUSAL_NAMES[c])
        else:
            raise ValueError("%s: causal: %r; expected False / 'none', True / 'top_left' or 'bottom_right'"
                             % (_WHERE, c))
    if len(codes) == 1:
        return codes.pop()
    if codes == {_lib.SAGE2_CAUSAL_NONE, _lib.SAGE2_CAUSAL_TOP_LEFT}:
        return -1
    raise ValueError("%s: causal=%r; one call tunes one causal mode, or none and top_left together "
                     "(the default); call tune once per other mode" % (_WHERE, causal))


def _device_spec(device, where=_WHERE):
    """The device argument checked: an ordinal, or None (to be resolved by _device_ordinal).
    `where` names the calling function in messages (sage2.stats uses it too)."""
    if device is None:
        return None
    if isinstance(device, bool):
        raise TypeError("%s: device must be None, an int, 'cuda[:N]' or a torch.device, got bool" % where)
    if isinstance(device, numbers.Integral):
        return _int(device, "device", 0, _INT32_MAX, where)
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        if kind == "cuda" and not index:
            return None
        if kind == "cuda" and index.isdigit():
            return int(index)
        raise ValueError("%s: device=%r; expected 'cuda' or 'cuda:N'" % (where, device))
    kind = getattr(device, "type", None)
    if isinstance(kind, str) and hasattr(device, "index"):  # a torch.device
        if kind != "cuda":
            raise ValueError("%s: device=%r is not a CUDA device" % (where, device))
        return None if device.index is None else _int(device.index, "device", 0, _INT32_MAX, where)
    raise TypeError("%s: device must be None, an int, 'cuda[:N]' or a torch.device, got %s"
                    % (where, type(device).__name__))


def _device_ordinal(spec):
    """None: torch's current device when torch is loaded and sees CUDA, else device 0."""
    if spec is not None:
        return spec
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_device())
    except (AttributeError, RuntimeError):
        pass
    return 0


def _options(head_dims, dtypes, causal, seq_lens, qk_bits, pv_precision, batch, heads, kv_heads, reps, warmup,
             budget_seconds, min_gain, write_db, jobs):
    """The checked arguments as {sage2_tune_options field: value} (None fields: the library's
    default) plus the two lists; raises TypeError/ValueError naming the first bad argument."""
    f = {}
    hds = None if head_dims is None else [_int(h, "head_dims", 1, 512) for h in _as_list(head_dims, "head_dims")]
    f["dtype"] = _dtype_field(dtypes)
    f["causal"] = _causal_field(causal)
    lens = None if seq_lens is None else [_int(n, "seq_lens", 1, _INT64_MAX) for n in _as_list(seq_lens, "seq_lens")]
    if qk_bits is None:
        f["qk_bits"] = 0
    elif not isinstance(qk_bits, bool) and isinstance(qk_bits, numbers.Integral) and qk_bits in (0, 4, 8):
        f["qk_bits"] = int(qk_bits)
    else:
        raise ValueError("%s: qk_bits=%r; expected None (auto), 4 or 8" % (_WHERE, qk_bits))
    if not isinstance(pv_precision, (str, type(None))) or pv_precision not in _PV_PRECISIONS:
        raise ValueError("%s: pv_precision=%r; expected None or 'auto', 'fp8' or 'fp16'" % (_WHERE, pv_precision))
    f["pv_precision"] = _PV_PRECISIONS[pv_precision]
    f["batch"] = 0 if batch is None else _int(batch, "batch", 0, _INT64_MAX)
    f["heads"] = None if heads is None else _int(heads, "heads", 1, _INT64_MAX)
    f["kv_heads"] = 0 if kv_heads is None else _int(kv_heads, "kv_heads", 0, _INT64_MAX)
    if f["kv_heads"]:
        h = f["heads"] if f["heads"] is not None else 32  # the library's default heads
        if h % f["kv_heads"]:
            raise ValueError("%s: heads=%d is not a multiple of kv_heads=%d" % (_WHERE, h, f["kv_heads"]))
    f["reps"] = None if reps is None else _int(reps, "reps", 1, _INT32_MAX)
    f["warmup"] = None if warmup is None else _int(warmup, "warmup", 0, _INT32_MAX)
    f["budget_seconds"] = None if budget_seconds is None else _float(budget_seconds, "budget_seconds", True)
    f["min_gain"] = None if min_gain is None else _float(min_gain, "min_gain", False)
    if not isinstance(write_db, bool):
        raise TypeError("%s: write_db must be True or False, got %r" % (_WHERE, write_db))
    f["write_db"] = int(write_db)
    f["jobs"] = _int(jobs, "jobs", 0, _INT32_MAX)
    return f, hds, lens


def tune(head_dims=None, dtypes=None, causal=None, seq_lens=None, qk_bits=None, pv_precision=None, batch=None,
         heads=None, kv_heads=None, reps=None, warmup=None, budget_seconds=None, min_gain=None, write_db=True,
         jobs=0, device=None):
    """Tunes sage2's tile choice on a device (sage2_tune): for every selected specialisation (head
    dim x dtype x causal mode, with qk_bits and pv_precision) and sequence length, times the
    candidate tiles and records the fastest in the tuning database beside the device context's
    kernel cache ($SAGE2_CACHE_DIR, else $XDG_CACHE_HOME/sage2 or ~/.cache/sage2, as read when the
    process first used that device), where sageattn calls of later processes find it (a context
    reads the database once, when it first plans a call). Blocks until done: minutes for the
    defaults.

    head_dims: an int or ints in 1..512 (None: 64, 96, 128). dtypes: torch.float16 / "float16",
    torch.bfloat16 / "bfloat16", or both (None: both). causal: False / "none", True / "top_left",
    "bottom_right", or [False, True] (None: none and top-left). seq_lens: an int or ints >= 1
    (None: 1024, 4096, 16384). qk_bits: None (auto: 8), 4 or 8. pv_precision: None / "auto",
    "fp8" or "fp16". batch: sequences per timed call (None or 0: 16K tokens, 1 to 4). heads: query
    heads (None: 32); kv_heads: None or 0 (= heads), else a divisor of heads. reps: timed calls per
    candidate at most (None: 20); warmup: untimed calls first (None: 2); budget_seconds: measured
    time per candidate at most (None: 1.0); min_gain: how much faster (0.02 = 2 %) a candidate must
    be to replace the heuristic tile (None: 0.02). write_db: False measures without writing. jobs:
    parallel kernel compiles (0: the CPU count, at most 16). device: None (torch's current device
    when torch is loaded and sees CUDA, else 0), an ordinal, "cuda:N" or a torch.device.

    Returns a dict: problems (specialisation, sequence length pairs measured), written (database
    entries written), failures (problems without a result, failed database writes), improved
    (problems where a candidate beat the heuristic tile), best_gain (the largest such gain, 0.1 =
    10 % more TOPS), kernels_compiled, kernels_from_cache, compile_errors, and database (the
    database file, "" when nothing was written).

    Bad arguments raise TypeError/ValueError naming the argument before the library is loaded or
    the GPU touched; a libsage2 without sage2_tune raises sage2.UnsupportedError; the library's
    errors raise sage2.Sage2Error subclasses (e.g. a GPU failure while timing)."""
    fields, hds, lens = _options(head_dims, dtypes, causal, seq_lens, qk_bits, pv_precision, batch, heads, kv_heads,
                                 reps, warmup, budget_seconds, min_gain, write_db, jobs)
    spec = _device_spec(device)
    L = _lib.require_tune()
    opts = _lib.TuneOptions()
    L.sage2_tune_options_init(ctypes.byref(opts))
    for name, value in fields.items():
        if value is not None:
            setattr(opts, name, value)
    hd_arr = (ctypes.c_int32 * len(hds))(*hds) if hds else None  # kept alive through the call
    len_arr = (ctypes.c_int64 * len(lens))(*lens) if lens else None
    if hd_arr is not None:
        opts.head_dims = ctypes.cast(hd_arr, ctypes.POINTER(ctypes.c_int32))
        opts.n_head_dims = len(hds)
    if len_arr is not None:
        opts.seq_lens = ctypes.cast(len_arr, ctypes.POINTER(ctypes.c_int64))
        opts.n_seq_lens = len(lens)
    ctx = _lib.context(_device_ordinal(spec))
    summary = _lib.TuneSummary()
    db = ctypes.create_string_buffer(4096)
    _lib.check(L.sage2_tune(ctx, ctypes.byref(opts), ctypes.byref(summary), db, 4096), "sage2_tune")
    out = {name: getattr(summary, name) for name in _SUMMARY_FIELDS}
    out["database"] = db.value.decode("utf-8", "replace")
    return out
