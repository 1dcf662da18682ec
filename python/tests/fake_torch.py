"""The fake torch of the suite's subprocess tests, and what their drivers share (issues 15, 17).

test_fast_path.py, test_varlen_args.py, test_varlen_fast_path.py and test_mask_args.py check the
binding without torch, a GPU or libsage2. run_driver() writes a fake torch package to tmp_path
and runs a driver script against it in a subprocess:

- FAKE_TORCH: metadata-only tensors with fake addresses (every new tensor is recorded in
  torch.ALLOCS), devices, the CUDA stream / capture queries sage2 makes, torch.library.custom_op
  (calls recorded in torch.OP_CALLS), grad mode (torch._grad[0]) and capture (torch.CAPTURING[0]);
- FAKE_TORCH_VARLEN adds int32/int64 and custom ops registered under their own names;
- FAKE_TORCH_MASK adds torch.bool, views with torch's stride rules (unsqueeze, expand) and
  stride(dim).

The driver runs with this folder on its path and takes the second half of this module from it:
FakeLib (a libsage2 that records the sage2_tensor / sage2_attention_params / sage2_seqlens /
sage2_mask structures it is handed), install(), T(), lens(), packed(), expect_error(),
expect_unsupported(), counting(). That half imports torch (the fake one, in the driver) and sage2
only when called; the module itself imports nothing outside the standard library, so a test
that imports it runs without torch.

sage2_child_env() is the environment of every Python subprocess of the suite that imports sage2:
its PYTHONPATH holds the folders this process found sage2 in (issue 42: a child does not inherit
sys.path entries added at run time, so a sage2 found through them would be missing there).

Also here, for the ctypes declaration tests (no torch either): FakeCDLL, and c_layout(), the
header's sizes, offsets and constants as a C compiler sees them."""
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
HEADER = os.path.join(os.environ.get("SAGE2_SOURCE_DIR") or REPO, "include", "sage2", "sage2.h")


# ---- the environment of a Python subprocess that imports sage2 -------------------------------------
def sage2_path_entries():
    """The directories this process finds sage2 in, for a child's PYTHONPATH (issue 42): the parent
    of the sage2 package this process imported (when it has), then every sys.path entry holding a
    sage2 package, absolute and without repeats — except the interpreter's own site directories,
    which a child of the same interpreter has anyway. A sage2 found through sys.path entries the
    child does not inherit (pytest's rootdir or conftest insertions, a ``pip install --target``
    folder added at run time) is then the child's too."""
    import site

    skip = set()
    try:
        skip.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        skip.add(os.path.realpath(user))
    out, seen = [], set()

    def add(d):
        d = os.path.abspath(d or os.curdir)
        real = os.path.realpath(d)
        if real not in seen and real not in skip:
            seen.add(real)
            out.append(d)

    mod = sys.modules.get("sage2")
    pkg = getattr(mod, "__file__", None)
    if pkg:
        add(os.path.dirname(os.path.dirname(os.path.abspath(pkg))))
    for entry in sys.path:
        if isinstance(entry, str) and os.path.isfile(os.path.join(entry or os.curdir, "sage2", "__init__.py")):
            add(entry)
    return out


def sage2_child_env(first=(), extra=None, base=None, inherit_pythonpath=True):
    """os.environ (or `base`) for a Python subprocess that imports sage2: PYTHONPATH = the `first`
    entries (a fake torch, a stub, this folder), then sage2_path_entries(), then the PYTHONPATH
    this process was given (unless inherit_pythonpath=False); `extra` is applied last."""
    env = dict(os.environ if base is None else base)
    parts = [str(p) for p in first] + sage2_path_entries()
    if inherit_pythonpath:
        parts += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    seen, path = set(), []
    for p in parts:
        if p not in seen:
            seen.add(p)
            path.append(p)
    env["PYTHONPATH"] = os.pathsep.join(path)
    env.update(extra or {})
    return env


