"""ctypes layer over the sage2 C ABI (include/sage2/sage2.h).

Nothing here needs torch. The shared library is found and loaded on first use (never at import),
so ``import sage2`` works on a machine without it; a call then raises :class:`LibraryNotFoundError`
that lists every place that was searched.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import logging
import os
import re
import sys
import threading
from typing import List, Optional, Tuple

from . import _logging

__all__ = [
    "Sage2Error",
    "InvalidArgumentError",
    "UnsupportedError",
    "Sage2OutOfMemoryError",
    "LibraryNotFoundError",
    "Tensor",
    "AttentionParams",
    "SeqLens",
    "Mask",
    "TuneOptions",
    "TuneSummary",
    "KernelStats",
    "lib",
    "has_varlen",
    "require_varlen",
    "require_masked",
    "require_tune",
    "require_kernel_stats",
    "kernel_stats",
    "library_path",
    "search_locations",
    "nvrtc_wheel_candidates",
    "nvrtc_library",
    "package_version",
    "build_commit",
    "check",
    "set_log_level",
    "STATUS_NAMES",
]

# ---- errors -------------------------------------------------------------------------------
# Status values equal sage2_status in sage2.h and never change.
SAGE2_OK = 0
SAGE2_ERROR_INVALID_ARGUMENT = 1
SAGE2_ERROR_UNSUPPORTED = 2
SAGE2_ERROR_NO_DRIVER = 3
SAGE2_ERROR_DRIVER = 4
SAGE2_ERROR_COMPILE = 5
SAGE2_ERROR_NVRTC_MISSING = 6
SAGE2_ERROR_CACHE = 7
SAGE2_ERROR_OUT_OF_MEMORY = 8
SAGE2_ERROR_INTERNAL = 9

STATUS_NAMES = {
    0: "ok",
    1: "invalid_argument",
    2: "unsupported",
    3: "no_driver",
    4: "driver_error",
    5: "compile_error",
    6: "nvrtc_missing",
    7: "cache_error",
    8: "out_of_memory",
    9: "internal",
}


class Sage2Error(RuntimeError):
    """A failed sage2 C call. ``status`` is the sage2_status value, ``status_name`` its name and
    the message is sage2_last_error() (it names the argument, the kernel key, the NVRTC log)."""

    def __init__(self, message: str, status: int = SAGE2_ERROR_INTERNAL, function: str = ""):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS_NAMES.get(status, "status %d" % status)
        self.function = function
        self.reason = message  # the cause alone (error_for_status: without the function and status)


class InvalidArgumentError(Sage2Error, ValueError):
    """SAGE2_ERROR_INVALID_ARGUMENT: also a ValueError."""


class UnsupportedError(Sage2Error, NotImplementedError):
    """SAGE2_ERROR_UNSUPPORTED: a valid request this build or device cannot serve."""


class Sage2OutOfMemoryError(Sage2Error, MemoryError):
    """SAGE2_ERROR_OUT_OF_MEMORY."""


class LibraryNotFoundError(Sage2Error):
    """libsage2.so could not be found or loaded; the message lists where sage2 looked."""

    def __init__(self, message: str):
        super().__init__(message, SAGE2_ERROR_INTERNAL, "load")


_STATUS_CLASSES = {
    SAGE2_ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    SAGE2_ERROR_UNSUPPORTED: UnsupportedError,
    SAGE2_ERROR_OUT_OF_MEMORY: Sage2OutOfMemoryError,
}


def library_text(message: str) -> str:
    """sage2_last_error() without the library's own "sage2 <status>: " prefix (C++ sage2::Error's
    what()): the Python message names the status once, at its end."""
    for name in STATUS_NAMES.values():
        prefix = "sage2 %s: " % name
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def error_for_status(status: int, message: str, function: str = "") -> Sage2Error:
    cls = _STATUS_CLASSES.get(status, Sage2Error)
    name = STATUS_NAMES.get(status, "status %d" % status)
    text = library_text(message or "") or "(no message)"
    where = "%s: " % function if function else ""
    err = cls("%s%s [%s]" % (where, text, name), status, function)
    err.reason = text
    return err


# ---- structs (must match sage2.h; python/tests/test_library.py checks offsets with a C compiler)
SAGE2_DTYPE_F16 = 0
SAGE2_DTYPE_BF16 = 1
SAGE2_CAUSAL_NONE = 0
SAGE2_CAUSAL_TOP_LEFT = 1
SAGE2_CAUSAL_BOTTOM_RIGHT = 2
SAGE2_PV_AUTO = 0
SAGE2_PV_FP8 = 1
SAGE2_PV_FP16 = 2


class Tensor(ctypes.Structure):
    """sage2_tensor: a [batch, heads, seq, dim] view with element strides."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("batch", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("seq", ctypes.c_int64),
        ("dim", ctypes.c_int64),
        ("stride_batch", ctypes.c_int64),
        ("stride_head", ctypes.c_int64),
        ("stride_seq", ctypes.c_int64),
        ("stride_dim", ctypes.c_int64),
    ]


