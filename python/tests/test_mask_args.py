"""sage2.sageattn(attn_mask=...) and patch_sdpa's masked calls without a GPU (issue 17).

1. Without torch and without the library: fake_torch.py's FAKE_TORCH_MASK (metadata-only
   tensors with fake addresses, with torch.bool, views (unsqueeze / expand with torch's stride
   rules) and stride(dim)) and its FakeLib, a fake library that records the sage2_tensor /
   sage2_mask / sage2_attention_params it is handed, run in a subprocess. Pins down: bad masks are
   refused with TypeError/ValueError naming attn_mask before any library call; attn_mask with
   kv_lens is refused; the sage2_mask of the C call (the mask's own pointer, its type code, the
   strides of its broadcast view: 0 on broadcast dims) for 2-D, 3-D and 4-D masks in both
   layouts; the dense fast path is bypassed; the custom op gets the broadcast view; library errors
   and a library without sage2_attention_masked; patch_sdpa sends a masked call to sage2 and a
   mask with is_causal to torch (reason "attn_mask with is_causal").
2. The ctypes declarations: Mask matches sage2_mask (C compiler), argtypes only where the symbols
   exist.
3. With a (CPU or CUDA) torch: the strides real torch gives the broadcast views (the same table as
   the fake's), the sage2_mask _mask._run builds from real tensors, the custom op, fake-tensor
   shapes, a fullgraph dynamo trace, and patch_sdpa's reasons.
"""
import ctypes

import pytest

from fake_torch import FAKE_TORCH_MASK, FakeCDLL, c_layout, run_driver

import sage2
from sage2 import _lib

# Problem sizes of the struct cases: B, Hq, Hkv, Nq, Nk, D.
B, HQ, HKV, NQ, NK, D = 2, 8, 2, 96, 160, 64
MASK_TYPE_CODES = {"bool": 1, "float16": 2, "bfloat16": 3, "float32": 4}  # sage2_mask_type

# (name, mask shape, mask strides (None: contiguous), dtype name, strides of the [B, Hq, Nq, Nk]
# view passed to the C call). Broadcast dims get stride 0; a dim of size 1 that stays 1 keeps
# torch's stride (not the case here: B and Hq are > 1).
MASK_CASES = [
    ("2d [Nq,Nk] bool", (NQ, NK), None, "bool", (0, 0, NK, 1)),
    ("[B,1,Nq,Nk] f16", (B, 1, NQ, NK), None, "float16", (NQ * NK, 0, NK, 1)),
    ("[B,1,1,Nk] bf16 (key padding)", (B, 1, 1, NK), None, "bfloat16", (NK, 0, 0, 1)),
    ("[B,Hq,Nq,Nk] f32", (B, HQ, NQ, NK), None, "float32", (HQ * NQ * NK, NQ * NK, NK, 1)),
    ("3d [Hq,Nq,Nk] bool", (HQ, NQ, NK), None, "bool", (0, NQ * NK, NK, 1)),
    ("2d [1,Nk] f16", (1, NK), None, "float16", (0, 0, 0, 1)),
    ("[B,1,Nq,Nk] bool, padded rows", (B, 1, NQ, NK), (NQ * (NK + 32), NQ * (NK + 32), NK + 32, 1), "bool",
     (NQ * (NK + 32), 0, NK + 32, 1)),
    ("[B,Hq,Nq,Nk] f16 expanded by the caller", (B, HQ, NQ, NK), (NK, 0, 0, 1), "float16", (NK, 0, 0, 1)),
]

# torch.nn.functional of the fake: the original SDPA records its calls (patch_sdpa's fallback).
FAKE_FUNCTIONAL = '''
CALLS = []
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 **kw):
    CALLS.append(dict(query=query, attn_mask=attn_mask, is_causal=is_causal, kw=kw))
    return "torch sdpa"
'''