# ---- the fake torch package ------------------------------------------------------------------------
FAKE_TORCH = '''
import itertools, threading
__version__ = "0.0-fake"
class _DT:
    def __init__(self, n, size): self.n, self.itemsize = n, size
    def __repr__(self): return "torch." + self.n
float16, bfloat16, float32, float64, uint8, int8 = (_DT("float16", 2), _DT("bfloat16", 2), _DT("float32", 4),
                                                    _DT("float64", 8), _DT("uint8", 1), _DT("int8", 1))
class device:
    def __init__(self, s, index=None):
        if isinstance(s, device): s, index = s.type, s.index
        t, _, i = str(s).partition(":")
        self.type, self.index = t, (int(i) if i else index)
    def __eq__(self, o): return isinstance(o, device) and (self.type, self.index) == (o.type, o.index)
    def __hash__(self): return hash((self.type, self.index))
    def __repr__(self): return "device(%s:%s)" % (self.type, self.index)
class Size(tuple): pass
_addr = itertools.count(1)
ALLOCS = []
class Tensor:
    def __init__(self, shape, dtype, dev, strides=None, requires_grad=False):
        self.shape, self.dtype, self.device = Size(shape), dtype, device(dev)
        if self.device.type == "cuda" and self.device.index is None: self.device.index = 0
        st, acc = [], 1
        for n in reversed(shape): st.append(acc); acc *= n
        self._st = tuple(strides) if strides else tuple(reversed(st))
        self._ptr = 0x7f0000000000 + next(_addr) * 0x1000000
        self.requires_grad = requires_grad
        ALLOCS.append(self)
    def stride(self): return self._st
    def dim(self): return len(self.shape)
    def data_ptr(self): return self._ptr
    def numel(self):
        n = 1
        for s in self.shape: n *= s
        return n
    def zero_(self): return self
    def fill_(self, x): return self
def empty(shape, dtype=None, device=None): return Tensor(tuple(shape), dtype, device)
_grad = [False]
def is_grad_enabled(): return _grad[0]
class _Compiler:
    @staticmethod
    def is_compiling(): return False
compiler = _Compiler()
class _Stream:
    def __init__(self, i): self.cuda_stream = 0x5000 + i
class _Cuda:
    @staticmethod
    def current_device(): return 0
    @staticmethod
    def current_stream(i=None): return _Stream(i if isinstance(i, int) else 0)
    @staticmethod
    def is_available(): return False
cuda = _Cuda()
CAPTURING = [False]
class _C:
    @staticmethod
    def _cuda_getCurrentRawStream(i): return 0x5000 + i
    @staticmethod
    def _cuda_isCurrentStreamCapturing(): return CAPTURING[0]
OP_CALLS = []
class _Op:
    def __init__(self, fn): self.fn = fn
    def register_fake(self, f): return f
    def register_autograd(self, *a, **k): pass
    def __call__(self, *a): return self.fn(*a)
class _Library:
    @staticmethod
    def custom_op(name, mutates_args=(), schema=None):
        def deco(fn):
            op = _Op(fn)
            def sageattn(*a):
                OP_CALLS.append(a)
                return fn(*a)
            ops.sage2.sageattn = sageattn
            return op
        return deco
library = _Library()
class _NS: pass
ops = _NS(); ops.sage2 = _NS()
'''

# int32 lengths, and custom ops registered under their own names (FAKE_TORCH knows one op).
FAKE_TORCH_VARLEN = FAKE_TORCH + '''
int32, int64 = _DT("int32", 4), _DT("int64", 8)
class _Library:
    @staticmethod
    def custom_op(name, mutates_args=(), schema=None):
        short = name.split("::")[1]
        def deco(fn):
            def call(*a):
                OP_CALLS.append((short, a))
                return fn(*a)
            setattr(ops.sage2, short, call)
            return _Op(fn)
        return deco
library = _Library()
'''

