"""``sageattention`` served by sage2: an opt-in drop-in for the SageAttention package.

Programs that ``import sageattention`` (diffusers' "sage" and "sage_varlen" backends, yunchang's
SAGE attention types, ComfyUI, scripts calling ``sageattn``) get the reference's public functions
with the reference's signatures, each running sage2 (``sageattention.core`` holds them, as in the
reference). Built from python/sageattention_shim of the sage2 repository as a separate wheel that a
user installs on purpose, beside the sage2 wheel.

It never shadows a real ``sageattention`` silently: on import it looks for another installation
(a distribution of that name, or a ``sageattention`` package elsewhere on sys.path) and raises
ImportError naming it. ``SAGE2_SAGEATTENTION_OVERRIDE=1`` turns that into a warning and uses
sage2 anyway.
"""
import importlib.metadata as _metadata
import os as _os
import sys as _sys
import warnings as _warnings

__version__ = "2.2.0+sage2.0.1.0"  # the reference's API version + sage2's (the distribution's version)
SAGE2_SHIM = True  # how to tell this package from the reference's: getattr(sageattention, "SAGE2_SHIM", False)

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_MARK = "SAGE2_SHIM = True"


def _is_shim_version(version):
    return "+sage2" in (version or "")


def _is_shim_dir(d):
    try:
        with open(_os.path.join(d, "__init__.py"), encoding="utf-8") as f:
            return _MARK in f.read()
    except OSError:
        return False


def _normalized(name):
    return (name or "").lower().replace("_", "-").replace(".", "-")


def other_installations():
    """Descriptions of every ``sageattention`` other than this drop-in that Python could import:
    distributions named sageattention (or declaring it as a top-level package) whose version is
    not this drop-in's, and ``sageattention`` packages in other sys.path folders."""
    found = []
    for dist in _metadata.distributions():
        try:
            name = dist.metadata["Name"]
            version = dist.version
        except Exception:  # noqa: BLE001 - a broken distribution is not this package's business
            continue
        tops = (dist.read_text("top_level.txt") or "").split()
        if _normalized(name) != "sageattention" and "sageattention" not in tops:
            continue
        if _is_shim_version(version):
            continue
        where = getattr(dist, "_path", None)
        found.append("the distribution %s %s%s" % (name, version, " (%s)" % where if where else ""))
    for entry in _sys.path:
        d = _os.path.join(entry or _os.getcwd(), "sageattention")
        if _os.path.isfile(_os.path.join(d, "__init__.py")) and not _os.path.samefile(d, _HERE) \
                and not _is_shim_dir(d):
            found.append("the package %s" % d)
    return sorted(set(found))


def _refuse_to_shadow():
    others = other_installations()
    if not others:
        return
    text = ("this `sageattention` is sage2's drop-in (%s), and another sageattention is installed: %s. "
            "It would be shadowed. Remove one of them (pip uninstall sageattention removes the one pip installed "
            "last), or set SAGE2_SAGEATTENTION_OVERRIDE=1 to run sage2 in its place."
            % (_HERE, "; ".join(others)))
    if _os.environ.get("SAGE2_SAGEATTENTION_OVERRIDE", "") not in ("", "0"):
        _warnings.warn("sageattention: " + text.replace(" or set SAGE2_SAGEATTENTION_OVERRIDE=1 to run sage2 in "
                                                         "its place.", " SAGE2_SAGEATTENTION_OVERRIDE is set: "
                                                                       "sage2 runs."), RuntimeWarning, stacklevel=2)
        return
    raise ImportError("sageattention: " + text)


_refuse_to_shadow()

from .core import (  # noqa: E402
    sageattn,
    sageattn_qk_int8_pv_fp8_cuda,
    sageattn_qk_int8_pv_fp8_cuda_sm90,
    sageattn_qk_int8_pv_fp16_cuda,
    sageattn_qk_int8_pv_fp16_triton,
    sageattn_varlen,
)

__all__ = ["sageattn", "sageattn_varlen", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp16_cuda",
           "sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90"]
