"""sage2: SageAttention2 (quantized attention) kernels generated at run time by NVRTC.

Thin Python binding over the C ABI of libsage2 (ctypes; nothing is compiled at install):

    import sage2
    out = sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=False)
    out = sage2.sageattn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)   # packed variable-length batch
    sage2.warmup(head_dims=(128,))                                       # compile before the first call
    sage2.tune(head_dims=128, seq_lens=[4096])                           # time tiles into the tuning database
    sage2.stats()                                                        # kernels compiled / loaded from the disk cache

Integrations (imported on demand): sage2.integrations.transformers ("sage2" attn_implementation),
sage2.integrations.diffusers ("sage2" attention backend), sage2.integrations.yunchang (USP).
Library notices go to the logging logger "sage2" (sage2.set_log_level).

``import sage2`` works without the native library and without torch. The library is looked for
at import ($SAGE2_LIBRARY, the libsage2.so inside the package — a wheel carries one —,
<repo>/build/libsage2.so, then the system's library path); without it a call raises
:class:`LibraryNotFoundError` listing where it looked, and a library of another version than the
package makes the import fail naming both. NVRTC is found by the library: $SAGE2_LIBNVRTC, then the
NVIDIA wheels next to torch, then the system's. ``python -m sage2 info`` prints what sage2 sees.
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

from . import _lib as _lib_module

# The package's own version (generated into a wheel from CMake's project VERSION, or read from the
# checkout's CMakeLists.txt), then the library's: they must agree, so a package paired with another
# build of libsage2 fails here rather than on a call with mismatched structs or semantics.
__version__ = _lib_module.package_version()
try:
    _lib_module.lib()
except LibraryNotFoundError:
    pass  # import works without the library; a call then says where it looked
else:
    _lib_version = _lib_module.version()
    if __version__ is not None and _lib_version != __version__:
        raise ImportError(
            "sage2: the Python package is version %s (%s) but the libsage2 it loaded is version %s (%s); "
            "they must match. Reinstall the sage2 wheel (it carries its own libsage2), or point "
            "SAGE2_LIBRARY at a libsage2 %s." % (__version__, _lib_module._PKG_DIR, _lib_version,
                                                _lib_module.library_path(), __version__))
    __version__ = _lib_version
if __version__ is None:
    __version__ = "unknown"  # neither a generated version, a checkout nor a library

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

from ._lib import set_log_level  # noqa: F401,E402  (notices: the logging logger "sage2", see _logging.py)
from ._warmup import warmup  # noqa: F401,E402  (needs torch when called)
from ._tune import tune  # noqa: F401,E402  (sage2_tune: the tuning database; no torch needed)
from ._stats import stats  # noqa: F401,E402  (kernel counts: compiled / from the disk cache; no torch needed)

if _torch is not None:
    from ._attention import OPTIONS, sageattn  # noqa: F401  (registers torch.ops.sage2.sageattn)
    from ._varlen import sageattn_varlen  # noqa: F401  (torch.ops.sage2.sageattn_varlen)
    from .sdpa import SdpaPatch, patch_sdpa, scaled_dot_product_attention  # noqa: F401
    from ._reference_api import (  # noqa: F401  (the reference's entry points, for the paths sage2 has)
        sageattn_qk_int8_pv_fp16_cuda,
        sageattn_qk_int8_pv_fp16_triton,
        sageattn_qk_int8_pv_fp8_cuda,
        sageattn_qk_int8_pv_fp8_cuda_sm90,
    )
else:
    from ._options import OPTIONS  # noqa: F401  (the names and defaults; a call needs torch)

    def _needs_torch(name):
        def f(*args, **kwargs):
            raise ImportError("sage2.%s needs PyTorch: %s" % (name, _TORCH_PROBLEM))

        f.__name__ = name
        return f

    sageattn_qk_int8_pv_fp16_cuda = _needs_torch("sageattn_qk_int8_pv_fp16_cuda")
    sageattn_qk_int8_pv_fp16_triton = _needs_torch("sageattn_qk_int8_pv_fp16_triton")
    sageattn_qk_int8_pv_fp8_cuda = _needs_torch("sageattn_qk_int8_pv_fp8_cuda")
    sageattn_qk_int8_pv_fp8_cuda_sm90 = _needs_torch("sageattn_qk_int8_pv_fp8_cuda_sm90")

    def sageattn(*args, **kwargs):  # noqa: D401
        """Needs torch >= 2.4; raises ImportError here."""
        raise ImportError("sage2.sageattn needs PyTorch: " + _TORCH_PROBLEM)

    def sageattn_varlen(*args, **kwargs):
        """Needs torch >= 2.4; raises ImportError here."""
        raise ImportError("sage2.sageattn_varlen needs PyTorch: " + _TORCH_PROBLEM)

    def scaled_dot_product_attention(*args, **kwargs):
        raise ImportError("sage2.scaled_dot_product_attention needs PyTorch: " + _TORCH_PROBLEM)

    def patch_sdpa(*args, **kwargs):
        raise ImportError("sage2.patch_sdpa needs PyTorch: " + _TORCH_PROBLEM)


def library_version() -> str:
    """Version string of the loaded libsage2 (loads it; raises LibraryNotFoundError)."""
    from . import _lib

    return _lib.version()


def build_commit():
    """The commit the loaded libsage2 was built from ("<40 hex digits>", with "-dirty" when the tree
    had uncommitted changes, or "unknown" when it was not built from a git checkout), or None when
    the library predates sage2_build_commit(). Loads the library (raises LibraryNotFoundError)."""
    from . import _lib

    return _lib.build_commit()


def info() -> dict:
    """What sage2 sees: library, versions, devices, cache directory, tuned entries (see __main__)."""
    from ._info import collect

    return collect()


__all__ = [
    "sageattn",
    "sageattn_varlen",
    "sageattn_qk_int8_pv_fp16_cuda",
    "sageattn_qk_int8_pv_fp16_triton",
    "sageattn_qk_int8_pv_fp8_cuda",
    "sageattn_qk_int8_pv_fp8_cuda_sm90",
    "warmup",
    "tune",
    "stats",
    "set_log_level",
    "scaled_dot_product_attention",
    "patch_sdpa",
    "OPTIONS",
    "info",
    "library_path",
    "library_version",
    "build_commit",
    "search_locations",
    "Sage2Error",
    "InvalidArgumentError",
    "UnsupportedError",
    "Sage2OutOfMemoryError",
    "LibraryNotFoundError",
]