# torch.bool, views with torch's stride rules, stride(dim).
FAKE_TORCH_MASK = FAKE_TORCH_VARLEN + '''
globals()["bool"] = _DT("bool", 1)  # torch.bool (the fake module has no other use of the builtin)
def _view(t, shape, strides):
    v = Tensor.__new__(Tensor)
    v.__dict__.update(t.__dict__)
    v.shape, v._st = Size(tuple(shape)), tuple(strides)
    return v
def _stride(self, dim=None):
    return self._st if dim is None else self._st[dim]
def _unsqueeze(self, dim):
    n = len(self.shape)
    if dim < 0:
        dim += n + 1
    st = self._st[dim] * self.shape[dim] if dim < n else 1  # torch's rule
    return _view(self, tuple(self.shape[:dim]) + (1,) + tuple(self.shape[dim:]),
                 self._st[:dim] + (st,) + self._st[dim:])
def _expand(self, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    extra = len(sizes) - len(self.shape)
    if extra < 0:
        raise RuntimeError("expand: %d sizes for %d dims" % (len(sizes), len(self.shape)))
    shape, st = [], []
    for i, want in enumerate(sizes):
        if i < extra:
            shape.append(want); st.append(0); continue
        have, s = self.shape[i - extra], self._st[i - extra]
        if want == -1 or want == have:
            shape.append(have); st.append(s)
        elif have == 1:
            shape.append(want); st.append(0)
        else:
            raise RuntimeError("expand: size %d of dim %d cannot become %d" % (have, i, want))
    return _view(self, shape, st)
Tensor.stride, Tensor.unsqueeze, Tensor.expand = _stride, _unsqueeze, _expand
'''

# torch.nn.functional of the fake: SDPA raises (patch_sdpa's fallback is not what these tests run).
SDPA_RAISES = "def scaled_dot_product_attention(*a, **k): raise RuntimeError\n"


def run_driver(tmp_path, driver, torch_source=FAKE_TORCH_VARLEN, functional=SDPA_RAISES, timeout=120, env=None):
    """Writes the fake torch package under tmp_path (torch/__init__.py: torch_source;
    torch/nn/functional.py: functional) and the driver script (dedented), runs the driver with
    the package first on its path (also its argv[1]), then this folder and where this process
    found sage2 (sage2_child_env), with SAGE2_LIBRARY pointing nowhere (the driver installs a
    FakeLib) and then `env`'s variables; returns the subprocess.CompletedProcess (text output)."""
    pkg = tmp_path / "faketorch"
    (pkg / "torch" / "nn").mkdir(parents=True)
    (pkg / "torch" / "__init__.py").write_text(torch_source + "\nfrom . import nn\n")
    (pkg / "torch" / "nn" / "__init__.py").write_text("from . import functional\n")
    (pkg / "torch" / "nn" / "functional.py").write_text(functional)
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(driver))
    # SAGE2_LIBRARY points nowhere unless `env` says otherwise: the fake library replaces it
    env = sage2_child_env(first=[pkg, HERE], extra=dict({"SAGE2_LIBRARY": "/nonexistent/libsage2.so"}, **(env or {})))
    return subprocess.run([sys.executable, str(script), str(pkg)], capture_output=True, text=True, env=env,
                          timeout=timeout)


# ---- in the driver: the fake library and the fake tensors ----------------------------------------------
# Fields of the structures the library is handed: sage2_tensor, sage2_attention_params,
# sage2_seqlens, sage2_mask.
TF = ("data", "dtype", "batch", "heads", "seq", "dim", "stride_batch", "stride_head", "stride_seq", "stride_dim")
PF = ("causal", "sm_scale", "qk_bits", "smooth_q", "smooth_k", "smooth_v", "lse", "workspace", "workspace_bytes",
      "pv_precision", "small_q_path", "pv_accum")
LF = ("batch", "cu_seqlens_q", "cu_seqlens_k", "kv_lens", "max_seqlen_q", "max_seqlen_k")
MF = ("data", "type", "stride_batch", "stride_head", "stride_q", "stride_k")


