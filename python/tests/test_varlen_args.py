"""sage2.sageattn_varlen and sageattn(kv_lens=...) without a GPU (issue 17).

1. Without torch and without the library: fake_torch.py's FAKE_TORCH_VARLEN (metadata-only
   tensors with fake addresses, with int32 and custom ops registered by name) and its FakeLib, a
   fake library that records the sage2_tensor / sage2_seqlens / sage2_attention_params it is
   handed, run in a subprocess. Pins down: bad arguments raise TypeError/ValueError naming the
   argument before any library call; the structures of the C call (packed NHD views with batch 1,
   key-padding views as sageattn's, the lengths' device pointers, smooth_q off, LSE, workspace,
   stream); the lengths are never read on the host (the fake tensors have no values to read); the
   dense fast path of sageattn is bypassed with kv_lens (the varlen fast path itself:
   test_varlen_fast_path.py); a library without the varlen symbols imports and fails the call with
   UnsupportedError.
2. The ctypes declarations: SeqLens matches sage2_seqlens (C compiler), argtypes are registered
   only where the symbols exist.
3. With a (CPU or CUDA) torch: the custom op, fake-tensor shapes and a fullgraph dynamo trace.
"""
import ctypes

import pytest

from fake_torch import FakeCDLL, c_layout, run_driver

import sage2
from sage2 import _lib

