"""sage2.tune without a GPU (issue 26):

1. The ctypes structures TuneOptions / TuneSummary (python/sage2/_lib.py, their one definition)
   match sage2_tune_options / sage2_tune_summary of include/sage2/sage2.h: field names, order and
   types read from the header text (no compiler needed), and offsets and sizes from a C compiler.
2. Every bad argument raises TypeError/ValueError naming it before the library is loaded.
3. The options sage2_tune receives for good arguments (a recording stand-in for the library, the
   real sage2_tune_options_init when libsage2 is present), and the dict tune returns.
4. The defaults sage2_tune_options_init writes are the ones sage2.tune documents.
The GPU run is python/tests/test_gpu_tune.py."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import sage2
from sage2 import _lib, _tune

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(os.environ.get("SAGE2_SOURCE_DIR") or REPO, "include", "sage2", "sage2.h")
# The C boundary's option and summary structs the bindings mirror (tuning, warm-up, kernel counts).
STRUCTS = (("sage2_tune_options", _lib.TuneOptions), ("sage2_tune_summary", _lib.TuneSummary),
           ("sage2_warmup_options", _lib.WarmupOptions), ("sage2_warmup_summary", _lib.WarmupSummary),
           ("sage2_kernel_stats", _lib.KernelStats))
C_TYPES = {"int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64, "double": ctypes.c_double,
           "const int32_t*": ctypes.POINTER(ctypes.c_int32), "const int64_t*": ctypes.POINTER(ctypes.c_int64)}


def header_fields(struct):
    """[(field, C type)] of `typedef struct <struct> { ... } <struct>;` in sage2.h, in order."""
    if not os.path.exists(HEADER):
        pytest.skip("no header (%s)" % HEADER)
    with open(HEADER, "r", encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), text, re.S)
    assert m, "%s not found in %s" % (struct, HEADER)
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    out = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        dm = re.match(r"((?:const )?\w+\s*\*?)\s*(.*)$", decl)
        ctype = dm.group(1).replace(" *", "*").strip()
        for name in dm.group(2).split(","):
            name = name.strip()
            if name.startswith("*"):
                ctype, name = ctype + "*", name[1:].strip()
            out.append((name, ctype))
    return out


@pytest.mark.parametrize("struct,cls", STRUCTS, ids=[s for s, _ in STRUCTS])
def test_struct_fields_follow_the_header(struct, cls):
    want = header_fields(struct)
    assert [n for n, _ in cls._fields_] == [n for n, _ in want]
    for (name, ctype), (_, pytype) in zip(want, cls._fields_):
        assert ctype in C_TYPES, "%s.%s: C type %s has no mapping in this test" % (struct, name, ctype)
        assert ctypes.sizeof(C_TYPES[ctype]) == ctypes.sizeof(pytype), (struct, name)
        assert C_TYPES[ctype]._type_ == pytype._type_ or (
            ctype.endswith("*") and pytype._type_._type_ == C_TYPES[ctype]._type_._type_), (struct, name, pytype)

    class FromHeader(ctypes.Structure):
        _fields_ = [(n, C_TYPES[t]) for n, t in want]

    assert ctypes.sizeof(FromHeader) == ctypes.sizeof(cls)
    for n, _ in want:
        assert getattr(FromHeader, n).offset == getattr(cls, n).offset, n


def test_struct_layout_matches_the_compiler(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc or not os.path.exists(HEADER):
        pytest.skip("no C compiler or no header (%s)" % HEADER)
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "sage2/sage2.h"', "int main(void) {"]
    for struct, cls in STRUCTS:
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (struct, struct))
        for f, _ in cls._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (struct, f, struct, f))
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", os.path.dirname(os.path.dirname(HEADER)), str(src), "-o", str(exe)], check=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.check_output([str(exe)], text=True).splitlines())
    for struct, cls in STRUCTS:
        assert int(got[struct]) == ctypes.sizeof(cls), struct
        for f, _ in cls._fields_:
            assert int(got[struct + "." + f]) == getattr(cls, f).offset, (struct, f)


# ---- argument checks: before the library is loaded --------------------------------------------------
@pytest.fixture
def no_library(monkeypatch):
    """Fails the test if tune touches the library (or a context) at all."""
    def refuse(*a, **k):
        raise AssertionError("the library was used before the arguments were checked")

    monkeypatch.setattr(_lib, "require_tune", refuse)
    monkeypatch.setattr(_lib, "lib", refuse)
    monkeypatch.setattr(_lib, "context", refuse)


BAD = [
    (dict(head_dims=0), ValueError, "head_dims=0"),
    (dict(head_dims=[64, 513]), ValueError, "head_dims=513"),
    (dict(head_dims=[]), ValueError, "head_dims is empty"),
    (dict(head_dims=64.0), TypeError, "head_dims must be an int"),
    (dict(head_dims=[True]), TypeError, "head_dims must be an int"),
    (dict(dtypes="float32"), ValueError, "dtypes: 'float32'"),
    (dict(dtypes=[]), ValueError, "dtypes is empty"),
    (dict(causal="bottom-right"), ValueError, "causal: 'bottom-right'"),
    (dict(causal=["top_left", "bottom_right"]), ValueError, "one causal mode"),
    (dict(causal=1), ValueError, "causal: 1"),
    (dict(seq_lens=0), ValueError, "seq_lens=0"),
    (dict(seq_lens=["1024"]), TypeError, "seq_lens must be an int"),
    (dict(qk_bits=6), ValueError, "qk_bits=6"),
    (dict(qk_bits=True), ValueError, "qk_bits=True"),
    (dict(pv_precision="fp32"), ValueError, "pv_precision='fp32'"),
    (dict(pv_precision=1), ValueError, "pv_precision=1"),
    (dict(batch=-1), ValueError, "batch=-1"),
    (dict(heads=0), ValueError, "heads=0"),
    (dict(heads=32, kv_heads=5), ValueError, "not a multiple of kv_heads=5"),
    (dict(kv_heads=3), ValueError, "heads=32 is not a multiple of kv_heads=3"),
    (dict(kv_heads=-1), ValueError, "kv_heads=-1"),
    (dict(reps=0), ValueError, "reps=0"),
    (dict(reps=2 ** 31), ValueError, "reps=2147483648"),
    (dict(warmup=-1), ValueError, "warmup=-1"),
    (dict(budget_seconds=0), ValueError, "budget_seconds=0"),
    (dict(budget_seconds=float("inf")), ValueError, "budget_seconds=inf"),
    (dict(budget_seconds="1"), TypeError, "budget_seconds must be a float"),
    (dict(min_gain=-0.1), ValueError, "min_gain=-0.1"),
    (dict(min_gain=float("nan")), ValueError, "min_gain=nan"),
    (dict(write_db=1), TypeError, "write_db must be True or False"),
    (dict(jobs=-1), ValueError, "jobs=-1"),
    (dict(jobs=None), TypeError, "jobs must be an int"),
    (dict(device=-1), ValueError, "device=-1"),
    (dict(device="cpu"), ValueError, "device='cpu'"),
    (dict(device="cuda:x"), ValueError, "device='cuda:x'"),
    (dict(device=1.0), TypeError, "device must be None"),
    (dict(device=True), TypeError, "device must be None"),
]


@pytest.mark.parametrize("kwargs,exc,text", BAD, ids=[repr(k) for k, _, _ in BAD])
def test_bad_arguments_are_named_before_the_library_is_used(no_library, kwargs, exc, text):
    with pytest.raises(exc) as e:
        sage2.tune(**kwargs)
    assert str(e.value).startswith("sage2.tune: ") and text in str(e.value), str(e.value)


def test_unknown_keyword_is_a_type_error(no_library):
    with pytest.raises(TypeError):
        sage2.tune(head_dim=64)  # noqa - the argument is head_dims


class _Device:
    """A torch.device look-alike (type, index)."""

    def __init__(self, type_, index):
        self.type, self.index = type_, index


def test_torch_device_forms(no_library):
    with pytest.raises(ValueError, match="not a CUDA device"):
        sage2.tune(device=_Device("cpu", None))
    assert _tune._device_spec(_Device("cuda", 2)) == 2
    assert _tune._device_spec("cuda:1") == 1 and _tune._device_spec("cuda") is None
    assert _tune._device_spec(3) == 3 and _tune._device_spec(None) is None


# ---- what the library receives ------------------------------------------------------------------------
class _RecordingLib:
    """Stands in for libsage2: sage2_tune_options_init from the real library when present (else the
    header's documented defaults), sage2_tune records its options and answers a fixed summary."""

    def __init__(self, real=None):
        self.real = real
        self.calls = []

    def sage2_tune_options_init(self, p):
        if self.real is not None:
            return self.real.sage2_tune_options_init(p)
        o = p._obj
        ctypes.memset(ctypes.addressof(o), 0, ctypes.sizeof(o))
        o.dtype = o.causal = -1
        o.heads, o.reps, o.warmup, o.budget_seconds, o.min_gain, o.write_db = 32, 20, 2, 1.0, 0.02, 1

    def sage2_tune(self, ctx, options, summary, database, size):
        o = options._obj
        rec = {n: getattr(o, n) for n, _ in _lib.TuneOptions._fields_ if n not in ("head_dims", "seq_lens")}
        rec["head_dims"] = [o.head_dims[i] for i in range(o.n_head_dims)] if o.head_dims else None
        rec["seq_lens"] = [o.seq_lens[i] for i in range(o.n_seq_lens)] if o.seq_lens else None
        rec["ctx"], rec["size"] = ctx, size
        self.calls.append(rec)
        s = summary._obj
        s.problems, s.written, s.failures, s.improved, s.best_gain = 6, 5, 1, 2, 0.25
        s.kernels_compiled, s.kernels_from_cache, s.compile_errors = 40, 2, 1
        database.value = b"/tmp/cache/tuning/x.json"
        return 0


def _real_library():
    try:
        L = _lib.lib()
    except sage2.LibraryNotFoundError:
        return None
    return L if hasattr(L, "sage2_tune_options_init") else None


@pytest.fixture
def recording(monkeypatch):
    L = _RecordingLib(_real_library())
    contexts = []
    monkeypatch.setattr(_lib, "require_tune", lambda: L)
    monkeypatch.setattr(_lib, "context", lambda i: contexts.append(i) or ctypes.c_void_p(0x1000 + i))
    L.contexts = contexts
    return L


def test_defaults_reach_the_library_as_its_own(recording):
    out = sage2.tune()
    (rec,) = recording.calls
    assert rec["head_dims"] is None and rec["seq_lens"] is None and rec["n_head_dims"] == rec["n_seq_lens"] == 0
    assert (rec["dtype"], rec["causal"], rec["qk_bits"], rec["pv_precision"]) == (-1, -1, 0, 0)
    assert (rec["batch"], rec["heads"], rec["kv_heads"]) == (0, 32, 0)
    assert (rec["reps"], rec["warmup"], rec["budget_seconds"], rec["min_gain"]) == (20, 2, 1.0, 0.02)
    assert (rec["write_db"], rec["jobs"]) == (1, 0)
    assert rec["size"] == 4096 and recording.contexts == [0]
    assert out == {"problems": 6, "written": 5, "failures": 1, "improved": 2, "best_gain": 0.25,
                   "kernels_compiled": 40, "kernels_from_cache": 2, "compile_errors": 1,
                   "database": "/tmp/cache/tuning/x.json"}


def test_arguments_reach_the_library(recording):
    sage2.tune(head_dims=[64, 128], dtypes="bf16", causal=True, seq_lens=(1024, 2048, 70000), qk_bits=4,
               pv_precision="fp16", batch=2, heads=16, kv_heads=4, reps=7, warmup=0, budget_seconds=0.5,
               min_gain=0, write_db=False, jobs=3, device="cuda:1")
    (rec,) = recording.calls
    assert rec["head_dims"] == [64, 128] and rec["seq_lens"] == [1024, 2048, 70000]
    assert (rec["dtype"], rec["causal"], rec["qk_bits"], rec["pv_precision"]) == (
        _lib.SAGE2_DTYPE_BF16, _lib.SAGE2_CAUSAL_TOP_LEFT, 4, _lib.SAGE2_PV_FP16)
    assert (rec["batch"], rec["heads"], rec["kv_heads"], rec["reps"], rec["warmup"]) == (2, 16, 4, 7, 0)
    assert (rec["budget_seconds"], rec["min_gain"], rec["write_db"], rec["jobs"]) == (0.5, 0.0, 0, 3)
    assert recording.contexts == [1]


@pytest.mark.parametrize("kwargs,dtype,causal", [
    (dict(head_dims=96), -1, -1),
    (dict(dtypes=["float16", "bfloat16"]), -1, -1),
    (dict(dtypes=("fp16", "half")), _lib.SAGE2_DTYPE_F16, -1),
    (dict(causal=False), -1, _lib.SAGE2_CAUSAL_NONE),
    (dict(causal=[False, True]), -1, -1),
    (dict(causal=["top_left", True]), -1, _lib.SAGE2_CAUSAL_TOP_LEFT),
    (dict(causal="bottom_right"), -1, _lib.SAGE2_CAUSAL_BOTTOM_RIGHT),
])
def test_lists_and_single_values(recording, kwargs, dtype, causal):
    sage2.tune(**kwargs)
    rec = recording.calls[-1]
    assert (rec["dtype"], rec["causal"]) == (dtype, causal)
    if "head_dims" in kwargs:
        assert rec["head_dims"] == [96]


def test_torch_dtypes_are_understood_without_importing_torch(recording, monkeypatch):
    class FakeTorch:
        float16, bfloat16 = object(), object()

    monkeypatch.setitem(__import__("sys").modules, "torch", FakeTorch)
    monkeypatch.setattr(_tune, "_device_ordinal", lambda spec: 0 if spec is None else spec)
    sage2.tune(dtypes=FakeTorch.bfloat16)
    assert recording.calls[-1]["dtype"] == _lib.SAGE2_DTYPE_BF16
    with pytest.raises(ValueError, match="dtypes"):
        sage2.tune(dtypes=object())


def test_library_errors_raise_sage2_errors(recording, monkeypatch):
    recording.sage2_tune = lambda *a: _lib.SAGE2_ERROR_DRIVER
    monkeypatch.setattr(_lib, "last_error", lambda: "tuning stopped: an illegal address")
    with pytest.raises(sage2.Sage2Error) as e:
        sage2.tune(head_dims=64)
    assert e.value.status_name == "driver_error" and "sage2_tune" in str(e.value)


def test_old_library_without_sage2_tune(monkeypatch):
    class Old:
        sage2_attention = None

    monkeypatch.setattr(_lib, "lib", lambda: Old())
    with pytest.raises(sage2.UnsupportedError, match="sage2_tune"):
        sage2.tune(head_dims=64)


def test_init_defaults_of_the_library():
    L = _real_library()
    if L is None:
        pytest.skip("libsage2 with sage2_tune_options_init not found")
    o = _lib.TuneOptions()
    ctypes.memset(ctypes.addressof(o), 0x5A, ctypes.sizeof(o))
    L.sage2_tune_options_init(ctypes.byref(o))
    assert not o.head_dims and not o.seq_lens and o.n_head_dims == o.n_seq_lens == 0
    assert (o.dtype, o.causal, o.qk_bits, o.pv_precision) == (-1, -1, 0, 0)
    assert (o.batch, o.heads, o.kv_heads, o.reps, o.warmup) == (0, 32, 0, 20, 2)
    assert (o.budget_seconds, o.min_gain, o.write_db, o.jobs) == (1.0, 0.02, 1, 0)