def snap(s, fields):
    return tuple(getattr(s, f) for f in fields)


class FakeLib:
    """A libsage2 that records what it is handed and returns `fail` (0: success) from every
    attention call; sage2_last_error says "the fake library refused it".

    calls and ws_queries get one record per attention call and per workspace query: dict(fn=
    "dense" | "varlen" | "masked", q, k, v, o (TF fields), p (PF fields), lens (LF fields, varlen
    only), m (MF fields, masked only), structs (ids of the q, params and lens structures: which
    objects the binding hands over)); attention calls also record stream (the handle as an int)
    and thread (whose ids also collect in `threads`).

    Workspace sizes: dense 4096 + Nq, varlen 8192 + B + max_seqlen_q (or ws_bytes when set),
    masked 12288. varlen=False / masked=False: a library that predates those entry points (it
    has no such attributes)."""

    def __init__(self, varlen=True, masked=True):
        self.calls, self.ws_queries, self.fail, self.ws_bytes, self.threads = [], [], 0, None, set()
        if varlen:
            self.sage2_attention_varlen = self._attention_varlen
            self.sage2_workspace_size_varlen = self._workspace_size_varlen
        if masked:
            self.sage2_attention_masked = self._attention_masked
            self.sage2_workspace_size_masked = self._workspace_size_masked

    def _record(self, fn, q, k, v, o, p, lens=None, m=None):
        rec = dict(fn=fn, q=snap(q._obj, TF), k=snap(k._obj, TF), v=snap(v._obj, TF), o=snap(o._obj, TF),
                   p=snap(p._obj, PF), structs=(id(q._obj), id(p._obj), None if lens is None else id(lens._obj)))
        if lens is not None:
            rec["lens"] = snap(lens._obj, LF)
        if m is not None:
            rec["m"] = snap(m._obj, MF)
        return rec

    def _query(self, rec, n, size):
        self.ws_queries.append(rec)
        n._obj.value = size
        return 0

    def _call(self, rec, stream):
        rec["stream"] = getattr(stream, "value", stream)  # the fast paths pass the raw int
        rec["thread"] = threading.get_ident()
        self.threads.add(rec["thread"])
        self.calls.append(rec)
        return self.fail

    def sage2_workspace_size(self, ctx, q, k, v, o, p, n):
        return self._query(self._record("dense", q, k, v, o, p), n, 4096 + q._obj.seq)

    def sage2_attention(self, ctx, q, k, v, o, p, stream):
        return self._call(self._record("dense", q, k, v, o, p), stream)

    def _workspace_size_varlen(self, ctx, q, k, v, o, lens, p, n):
        size = self.ws_bytes or 8192 + lens._obj.batch + lens._obj.max_seqlen_q
        return self._query(self._record("varlen", q, k, v, o, p, lens=lens), n, size)

    def _attention_varlen(self, ctx, q, k, v, o, lens, p, stream):
        return self._call(self._record("varlen", q, k, v, o, p, lens=lens), stream)

    def _workspace_size_masked(self, ctx, q, k, v, o, m, p, n):
        return self._query(self._record("masked", q, k, v, o, p, m=m), n, 12288)

    def _attention_masked(self, ctx, q, k, v, o, m, p, stream):
        return self._call(self._record("masked", q, k, v, o, p, m=m), stream)

    def sage2_last_error(self):
        return b"the fake library refused it"


def install(lib):
    """Makes sage2 use `lib` (a FakeLib) and fake contexts 0x1000 + device index."""
    from sage2 import _lib

    _lib.lib = lambda: lib
    _lib.context = lambda i: ctypes.c_void_p(0x1000 + i)


def T(*shape, dtype=None, strides=None, dev="cuda:0", rg=False):
    """A fake tensor (float16 unless dtype is given)."""
    import torch

    return torch.Tensor(shape, dtype or torch.float16, dev, strides, rg)