class AttentionParams(ctypes.Structure):
    """sage2_attention_params."""

    _fields_ = [
        ("causal", ctypes.c_int32),
        ("sm_scale", ctypes.c_float),
        ("qk_bits", ctypes.c_int32),
        ("smooth_q", ctypes.c_int32),
        ("smooth_k", ctypes.c_int32),
        ("smooth_v", ctypes.c_int32),
        ("lse", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("pv_precision", ctypes.c_int32),
        ("small_q_path", ctypes.c_int32),  # 0 auto, 1 quantized, 2 direct (appended in 0.1)
        ("pv_accum", ctypes.c_int32),      # sage2_pv_accum: 0 auto, 1 fp32, 2 fp16, 3 prefer fp16 (appended)
    ]


def attention_params(causal, sm_scale, qk_bits, pv_precision, pv_accum, smooth_q, smooth_k, smooth_v, lse=None,
                     workspace=None, workspace_bytes=0, small_q=0):
    """sage2_attention_params from the bindings' normalized scalars, each its own field: qk_bits (0,
    4, 8), pv_precision (SAGE2_PV_*), pv_accum (sage2_pv_accum), small_q (sage2_small_q_path)."""
    return AttentionParams(causal=causal, sm_scale=sm_scale, qk_bits=qk_bits, smooth_q=smooth_q, smooth_k=smooth_k,
                           smooth_v=smooth_v, lse=lse, workspace=workspace, workspace_bytes=workspace_bytes,
                           pv_precision=pv_precision, small_q_path=small_q, pv_accum=pv_accum)


class Mask(ctypes.Structure):
    """sage2_mask: an attention mask view, element (b, h, i, j) at data + b·stride_batch + h·stride_head
    + i·stride_q + j·stride_k elements (0 broadcasts); type 1 bool, 2 f16, 3 bf16, 4 f32 (additive)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("type", ctypes.c_int32),
        ("stride_batch", ctypes.c_int64),
        ("stride_head", ctypes.c_int64),
        ("stride_q", ctypes.c_int64),
        ("stride_k", ctypes.c_int64),
    ]


class SeqLens(ctypes.Structure):
    """sage2_seqlens: the lengths of a variable-length batch. Pointers are int32 device
    arrays; the unused ones NULL. Packed form: cu_seqlens_q and cu_seqlens_k ([batch + 1] each);
    key padding: kv_lens ([batch]). max_seqlen_q/k: upper bounds of the lengths, 0 unknown."""

    _fields_ = [
        ("batch", ctypes.c_int64),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_k", ctypes.c_void_p),
        ("kv_lens", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
    ]


# The leading fields sage2_tune_options and sage2_warmup_options share (the selection).
_SELECTION_FIELDS = [
    ("head_dims", ctypes.POINTER(ctypes.c_int32)),
    ("n_head_dims", ctypes.c_int32),
    ("dtype", ctypes.c_int32),          # -1: f16 and bf16; else a sage2_dtype
    ("causal", ctypes.c_int32),         # -1: none and top-left; else a sage2_causal
    ("qk_bits", ctypes.c_int32),        # 0 auto (8), 4 or 8
    ("pv_precision", ctypes.c_int32),   # sage2_pv_precision
]


class TuneOptions(ctypes.Structure):
    """sage2_tune_options (added in 0.1): what sage2_tune times. sage2_tune_options_init writes the
    defaults (NULL lists: head dims 64, 96, 128 and sequence lengths 1024, 4096, 16384; dtype and
    causal -1: both f16 and bf16, none and top-left; heads 32; reps 20, warmup 2, budget 1 s, min
    gain 0.02, write_db 1, jobs 0). sage2.tune (_tune.py) fills it."""

    _fields_ = _SELECTION_FIELDS + [
        ("seq_lens", ctypes.POINTER(ctypes.c_int64)),
        ("n_seq_lens", ctypes.c_int32),
        ("batch", ctypes.c_int64),          # 0: 16K tokens, 1 to 4 sequences
        ("heads", ctypes.c_int64),
        ("kv_heads", ctypes.c_int64),       # 0: heads
        ("reps", ctypes.c_int32),
        ("warmup", ctypes.c_int32),
        ("budget_seconds", ctypes.c_double),
        ("min_gain", ctypes.c_double),
        ("write_db", ctypes.c_int32),
        ("jobs", ctypes.c_int32),           # 0: CPU count, at most 16
    ]


class TuneSummary(ctypes.Structure):
    """sage2_tune_summary: what a sage2_tune call measured and wrote."""

    _fields_ = [
        ("problems", ctypes.c_int32),
        ("written", ctypes.c_int32),
        ("failures", ctypes.c_int32),
        ("improved", ctypes.c_int32),
        ("best_gain", ctypes.c_double),
        ("kernels_compiled", ctypes.c_int64),
        ("kernels_from_cache", ctypes.c_int64),
        ("compile_errors", ctypes.c_int64),
    ]


class WarmupOptions(ctypes.Structure):
    """sage2_warmup_options: the calls sage2_warmup covers. sage2_warmup_options_init writes the
    defaults (head dims 64, 96, 128; dtype and causal -1: both; masks 1: unmasked; smooth_k 1)."""

    _fields_ = _SELECTION_FIELDS + [
        ("return_lse", ctypes.c_int32),     # -1 both, 0 without, 1 with
        ("masks", ctypes.c_uint32),         # bit t: calls with sage2_mask_type t
        ("varlen", ctypes.c_int32),
        ("pv_accum", ctypes.c_int32),
        ("smooth_q", ctypes.c_int32),       # 0 auto, 1 on, 2 off
        ("smooth_k", ctypes.c_int32),
        ("smooth_v", ctypes.c_int32),
        ("small_q_path", ctypes.c_int32),
        ("jobs", ctypes.c_int32),
    ]


class WarmupSummary(ctypes.Structure):
    """sage2_warmup_summary: the kernels the selection needs and how they were found."""

    _fields_ = [
        ("kernels", ctypes.c_int64),
        ("compiled", ctypes.c_int64),
        ("from_cache", ctypes.c_int64),
        ("seconds", ctypes.c_double),
    ]


class KernelStats(ctypes.Structure):
    """sage2_kernel_stats (added in 0.1): where kernels came from, per context or per process."""

    _fields_ = [
        ("compiled", ctypes.c_int64),         # compiled by NVRTC
        ("disk_loads", ctypes.c_int64),       # loaded from the disk cache
        ("memory_hits", ctypes.c_int64),      # requests served by a kernel already held
        ("loaded", ctypes.c_int64),           # held now (process: by the live contexts)
        ("compile_seconds", ctypes.c_double),
    ]


# ---- discovery ----------------------------------------------------------------------------
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_LIB_NAMES = ("libsage2.so", "libsage2.so.0")


def search_locations() -> List[Tuple[str, str]]:
    """The places sage2 looks for the library, in order, as (description, path-or-name)."""
    locs: List[Tuple[str, str]] = []
    env = os.environ.get("SAGE2_LIBRARY", "")
    if env:
        locs.append(("$SAGE2_LIBRARY", env))
    for d, what in ((_PKG_DIR, "next to the package"), (os.path.dirname(_PKG_DIR), "beside the package dir")):
        for n in _LIB_NAMES:
            locs.append((what, os.path.join(d, n)))
    repo = os.path.dirname(os.path.dirname(_PKG_DIR))  # <repo>/python/sage2 -> <repo>
    locs.append(("repository build", os.path.join(repo, "build", "libsage2.so")))
    locs.append(("ctypes.util.find_library('sage2')", "sage2"))
    return locs


def package_version() -> Optional[str]:
    """The version this Python package belongs to: the generated _version.py in a wheel, else the
    project VERSION of the source checkout's CMakeLists.txt (the single source of both)."""
    try:
        from ._version import __version__ as v  # written by CMake into the wheel

        return v
    except ImportError:
        pass
    cmake = os.path.join(os.path.dirname(os.path.dirname(_PKG_DIR)), "CMakeLists.txt")
    try:
        with open(cmake, "r", encoding="utf-8") as f:
            m = re.search(r"project\(\s*sage2\s+VERSION\s+([0-9][0-9.]*)", f.read())
    except OSError:
        return None
    return m.group(1) if m else None


# The NVIDIA wheels that carry libnvrtc, as (CUDA major, path below site-packages). A pip-installed
# torch depends on one of them, so a torch environment has NVRTC without any toolkit.
_NVRTC_WHEEL_LAYOUTS = (
    (13, os.path.join("nvidia", "cu13", "lib", "libnvrtc.so.13")),
    (12, os.path.join("nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12")),
)


def _torch_location() -> Tuple[Optional[str], Optional[int]]:
    """(torch's package directory, its CUDA major) for the torch this process runs, or would
    import; never imports torch (find_spec only locates it)."""
    t = sys.modules.get("torch")
    d = None
    if t is not None and getattr(t, "__file__", None):
        d = os.path.dirname(os.path.abspath(t.__file__))
    else:
        try:
            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            d = os.path.dirname(os.path.abspath(spec.origin))
    if d is None:
        return None, None
    cuda = getattr(getattr(t, "version", None), "cuda", None) if t is not None else None
    if cuda is None:
        # torch/version.py holds `cuda = '13.0'` (None for a CPU build); read, not imported
        try:
            with open(os.path.join(d, "version.py"), "r", encoding="utf-8") as f:
                m = re.search(r"^cuda\b[^=]*=\s*['\"]([0-9]+)", f.read(), re.M)
            cuda = m.group(1) if m else None
        except OSError:
            cuda = None
    try:
        major = int(str(cuda).split(".")[0]) if cuda else None
    except ValueError:
        major = None
    return d, major


def nvrtc_wheel_candidates() -> List[Tuple[str, str]]:
    """The libnvrtc files of NVIDIA wheels that the library tries after $SAGE2_LIBNVRTC and before
    the system's names, in order, as (path, rule): both layouts next to the running torch (its own
    CUDA major first), then those of other `nvidia` package directories on sys.path that exist."""
    out: List[Tuple[str, str]] = []
    torch_dir, major = _torch_location()
    layouts = sorted(_NVRTC_WHEEL_LAYOUTS, key=lambda lay: lay[0] != major)  # stable: 13 before 12
    torch_site = None
    if torch_dir:
        torch_site = os.path.dirname(torch_dir)
        for m, rel in layouts:
            out.append((os.path.join(torch_site, rel),
                        "torch's NVIDIA wheel, CUDA %d layout, next to %s" % (m, torch_dir)))
    try:
        spec = importlib.util.find_spec("nvidia")
        dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    except (ImportError, ValueError):
        dirs = []
    for nv in dirs:
        site = os.path.dirname(os.path.abspath(nv))
        if torch_site and os.path.realpath(site) == os.path.realpath(torch_site):
            continue
        for m, rel in layouts:
            p = os.path.join(site, rel)
            if os.path.isfile(p):
                out.append((p, "NVIDIA wheel on sys.path, CUDA %d layout" % m))
    seen = set()
    return [c for c in out if not (c[0] in seen or seen.add(c[0]))]


def _add_nvrtc_candidates(L: ctypes.CDLL) -> None:
    """Tells the library where torch's NVRTC is, before anything loads NVRTC."""
    if not hasattr(L, "sage2_nvrtc_add_candidate"):
        return
    for path, rule in nvrtc_wheel_candidates():
        # refused only when this process already loaded NVRTC (e.g. a second copy of the
        # package, or C++ code in the process used sage2 first): the loaded one stays
        L.sage2_nvrtc_add_candidate(os.fsencode(path), rule.encode("utf-8", "replace"))


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def _declare(L: ctypes.CDLL) -> None:
    c_int, c_char_p, c_size_t, c_void_p = ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p
    P = ctypes.POINTER
    L.sage2_last_error.restype = c_char_p
    L.sage2_last_error.argtypes = []
    L.sage2_status_name.restype = c_char_p
    L.sage2_status_name.argtypes = [c_int]
    L.sage2_version.restype = c_char_p
    L.sage2_version.argtypes = []
    L.sage2_device_count.restype = c_int
    L.sage2_device_count.argtypes = []
    L.sage2_context_create.restype = c_int
    L.sage2_context_create.argtypes = [c_int, c_char_p, c_int, P(c_void_p)]
    L.sage2_context_destroy.restype = c_int
    L.sage2_context_destroy.argtypes = [c_void_p]
    L.sage2_context_device.restype = c_int
    L.sage2_context_device.argtypes = [c_void_p, ctypes.c_char_p, c_size_t, ctypes.c_char_p, c_size_t]
    L.sage2_attention_params_init.restype = None
    L.sage2_attention_params_init.argtypes = [P(AttentionParams)]
    L.sage2_attention.restype = c_int
    L.sage2_attention.argtypes = [c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(AttentionParams), c_void_p]
    L.sage2_workspace_size.restype = c_int
    L.sage2_workspace_size.argtypes = [c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(AttentionParams),
                                       P(c_size_t)]
    for fn in (L.sage2_tensor_hnd, L.sage2_tensor_nhd):
        fn.restype = Tensor
        fn.argtypes = [c_void_p, c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    if hasattr(L, "sage2_set_log_level"):
        L.sage2_set_log_level.restype = c_int
        L.sage2_set_log_level.argtypes = [c_int]
    # Added with the Python binding; an older library lacks them (info() then says so).
    if hasattr(L, "sage2_build_commit"):
        L.sage2_build_commit.restype = c_char_p
        L.sage2_build_commit.argtypes = []
    if hasattr(L, "sage2_version_info"):
        L.sage2_version_info.restype = c_int
        L.sage2_version_info.argtypes = [P(c_int), P(c_int), P(c_int)]
    if hasattr(L, "sage2_context_cache_dir"):
        L.sage2_context_cache_dir.restype = c_int
        L.sage2_context_cache_dir.argtypes = [c_void_p, ctypes.c_char_p, c_size_t]
    if hasattr(L, "sage2_default_cache_dir"):
        L.sage2_default_cache_dir.restype = c_int
        L.sage2_default_cache_dir.argtypes = [ctypes.c_char_p, c_size_t]
    if hasattr(L, "sage2_nvrtc_add_candidate"):
        L.sage2_nvrtc_add_candidate.restype = c_int
        L.sage2_nvrtc_add_candidate.argtypes = [c_char_p, c_char_p]
    if hasattr(L, "sage2_nvrtc_library"):
        L.sage2_nvrtc_library.restype = c_int
        L.sage2_nvrtc_library.argtypes = [c_char_p, c_size_t, c_char_p, c_size_t, c_char_p, c_size_t]
    if hasattr(L, "sage2_context_target"):
        L.sage2_context_target.restype = c_int
        L.sage2_context_target.argtypes = [c_void_p, P(c_int), ctypes.c_char_p, c_size_t, ctypes.c_char_p, c_size_t]
    if hasattr(L, "sage2_context_device_props"):
        L.sage2_context_device_props.restype = c_int
        L.sage2_context_device_props.argtypes = [c_void_p, P(c_int), P(c_int), P(ctypes.c_uint64)]
    # Variable-length batches (issue 17); a library built before them lacks both (has_varlen()).
    if hasattr(L, "sage2_attention_varlen"):
        L.sage2_attention_varlen.restype = c_int
        L.sage2_attention_varlen.argtypes = [c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(SeqLens),
                                             P(AttentionParams), c_void_p]
    if hasattr(L, "sage2_workspace_size_varlen"):
        L.sage2_workspace_size_varlen.restype = c_int
        L.sage2_workspace_size_varlen.argtypes = [c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(SeqLens),
                                                  P(AttentionParams), P(c_size_t)]
    # Attention masks (issue 17); a library built before them lacks both (require_masked()).
    if hasattr(L, "sage2_attention_masked"):
        L.sage2_attention_masked.restype = c_int
        L.sage2_attention_masked.argtypes = [c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(Mask),
                                             P(AttentionParams), c_void_p]
    if hasattr(L, "sage2_workspace_size_masked"):
        L.sage2_workspace_size_masked.restype = c_int
        L.sage2_workspace_size_masked.argtypes = [c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(Mask),
                                                  P(AttentionParams), P(c_size_t)]
    # Tuning (issue 26); a library built before it lacks both (require_tune()).
    if hasattr(L, "sage2_tune_options_init"):
        L.sage2_tune_options_init.restype = None
        L.sage2_tune_options_init.argtypes = [P(TuneOptions)]
    if hasattr(L, "sage2_tune"):
        L.sage2_tune.restype = c_int
        L.sage2_tune.argtypes = [c_void_p, P(TuneOptions), P(TuneSummary), ctypes.c_char_p, c_size_t]
    # Warm-ups covering every size (issue 43); sage2.warmup runs its calls without them.
    if hasattr(L, "sage2_warmup_options_init"):
        L.sage2_warmup_options_init.restype = None
        L.sage2_warmup_options_init.argtypes = [P(WarmupOptions)]
    if hasattr(L, "sage2_warmup"):
        L.sage2_warmup.restype = c_int
        L.sage2_warmup.argtypes = [c_void_p, P(WarmupOptions), P(WarmupSummary)]
    # Kernel counts (issue 43); a library built before them lacks both (require_kernel_stats()).
    if hasattr(L, "sage2_process_kernel_stats"):
        L.sage2_process_kernel_stats.restype = c_int
        L.sage2_process_kernel_stats.argtypes = [P(KernelStats)]
    if hasattr(L, "sage2_context_kernel_stats"):
        L.sage2_context_kernel_stats.restype = c_int
        L.sage2_context_kernel_stats.argtypes = [c_void_p, P(KernelStats)]


def _load() -> ctypes.CDLL:
    tried: List[str] = []
    for what, path in search_locations():
        if what.startswith("ctypes.util"):
            found = ctypes.util.find_library(path)
            if not found:
                tried.append("  %s: not found" % what)
                continue
            path = found
        elif not os.path.exists(path):
            tried.append("  %s: %s (no such file)" % (what, path))
            if what == "$SAGE2_LIBRARY":
                break  # an explicit setting that is wrong is reported, not silently skipped
            continue
        try:
            L = ctypes.CDLL(path)
            L.sage2_attention  # noqa: B018 - the symbol must be there
        except (OSError, AttributeError) as e:
            tried.append("  %s: %s (cannot load: %s)" % (what, path, e))
            if what == "$SAGE2_LIBRARY":
                break
            continue
        _declare(L)
        _add_nvrtc_candidates(L)
        _logging.install(L)  # notices to the "sage2" logger (an older library keeps stderr)
        global _lib_path
        _lib_path = os.path.abspath(path) if os.path.sep in path else path
        return L
    raise LibraryNotFoundError(
        "sage2: could not load the native library libsage2.so. Looked in order:\n"
        + "\n".join(tried)
        + "\nBuild it (cmake -S . -B build && cmake --build build --target sage2) and set "
        "SAGE2_LIBRARY=/path/to/libsage2.so, or put libsage2.so next to the sage2 package."
    )


def lib() -> ctypes.CDLL:
    """The loaded library (loaded once, thread-safe). Raises LibraryNotFoundError."""
    global _lib
    L = _lib
    if L is not None:
        return L
    with _lock:
        if _lib is None:
            _lib = _load()
        return _lib


def library_path() -> Optional[str]:
    """Path of the loaded library, or None when it is not loaded (or cannot be)."""
    try:
        lib()
    except LibraryNotFoundError:
        return None
    return _lib_path


def last_error() -> str:
    s = lib().sage2_last_error()
    return s.decode("utf-8", "replace") if s else ""


def check(status: int, function: str) -> None:
    """Raise the Python exception for a failed C call (reads sage2_last_error on this thread)."""
    if status != SAGE2_OK:
        raise error_for_status(status, last_error(), function)


def _reset_for_tests() -> None:
    """Forget the loaded library (tests of discovery only)."""
    global _lib, _lib_path
    with _lock:
        _lib = None
        _lib_path = None


# ---- contexts: one per device, created lazily, cached, thread-safe ---------------------------
_ctx_lock = threading.Lock()
_contexts: dict = {}


def context(device: int) -> ctypes.c_void_p:
    """The sage2_context* of a CUDA device ordinal (created on first use, kept for the process).

    If the calling thread has a current CUDA context on that device (PyTorch's primary context),
    sage2 uses it; otherwise it retains the device's primary context, which is the same one."""
    c = _contexts.get(device)
    if c is not None:
        return c
    L = lib()
    with _ctx_lock:
        c = _contexts.get(device)
        if c is None:
            out = ctypes.c_void_p()
            check(L.sage2_context_create(int(device), None, 1, ctypes.byref(out)), "sage2_context_create")
            c = out
            _contexts[device] = c
        return c


_VARLEN_SYMBOLS = ("sage2_attention_varlen", "sage2_workspace_size_varlen")


def has_varlen() -> bool:
    """Whether the loaded library has the variable-length entry points (loads it; raises
    LibraryNotFoundError)."""
    L = lib()
    return all(hasattr(L, n) for n in _VARLEN_SYMBOLS)


def require_varlen():
    """The loaded library, which must have sage2_attention_varlen and sage2_workspace_size_varlen;
    an older one raises UnsupportedError (a NotImplementedError) saying so."""
    L = lib()
    missing = [n for n in _VARLEN_SYMBOLS if not hasattr(L, n)]
    if missing:
        raise UnsupportedError(
            "this libsage2 (%s) predates variable-length batches: it lacks %s. Use a libsage2 built from a "
            "source with sage2_attention_varlen (the sage2 wheel carries a matching one)" % (_lib_path or "unknown path", ", ".join(missing)),
            SAGE2_ERROR_UNSUPPORTED, "sage2_attention_varlen")
    return L


_MASK_SYMBOLS = ("sage2_attention_masked", "sage2_workspace_size_masked")


def require_masked():
    """The loaded library, which must have sage2_attention_masked and sage2_workspace_size_masked;
    an older one raises UnsupportedError saying so."""
    L = lib()
    missing = [n for n in _MASK_SYMBOLS if not hasattr(L, n)]
    if missing:
        raise UnsupportedError(
            "this libsage2 (%s) predates attention masks: it lacks %s. Use a libsage2 built from a source with "
            "sage2_attention_masked (the sage2 wheel carries a matching one)" % (_lib_path or "unknown path", ", ".join(missing)),
            SAGE2_ERROR_UNSUPPORTED, "sage2_attention_masked")
    return L


_TUNE_SYMBOLS = ("sage2_tune_options_init", "sage2_tune")


def require_tune():
    """The loaded library, which must have sage2_tune_options_init and sage2_tune; an older one
    raises UnsupportedError saying so."""
    L = lib()
    missing = [n for n in _TUNE_SYMBOLS if not hasattr(L, n)]
    if missing:
        raise UnsupportedError(
            "this libsage2 (%s) predates tuning from the API: it lacks %s. Use a libsage2 built from a source with "
            "sage2_tune (the sage2 wheel carries a matching one), or the sage2-autotune tool" % (_lib_path or "unknown path", ", ".join(missing)),
            SAGE2_ERROR_UNSUPPORTED, "sage2_tune")
    return L


_STATS_SYMBOLS = ("sage2_process_kernel_stats", "sage2_context_kernel_stats")


def require_kernel_stats():
    """The loaded library, which must have sage2_process_kernel_stats and sage2_context_kernel_stats;
    an older one raises UnsupportedError saying so."""
    L = lib()
    missing = [n for n in _STATS_SYMBOLS if not hasattr(L, n)]
    if missing:
        raise UnsupportedError(
            "this libsage2 (%s) predates kernel counts: it lacks %s. Use a libsage2 built from a source with "
            "sage2_process_kernel_stats (the sage2 wheel carries a matching one)" % (_lib_path or "unknown path", ", ".join(missing)),
            SAGE2_ERROR_UNSUPPORTED, "sage2_process_kernel_stats")
    return L


def kernel_stats(ctx=None) -> dict:
    """sage2_kernel_stats as a dict: of the context `ctx` (a sage2_context*), or of the process when
    None. Raises UnsupportedError on a library without them."""
    L = require_kernel_stats()
    out = KernelStats()
    if ctx is None:
        check(L.sage2_process_kernel_stats(ctypes.byref(out)), "sage2_process_kernel_stats")
    else:
        check(L.sage2_context_kernel_stats(ctx, ctypes.byref(out)), "sage2_context_kernel_stats")
    return {name: getattr(out, name) for name, _ in KernelStats._fields_}


def existing_context(device: int):
    """The sage2_context* of a device ordinal if this process has created one, else None (never
    creates one: asking for counts must not load anything)."""
    return _contexts.get(device)


def _string_out(fn, *args, size: int = 4096) -> str:
    buf = ctypes.create_string_buffer(size)
    check(fn(*args, buf, size), fn.__name__)
    return buf.value.decode("utf-8", "replace")


def version() -> str:
    return lib().sage2_version().decode()


def build_commit() -> Optional[str]:
    """The source commit the loaded libsage2 was built from: 40 hex digits, optionally followed by
    "-dirty", or "unknown" (built outside a git checkout); None when that library predates
    sage2_build_commit(). Loads the library (raises LibraryNotFoundError without one)."""
    L = lib()
    if not hasattr(L, "sage2_build_commit"):
        return None
    v = L.sage2_build_commit()
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else None


def device_count() -> int:
    return int(lib().sage2_device_count())


def version_info() -> Tuple[int, int, int]:
    """(nvrtc_major, nvrtc_minor, driver_version); raises Sage2Error on an old library."""
    L = lib()
    if not hasattr(L, "sage2_version_info"):
        raise Sage2Error("this libsage2 predates sage2_version_info()", SAGE2_ERROR_UNSUPPORTED, "sage2_version_info")
    a, b, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    check(L.sage2_version_info(ctypes.byref(a), ctypes.byref(b), ctypes.byref(c)), "sage2_version_info")
    return a.value, b.value, c.value


def nvrtc_library() -> Tuple[str, str, str]:
    """(file, rule, passed_over) of the NVRTC the library loaded: the file, the search rule that
    chose it and the earlier candidates that failed ("" if none). Loads NVRTC; raises Sage2Error
    (status nvrtc_missing, the message listing every candidate tried) when none can be loaded."""
    L = lib()
    if not hasattr(L, "sage2_nvrtc_library"):
        raise Sage2Error("this libsage2 predates sage2_nvrtc_library()", SAGE2_ERROR_UNSUPPORTED, "sage2_nvrtc_library")
    path = ctypes.create_string_buffer(4096)
    rule = ctypes.create_string_buffer(1024)
    passed = ctypes.create_string_buffer(16384)
    check(L.sage2_nvrtc_library(path, 4096, rule, 1024, passed, 16384), "sage2_nvrtc_library")
    dec = lambda b: b.value.decode("utf-8", "replace")  # noqa: E731
    return dec(path), dec(rule), dec(passed)


def default_cache_dir() -> str:
    L = lib()
    if not hasattr(L, "sage2_default_cache_dir"):
        raise Sage2Error("this libsage2 predates sage2_default_cache_dir()", SAGE2_ERROR_UNSUPPORTED)
    return _string_out(L.sage2_default_cache_dir)


def context_cache_dir(ctx) -> str:
    L = lib()
    if not hasattr(L, "sage2_context_cache_dir"):
        raise Sage2Error("this libsage2 predates sage2_context_cache_dir()", SAGE2_ERROR_UNSUPPORTED)
    return _string_out(L.sage2_context_cache_dir, ctx)


def context_device(ctx) -> Tuple[str, str]:
    name = ctypes.create_string_buffer(256)
    arch = ctypes.create_string_buffer(32)
    check(lib().sage2_context_device(ctx, name, 256, arch, 32), "sage2_context_device")
    return name.value.decode("utf-8", "replace"), arch.value.decode()


def context_target(ctx) -> Tuple[bool, str, str]:
    """(ptx, path, note) of a context's code target: whether its kernels are PTX JIT-compiled by the
    driver, the path its calls get, and why PTX / another arch ("" when native)."""
    L = lib()
    if not hasattr(L, "sage2_context_target"):
        raise Sage2Error("this libsage2 predates sage2_context_target()", SAGE2_ERROR_UNSUPPORTED)
    ptx = ctypes.c_int()
    path = ctypes.create_string_buffer(512)
    note = ctypes.create_string_buffer(1024)
    check(L.sage2_context_target(ctx, ctypes.byref(ptx), path, 512, note, 1024), "sage2_context_target")
    return bool(ptx.value), path.value.decode("utf-8", "replace"), note.value.decode("utf-8", "replace")


def context_device_props(ctx) -> Tuple[int, int, int]:
    """(ordinal, sm_count, total_memory_bytes)."""
    L = lib()
    if not hasattr(L, "sage2_context_device_props"):
        raise Sage2Error("this libsage2 predates sage2_context_device_props()", SAGE2_ERROR_UNSUPPORTED)
    o, s, m = ctypes.c_int(), ctypes.c_int(), ctypes.c_uint64()
    check(L.sage2_context_device_props(ctx, ctypes.byref(o), ctypes.byref(s), ctypes.byref(m)),
          "sage2_context_device_props")
    return o.value, s.value, m.value


def set_log_level(level) -> None:
    """Sets the level of sage2's notices, in the library (what it emits) and on the ``sage2`` logger
    (what logging passes on): "error", "warning" / "warn", "info", "debug", a logging level
    (logging.DEBUG ...), or None to follow SAGE2_LOG_LEVEL again (logger back to NOTSET).
    A bad level raises ValueError/TypeError; then it loads the library (raises
    LibraryNotFoundError without one)."""
    code = None if level is None else _logging._level_code(level)
    L = lib()
    if code is None:
        check(L.sage2_set_log_level(-1), "sage2_set_log_level")  # SAGE2_FROM_ENV
        _logging.logger.setLevel(logging.NOTSET)
        return
    check(L.sage2_set_log_level(code), "sage2_set_log_level")
    _logging.logger.setLevel(_logging._TO_LOGGING[code])