DRIVER = r'''
import sys
sys.path.insert(0, sys.argv[1])
import torch
import torch.nn.functional as F
import sage2
from sage2 import _attention as A
from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)
from fake_torch import FakeLib, T, expect_error, expect_unsupported, install

CASES = @CASES@
B, HQ, HKV, NQ, NK, D = @SIZES@
CODES = @CODES@

fake = FakeLib()
install(fake)

F16, BF16, F32, F64, I32, BOOL = torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.bool
def qkv(layout="HND", b=B, hq=HQ, hkv=HKV, nq=NQ, nk=NK, d=D, dtype=F16):
    if layout == "HND":
        return T(b, hq, nq, d, dtype=dtype), T(b, hkv, nk, d, dtype=dtype), T(b, hkv, nk, d, dtype=dtype)
    return T(b, nq, hq, d, dtype=dtype), T(b, nk, hkv, d, dtype=dtype), T(b, nk, hkv, d, dtype=dtype)

S = sage2.sageattn

# ---- 1. bad masks are refused naming attn_mask, before any library call ----------------------------
for layout in ("HND", "NHD"):
    q, k, v = qkv(layout)
    def call(m, **kw):
        return lambda: S(q, k, v, tensor_layout=layout, attn_mask=m, **kw)
    bad = [
        (call([[True] * NK] * NQ), TypeError, "attn_mask must be a torch.Tensor or None, got list"),
        (call(1.0), TypeError, "attn_mask must be a torch.Tensor or None, got float"),
        (call(T(NQ, NK, dtype=I32)), TypeError, "attn_mask has dtype torch.int32"),
        (call(T(NQ, NK, dtype=F64)), TypeError, "attn_mask has dtype torch.float64"),
        (call(T(NQ, NK, dtype=BOOL, dev="cuda:1")), ValueError, "attn_mask is on device(cuda:1) but q is on"),
        (call(T(NQ, NK, dtype=BOOL, dev="cpu")), ValueError, "attn_mask is on device(cpu:None)"),
        (call(T(NK, dtype=BOOL)), ValueError, "attn_mask must be 2-D to 4-D"),
        (call(T(1, B, 1, NQ, NK, dtype=BOOL)), ValueError, "attn_mask must be 2-D to 4-D"),
        (call(T(NQ, NK + 1, dtype=BOOL)), ValueError, "is not broadcastable to [B, Hq, Nq, Nk] = [%d, %d, %d, %d]"
         % (B, HQ, NQ, NK)),
        (call(T(NK, NQ, dtype=BOOL)), ValueError, "attn_mask of shape (%d, %d) is not broadcastable" % (NK, NQ)),
        (call(T(3, 1, NQ, NK, dtype=F16)), ValueError, "is not broadcastable"),
        (call(T(B, HKV, NQ, NK, dtype=F16)), ValueError, "is not broadcastable"),  # heads are q's, not k's
        (call(T(B, 1, 1, NK, 1, dtype=F32)), ValueError, "2-D to 4-D"),
        (call(T(B, 1, NQ, 1, dtype=BOOL), kv_lens=T(B, dtype=I32)), ValueError,
         "give attn_mask or kv_lens, not both"),
    ]
    for fn, exc, text in bad:
        msg = expect_error(fn, exc, text)
        assert "attn_mask" in msg, msg
# q, k and v are checked first (the mask is refused only for itself)
expect_error(lambda: S(T(1, 2, 8, 16, dtype=F32), T(1, 2, 8, 16), T(1, 2, 8, 16), attn_mask=T(3, dtype=I32)),
             TypeError, "q has dtype torch.float32")
print("errors ok")

# ---- 2. the sage2_mask of the C call ------------------------------------------------------------------
code_of = C._tensor_fields
for layout in ("HND", "NHD"):
    for name, shape, strides, dt, want in CASES:
        for kw in (dict(), dict(is_causal=True, return_lse=True, sm_scale=0.125, qk_bits=8, smooth_v=True)):
            q, k, v = qkv(layout, dtype=BF16 if dt == "bfloat16" else F16)
            m = T(*shape, dtype=getattr(torch, dt), strides=strides)
            c0, w0 = len(fake.calls), len(fake.ws_queries)
            r = S(q, k, v, tensor_layout=layout, attn_mask=m, **kw)
            assert len(fake.calls) == c0 + 1, name
            rec = fake.calls[-1]
            out, lse = r if kw else (r, None)
            assert rec["fn"] == "masked", (name, rec["fn"])
            assert rec["m"] == (m.data_ptr(), CODES[dt]) + tuple(want), (layout, name, rec["m"], want)
            qc = 1 if q.dtype is BF16 else 0
            assert rec["q"] == (q.data_ptr(),) + code_of(q.shape, q.stride(), layout, qc), (name, rec["q"])
            assert rec["k"] == (k.data_ptr(),) + code_of(k.shape, k.stride(), layout, qc), (name, rec["k"])
            assert rec["v"] == (v.data_ptr(),) + code_of(v.shape, v.stride(), layout, qc), (name, rec["v"])
            assert rec["o"] == (out.data_ptr(),) + code_of(q.shape, out.stride(), layout, qc), (name, rec["o"])
            assert out.shape == q.shape and out.dtype == q.dtype
            assert rec["stream"] == 0x5000
            p = rec["p"]
            if kw:
                assert lse.shape == (B, HQ, NQ) and lse.dtype == F32
                assert p[:7] == (1, 0.125, 8, 0, 1, 1, lse.data_ptr()), (name, p)
            else:
                assert p[:7] == (0, 0.0, 0, 0, 1, 0, None), (name, p)
            assert p[7] % 256 == 0 and p[8] == 12288, p
            if len(fake.ws_queries) > w0:  # the workspace query sees the same mask
                assert fake.ws_queries[-1]["m"] == rec["m"]
print("structs ok")

# GQA / MQA masks are per q head; a head-broadcast mask with one q head per kv head also works
q, k, v = qkv("NHD", hq=4, hkv=1)
m = T(B, 4, NQ, NK, dtype=BOOL)
S(q, k, v, tensor_layout="NHD", attn_mask=m)
assert fake.calls[-1]["m"] == (m.data_ptr(), 1, 4 * NQ * NK, NQ * NK, NK, 1)
# a batch of one: the batch dim is not broadcast, it keeps torch's stride
q, k, v = qkv(b=1)
m = T(1, 1, NQ, NK, dtype=BOOL)
S(q, k, v, attn_mask=m)
assert fake.calls[-1]["m"] == (m.data_ptr(), 1, NQ * NK, 0, NK, 1), fake.calls[-1]["m"]

# empty outputs and no keys: no library call
c0 = len(fake.calls)
eq = dict(strides=(HQ * D, D, D, 1))  # torch's strides of an empty [B, Hq, 0, D] tensor
o, l = S(T(B, HQ, 0, D, **eq), T(B, HKV, NK, D), T(B, HKV, NK, D), attn_mask=T(0, NK, dtype=BOOL), return_lse=True)
assert o.shape == (B, HQ, 0, D) and l.shape == (B, HQ, 0)
e = dict(strides=(HKV * D, D, D, 1))  # torch's strides of an empty [B, Hkv, 0, D] tensor
o, l = S(T(B, HQ, NQ, D), T(B, HKV, 0, D, **e), T(B, HKV, 0, D, **e), attn_mask=T(NQ, 0, dtype=BOOL),
         return_lse=True)
assert o.shape == (B, HQ, NQ, D) and l.shape == (B, HQ, NQ)
assert len(fake.calls) == c0
print("views ok")

# ---- 3. the dense fast path is bypassed ------------------------------------------------------------------
q, k, v = qkv()
S(q, k, v)
S(q, k, v)
assert fake.calls[-1]["fn"] == "dense"
nfast = len(A._fast)
for _ in range(2):
    S(q, k, v, attn_mask=T(NQ, NK, dtype=BOOL))
    assert fake.calls[-1]["fn"] == "masked"
assert len(A._fast) == nfast
S(q, k, v)
assert fake.calls[-1]["fn"] == "dense"

# ---- 4. autograd / tracing: the custom op gets the broadcast view -----------------------------------------
torch._grad[0] = True
ops0 = len(torch.OP_CALLS)
m = T(B, 1, 1, NK, dtype=F32)
q, k, v = qkv("NHD")
out = S(T(B, NQ, HQ, D, rg=True), k, v, tensor_layout="NHD", attn_mask=m, is_causal=True, qk_bits=4)
name, args = torch.OP_CALLS[-1]
assert len(torch.OP_CALLS) == ops0 + 1 and name == "sageattn_masked", name
view = args[3]
assert view.data_ptr() == m.data_ptr() and view.dtype is F32
assert tuple(view.shape) == (B, HQ, NQ, NK) and view.stride() == (NK, 0, 0, 1), (view.shape, view.stride())
assert list(args[4:]) == ["NHD", 1, 0.0, False, 4, 0, 0, 0, True, False], args[4:]
assert fake.calls[-1]["m"] == (m.data_ptr(), 4, NK, 0, 0, 1)
torch._grad[0] = False
S(q, k, v, tensor_layout="NHD", attn_mask=m)
assert len(torch.OP_CALLS) == ops0 + 1  # plain eager calls do not go through the op
print("op ok")

# ---- 5. library errors ------------------------------------------------------------------------------------
fake.fail = 1
try:
    S(q, k, v, tensor_layout="NHD", attn_mask=m)
    raise AssertionError("no error")
except sage2.InvalidArgumentError as e:
    assert "the fake library refused it" in str(e) and "sage2_attention_masked" in str(e), str(e)
fake.fail = 0

# ---- 6. patch_sdpa: masked calls go to sage2, a mask with is_causal to torch ---------------------------
q, k, v = qkv("HND")
c0 = len(fake.calls)
with sage2.patch_sdpa() as p:
    m = T(B, 1, 1, NK, dtype=F16)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    assert out.shape == q.shape and len(fake.calls) == c0 + 1
    rec = fake.calls[-1]
    assert rec["fn"] == "masked" and rec["m"] == (m.data_ptr(), 2, NK, 0, 0, 1), rec["m"]
    assert rec["p"][:2] == (0, 0.0)
    assert F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True, enable_gqa=True) == "torch sdpa"
    assert len(fake.calls) == c0 + 1
    assert F.CALLS[-1]["attn_mask"] is m and F.CALLS[-1]["is_causal"] is True
    assert F.scaled_dot_product_attention(q, k, v, attn_mask=T(NQ, NK, dtype=I32), enable_gqa=True) == "torch sdpa"
    assert F.scaled_dot_product_attention(q, k, v, attn_mask=T(NK, dtype=BOOL), enable_gqa=True) == "torch sdpa"
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=T(NQ, NK, dtype=BOOL), scale=0.5, enable_gqa=True)
    assert fake.calls[-1]["m"][1:] == (1, 0, 0, NK, 1) and fake.calls[-1]["p"][:2] == (0, 0.5)
    assert len(fake.calls) == c0 + 2
stats = p.stats.as_dict()
assert stats == {"sage2": 2, "fallback": {"attn_mask with is_causal": 1, "attn_mask dtype": 1,
                                          "attn_mask shape or device": 1}}, stats
print("sdpa ok")

# ---- 7. a library without the masked entry points ----------------------------------------------------------
old = FakeLib(masked=False)
install(old)
A._fast.clear()
sage2._mask._fast.clear()  # cached masked calls keep the library functions they were built with
for fn in (lambda: S(q, k, v, attn_mask=T(NQ, NK, dtype=BOOL)),
           lambda: S(T(B, HQ, 0, D, strides=(HQ * D, D, D, 1)), k, v, attn_mask=T(0, NK, dtype=BOOL))):
    expect_unsupported(fn, "sage2_attention_masked")
expect_error(lambda: S(q, k, v, attn_mask=T(NQ, NK, dtype=I32)), TypeError, "attn_mask has dtype")  # checks first
S(q, k, v)  # plain calls keep working
assert old.calls and old.calls[-1]["fn"] == "dense"
install(fake)
print("MASK ARGS OK")
'''


