"""sage2.stats without a GPU (issue 43): kernel counts of the process and of a device's context.

1. KernelStats (python/sage2/_lib.py) matches sage2_kernel_stats of include/sage2/sage2.h: checked
   with the other structs of the C boundary in test_tune_args.py (header text and a C compiler).
2. A bad device raises TypeError/ValueError naming it before the library is loaded.
3. What stats returns, against a stand-in for the library: no context created or looked up when the
   process has none; the context of the given (or current) device when it exists.
4. A library without the two functions: a clear UnsupportedError; the real library (when built):
   counts of a process that loaded nothing, and the C functions' NULL checks through ctypes.
"""
import ctypes
import os
import sys

import pytest

import sage2
from sage2 import _lib, _stats


FIELDS = ["compiled", "disk_loads", "memory_hits", "loaded", "compile_seconds"]


# ---- arguments: checked before the library is loaded --------------------------------------------
@pytest.fixture
def no_library(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the library was used before the arguments were checked")

    monkeypatch.setattr(_lib, "lib", refuse)
    monkeypatch.setattr(_lib, "require_kernel_stats", refuse)
    monkeypatch.setattr(_lib, "context", refuse)


class _Device:
    """A torch.device look-alike (type, index)."""

    def __init__(self, type_, index):
        self.type, self.index = type_, index


@pytest.mark.parametrize("device,exc,text", [
    (-1, ValueError, "device=-1"),
    ("cpu", ValueError, "device='cpu'"),
    ("cuda:x", ValueError, "device='cuda:x'"),
    (1.0, TypeError, "device must be None"),
    (True, TypeError, "device must be None"),
    (_Device("cpu", None), ValueError, "not a CUDA device"),
])
def test_bad_device_is_named_before_the_library_is_used(no_library, device, exc, text):
    with pytest.raises(exc) as e:
        sage2.stats(device)
    assert str(e.value).startswith("sage2.stats: ") and text in str(e.value), str(e.value)


def test_unknown_keyword_is_a_type_error(no_library):
    with pytest.raises(TypeError):
        sage2.stats(devices=0)  # noqa - the argument is device


# ---- what stats returns ---------------------------------------------------------------------------
class _FakeLib:
    """Stands in for libsage2: fixed process counts; per-context counts keyed by the handle's value."""

    def __init__(self):
        self.context_calls = []

    def sage2_process_kernel_stats(self, p):
        s = p._obj
        s.compiled, s.disk_loads, s.memory_hits, s.loaded, s.compile_seconds = 7, 3, 11, 9, 2.5
        return 0

    def sage2_context_kernel_stats(self, ctx, p):
        self.context_calls.append(ctx.value)
        s = p._obj
        s.compiled, s.disk_loads, s.memory_hits, s.loaded, s.compile_seconds = 4, 1, 6, 5, 1.25
        return 0


PROCESS = {"compiled": 7, "disk_loads": 3, "memory_hits": 11, "loaded": 9, "compile_seconds": 2.5}
CONTEXT = {"compiled": 4, "disk_loads": 1, "memory_hits": 6, "loaded": 5, "compile_seconds": 1.25}


@pytest.fixture
def fake(monkeypatch):
    L = _FakeLib()
    monkeypatch.setattr(_lib, "lib", lambda: L)
    monkeypatch.setattr(_lib, "_contexts", {})

    def refuse(i):
        raise AssertionError("stats created a context")

    monkeypatch.setattr(_lib, "context", refuse)
    return L


def test_without_contexts_only_the_process_counts(fake, monkeypatch):
    def no_resolution(spec):
        raise AssertionError("the device was resolved although no context exists")

    monkeypatch.setattr(_stats._tune, "_device_ordinal", no_resolution)
    assert sage2.stats() == {"process": PROCESS, "context": None, "device": None}
    assert sage2.stats("cuda:1") == {"process": PROCESS, "context": None, "device": 1}
    assert fake.context_calls == []


def test_the_context_of_the_device(fake):
    _lib._contexts[1] = ctypes.c_void_p(0x1001)
    assert sage2.stats(1) == {"process": PROCESS, "context": CONTEXT, "device": 1}
    assert sage2.stats(_Device("cuda", 1))["context"] == CONTEXT
    assert fake.context_calls == [0x1001, 0x1001]
    # another device: no context there, none created
    assert sage2.stats("cuda:0") == {"process": PROCESS, "context": None, "device": 0}
    assert fake.context_calls == [0x1001, 0x1001]


def test_current_device_without_torch_is_0(fake, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not imported
    _lib._contexts[0] = ctypes.c_void_p(0x1000)
    assert sage2.stats() == {"process": PROCESS, "context": CONTEXT, "device": 0}


def test_an_older_library_is_a_clear_error(monkeypatch):
    class Old:
        pass

    monkeypatch.setattr(_lib, "lib", lambda: Old())
    with pytest.raises(sage2.UnsupportedError) as e:
        sage2.stats()
    msg = str(e.value)
    assert "predates kernel counts" in msg
    assert "sage2_process_kernel_stats" in msg and "sage2_context_kernel_stats" in msg


# ---- the real library, where it is built ----------------------------------------------------------
def _real_library():
    try:
        L = _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])
    if not hasattr(L, "sage2_process_kernel_stats"):
        pytest.skip("this libsage2 predates the kernel counts")
    return L


def test_real_library_counts_and_null_checks():
    L = _real_library()
    s = sage2.stats()
    assert set(s["process"]) == set(FIELDS)
    assert all(v >= 0 for v in s["process"].values())
    if not _lib._contexts:
        assert s["context"] is None
    assert L.sage2_process_kernel_stats(None) == _lib.SAGE2_ERROR_INVALID_ARGUMENT
    assert "out is NULL" in _lib.last_error()
    out = _lib.KernelStats()
    assert L.sage2_context_kernel_stats(None, ctypes.byref(out)) == _lib.SAGE2_ERROR_INVALID_ARGUMENT
    assert "ctx is NULL" in _lib.last_error()
    assert L.sage2_process_kernel_stats(ctypes.byref(out)) == _lib.SAGE2_OK
    assert _lib.last_error() == ""
