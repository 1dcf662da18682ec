"""The eager fast path of sageattn (issue 15 item 2), without a GPU and without torch: a small
fake torch module (metadata-only tensors with fake addresses) and a fake library (records the
sage2_tensor / sage2_attention_params it is handed) run in a subprocess.

What it pins down: a second call with the same metadata skips the Python checks and the
workspace query and hands the library exactly the structures a fresh (uncached) call builds for
the same pointers; other strides, dtypes, layouts, causal modes, scales or options miss; a value
that equals a cached one but has another type (sm_scale=True vs 1.0) is still refused; autograd
and library errors behave as before; each thread has its own structures."""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)

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

DRIVER = r'''
import ctypes, sys, threading
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from sage2 import _attention as A, _lib

FIELDS = ("data", "dtype", "batch", "heads", "seq", "dim", "stride_batch", "stride_head", "stride_seq", "stride_dim")
PFIELDS = ("causal", "sm_scale", "qk_bits", "smooth_q", "smooth_k", "smooth_v", "lse", "workspace", "workspace_bytes")
def snap(t, fields): return tuple(getattr(t, f) for f in fields)

class FakeLib:
    def __init__(self): self.calls, self.ws_queries, self.fail, self.threads = [], 0, 0, set()
    def sage2_workspace_size(self, ctx, q, k, v, o, p, n):
        self.ws_queries += 1
        n._obj.value = 4096 + q._obj.seq
        return 0
    def sage2_attention(self, ctx, q, k, v, o, p, stream):
        self.threads.add(threading.get_ident())
        self.calls.append(dict(q=snap(q._obj, FIELDS), k=snap(k._obj, FIELDS), v=snap(v._obj, FIELDS),
                               o=snap(o._obj, FIELDS), p=snap(p._obj, PFIELDS),
                               stream=getattr(stream, "value", stream)))
        if self.fail:
            return self.fail
        return 0
    def sage2_last_error(self): return b"the fake library refused it"
fake = FakeLib()
_lib.lib = lambda: fake
_lib.context = lambda i: ctypes.c_void_p(0x1000 + i)
normalize_calls = [0]
_orig_normalize = A._normalize
def counting_normalize(*a):
    normalize_calls[0] += 1
    return _orig_normalize(*a)
A._normalize = counting_normalize

def T(*shape, dtype=torch.float16, strides=None, rg=False):
    return torch.Tensor(shape, dtype, "cuda:0", strides, rg)

def call(q, k, v, **kw):
    n0, c0, w0 = normalize_calls[0], len(fake.calls), fake.ws_queries
    r = sage2.sageattn(q, k, v, **kw)
    return r, normalize_calls[0] - n0, fake.ws_queries - w0, fake.calls[-1] if len(fake.calls) > c0 else None

def expect_fresh_equal(rec, q, k, v, out, **kw):
    """The same call with the fast cache emptied: the structures must be identical (the output's
    and workspace's pointers aside, which are new allocations) -> compare with those swapped in."""
    saved = dict(A._fast)
    A._fast.clear()
    r2, n, w, rec2 = call(q, k, v, **kw)
    A._fast.clear(); A._fast.update(saved)
    assert n == 1, "the fresh call normalizes"
    out2 = r2[0] if isinstance(r2, tuple) else r2
    for name in ("q", "k", "v"):
        assert rec[name] == rec2[name], (name, rec[name], rec2[name])
    assert rec["o"][1:] == rec2["o"][1:] and rec["o"][0] == out.data_ptr() and rec2["o"][0] == out2.data_ptr()
    p1, p2 = list(rec["p"]), list(rec2["p"])
    assert p1[:6] == p2[:6] and p1[8] == p2[8], (p1, p2)
    assert (p1[6] is None) == (p2[6] is None)
    assert rec["stream"] == rec2["stream"]

# 1. first call: checks + workspace query; second: neither, same structures
q, k, v = T(1, 2, 128, 64), T(1, 2, 128, 64), T(1, 2, 128, 64)
out, n, w, rec = call(q, k, v)
assert (n, w) == (1, 1), (n, w)
q2, k2, v2 = T(1, 2, 128, 64), T(1, 2, 128, 64), T(1, 2, 128, 64)
out2, n, w, rec = call(q2, k2, v2)
assert (n, w) == (0, 0), (n, w)
assert rec["q"][0] == q2.data_ptr() and rec["k"][0] == k2.data_ptr() and rec["v"][0] == v2.data_ptr()
assert rec["o"][0] == out2.data_ptr() and out2.shape == q2.shape and out2.dtype == torch.float16
assert rec["p"][7] % 256 == 0 and rec["p"][8] == 4096 + 128 and rec["stream"] == 0x5000
expect_fresh_equal(rec, q2, k2, v2, out2)

# 2. what must miss: strides, dtype, layout, causal, scale, options, lse
variants = [
    (lambda: (T(1, 2, 128, 64, strides=(2 * 128 * 128, 128 * 128, 128, 1)), T(1, 2, 128, 64), T(1, 2, 128, 64)), {}),
    (lambda: tuple(T(1, 2, 128, 64, dtype=torch.bfloat16) for _ in range(3)), {}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"tensor_layout": "NHD"}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"is_causal": True}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"is_causal": True, "causal_alignment": "bottom_right"}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"sm_scale": 0.5}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"qk_bits": 8}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"smooth_v": True}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"return_lse": True}),
    (lambda: (T(1, 4, 128, 64), T(1, 2, 128, 64), T(1, 2, 128, 64)), {}),
]
for make, kw in variants:
    r, n, w, rec = call(*make(), **kw)
    assert n == 1, ("should miss", kw)
    args = make()
    r, n, w, rec = call(*args, **kw)
    assert (n, w) == (0, 0), ("should hit", kw, n, w)
    out = r[0] if isinstance(r, tuple) else r
    if kw.get("return_lse"):
        assert isinstance(r, tuple) and r[1].shape == (1, 2, 128) and rec["p"][6] == r[1].data_ptr()
    else:
        assert rec["p"][6] is None
    expect_fresh_equal(rec, *args, out, **kw)

# 3. equal but differently typed scalars are checked again
q, k, v = T(1, 2, 64, 64), T(1, 2, 64, 64), T(1, 2, 64, 64)
call(q, k, v, sm_scale=1.0)
r, n, w, rec = call(q, k, v, sm_scale=1.0)
assert n == 0
try:
    sage2.sageattn(q, k, v, sm_scale=True)
    raise AssertionError("sm_scale=True accepted")
except TypeError as e:
    assert "sm_scale" in str(e)
call(q, k, v, smooth_k=True)
try:
    sage2.sageattn(q, k, v, smooth_k=1)
    raise AssertionError("smooth_k=1 accepted")
except TypeError as e:
    assert "smooth_k" in str(e)
# unhashable arguments: the normal checks name them
try:
    sage2.sageattn(q, k, v, tensor_layout=["HND"])
    raise AssertionError("a list layout accepted")
except TypeError as e:
    assert "tensor_layout" in str(e)

# 4. autograd: a tensor that requires grad goes through the custom op even when cached
q, k, v = T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64)
call(q, k, v)
torch._grad[0] = True
ops0 = len(torch.OP_CALLS)
r, n, w, rec = call(T(1, 2, 32, 64, rg=True), k, v)
assert len(torch.OP_CALLS) == ops0 + 1 and n == 1
torch._grad[0] = False

# 5. a library error on the fast path raises like the slow one
fake.fail = 1
try:
    sage2.sageattn(q, k, v)
    raise AssertionError("no error")
except sage2.InvalidArgumentError as e:
    assert "the fake library refused it" in str(e) and "sage2_attention" in str(e)
fake.fail = 0

# 6. the workspace: a small one is reused by the thread's next call on the same stream (that call
#    is ordered after the previous one's kernels) when it is large enough, whatever the signature;
#    never while a CUDA graph is captured, never across streams; one kept per thread
q, k, v = T(1, 2, 96, 64), T(1, 2, 96, 64), T(1, 2, 96, 64)
call(q, k, v)
_, _, _, rec1 = call(q, k, v)
_, _, _, rec2 = call(q, k, v)
assert rec1["p"][7] == rec2["p"][7] and rec2["p"][8] == 4096 + 96, (rec1["p"], rec2["p"])
torch.CAPTURING[0] = True
_, _, _, rec3 = call(q, k, v)
_, _, _, rec4 = call(q, k, v)
torch.CAPTURING[0] = False
assert len({rec2["p"][7], rec3["p"][7], rec4["p"][7]}) == 3, "capture allocates each call from torch"
_, _, _, rec5 = call(q, k, v)  # after the capture: the kept one was not replaced by a captured one
assert rec5["p"][7] == rec2["p"][7]
raw = torch._C._cuda_getCurrentRawStream
torch._C._cuda_getCurrentRawStream = staticmethod(lambda i: 0x6000 + i)
A._raw_stream = torch._C._cuda_getCurrentRawStream
_, _, _, rec6 = call(q, k, v)
A._raw_stream = raw
torch._C._cuda_getCurrentRawStream = raw
assert rec6["stream"] == 0x6000 and rec6["p"][7] != rec2["p"][7], "another stream gets its own workspace"
for n_ in (16, 200):  # first calls of these signatures (the checked path, its own workspace)
    call(T(1, 2, n_, 64), T(1, 2, n_, 64), T(1, 2, n_, 64))
_, _, _, r_a = call(T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64))     # 4096 + 32 bytes on 0x5000: new
_, _, _, r_b = call(T(1, 2, 16, 64), T(1, 2, 16, 64), T(1, 2, 16, 64))     # smaller: reuses it
assert r_b["p"][7] == r_a["p"][7] and r_b["p"][8] == 4096 + 16
_, _, _, r_c = call(T(1, 2, 200, 64), T(1, 2, 200, 64), T(1, 2, 200, 64))  # larger: a new one
assert r_c["p"][7] != r_a["p"][7]

# every device's default stream has the raw handle 0: a workspace kept on one device is never
# handed to a call on another
A._raw_stream = lambda i: 0
def T1(*shape): return torch.Tensor(shape, torch.float16, "cuda:1")
call(T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64))
_, _, _, r_d0 = call(T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64))
call(T1(1, 2, 32, 64), T1(1, 2, 32, 64), T1(1, 2, 32, 64))
_, _, _, r_d1 = call(T1(1, 2, 32, 64), T1(1, 2, 32, 64), T1(1, 2, 32, 64))
A._raw_stream = raw
assert r_d0["stream"] == r_d1["stream"] == 0 and r_d1["p"][7] != r_d0["p"][7], "a kept workspace crossed devices"

# 7. another thread: its own structures, the same results
res = {}
def worker():
    res["r"] = call(T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64))
th = threading.Thread(target=worker); th.start(); th.join()
assert res["r"][1:3] == (0, 0) and len(fake.threads) == 2
print("FAST PATH OK")
'''


def test_fast_path_with_fake_torch(tmp_path):
    pkg = tmp_path / "faketorch"
    (pkg / "torch" / "nn").mkdir(parents=True)
    (pkg / "torch" / "__init__.py").write_text(FAKE_TORCH + "\nfrom . import nn\n")
    (pkg / "torch" / "nn" / "__init__.py").write_text("from . import functional\n")
    (pkg / "torch" / "nn" / "functional.py").write_text("def scaled_dot_product_attention(*a, **k): raise RuntimeError\n")
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pkg), PYTHON_DIR])
    env.setdefault("SAGE2_LIBRARY", "/nonexistent/libsage2.so")  # the fake library replaces it
    r = subprocess.run([sys.executable, str(script), str(pkg)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "FAST PATH OK" in r.stdout, r.stdout + r.stderr