def _driver():
    return (DRIVER.replace("@CASES@", repr(MASK_CASES))
            .replace("@SIZES@", repr((B, HQ, HKV, NQ, NK, D))).replace("@CODES@", repr(MASK_TYPE_CODES)))


def test_masks_with_fake_torch(tmp_path):
    r = run_driver(tmp_path, _driver(), torch_source=FAKE_TORCH_MASK, functional=FAKE_FUNCTIONAL)
    assert r.returncode == 0 and "MASK ARGS OK" in r.stdout, r.stdout + r.stderr


# ---- the ctypes declarations ---------------------------------------------------------------------
def test_mask_layout_matches_the_header(tmp_path):
    fields = [f for f, _ in _lib.Mask._fields_]
    got = c_layout(tmp_path, "sage2_mask", fields,
                   constants=(("bool", "SAGE2_MASK_BOOL"), ("float16", "SAGE2_MASK_F16"),
                              ("bfloat16", "SAGE2_MASK_BF16"), ("float32", "SAGE2_MASK_F32")))
    assert got["size"] == ctypes.sizeof(_lib.Mask)
    for f in fields:
        assert got[f] == getattr(_lib.Mask, f).offset, f
    for n, c in MASK_TYPE_CODES.items():
        assert got[n] == c, n


def test_declarations_only_where_the_symbols_exist():
    P = ctypes.POINTER
    new = FakeCDLL()
    _lib._declare(new)
    a = new.sage2_attention_masked.argtypes
    assert len(a) == 8 and a[5] is P(_lib.Mask) and a[6] is P(_lib.AttentionParams)
    assert new.sage2_attention_masked.restype is ctypes.c_int
    ws = new.sage2_workspace_size_masked.argtypes
    assert len(ws) == 8 and ws[5] is P(_lib.Mask) and ws[7] is P(ctypes.c_size_t)
    old = FakeCDLL(missing=_lib._MASK_SYMBOLS)
    _lib._declare(old)  # an older library: declared without them, no error
    assert not hasattr(old, "sage2_attention_masked") and not hasattr(old, "sage2_workspace_size_masked")


