"""The eager fast path of sageattn_varlen and sageattn(kv_lens=...) (issue 17), without a GPU and
without torch: the metadata-only fake torch of fake_torch.py (fake addresses, int32, custom ops
by name) and its FakeLib, a fake library that records the sage2_tensor / sage2_seqlens /
sage2_attention_params it is handed, run in a subprocess.

What it pins down, for the packed and the key-padding form: the second call of a signature skips
the Python checks and the workspace query and hands sage2_attention_varlen exactly the structures
a fresh (uncached) call builds, with the pointers of the new call's q, k, v, output, LSE and
length tensors; another max_seqlen_q/k, batch B, option, dtype, stride or layout is another
signature; equal values of another type are checked again; bad length tensors are still refused;
the kept workspace follows the dense path's rules (per thread, same device and stream, not while
capturing, at most C._WS_KEEP_MAX (64 MiB), shared with dense calls); autograd, torch.compile and tensor
subclasses bypass it; library errors raise the same exceptions; a failed, empty or no-key call
is not cached; the dense cache and the varlen cache stay apart; each thread has its own structures."""
from fake_torch import run_driver

DRIVER = r'''
import sys, threading
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from sage2 import _attention as A, _varlen as VL
from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)
from fake_torch import FakeLib, T, counting, expect_error, install, lens, packed

fake = FakeLib()
install(fake)
checks = [0]
VL._normalize_packed = counting(VL._normalize_packed, checks)  # the packed form's checks
C._normalize = counting(C._normalize, checks)                  # sageattn's (the key-padding form's first step)

F16, BF16, I32 = torch.float16, torch.bfloat16, torch.int32
def padded(layout="HND", b=2, hq=8, hk=2, nq=128, nk=256, d=64, dtype=F16, dev="cuda:0"):
    qs, ks = ((b, hq, nq, d), (b, hk, nk, d)) if layout == "HND" else ((b, nq, hq, d), (b, nk, hk, d))
    return T(*qs, dtype=dtype, dev=dev), T(*ks, dtype=dtype, dev=dev), T(*ks, dtype=dtype, dev=dev), lens(b, dev=dev)

V, S = sage2.sageattn_varlen, sage2.sageattn
def run(fn, *a, **kw):
    """(result, checks run, workspace queries, the C call's record or None, new allocations)."""
    n0, w0, c0, a0 = checks[0], len(fake.ws_queries), len(fake.calls), len(torch.ALLOCS)
    r = fn(*a, **kw)
    rec = fake.calls[-1] if len(fake.calls) > c0 else None
    return r, checks[0] - n0, len(fake.ws_queries) - w0, rec, torch.ALLOCS[a0:]
def vp(q, k, v, cq, ck, **kw): return run(V, q, k, v, cq, ck, **kw)
def kp(q, k, v, kvl, **kw): return run(S, q, k, v, kv_lens=kvl, **kw)
def first(r): return r[0] if isinstance(r, tuple) else r

def expect_fresh_equal(rec, fn, args, kw, out):
    """The same call with the varlen cache emptied builds the same structures (output, LSE and
    workspace pointers aside: new allocations; the output's must be the returned tensor's)."""
    saved = dict(VL._fast)
    VL._fast.clear()
    r2, n, w, rec2, _ = run(fn, *args, **kw)
    VL._fast.clear(); VL._fast.update(saved)
    assert n == 1 and rec2 is not None, "the fresh call is checked"
    for name in ("q", "k", "v", "lens"):
        assert rec[name] == rec2[name], (name, rec[name], rec2[name])
    assert rec["o"][1:] == rec2["o"][1:] and rec["o"][0] == out.data_ptr() and rec2["o"][0] == first(r2).data_ptr()
    p1, p2 = rec["p"], rec2["p"]
    assert p1[:6] == p2[:6] and p1[8] == p2[8] and (p1[6] is None) == (p2[6] is None), (p1, p2)
    assert rec["stream"] == rec2["stream"] and rec["fn"] == rec2["fn"] == "varlen"

# ---- 1. packed: the second call of a signature is the fast path ---------------------------------------------
kw = dict(max_seqlen_q=40, max_seqlen_k=90, is_causal=True, causal_alignment="bottom_right", return_lse=True)
r, n, w, rec, new = vp(*packed(), **kw)
assert (n, w) == (1, 1) and rec["fn"] == "varlen", (n, w)
for i in range(3):  # new tensors each call: every pointer is the new call's
    q, k, v, cq, ck = packed()
    (out, lse), n, w, rec, new = vp(q, k, v, cq, ck, **kw)
    assert (n, w) == (0, 0), (n, w)
    assert new[0] is out and new[1] is lse
    # the first fast call allocates the workspace it then keeps; the next ones allocate the outputs only
    assert len(new) == (3 if i == 0 else 2) and (i or new[2].dtype is torch.uint8), new
    assert out.shape == (100, 8, 64) and out.dtype == F16 and lse.shape == (8, 100) and lse.dtype == torch.float32
    assert rec["q"] == (q.data_ptr(), 0, 1, 8, 100, 64, 100 * 512, 64, 512, 1), rec["q"]
    assert rec["k"][0] == k.data_ptr() and rec["v"][0] == v.data_ptr()
    assert rec["o"] == (out.data_ptr(), 0, 1, 8, 100, 64, 100 * 512, 64, 512, 1), rec["o"]
    assert rec["lens"] == (4, cq.data_ptr(), ck.data_ptr(), None, 40, 90), rec["lens"]
    assert rec["p"][:7] == (2, 0.0, 0, 2, 1, 0, lse.data_ptr()), rec["p"]
    assert rec["p"][7] % 256 == 0 and rec["p"][8] == 8192 + 4 + 40 and rec["stream"] == 0x5000, rec["p"]
expect_fresh_equal(rec, V, (q, k, v, cq, ck), kw, out)
# no LSE: out alone, a NULL LSE pointer and no LSE allocation
vp(*packed())
q, k, v, cq, ck = packed()
out, n, w, rec, new = vp(q, k, v, cq, ck)
assert n == 0 and not isinstance(out, tuple) and rec["p"][6] is None and new[0] is out
assert all(t.dtype is not torch.float32 for t in new)
expect_fresh_equal(rec, V, (q, k, v, cq, ck), {}, out)
print("packed hit ok")

# ---- 2. key padding: the same ---------------------------------------------------------------------------------
for layout in ("HND", "NHD"):
    kw = dict(tensor_layout=layout, is_causal=True, return_lse=True, qk_bits=8)
    r, n, w, rec, new = kp(*padded(layout), **kw)
    assert (n, w) == (1, 1) and rec["fn"] == "varlen"
    for _ in range(2):
        q, k, v, kvl = padded(layout)
        (out, lse), n, w, rec, new = kp(q, k, v, kvl, **kw)
        assert (n, w) == (0, 0), (layout, n, w)
        assert [t.data_ptr() for t in new] == [out.data_ptr(), lse.data_ptr()]
        assert out.shape == q.shape and lse.shape == (2, 8, 128)
        assert rec["q"] == (q.data_ptr(),) + C._tensor_fields(q.shape, q.stride(), layout, 0), rec["q"]
        assert rec["k"] == (k.data_ptr(),) + C._tensor_fields(k.shape, k.stride(), layout, 0), rec["k"]
        assert rec["v"][0] == v.data_ptr()
        assert rec["o"] == (out.data_ptr(),) + C._tensor_fields(q.shape, out.stride(), layout, 0), rec["o"]
        assert rec["lens"] == (2, None, None, kvl.data_ptr(), 0, 0), rec["lens"]
        assert rec["p"][:7] == (1, 0.0, 8, 2, 1, 0, lse.data_ptr()), rec["p"]
        assert rec["p"][8] == 8192 + 2 and rec["stream"] == 0x5000
    expect_fresh_equal(rec, S, (q, k, v), dict(kw, kv_lens=kvl), out)
print("kv_lens hit ok")

# ---- 3. what is another signature: it is checked, then cached itself --------------------------------------------
P = dict(max_seqlen_q=40, max_seqlen_k=90)
packed_variants = [
    (lambda: packed(), dict(max_seqlen_q=41, max_seqlen_k=90)),
    (lambda: packed(), dict(max_seqlen_q=40, max_seqlen_k=91)),
    (lambda: packed(), dict(max_seqlen_q=40)),                      # max_seqlen_k None
    (lambda: packed(), dict(max_seqlen_q=40, max_seqlen_k=0)),      # 0: the same C value, another key
    (lambda: packed(b=3), P),                                       # another batch B
    (lambda: packed(b=7), P),
    (lambda: packed(tq=120), P),
    (lambda: packed(hq=4), P),
    (lambda: packed(dtype=BF16), P),
    (lambda: (T(100, 8, 64, strides=(3 * 512, 64, 1)),) + packed()[1:], P),  # a view of a packed qkv
    (lambda: packed(), dict(P, is_causal=True)),
    (lambda: packed(), dict(P, sm_scale=0.5)),
    (lambda: packed(), dict(P, qk_bits=8)),
    (lambda: packed(), dict(P, smooth_k=False)),
    (lambda: packed(), dict(P, smooth_v=True)),
    (lambda: packed(), dict(P, smooth_q=False)),
    (lambda: packed(), dict(P, return_lse=True)),
    (lambda: packed(dev="cuda:1"), P),
]
kv_variants = [
    (lambda: padded(b=3), {}),                                      # another batch B
    (lambda: padded(nk=200), {}),
    (lambda: padded(hk=4), {}),
    (lambda: padded(dtype=BF16), {}),
    (lambda: padded("NHD"), dict(tensor_layout="NHD", is_causal=True)),
    (lambda: padded(), dict(is_causal=True, causal_alignment="bottom_right")),
    (lambda: padded(), dict(sm_scale=0.25)),
    (lambda: padded(), dict(qk_bits=4)),
    (lambda: padded(), dict(smooth_v=True)),
    (lambda: padded(), dict(return_lse=True)),
]
vp(*packed(), **P)
kp(*padded())
for fn, variants in ((vp, packed_variants), (kp, kv_variants)):
    for make, kw in variants:
        r, n, w, rec, _ = fn(*make(), **kw)
        assert n == 1, ("should miss", kw)
        args = make()
        r, n, w, rec, _ = fn(*args, **kw)
        assert (n, w) == (0, 0), ("should hit", kw, n, w)
        out = first(r)
        if kw.get("return_lse"):
            assert rec["p"][6] == r[1].data_ptr()
        if fn is vp:
            assert rec["lens"][0] == args[3].shape[0] - 1
            assert rec["lens"][1:3] == (args[3].data_ptr(), args[4].data_ptr())
            assert rec["lens"][4:] == (kw.get("max_seqlen_q") or 0, kw.get("max_seqlen_k") or 0)
            expect_fresh_equal(rec, V, args, kw, out)
        else:
            assert rec["lens"] == (args[0].shape[0], None, None, args[3].data_ptr(), 0, 0)
            expect_fresh_equal(rec, S, args[:3], dict(kw, kv_lens=args[3]), out)
print("signatures ok")

# ---- 4. what the checks refuse is still refused after a similar call was cached ----------------------------------
q, k, v, cq, ck = packed()
vp(q, k, v, cq, ck, max_seqlen_q=1)
vp(q, k, v, cq, ck, max_seqlen_q=1, sm_scale=1.0)
vp(q, k, v, cq, ck, smooth_k=True)
qh, kh, vh, kvl = padded()
kp(qh, kh, vh, kvl, sm_scale=1.0)
kp(qh, kh, vh, kvl, sm_scale=1.0)
W = "sage2.sageattn_varlen: "
for fn, exc, text in [
    (lambda: V(q, k, v, cq, ck, max_seqlen_q=True), TypeError, W + "max_seqlen_q must be an int or None"),
    (lambda: V(q, k, v, cq, ck, max_seqlen_q=1, sm_scale=True), TypeError, W + "sm_scale must be a float"),
    (lambda: V(q, k, v, cq, ck, smooth_k=1), TypeError, W + "smooth_k=1"),
    (lambda: V(q, k, v, cq, ck, max_seqlen_q=[1]), TypeError, W + "max_seqlen_q must be an int"),  # unhashable
    (lambda: V(q, k, v, cq, ck, qk_bits=[8]), ValueError, W + "qk_bits=[8]"),
    (lambda: V(q, k, v, lens(5, strides=(2,)), ck), ValueError, W + "cu_seqlens_q must be contiguous"),
    (lambda: V(q, k, v, cq, lens(5, dtype=torch.float16)), TypeError, W + "cu_seqlens_k has dtype torch.float16"),
    (lambda: V(q, k, v, lens(5, dev="cuda:1"), ck), ValueError, W + "cu_seqlens_q is on device(cuda:1) but q"),
    (lambda: V(q, k, v, cq, lens(4)), ValueError, W + "cu_seqlens_k has 4 entries but cu_seqlens_q has 5"),
    (lambda: V(q, k, v, cq, [0, 100]), TypeError, W + "cu_seqlens_k must be a torch.Tensor"),
    (lambda: V(q, k, v, cq, ck, smooth_q=True), ValueError, W + "smooth_q=True is not supported"),
    (lambda: S(qh, kh, vh, kv_lens=kvl, sm_scale=True), TypeError, "sage2.sageattn: sm_scale must be a float"),
    (lambda: S(qh, kh, vh, kv_lens=lens(3)), ValueError, "sage2.sageattn: kv_lens has 3 entries but q has batch 2"),
    (lambda: S(qh, kh, vh, kv_lens=lens(2, strides=(2,))), ValueError, "sage2.sageattn: kv_lens must be contiguous"),
    (lambda: S(qh, kh, vh, kv_lens=lens(2, dtype=torch.int64)), TypeError, "kv_lens has dtype torch.int64"),
    (lambda: S(qh, kh, vh, kv_lens=[10, 20]), TypeError, "sage2.sageattn: kv_lens must be a torch.Tensor"),
    (lambda: S(qh, kh, vh, kv_lens=kvl, smooth_q=True), ValueError, "smooth_q=True is not supported"),
    (lambda: S(qh, kh, vh, kv_lens=kvl, tensor_layout=["HND"]), TypeError, "tensor_layout must be a str"),
]:
    expect_error(fn, exc, text)
print("refusals ok")

# ---- 5. the workspace: the dense path's rules, one kept per thread for dense and varlen calls alike -------------
def ws_of(rec): return rec["p"][7]
q, k, v, cq, ck = packed(tq=64)
vp(q, k, v, cq, ck, max_seqlen_q=50)
_, _, _, r1, new1 = vp(q, k, v, cq, ck, max_seqlen_q=50)
_, _, _, r2, new2 = vp(q, k, v, cq, ck, max_seqlen_q=50)
assert ws_of(r1) == ws_of(r2) and r2["p"][8] == 8192 + 4 + 50 and len(new2) == 1, "kept for the next call"
vp(q, k, v, cq, ck, max_seqlen_q=40)
_, _, _, r3, _ = vp(q, k, v, cq, ck, max_seqlen_q=40)    # a smaller one of another signature: reused
assert ws_of(r3) == ws_of(r2) and r3["p"][8] == 8192 + 4 + 40
vp(q, k, v, cq, ck, max_seqlen_q=60)
_, _, _, r4, _ = vp(q, k, v, cq, ck, max_seqlen_q=60)    # a larger one: a new workspace (then kept)
assert ws_of(r4) != ws_of(r2)
qh, kh, vh, kvl = padded(b=1)
_, _, _, r5, _ = kp(qh, kh, vh, kvl)                     # the key-padding form takes the kept one too
_, _, _, r5, new5 = kp(qh, kh, vh, kvl)
assert ws_of(r5) == ws_of(r4) and r5["p"][8] == 8192 + 1 and len(new5) == 1
qd = T(1, 2, 32, 64)
S(qd, qd, qd)
_, _, _, r6, _ = run(S, qd, qd, qd)                       # and a dense fast call (4096 + 32 bytes)
assert r6["fn"] == "dense" and ws_of(r6) == ws_of(r4) and r6["p"][8] == 4096 + 32
# while a CUDA graph is captured: a workspace from torch each call, the kept one left alone
torch.CAPTURING[0] = True
cap = []
for _ in range(3):
    _, n, _, rc, newc = vp(q, k, v, cq, ck, max_seqlen_q=60)
    assert n == 0 and len(newc) == 2 and newc[1].dtype is torch.uint8 and newc[1].shape == (8192 + 4 + 60 + 256,)
    assert newc[1].data_ptr() <= ws_of(rc) < newc[1].data_ptr() + 256
    cap.append(ws_of(rc))
torch.CAPTURING[0] = False
assert len(set(cap)) == 3 and ws_of(r4) not in cap
_, _, _, r7, _ = vp(q, k, v, cq, ck, max_seqlen_q=60)
assert ws_of(r7) == ws_of(r4), "the kept workspace survives a capture"
# another stream: its own workspace
raw = C._raw_stream
C._raw_stream = lambda i: 0x6000 + i
_, _, _, r8, _ = vp(q, k, v, cq, ck, max_seqlen_q=60)
C._raw_stream = raw
assert r8["stream"] == 0x6000 and ws_of(r8) != ws_of(r4)
# every device's default stream is 0: a kept workspace never crosses devices
C._raw_stream = lambda i: 0
vp(q, k, v, cq, ck, max_seqlen_q=60)
_, _, _, r9, _ = vp(q, k, v, cq, ck, max_seqlen_q=60)
q1, k1, v1, cq1, ck1 = packed(tq=64, dev="cuda:1")
vp(q1, k1, v1, cq1, ck1, max_seqlen_q=60)
_, _, _, r10, _ = vp(q1, k1, v1, cq1, ck1, max_seqlen_q=60)
C._raw_stream = raw
assert r9["stream"] == r10["stream"] == 0 and ws_of(r10) != ws_of(r9), "a kept workspace crossed devices"
# more than C._WS_KEEP_MAX is never kept: each call takes its own, and the small kept one stays
vp(q, k, v, cq, ck, max_seqlen_q=60)
_, _, _, small, _ = vp(q, k, v, cq, ck, max_seqlen_q=60)
fake.ws_bytes = C._WS_KEEP_MAX + 256
qb, kb, vb, cqb, ckb = packed(tq=64, b=9)
vp(qb, kb, vb, cqb, ckb)
fake.ws_bytes = None
big = []
for _ in range(2):
    _, n, _, rb, newb = vp(qb, kb, vb, cqb, ckb)
    assert n == 0 and rb["p"][8] == C._WS_KEEP_MAX + 256 and len(newb) == 2
    big.append(ws_of(rb))
assert big[0] != big[1] and ws_of(small) not in big
_, _, _, r11, _ = vp(q, k, v, cq, ck, max_seqlen_q=60)
assert ws_of(r11) == ws_of(small)
print("workspace ok")

# ---- 6. what bypasses it: autograd, torch.compile, tensor subclasses ----------------------------------------
q, k, v, cq, ck = packed(tq=32)
qh, kh, vh, kvl = padded(nq=32)
vp(q, k, v, cq, ck)
kp(qh, kh, vh, kvl)
nv = len(VL._fast)
torch._grad[0] = True
ops0 = len(torch.OP_CALLS)
_, n, _, rec, _ = vp(T(32, 8, 64, rg=True), k, v, cq, ck)
assert n == 1 and len(torch.OP_CALLS) == ops0 + 1 and torch.OP_CALLS[-1][0] == "sageattn_varlen"
_, n, _, rec, _ = kp(T(*qh.shape, rg=True), kh, vh, kvl)
assert n == 1 and len(torch.OP_CALLS) == ops0 + 2
_, n, _, _, _ = vp(q, k, v, cq, ck)    # grad mode on, nothing requires grad: no recording, the fast path
assert n == 0 and len(torch.OP_CALLS) == ops0 + 2
torch._grad[0] = False
torch.compiler.is_compiling = lambda: True
_, n, _, _, _ = vp(q, k, v, cq, ck)
_, n2, _, _, _ = kp(qh, kh, vh, kvl)
torch.compiler.is_compiling = lambda: False
assert (n, n2) == (1, 1) and len(torch.OP_CALLS) == ops0 + 4
class Sub(torch.Tensor): pass
sub = Sub((5,), I32, "cuda:0")
_, n, _, _, _ = vp(q, k, v, sub, ck)
sub_kv = Sub((2,), I32, "cuda:0")
_, n2, _, _, _ = kp(qh, kh, vh, sub_kv)
assert (n, n2) == (1, 1) and len(torch.OP_CALLS) == ops0 + 6, "subclass lengths go to the custom op"
assert len(VL._fast) == nv, "nothing from the op path is cached"
print("bypass ok")

# ---- 7. library errors; failed, empty and no-key calls are not cached ------------------------------------------
q, k, v, cq, ck = packed(tq=48)
qh, kh, vh, kvl = padded(nq=48)
vp(q, k, v, cq, ck)
kp(qh, kh, vh, kvl)
for status, exc in ((1, sage2.InvalidArgumentError), (2, sage2.UnsupportedError), (8, sage2.Sage2OutOfMemoryError),
                    (9, sage2.Sage2Error)):
    fake.fail = status
    for fn in (lambda: V(q, k, v, cq, ck), lambda: S(qh, kh, vh, kv_lens=kvl)):
        n0 = checks[0]
        try:
            fn()
            raise AssertionError("no error")
        except exc as e:
            assert type(e) is exc and e.status == status and e.function == "sage2_attention_varlen", (e, status)
            assert "the fake library refused it" in str(e) and "sage2_attention_varlen" in str(e), str(e)
        assert checks[0] == n0, "the error came from the fast path"
fake.fail = 1
nv = len(VL._fast)
for fn in (lambda: V(*packed(tq=56)), lambda: S(*padded(nq=56)[:3], kv_lens=lens(2))):
    try:
        fn()
        raise AssertionError("no error")
    except sage2.InvalidArgumentError:
        pass
fake.fail = 0
assert len(VL._fast) == nv, "a failed call is not cached"
for fn in (vp, kp):
    args = packed(tq=56) if fn is vp else padded(nq=56)
    _, n, w, _, _ = fn(*args)
    assert (n, w) == (1, 0), "checked again (the workspace size was cached by the failed call)"
c0 = len(fake.calls)
e3, e4 = dict(strides=(128, 64, 1)), dict(strides=(128, 64, 64, 1))  # torch's strides of empty tensors
for _ in range(2):
    assert vp(T(0, 8, 64), k, v, cq, ck)[1] == 1
    assert vp(T(10, 8, 64), T(0, 2, 64, **e3), T(0, 2, 64, **e3), cq, ck)[1] == 1
    assert kp(T(2, 8, 0, 64, strides=(512, 64, 64, 1)), kh, vh, kvl)[1] == 1
    assert kp(qh, T(2, 2, 0, 64, **e4), T(2, 2, 0, 64, **e4), kvl)[1] == 1
assert len(fake.calls) == c0 and len(VL._fast) == nv + 2, "empty and no-key calls are not cached"
print("errors ok")

# ---- 8. the dense and the varlen caches stay apart ------------------------------------------------------------
qd = T(1, 2, 40, 64)
S(qd, qd, qd)
nd, nv = len(A._fast), len(VL._fast)
kvl1 = lens(1)
_, n, _, rec, _ = kp(qd, qd, qd, kvl1)
assert n == 1 and rec["fn"] == "varlen"
_, n, _, rec, _ = kp(qd, qd, qd, kvl1)
assert n == 0 and rec["fn"] == "varlen"
_, n, _, rec, _ = run(S, qd, qd, qd)
assert n == 0 and rec["fn"] == "dense" and "lens" not in rec
qp = T(40, 2, 64)
for i in range(2):
    _, n, _, rec, _ = vp(qp, qp, qp, lens(2), lens(2))
    assert n == 1 - i and rec["fn"] == "varlen"
assert len(A._fast) == nd and len(VL._fast) == nv + 2
print("caches ok")

# ---- 9. another thread: its own structures, the same fields -------------------------------------------------------
q, k, v, cq, ck = packed(tq=24)
qh, kh, vh, kvl = padded(nq=24)
_, _, _, mine_p, _ = vp(q, k, v, cq, ck)
_, _, _, mine_p, _ = vp(q, k, v, cq, ck)
_, _, _, mine_k, _ = kp(qh, kh, vh, kvl)
_, _, _, mine_k, _ = kp(qh, kh, vh, kvl)
res = {}
def worker():
    res["p"] = vp(q, k, v, cq, ck)
    res["k"] = kp(qh, kh, vh, kvl)
th = threading.Thread(target=worker); th.start(); th.join()
for name, mine in (("p", mine_p), ("k", mine_k)):
    _, n, w, theirs, _ = res[name]
    assert (n, w) == (0, 0) and theirs["thread"] != mine["thread"]
    assert all(a != b for a, b in zip(theirs["structs"], mine["structs"])), "structures shared across threads"
    for f in ("q", "k", "v", "lens"):
        assert theirs[f] == mine[f], f
    assert theirs["p"][:7] == mine["p"][:7]
print("VARLEN FAST PATH OK")
'''


def test_varlen_fast_path_with_fake_torch(tmp_path):
    r = run_driver(tmp_path, DRIVER)
    assert r.returncode == 0 and "VARLEN FAST PATH OK" in r.stdout, r.stdout + r.stderr