DRIVER = r'''
import sys
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from sage2 import _attention as A, _lib
from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)
from fake_torch import FakeLib, T, counting, expect_error, expect_unsupported, install, lens, packed

fake = FakeLib()
install(fake)
normalize_calls = [0]
C._normalize = counting(C._normalize, normalize_calls)

F16, BF16, I32 = torch.float16, torch.bfloat16, torch.int32

# ---- 1. argument errors name the argument, before the library is called --------------------------
V = sage2.sageattn_varlen
q, k, v, cq, ck = packed()
cases = [
    (lambda: V([1.0], k, v, cq, ck), TypeError, "q must be a torch.Tensor"),
    (lambda: V(q, k, None, cq, ck), TypeError, "v must be a torch.Tensor"),
    (lambda: V(T(1, 100, 8, 64), k, v, cq, ck), ValueError, "q must be 3-D"),
    (lambda: V(q, T(300, 128), v, cq, ck), ValueError, "k must be 3-D"),
    (lambda: V(q, k, T(1, 300, 2, 64), cq, ck), ValueError, "v must be 3-D"),
    (lambda: V(T(100, 8, 64, dtype=torch.float32), k, v, cq, ck), TypeError, "q has dtype torch.float32"),
    (lambda: V(q, T(300, 2, 64, dtype=BF16), v, cq, ck), TypeError, "k has dtype torch.bfloat16 but q has"),
    (lambda: V(q, k, T(300, 2, 64, dtype=BF16), cq, ck), TypeError, "v has dtype torch.bfloat16 but q has"),
    (lambda: V(T(100, 8, 64, dev="cpu"), k, v, cq, ck), ValueError, "q is on device 'device(cpu:None)'"),
    (lambda: V(q, T(300, 2, 64, dev="cuda:1"), v, cq, ck), ValueError, "k is on device(cuda:1) but q is on"),
    (lambda: V(q, T(300, 2, 32), v, cq, ck), ValueError, "k has head dim 32 but q has 64"),
    (lambda: V(q, k, T(300, 2, 32), cq, ck), ValueError, "v has head dim 32 but q has 64"),
    (lambda: V(q, k, T(299, 2, 64), cq, ck), ValueError, "v has 299 tokens x 2 heads but k has 300 x 2"),
    (lambda: V(q, k, T(300, 4, 64), cq, ck), ValueError, "v has 300 tokens x 4 heads but k has 300 x 2"),
    (lambda: V(T(100, 3, 64), k, v, cq, ck), ValueError, "q has 3 heads, not a multiple of k/v's 2 heads"),
    (lambda: V(T(100, 8, 64, strides=(512, 1, 8)), k, v, cq, ck), ValueError, "q must have a contiguous last dim"),
    (lambda: V(q, T(300, 2, 64, strides=(0, 64, 1)), v, cq, ck), ValueError, "k has stride 0 on dim 0"),
    (lambda: V(q, k, v, None, ck), TypeError, "cu_seqlens_q must be a torch.Tensor"),
    (lambda: V(q, k, v, cq, [0, 10]), TypeError, "cu_seqlens_k must be a torch.Tensor"),
    (lambda: V(q, k, v, cq, lens(5, dtype=F16)), TypeError,
     "cu_seqlens_k has dtype torch.float16; it must be torch.int32 (or torch.int64, converted)"),
    (lambda: V(q, k, v, T(1, 5, dtype=I32), ck), ValueError, "cu_seqlens_q must be 1-D"),
    (lambda: V(q, k, v, cq, lens(5, dev="cpu")), ValueError, "cu_seqlens_k is on device 'device(cpu:None)'"),
    (lambda: V(q, k, v, lens(5, dev="cuda:1"), ck), ValueError, "cu_seqlens_q is on device(cuda:1) but q is on"),
    (lambda: V(q, k, v, lens(5, strides=(2,)), ck), ValueError,
     "cu_seqlens_q must be contiguous (stride 1), got stride 2"),
    (lambda: V(q, k, v, lens(1), lens(1)), ValueError, "cu_seqlens_q has 1 entries; it needs B + 1 >= 2"),
    (lambda: V(q, k, v, lens(0), lens(0)), ValueError, "cu_seqlens_q has 0 entries"),
    (lambda: V(q, k, v, cq, lens(4)), ValueError, "cu_seqlens_k has 4 entries but cu_seqlens_q has 5"),
    (lambda: V(q, k, v, cq, ck, max_seqlen_q=-1), ValueError, "max_seqlen_q=-1 must be >= 0"),
    (lambda: V(q, k, v, cq, ck, max_seqlen_k=12.0), TypeError, "max_seqlen_k must be an int or None"),
    (lambda: V(q, k, v, cq, ck, max_seqlen_k=True), TypeError, "max_seqlen_k must be an int or None"),
    (lambda: V(q, k, v, cq, ck, is_causal="yes"), TypeError, "is_causal must be a bool"),
    (lambda: V(q, k, v, cq, ck, sm_scale=0.0), ValueError, "sm_scale=0.0 must be finite"),
    (lambda: V(q, k, v, cq, ck, return_lse="no"), TypeError, "return_lse must be a bool"),
    (lambda: V(q, k, v, cq, ck, is_causal=True, causal_alignment="bottom"), ValueError, "causal_alignment='bottom'"),
    (lambda: V(q, k, v, cq, ck, qk_bits=3), ValueError, "qk_bits=3"),
    (lambda: V(q, k, v, cq, ck, smooth_q=True), ValueError, "smooth_q=True is not supported with variable-length"),
    (lambda: V(q, k, v, cq, ck, smooth_q=1), TypeError, "smooth_q=1"),
    (lambda: V(q, k, v, cq, ck, smooth_k=None), TypeError, "smooth_k=None"),
    (lambda: V(q, k, v, cq, ck, tensor_layout="NHD"), TypeError, "unexpected option 'tensor_layout'"),
]
for fn, exc, text in cases:
    expect_error(fn, exc, "sage2.sageattn_varlen: " + text if not text.startswith("sage2") else text)

S = sage2.sageattn
qh, kh, vh, kvl = T(2, 8, 128, 64), T(2, 2, 256, 64), T(2, 2, 256, 64), lens(2)
kv_cases = [
    (lambda: S(qh, kh, vh, kv_lens=[10, 20]), TypeError, "kv_lens must be a torch.Tensor"),
    (lambda: S(qh, kh, vh, kv_lens=lens(2, dtype=torch.int64)), TypeError, "kv_lens has dtype torch.int64"),
    (lambda: S(qh, kh, vh, kv_lens=T(2, 1, dtype=I32)), ValueError, "kv_lens must be 1-D"),
    (lambda: S(qh, kh, vh, kv_lens=lens(2, dev="cpu")), ValueError, "kv_lens is on device 'device(cpu:None)'"),
    (lambda: S(qh, kh, vh, kv_lens=lens(2, strides=(3,))), ValueError, "kv_lens must be contiguous"),
    (lambda: S(qh, kh, vh, kv_lens=lens(3)), ValueError, "kv_lens has 3 entries but q has batch 2"),
    (lambda: S(qh, kh, vh, kv_lens=kvl, smooth_q=True), ValueError, "smooth_q=True is not supported"),
    (lambda: S(T(2, 128, 64), kh, vh, kv_lens=kvl), ValueError, "q must be 4-D"),  # sageattn's own checks first
    (lambda: S(qh, kh, vh, tensor_layout="BHND", kv_lens=kvl), ValueError, "tensor_layout='BHND'"),
]
for fn, exc, text in kv_cases:
    expect_error(fn, exc, "sage2.sageattn: " + text)
print("errors ok")

# ---- 2. the packed call's structures ----------------------------------------------------------------
q, k, v, cq, ck = packed()
c0, w0 = len(fake.calls), len(fake.ws_queries)
out, lse = V(q, k, v, cq, ck, max_seqlen_q=40, is_causal=True, causal_alignment="bottom_right", return_lse=True)
assert len(fake.calls) == c0 + 1 and len(fake.ws_queries) == w0 + 1
rec = fake.calls[-1]
assert rec["fn"] == "varlen"
assert out.shape == (100, 8, 64) and out.dtype == F16 and out.stride() == (512, 64, 1)
assert lse.shape == (8, 100) and lse.dtype == torch.float32
# NHD views with batch 1: (data, dtype, batch, heads, seq, dim, stride_batch, stride_head, stride_seq, 1)
assert rec["q"] == (q.data_ptr(), 0, 1, 8, 100, 64, 100 * 512, 64, 512, 1), rec["q"]
assert rec["k"] == (k.data_ptr(), 0, 1, 2, 300, 64, 300 * 128, 64, 128, 1), rec["k"]
assert rec["v"] == (v.data_ptr(), 0, 1, 2, 300, 64, 300 * 128, 64, 128, 1), rec["v"]
assert rec["o"] == (out.data_ptr(), 0, 1, 8, 100, 64, 100 * 512, 64, 512, 1), rec["o"]
assert rec["lens"] == (4, cq.data_ptr(), ck.data_ptr(), None, 40, 0), rec["lens"]
p = rec["p"]
# causal bottom_right, default scale, auto bits, smooth_q OFF (2), smooth_k on, smooth_v off
assert p[:6] == (2, 0.0, 0, 2, 1, 0) and p[6] == lse.data_ptr(), p
assert p[7] % 256 == 0 and p[8] == 8192 + 4 + 40, p
assert rec["stream"] == 0x5000
assert fake.ws_queries[-1]["lens"] == rec["lens"] and fake.ws_queries[-1]["q"] == rec["q"]
# the same signature: the workspace size is not asked again; other lengths' bounds are
V(q, k, v, cq, ck, max_seqlen_q=40, is_causal=True, causal_alignment="bottom_right", return_lse=True)
assert len(fake.ws_queries) == w0 + 1
out2 = V(q, k, v, cq, ck, max_seqlen_q=41, is_causal=True, causal_alignment="bottom_right", return_lse=True)[0]
assert len(fake.ws_queries) == w0 + 2 and fake.calls[-1]["p"][8] == 8192 + 4 + 41

# options reach the parameters; no LSE: NULL
o = V(q, k, v, cq, ck, sm_scale=0.5, qk_bits=8, smooth_k=False, smooth_v=True, smooth_q=False, max_seqlen_k=7)
assert not isinstance(o, tuple) and o.shape == (100, 8, 64)
rec = fake.calls[-1]
assert rec["p"][:7] == (0, 0.5, 8, 2, 0, 1, None) and rec["lens"][4:] == (0, 7), rec
o = V(q, k, v, cq, ck, is_causal=True)
assert fake.calls[-1]["p"][0] == 1  # top_left by default

# views of a packed qkv [total, 3, H, D] tensor (token stride 3*H*D), bf16, MQA
qkv_ptr_q, ql = T(50, 4, 32, strides=(3 * 4 * 32, 32, 1), dtype=BF16), T(50, 1, 32, dtype=BF16)
o = V(qkv_ptr_q, ql, ql, lens(3), lens(3))
rec = fake.calls[-1]
assert rec["q"] == (qkv_ptr_q.data_ptr(), 1, 1, 4, 50, 32, 50 * 384, 32, 384, 1), rec["q"]
assert rec["o"] == (o.data_ptr(), 1, 1, 4, 50, 32, 50 * 128, 32, 128, 1), rec["o"]
assert o.stride() == (128, 32, 1) and o.dtype == BF16

# empty outputs and no keys: no library call
c0 = len(fake.calls)
o, l = V(T(0, 8, 64), k, v, cq, ck, return_lse=True)
assert o.shape == (0, 8, 64) and l.shape == (8, 0)
e = dict(strides=(128, 64, 1))  # torch's strides of an empty [0, 2, 64] tensor
o, l = V(T(10, 8, 64), T(0, 2, 64, **e), T(0, 2, 64, **e), cq, ck, return_lse=True)
assert o.shape == (10, 8, 64) and l.shape == (8, 10)
assert len(fake.calls) == c0
print("packed ok")

# ---- 3. key padding: sageattn(kv_lens=...) ------------------------------------------------------------
for layout, qs, ks in (("HND", (2, 8, 128, 64), (2, 2, 256, 64)), ("NHD", (2, 128, 8, 64), (2, 256, 2, 64))):
    qh, kh, vh, kvl = T(*qs), T(*ks), T(*ks), lens(2)
    n0 = normalize_calls[0]
    out, lse = S(qh, kh, vh, tensor_layout=layout, return_lse=True, kv_lens=kvl, is_causal=True)
    assert normalize_calls[0] == n0 + 1
    rec = fake.calls[-1]
    assert rec["fn"] == "varlen" and out.shape == qs and lse.shape == (2, 8, 128)
    code = C._tensor_fields
    assert rec["q"][1:] == code(qs, qh.stride(), layout, 0) and rec["q"][0] == qh.data_ptr(), rec["q"]
    assert rec["k"][1:] == code(ks, kh.stride(), layout, 0) and rec["v"][0] == vh.data_ptr(), rec["k"]
    assert rec["o"][1:] == code(qs, out.stride(), layout, 0) and rec["o"][0] == out.data_ptr()
    assert rec["lens"] == (2, None, None, kvl.data_ptr(), 0, 0), rec["lens"]
    assert rec["p"][:7] == (1, 0.0, 0, 2, 1, 0, lse.data_ptr()), rec["p"]

# sageattn's dense fast path is bypassed: a signature cached by plain calls still goes to the
# varlen entry; kv_lens calls have their own cache (test_varlen_fast_path.py), the dense one is untouched
qh, kh, vh = T(1, 2, 64, 64), T(1, 2, 64, 64), T(1, 2, 64, 64)
S(qh, kh, vh)
S(qh, kh, vh)
assert fake.calls[-1]["fn"] == "dense"
nfast = len(A._fast)
for i in range(2):
    n0 = normalize_calls[0]
    S(qh, kh, vh, kv_lens=lens(1))
    assert fake.calls[-1]["fn"] == "varlen" and normalize_calls[0] == n0 + (1 - i)  # the second: varlen fast path
assert len(A._fast) == nfast
S(qh, kh, vh)
assert fake.calls[-1]["fn"] == "dense"
c0 = len(fake.calls)
e = dict(strides=(128, 64, 64, 1))  # torch's strides of an empty [1, 2, 0, 64] tensor
o, l = S(T(1, 2, 64, 64), T(1, 2, 0, 64, **e), T(1, 2, 0, 64, **e), kv_lens=lens(1), return_lse=True)
assert len(fake.calls) == c0 and o.shape == (1, 2, 64, 64) and l.shape == (1, 2, 64)
print("kv_lens ok")

# ---- 4. CUDA graph capture: every call takes its workspace from torch's allocator -----------------
q, k, v, cq, ck = packed()
V(q, k, v, cq, ck)
torch.CAPTURING[0] = True
ptrs = []
for _ in range(3):
    a0 = len(torch.ALLOCS)
    V(q, k, v, cq, ck)
    new = torch.ALLOCS[a0:]
    ws = [t for t in new if t.dtype is torch.uint8]
    assert len(ws) == 1 and ws[0].shape == (8192 + 4 + 256,), [(t.shape, t.dtype) for t in new]
    ptrs.append(fake.calls[-1]["p"][7])
    assert ws[0].data_ptr() <= ptrs[-1] < ws[0].data_ptr() + 256
torch.CAPTURING[0] = False
assert len(set(ptrs)) == 3

# ---- 5. autograd / tracing: the custom op, by its name -------------------------------------------------
torch._grad[0] = True
ops0 = len(torch.OP_CALLS)
out = V(T(100, 8, 64, rg=True), k, v, cq, ck, max_seqlen_k=9)
name, args = torch.OP_CALLS[-1]
assert len(torch.OP_CALLS) == ops0 + 1 and name == "sageattn_varlen"
assert args[3] is cq and args[4] is ck and args[5] is None and args[6] == "packed"
assert list(args[7:]) == [0, 9, 0, 0.0, False, 0, 0, 0, 2, True, False], args[7:]
S(T(2, 8, 128, 64, rg=True), T(2, 2, 256, 64), T(2, 2, 256, 64), tensor_layout="HND", kv_lens=kvl, qk_bits=8)
name, args = torch.OP_CALLS[-1]
assert name == "sageattn_varlen" and args[3] is None and args[4] is None and args[5] is kvl and args[6] == "HND"
assert list(args[7:]) == [0, 0, 0, 0.0, False, 8, 0, 0, 2, True, False], args[7:]
torch._grad[0] = False
S(T(1, 2, 32, 64, rg=False), T(1, 2, 32, 64), T(1, 2, 32, 64))
assert len(torch.OP_CALLS) == ops0 + 2  # plain eager calls do not go through an op

# ---- 6. library errors ----------------------------------------------------------------------------------
fake.fail = 1
for fn in (lambda: V(q, k, v, cq, ck), lambda: S(qh, kh, vh, kv_lens=lens(1))):
    try:
        fn()
        raise AssertionError("no error")
    except sage2.InvalidArgumentError as e:
        assert "the fake library refused it" in str(e) and "sage2_attention_varlen" in str(e), str(e)
fake.fail = 0

# ---- 7. a library without the varlen entry points -----------------------------------------------------------
old = FakeLib(varlen=False)
install(old)
# A process loads one library; the fast paths' cached calls hold that library's functions, so a
# swap of libraries (only tests do that) starts from empty caches.
A._fast.clear()
sage2._varlen._fast.clear()
for fn in (lambda: V(q, k, v, cq, ck), lambda: S(qh, kh, vh, kv_lens=lens(1)), lambda: V(T(0, 8, 64), k, v, cq, ck)):
    expect_unsupported(fn, "sage2_attention_varlen")
assert not _lib.has_varlen()
expect_error(lambda: V(q, k, v, cq, lens(3)), ValueError, "cu_seqlens_k has 3 entries")  # checks still first
S(T(1, 2, 48, 64), T(1, 2, 48, 64), T(1, 2, 48, 64))  # plain calls keep working
assert old.calls and old.calls[-1]["fn"] == "dense"
install(fake)
assert _lib.has_varlen()
print("VARLEN ARGS OK")
'''