def lens(n, dev="cuda:0", dtype=None, strides=None):
    """A fake 1-D length tensor of n entries (int32 unless dtype is given)."""
    import torch

    return torch.Tensor((n,), dtype or torch.int32, dev, strides)


def packed(tq=100, tk=300, hq=8, hk=2, d=64, b=4, dtype=None, dev="cuda:0"):
    """sageattn_varlen's arguments: q [tq, hq, d], k, v [tk, hk, d], cu_seqlens_q, cu_seqlens_k [b + 1]."""
    return (T(tq, hq, d, dtype=dtype, dev=dev), T(tk, hk, d, dtype=dtype, dev=dev), T(tk, hk, d, dtype=dtype, dev=dev),
            lens(b + 1, dev=dev), lens(b + 1, dev=dev))


def expect_error(fn, exc, text):
    """fn() raises exc with `text` in its message, and the installed library (a FakeLib) was
    neither called nor asked for a workspace size; returns the message."""
    from sage2 import _lib

    lib = _lib.lib()
    c0, w0 = len(lib.calls), len(lib.ws_queries)
    try:
        fn()
    except exc as e:
        msg = str(e)
    else:
        raise AssertionError("no %s for %r" % (exc.__name__, text))
    assert text in msg, (text, msg)
    assert len(lib.calls) == c0 and len(lib.ws_queries) == w0, "the library was called before the error: " + text
    return msg


def expect_unsupported(fn, symbol):
    """fn() raises sage2.UnsupportedError (a NotImplementedError, status "unsupported") saying that
    the library predates `symbol`."""
    import sage2

    try:
        fn()
    except sage2.UnsupportedError as e:
        assert isinstance(e, NotImplementedError) and e.status_name == "unsupported"
        assert symbol in str(e) and "predates" in str(e), str(e)
    else:
        raise AssertionError("no UnsupportedError for %s" % symbol)


def counting(f, counter):
    """f, counting its calls in counter[0]."""
    def g(*a):
        counter[0] += 1
        return f(*a)

    return g


# ---- the ctypes declarations ---------------------------------------------------------------------------
class _Fn:
    """Stands for a ctypes function: takes restype / argtypes."""


class FakeCDLL:
    """Stands for a ctypes.CDLL that has every symbol but those in `missing`."""

    def __init__(self, missing=()):
        self._missing = set(missing)

    def __getattr__(self, name):
        if name.startswith("_") or name in self._missing:
            raise AttributeError(name)
        fn = _Fn()
        setattr(self, name, fn)
        return fn


def c_layout(tmp_path, struct, fields, constants=()):
    """{"size": sizeof(struct), field: offsetof(struct, field) for each of fields, name: (int)expr
    for each (name, expr) of constants} as a C compiler sees include/sage2/sage2.h. Skips (pytest)
    without a C compiler, the header, or `struct` in the header."""
    import pytest

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc or not os.path.exists(HEADER):
        pytest.skip("no C compiler or no header (%s)" % HEADER)
    with open(HEADER, encoding="utf-8") as f:
        if struct not in f.read():
            pytest.skip("the header %s predates %s" % (HEADER, struct))
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "sage2/sage2.h"', "int main(void) {",
             'printf("size %%zu\\n", sizeof(%s));' % struct]
    lines += ['printf("%s %%zu\\n", offsetof(%s, %s));' % (f, struct, f) for f in fields]
    lines += ['printf("%s %%d\\n", (int)%s);' % (n, c) for n, c in constants]
    lines += ["return 0;", "}"]
    src = tmp_path / (struct + ".c")
    src.write_text("\n".join(lines))
    exe = tmp_path / struct
    subprocess.run([cc, "-I", os.path.dirname(os.path.dirname(HEADER)), str(src), "-o", str(exe)], check=True)
    return {k: int(v) for k, v in (line.rsplit(" ", 1) for line in subprocess.check_output([str(exe)], text=True)
                                   .splitlines())}