# ---- with a real torch (CPU or CUDA build; no GPU needed) ---------------------------------------------------
def _torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def _real_mask(torch, shape, strides, dt):
    dtype = getattr(torch, dt)
    if strides is None:
        return torch.zeros(shape, dtype=dtype)
    return torch.empty_strided(shape, strides, dtype=dtype).zero_()


def _cpu_qkv(torch, layout, dtype=None):
    dtype = dtype or torch.float16

    def mk(h, n):
        return torch.zeros((B, h, n, D) if layout == "HND" else (B, n, h, D), dtype=dtype)

    return mk(HQ, NQ), mk(HKV, NK), mk(HKV, NK)


@pytest.mark.parametrize("layout", ["HND", "NHD"])
def test_mask_views_of_real_torch_match_the_table(layout):
    """The strides real torch gives mask_view's broadcast views are the table's (the fake torch
    of fake_torch.py models the same rules)."""
    torch = _torch()
    from sage2 import _mask

    q, k, _ = _cpu_qkv(torch, layout)
    for name, shape, strides, dt, want in MASK_CASES:
        m = _real_mask(torch, shape, strides, dt)
        view = _mask.mask_view(m, q, k, layout)
        assert tuple(view.shape) == (B, HQ, NQ, NK), name
        assert view.stride() == want, (name, view.stride(), want)
        assert view.data_ptr() == m.data_ptr() and view.dtype == m.dtype, name