def test_varlen_with_fake_torch(tmp_path):
    r = run_driver(tmp_path, DRIVER)
    assert r.returncode == 0 and "VARLEN ARGS OK" in r.stdout, r.stdout + r.stderr


# ---- the ctypes declarations ---------------------------------------------------------------------
def test_seqlens_layout_matches_the_header(tmp_path):
    fields = [f for f, _ in _lib.SeqLens._fields_]
    got = c_layout(tmp_path, "sage2_seqlens", fields)
    assert got["size"] == ctypes.sizeof(_lib.SeqLens)
    for f in fields:
        assert got[f] == getattr(_lib.SeqLens, f).offset, f


def test_declarations_only_where_the_symbols_exist():
    P = ctypes.POINTER
    new = FakeCDLL()
    _lib._declare(new)
    argtypes = new.sage2_attention_varlen.argtypes
    assert argtypes[5] is P(_lib.SeqLens) and argtypes[6] is P(_lib.AttentionParams) and len(argtypes) == 8
    assert new.sage2_attention_varlen.restype is ctypes.c_int
    ws = new.sage2_workspace_size_varlen.argtypes
    assert ws[5] is P(_lib.SeqLens) and ws[7] is P(ctypes.c_size_t) and len(ws) == 8
    old = FakeCDLL(missing=_lib._VARLEN_SYMBOLS)
    _lib._declare(old)  # an older library: declared without them, no error
    assert not hasattr(old, "sage2_attention_varlen") and not hasattr(old, "sage2_workspace_size_varlen")


