"""sage2: SageAttention2 (quantized attention) kernels generated at run time by NVRTC.

Thin Python binding over the C ABI of libsage2 (ctypes; nothing is compiled at install):

    import sage2
    out = sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=False)

``import sage2`` works without the native library and without torch; the library is located on
first use ($SAGE2_LIBRARY, a libsage2.so next to the package, <repo>/build/libsage2.so, then the
system's library path) and a call without it raises :class:`LibraryNotFoundError` listing where it
looked. ``python -m sage2 info`` prints what sage2 sees on this machine.
"""
from ._lib import (  # noqa: F401
    InvalidArgumentError,
    LibraryNotFoundError,
    Sage2Error,
    Sage2OutOfMemoryError,
    UnsupportedError,
    library_path,
    search_locations,
)

__version__ = "0.1.0"

_TORCH_PROBLEM = None
try:
    import torch as _torch  # noqa: F401
except (ImportError, OSError) as _e:  # pragma: no cover - exercised only where torch is absent
    _torch = None
    _TORCH_PROBLEM = "import torch failed: %s" % _e
else:
    if not hasattr(_torch, "library") or not hasattr(_torch.library, "custom_op"):
        _TORCH_PROBLEM = "torch %s is too old: sage2 needs torch >= 2.4 (torch.library.custom_op)" % _torch.__version__
        _torch = None

if _torch is not None:
    from ._attention import OPTIONS, sageattn  # noqa: F401  (registers torch.ops.sage2.sageattn)
    from .sdpa import SdpaPatch, patch_sdpa, scaled_dot_product_attention  # noqa: F401
else:
    OPTIONS = {}

    def sageattn(*args, **kwargs):  # noqa: D401
        """Needs torch >= 2.4; raises ImportError here."""
        raise ImportError("sage2.sageattn needs PyTorch: " + _TORCH_PROBLEM)

    def scaled_dot_product_attention(*args, **kwargs):
        raise ImportError("sage2.scaled_dot_product_attention needs PyTorch: " + _TORCH_PROBLEM)

    def patch_sdpa(*args, **kwargs):
        raise ImportError("sage2.patch_sdpa needs PyTorch: " + _TORCH_PROBLEM)


def library_version() -> str:
    """Version string of the loaded libsage2 (loads it; raises LibraryNotFoundError)."""
    from . import _lib

    return _lib.version()


def info() -> dict:
    """What sage2 sees: library, versions, devices, cache directory, tuned entries (see __main__)."""
    from ._info import collect

    return collect()


__all__ = [
    "sageattn",
    "scaled_dot_product_attention",
    "patch_sdpa",
    "OPTIONS",
    "info",
    "library_path",
    "library_version",
    "search_locations",
    "Sage2Error",
    "InvalidArgumentError",
    "UnsupportedError",
    "Sage2OutOfMemoryError",
    "LibraryNotFoundError",
]
