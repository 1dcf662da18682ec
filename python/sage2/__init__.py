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

``import sage2`` works without the native library and without torch, and imports torch only when
a torch-facing name (sageattn, sageattn_varlen, patch_sdpa ...) is first used, or at once where
torch is imported already; the console scripts never import it. The library is looked for
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

import sys as _sys

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

from ._lib import set_log_level  # noqa: F401,E402  (notices: the logging logger "sage2", see _logging.py)
from ._options import OPTIONS  # noqa: F401,E402  (the names and defaults: the dict sageattn reads; no torch needed)
from ._warmup import warmup  # noqa: F401,E402  (needs torch when called)
from ._tune import tune  # noqa: F401,E402  (sage2_tune: the tuning database; no torch needed)
from ._stats import stats  # noqa: F401,E402  (kernel counts: compiled / from the disk cache; no torch needed)

# The torch-facing names are bound on first use (issue 42): ``import sage2`` does not import torch
# (seconds, and torch's own warnings): the console scripts, tune(), stats() and set_log_level() never
# need it. The first lookup of one of these names (sage2.sageattn, ``from sage2 import sageattn``)
# imports torch and the modules built on it, registers the custom ops torch.ops.sage2.* and binds
# every name below as a plain module attribute, so later lookups never come back here: the calls'
# fast paths are the same as with an eager import. Where torch is already imported when sage2 is,
# that happens at import, and where torch is imported later, right after torch's import
# (_TorchImportHook): torch.ops.sage2.* exist whenever torch does, as with an eager import.
# Without a usable torch the names are functions raising ImportError with the reason.
_TORCH_NAMES = frozenset((
    "sageattn", "sageattn_varlen", "scaled_dot_product_attention", "patch_sdpa", "SdpaPatch",
    "sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp8_cuda",
    "sageattn_qk_int8_pv_fp8_cuda_sm90", "_torch", "_TORCH_PROBLEM",
))
# submodules an import with torch brings in (attributes of the package once imported)
_TORCH_MODULES = frozenset(("_attention", "_core", "_varlen", "_mask", "_op_util", "_compat", "sdpa",
                            "_reference_api"))
_torch_bound = False
_binding = False


def _bind_torch_api():
    """Imports torch and binds the names of _TORCH_NAMES into this module (once)."""
    global _torch_bound, _binding
    if _torch_bound:
        return
    problem = None
    try:
        import torch
    except (ImportError, OSError) as e:  # pragma: no cover - exercised only where torch is absent
        torch = None
        problem = "import torch failed: %s" % e
    else:
        if _torch_bound:  # bound by _TorchImportHook at the end of that import
            return
        if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
            problem = "torch %s is too old: sage2 needs torch >= 2.4 (torch.library.custom_op)" % torch.__version__
            torch = None
    g = globals()
    if torch is not None:
        _binding = True
        try:
            from ._attention import sageattn  # registers torch.ops.sage2.sageattn
            from ._varlen import sageattn_varlen  # torch.ops.sage2.sageattn_varlen
            from .sdpa import SdpaPatch, patch_sdpa, scaled_dot_product_attention
            from ._reference_api import (  # the reference's entry points, for the paths sage2 has
                sageattn_qk_int8_pv_fp16_cuda,
                sageattn_qk_int8_pv_fp16_triton,
                sageattn_qk_int8_pv_fp8_cuda,
                sageattn_qk_int8_pv_fp8_cuda_sm90,
            )
        finally:
            _binding = False
        g.update(sageattn=sageattn, sageattn_varlen=sageattn_varlen, SdpaPatch=SdpaPatch, patch_sdpa=patch_sdpa,
                 scaled_dot_product_attention=scaled_dot_product_attention,
                 sageattn_qk_int8_pv_fp16_cuda=sageattn_qk_int8_pv_fp16_cuda,
                 sageattn_qk_int8_pv_fp16_triton=sageattn_qk_int8_pv_fp16_triton,
                 sageattn_qk_int8_pv_fp8_cuda=sageattn_qk_int8_pv_fp8_cuda,
                 sageattn_qk_int8_pv_fp8_cuda_sm90=sageattn_qk_int8_pv_fp8_cuda_sm90)
    else:
        def _needs_torch(name):
            def f(*args, **kwargs):
                raise ImportError("sage2.%s needs PyTorch: %s" % (name, _TORCH_PROBLEM))

            f.__name__ = f.__qualname__ = name
            return f

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

        g.update(sageattn=sageattn, sageattn_varlen=sageattn_varlen,
                 scaled_dot_product_attention=scaled_dot_product_attention, patch_sdpa=patch_sdpa)
        for name in ("sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton",
                     "sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90"):
            g[name] = _needs_torch(name)
        for name in ("sageattn", "sageattn_varlen", "scaled_dot_product_attention", "patch_sdpa"):
            g[name].__qualname__ = name  # as when they were defined at module level
    g["_torch"], g["_TORCH_PROBLEM"] = torch, problem
    _torch_bound = True
    _remove_torch_import_hook()


def __getattr__(name):
    # Only names not yet in the module's dict come here (PEP 562): the torch-facing ones before
    # their first use, and submodules not imported (the import system asks while importing them:
    # never bind from inside the binding).
    if name in _TORCH_NAMES or (name in _TORCH_MODULES and not _binding):
        _bind_torch_api()
        try:
            return globals()[name]
        except KeyError:
            pass
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _TorchImportHook:
    """A sys.meta_path finder, there until the names are bound: a torch imported after sage2 gets
    them bound right after its own import (torch.ops.sage2.* registered, as when sage2 imported
    torch itself), so the order of ``import sage2`` and ``import torch`` changes nothing. It finds
    torch with the finders after it and only wraps the loader's exec_module; the module keeps
    torch's own loader. Anything unexpected leaves the import to the other finders."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or _torch_bound:
            return None
        try:
            for finder in _sys.meta_path:
                find = getattr(finder, "find_spec", None) if finder is not self else None
                spec = find(fullname, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            spec.loader = _BindAfterTorch(spec.loader)
            return spec
        except Exception:  # noqa: BLE001 - the normal import then finds torch
            return None


class _BindAfterTorch:
    """The loader of torch's spec while it is imported: torch's own loader, then the binding."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        module.__loader__ = self.loader  # torch keeps its own loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        try:
            _bind_torch_api()
        except Exception:  # noqa: BLE001 - never fails torch's import; the first use of a name raises it
            pass

    def __getattr__(self, name):
        return getattr(self.loader, name)


_torch_import_hook = None


def _remove_torch_import_hook():
    global _torch_import_hook
    hook, _torch_import_hook = _torch_import_hook, None
    if hook is not None:
        try:
            _sys.meta_path.remove(hook)
        except ValueError:
            pass


if "torch" in _sys.modules:  # torch is loaded already: nothing to save, and torch.ops.sage2.* exist at once
    _bind_torch_api()
else:
    _torch_import_hook = _TorchImportHook()
    _sys.meta_path.insert(0, _torch_import_hook)

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