def test_real_library_declares_varlen_if_it_has_it():
    try:
        L = _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])
    if not _lib.has_varlen():
        pytest.skip("this libsage2 (%s) has no sage2_attention_varlen yet" % _lib.library_path())
    assert L.sage2_attention_varlen.argtypes[5] is ctypes.POINTER(_lib.SeqLens)
    assert L.sage2_workspace_size_varlen.restype is ctypes.c_int


# ---- with a real torch (CPU or CUDA build; no GPU needed) ---------------------------------------------------
def _torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def test_custom_op_is_registered():
    torch = _torch()
    assert hasattr(torch.ops.sage2, "sageattn_varlen")
    assert "sage2::sageattn_varlen" in str(torch.ops.sage2.sageattn_varlen.default._schema)


def test_cpu_tensors_are_rejected_naming_the_argument():
    torch = _torch()
    q = torch.zeros(10, 2, 16, dtype=torch.float16)
    cu = torch.tensor([0, 10], dtype=torch.int32)
    with pytest.raises(ValueError, match="sageattn_varlen: q is on device 'cpu'"):
        sage2.sageattn_varlen(q, q, q, cu, cu)
    with pytest.raises(ValueError, match="q must be 3-D"):
        sage2.sageattn_varlen(q[None], q, q, cu, cu)
    with pytest.raises(ValueError, match="sageattn: q is on device 'cpu'"):  # q, k, v are checked first
        sage2.sageattn(q[None], q[None], q[None], kv_lens=[10])