def test_run_passes_the_views_of_real_tensors(monkeypatch):
    """_mask._run with real (CPU) tensors and a recording library: the sage2_mask holds the mask's
    own pointer, its type code and the view's strides."""
    torch = _torch()
    from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)
    from sage2 import _mask

    calls = []

    class Lib:
        def sage2_workspace_size_masked(self, ctx, q, k, v, o, m, p, n):
            n._obj.value = 1024
            return 0

        def sage2_attention_masked(self, ctx, q, k, v, o, m, p, stream):
            mm = m._obj
            calls.append((mm.data, mm.type, mm.stride_batch, mm.stride_head, mm.stride_q, mm.stride_k,
                          q._obj.data, o._obj.data))
            return 0

    monkeypatch.setattr(_lib, "lib", lambda: Lib())
    monkeypatch.setattr(_lib, "context", lambda i: ctypes.c_void_p(0x1000))
    monkeypatch.setattr(C, "_raw_stream", lambda i: 0)
    monkeypatch.setattr(C, "_device_index", lambda dev: 0)
    monkeypatch.setattr(C, "_ws_cache", {})  # keep these fake sizes away from real calls
    for layout in ("HND", "NHD"):
        for name, shape, strides, dt, want in MASK_CASES:
            q, k, v = _cpu_qkv(torch, layout)
            m = _real_mask(torch, shape, strides, dt)
            view = _mask.mask_view(m, q, k, layout)
            out, _ = _mask._run(q, k, v, view, layout, 0, 0.0, False, 0, 0, 0, 0, True, False)
            got = calls[-1]
            assert got[:6] == (m.data_ptr(), MASK_TYPE_CODES[dt]) + want, (layout, name, got, want)
            assert got[6] == q.data_ptr() and got[7] == out.data_ptr()


