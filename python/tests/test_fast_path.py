"""The eager fast path of sageattn (issue 15 item 2), without a GPU and without torch: a small
fake torch module (metadata-only tensors with fake addresses) and a fake library (records the
sage2_tensor / sage2_attention_params it is handed) run in a subprocess (both: fake_torch.py).

What it pins down: a second call with the same metadata skips the Python checks and the
workspace query and hands the library exactly the structures a fresh (uncached) call builds for
the same pointers; other strides, dtypes, layouts, causal modes, scales or options miss; a value
that equals a cached one but has another type (sm_scale=True vs 1.0) is still refused; autograd
and library errors behave as before; each thread has its own structures."""
from fake_torch import FAKE_TORCH, run_driver

DRIVER = r'''
import sys, threading
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from sage2 import _attention as A
from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)
from fake_torch import FakeLib, T, counting, install

fake = FakeLib(varlen=False, masked=False)
install(fake)
normalize_calls = [0]
C._normalize = counting(C._normalize, normalize_calls)

def call(q, k, v, **kw):
    n0, c0, w0 = normalize_calls[0], len(fake.calls), len(fake.ws_queries)
    r = sage2.sageattn(q, k, v, **kw)
    return r, normalize_calls[0] - n0, len(fake.ws_queries) - w0, fake.calls[-1] if len(fake.calls) > c0 else None

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
    assert p1[:6] == p2[:6] and p1[8:] == p2[8:], (p1, p2)
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
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"pv_precision": "fp16"}),
    (lambda: tuple(T(1, 2, 128, 64) for _ in range(3)), {"pv_precision": "fp8", "qk_bits": 4}),
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
    # the P~V precision travels in its own field; qk_bits keeps the C value
    assert rec["p"][9] == {None: 0, "fp8": 1, "fp16": 2}[kw.get("pv_precision")], rec["p"]
    assert rec["p"][2] == kw.get("qk_bits", 0), rec["p"]
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
C._raw_stream = torch._C._cuda_getCurrentRawStream
_, _, _, rec6 = call(q, k, v)
C._raw_stream = raw
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
C._raw_stream = lambda i: 0
def T1(*shape): return torch.Tensor(shape, torch.float16, "cuda:1")
call(T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64))
_, _, _, r_d0 = call(T(1, 2, 32, 64), T(1, 2, 32, 64), T(1, 2, 32, 64))
call(T1(1, 2, 32, 64), T1(1, 2, 32, 64), T1(1, 2, 32, 64))
_, _, _, r_d1 = call(T1(1, 2, 32, 64), T1(1, 2, 32, 64), T1(1, 2, 32, 64))
C._raw_stream = raw
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
    r = run_driver(tmp_path, DRIVER, torch_source=FAKE_TORCH)
    assert r.returncode == 0 and "FAST PATH OK" in r.stdout, r.stdout + r.stderr