def test_fake_tensors_give_output_shapes_without_a_gpu():
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(300, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(500, 2, 64, dtype=torch.bfloat16, device="cuda")
        cu = torch.empty(4, dtype=torch.int32, device="cuda")
        out, lse = sage2.sageattn_varlen(q, k, k, cu, cu, max_seqlen_q=200, return_lse=True, is_causal=True)
        assert out.shape == (300, 8, 64) and out.dtype == torch.bfloat16 and out.device.type == "cuda"
        assert out.is_contiguous() and lse.shape == (8, 300) and lse.dtype == torch.float32
        qkv = torch.empty(300, 3, 8, 64, dtype=torch.float16, device="cuda")
        o = sage2.sageattn_varlen(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu, cu)
        assert o.shape == (300, 8, 64) and o.is_contiguous()
        with pytest.raises(ValueError, match="cu_seqlens_k has 3 entries but cu_seqlens_q has 4"):
            sage2.sageattn_varlen(q, k, k, cu, cu[:3])
        out = sage2.sageattn_varlen(q, k, k, cu.long(), cu.long())  # int64: converted on the device
        assert out.shape == (300, 8, 64)
        with pytest.raises(ValueError, match="smooth_q=True is not supported"):
            sage2.sageattn_varlen(q, k, k, cu, cu, smooth_q=True)
        qh = torch.empty(2, 100, 4, 64, dtype=torch.float16, device="cuda")
        kh = torch.empty(2, 300, 2, 64, dtype=torch.float16, device="cuda")
        kvl = torch.empty(2, dtype=torch.int32, device="cuda")
        out, lse = sage2.sageattn(qh, kh, kh, tensor_layout="NHD", kv_lens=kvl, return_lse=True)
        assert out.shape == (2, 100, 4, 64) and lse.shape == (2, 4, 100)


def test_dynamo_traces_one_opaque_node_fullgraph():
    """torch.compile(fullgraph=True) sees sageattn_varlen and sageattn(kv_lens=...) as one
    sage2::sageattn_varlen node each (no graph break, no host read of the lengths)."""
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    def f(q, k, v, cu_q, cu_k, qh, kh, kv_lens):
        o, lse = sage2.sageattn_varlen(q, k, v, cu_q, cu_k, max_seqlen_q=64, max_seqlen_k=128, is_causal=True,
                                       return_lse=True, causal_alignment="bottom_right", qk_bits=8)
        o2 = sage2.sageattn(qh, kh, kh, kv_lens=kv_lens, smooth_v=True)
        return o * 2, lse, o2

    torch._dynamo.reset()
    try:
        with FakeTensorMode():
            q = torch.empty(256, 4, 64, dtype=torch.float16, device="cuda")
            k = torch.empty(512, 2, 64, dtype=torch.float16, device="cuda")
            cu = torch.empty(5, dtype=torch.int32, device="cuda")
            qh = torch.empty(2, 4, 128, 64, dtype=torch.float16, device="cuda")
            kh = torch.empty(2, 2, 256, 64, dtype=torch.float16, device="cuda")
            kvl = torch.empty(2, dtype=torch.int32, device="cuda")
            o, lse, o2 = torch.compile(f, backend=backend, fullgraph=True)(q, k, k, cu, cu, qh, kh, kvl)
        assert o.shape == (256, 4, 64) and lse.shape == (4, 256) and o2.shape == (2, 4, 128, 64)
        assert len(graphs) == 1
        calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "sage2" in str(n.target)]
        assert len(calls) == 2 and all("sageattn_varlen" in str(n.target) for n in calls)
        assert list(calls[0].args[5:]) == [None, "packed", 64, 128, 2, 0.0, True, 8, 0, 0, 2, True, False]
        assert calls[1].args[3] is None and calls[1].args[4] is None
        assert list(calls[1].args[6:]) == ["HND", 0, 0, 0, 0.0, False, 0, 0, 0, 2, True, True]
    finally:
        torch._dynamo.reset()