def test_bad_masks_with_real_torch_name_attn_mask():
    torch = _torch()
    from sage2 import _mask

    q, k, _ = _cpu_qkv(torch, "HND")
    for m, exc, text in (
            (torch.zeros(NQ, NK, dtype=torch.int32), TypeError, "attn_mask has dtype torch.int32"),
            (torch.zeros(NQ, NK, dtype=torch.float64), TypeError, "attn_mask has dtype torch.float64"),
            (torch.zeros(NK, dtype=torch.bool), ValueError, "attn_mask must be 2-D to 4-D"),
            (torch.zeros(1, B, 1, NQ, NK, dtype=torch.bool), ValueError, "attn_mask must be 2-D to 4-D"),
            (torch.zeros(B, HKV, NQ, NK, dtype=torch.bool), ValueError, "is not broadcastable"),
            (torch.zeros(NQ, NK - 1, dtype=torch.bool), ValueError, "is not broadcastable"),
            (torch.zeros(NQ, NK, dtype=torch.bool, device="meta"), ValueError, "attn_mask is on meta but q is on cpu"),
            (None, TypeError, "attn_mask must be a torch.Tensor")):
        with pytest.raises(exc, match=text.replace("[", r"\[")):
            _mask.mask_view(m, q, k, "HND")


def test_custom_op_is_registered():
    torch = _torch()
    assert hasattr(torch.ops.sage2, "sageattn_masked")
    schema = str(torch.ops.sage2.sageattn_masked.default._schema)
    assert "sage2::sageattn_masked" in schema and "Tensor mask" in schema


def test_fake_tensors_give_output_shapes_without_a_gpu():
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 100, 8, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 300, 2, 64, dtype=torch.bfloat16, device="cuda")
        pad = torch.empty(2, 1, 1, 300, dtype=torch.bool, device="cuda")
        out, lse = sage2.sageattn(q, k, k, tensor_layout="NHD", attn_mask=pad, return_lse=True)
        assert out.shape == (2, 100, 8, 64) and out.dtype == torch.bfloat16 and out.is_contiguous()
        assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32
        add = torch.empty(100, 300, dtype=torch.float32, device="cuda")
        assert sage2.sageattn(q, k, k, tensor_layout="NHD", attn_mask=add, is_causal=True).shape == q.shape
        with pytest.raises(ValueError, match="attn_mask is on cpu but q is on cuda"):
            sage2.sageattn(q, k, k, tensor_layout="NHD", attn_mask=torch.empty(100, 300, dtype=torch.bool))
        with pytest.raises(ValueError, match="attn_mask of shape \\(2, 2, 100, 300\\) is not broadcastable"):
            sage2.sageattn(q, k, k, tensor_layout="NHD",
                           attn_mask=torch.empty(2, 2, 100, 300, dtype=torch.bool, device="cuda"))
        with pytest.raises(ValueError, match="give attn_mask or kv_lens, not both"):
            sage2.sageattn(q, k, k, tensor_layout="NHD", attn_mask=pad,
                           kv_lens=torch.empty(2, dtype=torch.int32, device="cuda"))


def test_dynamo_traces_one_opaque_node_fullgraph():
    """torch.compile(fullgraph=True) sees sageattn(attn_mask=...) as one sage2::sageattn_masked
    node (no graph break), the mask's broadcast view traced before it."""
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    def f(q, k, v, pad, add):
        o = sage2.sageattn(q, k, v, attn_mask=pad)
        o2, lse = sage2.sageattn(q, k, v, attn_mask=add, return_lse=True, qk_bits=8, smooth_v=True)
        return o * 2, o2, lse

    torch._dynamo.reset()
    try:
        with FakeTensorMode():
            q = torch.empty(2, 4, 128, 64, dtype=torch.float16, device="cuda")
            k = torch.empty(2, 2, 256, 64, dtype=torch.float16, device="cuda")
            pad = torch.empty(2, 1, 1, 256, dtype=torch.bool, device="cuda")
            add = torch.empty(128, 256, dtype=torch.float16, device="cuda")
            o, o2, lse = torch.compile(f, backend=backend, fullgraph=True)(q, k, k, pad, add)
        assert o.shape == (2, 4, 128, 64) and o2.shape == o.shape and lse.shape == (2, 4, 128)
        assert len(graphs) == 1
        calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "sage2" in str(n.target)]
        assert len(calls) == 2 and all("sageattn_masked" in str(n.target) for n in calls), calls
        assert list(calls[0].args[4:]) == ["HND", 0, 0.0, False, 0, 0, 0, 0, True, False]
        assert list(calls[1].args[4:]) == ["HND", 0, 0.0, True, 8, 0, 0, 0, True, True]
    finally:
        torch._dynamo.reset()


def test_patch_sdpa_reasons_with_real_torch():
    """CPU tensors fall back for their device; what sage2 does not take (a mask with is_causal, an
    int mask, a 1-D mask) goes to torch unchanged, counted by reason: torch raises its own error or,
    for a mask with is_causal (accepted by torch 2.11, refused by older versions), computes it."""
    torch = _torch()
    F = torch.nn.functional
    q = torch.randn(1, 2, 8, 16, dtype=torch.float16)
    m = torch.ones(8, 8, dtype=torch.bool).tril()
    with sage2.patch_sdpa() as p:
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=m)
        try:
            both = F.scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True)
        except RuntimeError as e:
            assert "is_causal" in str(e), e
            both = None
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, q, q, attn_mask=m.to(torch.int32))
        with pytest.raises((RuntimeError, IndexError)):
            F.scaled_dot_product_attention(q, q, q, attn_mask=m[0])
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q, attn_mask=m))
    if both is not None:  # torch's own result, unchanged by the patch
        torch.testing.assert_close(both, F.scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True))
    assert p.stats.as_dict() == {"sage2": 0, "fallback": {"device": 1, "attn_mask with is_causal": 1,
                                                          "attn_mask dtype": 1, "attn_mask shape or device": 1}}, \
        p.stats
