"""The reference's call form (issue 25 item 4), without a GPU and without torch: the fake torch and
fake library of fake_torch.py. Each mapped keyword value must reach the library as the sage2
parameter the table of docs/integrations.md says (causal mode, sm_scale, P~V precision); each refused value must
raise before the library is called, with a message naming the value; the aliases under the
reference's function names fix their P~V precision."""
import re

import pytest

from fake_torch import FAKE_TORCH_VARLEN, run_driver

import sage2
from sage2 import _compat

DRIVER = r'''
import sys
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from sage2 import _lib
from fake_torch import FakeLib, T, install, expect_error, packed

fake = FakeLib(masked=False)
install(fake)
TOP, BOTTOM, NONE = _lib.SAGE2_CAUSAL_TOP_LEFT, _lib.SAGE2_CAUSAL_BOTTOM_RIGHT, _lib.SAGE2_CAUSAL_NONE
PV_AUTO, PV_FP8, PV_FP16 = _lib.SAGE2_PV_AUTO, _lib.SAGE2_PV_FP8, _lib.SAGE2_PV_FP16

def q3():
    return T(1, 2, 64, 64), T(1, 2, 64, 64), T(1, 2, 64, 64)

def params(fn, *a, **kw):
    n = len(fake.calls)
    fn(*a, **kw)
    assert len(fake.calls) == n + 1, "the library was not called"
    p = fake.calls[-1]["p"]   # causal, sm_scale, qk_bits, smooth_q, smooth_k, smooth_v, lse, ws, ws_bytes, pv, small_q
    return p[0], round(p[1], 6), p[4], p[5], p[9]

q, k, v = q3()
base = params(sage2.sageattn, q, k, v)
assert base == (NONE, 0.0, 1, 0, PV_AUTO), base

# ---- mapped keywords: what reaches the library
cases = [
    (dict(qk_quant_gran="per_thread"), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(qk_quant_gran="per_warp"), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(pv_accum_dtype="fp32+fp16"), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(pv_accum_dtype="fp16"), (NONE, 0.0, 1, 0, PV_FP16)),
    (dict(pv_accum_dtype="fp16+fp32"), (NONE, 0.0, 1, 0, PV_FP16)),
    (dict(pv_accum_dtype="fp32+fp32"), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(pv_accum_dtype="fp32+fp32", pv_precision="fp16"), (NONE, 0.0, 1, 0, PV_FP16)),
    (dict(pv_accum_dtype="fp32"), (NONE, 0.0, 1, 0, PV_FP16)),
    (dict(pv_accum_dtype="fp32", pv_precision="fp16"), (NONE, 0.0, 1, 0, PV_FP16)),
    (dict(quantization_backend="cuda"), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(quantization_backend="triton"), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(softmax_scale=0.25), (NONE, 0.25, 1, 0, PV_AUTO)),
    (dict(softmax_scale=0.25, sm_scale=0.25), (NONE, 0.25, 1, 0, PV_AUTO)),
    (dict(softmax_scale=None), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(causal=True), (BOTTOM, 0.0, 1, 0, PV_AUTO)),
    (dict(causal=True, causal_alignment="top_left"), (TOP, 0.0, 1, 0, PV_AUTO)),
    (dict(causal=True, is_causal=True), (BOTTOM, 0.0, 1, 0, PV_AUTO)),
    (dict(causal=False), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(dropout_p=0.0), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(dropout_p=0), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(window_size=(-1, -1)), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(window_size=None), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(softcap=0.0), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(softcap=None), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(alibi_slopes=None), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(deterministic=True), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(return_attn_probs=False), (NONE, 0.0, 1, 0, PV_AUTO)),
    (dict(smooth_k=False, smooth_v=True, qk_quant_gran="per_thread"), (NONE, 0.0, 0, 1, PV_AUTO)),
]
for kw, want in cases:
    for _ in range(2):  # the second call takes the fast path: the same parameters
        got = params(sage2.sageattn, *q3(), **kw)
        assert got == want, (kw, got, want)
print("MAPPED", len(cases))

# ---- refused: raises before the library, naming the value
refused = [
    (dict(qk_quant_gran="per_block"), ValueError, "qk_quant_gran='per_block'"),
    (dict(pv_accum_dtype="bf16"), ValueError, "pv_accum_dtype='bf16'"),
    (dict(pv_accum_dtype="fp32", pv_precision="fp8"), ValueError, "pv_precision='fp8' was given"),
    (dict(quantization_backend="cutlass"), ValueError, "quantization_backend='cutlass'"),
    (dict(softmax_scale=0.5, sm_scale=0.25), ValueError, "softmax_scale=0.5 and sm_scale=0.25"),
    (dict(causal=False, is_causal=True), ValueError, "causal=False and is_causal=True"),
    (dict(causal="yes"), TypeError, "causal must be a bool, got 'yes'"),
    (dict(dropout_p=0.1), ValueError, "dropout_p=0.1"),
    (dict(window_size=(128, 0)), ValueError, "window_size=(128, 0)"),
    (dict(softcap=30.0), ValueError, "softcap=30.0"),
    (dict(alibi_slopes=T(2, dtype=torch.float32)), ValueError, "alibi_slopes"),
    (dict(return_attn_probs=True), ValueError, "return_attn_probs=True"),
    (dict(bogus_option=1), TypeError, "unexpected option 'bogus_option'"),
]
for kw, exc, text in refused:
    for _ in range(2):
        expect_error(lambda: sage2.sageattn(*q3(), **kw), exc, text)
print("REFUSED", len(refused))

# ---- the reference's function names
aliases = [
    (sage2.sageattn_qk_int8_pv_fp16_cuda, {}, PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp32"), PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp16"), PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp16+fp32", qk_quant_gran="per_warp"), PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp16_triton, dict(pv_accum_dtype="fp32+fp16"), PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, dict(pv_accum_dtype="fp32+fp16"), PV_FP8),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, dict(pv_accum_dtype="fp32+fp32"), PV_FP8),
    (sage2.sageattn_qk_int8_pv_fp8_cuda_sm90, dict(pv_accum_dtype="fp32", qk_quant_gran="per_warp"), PV_FP8),
    (sage2.sageattn_qk_int8_pv_fp16_triton, {}, PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp16_triton, dict(quantization_backend="cuda"), PV_FP16),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, {}, PV_FP8),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, dict(pv_accum_dtype="fp32"), PV_FP8),
    (sage2.sageattn_qk_int8_pv_fp8_cuda_sm90, {}, PV_FP8),
    (sage2.sageattn_qk_int8_pv_fp8_cuda_sm90, dict(smooth_v=True), PV_FP8),
]
for fn, kw, pv in aliases:
    got = params(fn, *q3(), **kw)
    assert got[4] == pv, (fn.__name__, kw, got)
c, s, sk, sv, pv = params(sage2.sageattn_qk_int8_pv_fp8_cuda, *q3(), is_causal=True, sm_scale=0.125, smooth_k=False,
                          smooth_v=True, return_lse=True, tensor_layout="NHD")
assert (c, s, sk, sv, pv) == (TOP, 0.125, 0, 1, PV_FP8), (c, s, sk, sv, pv)
for fn, kw, text in [
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp32+fp32"), "pv_accum_dtype='fp32+fp32'"),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp32+fp16"), "pv_accum_dtype='fp32+fp16'"),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(qk_quant_gran="per_block"), "qk_quant_gran='per_block'"),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, dict(pv_accum_dtype="fp16"), "pv_accum_dtype='fp16'"),
    (sage2.sageattn_qk_int8_pv_fp8_cuda_sm90, dict(pv_accum_dtype="fp16+fp32"), "pv_accum_dtype='fp16+fp32'"),
    (sage2.sageattn_qk_int8_pv_fp16_triton, dict(pv_accum_dtype="bf16"), "pv_accum_dtype='bf16'"),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, dict(nonsense=3), "unexpected option 'nonsense'"),
]:
    expect_error(lambda: fn(*q3(), **kw), (ValueError, TypeError), text)
print("ALIASES", len(aliases))

# ---- sageattn_varlen takes the same keywords
qv, kv_, vv, cq, ck = packed()
n = len(fake.calls)
sage2.sageattn_varlen(qv, kv_, vv, cq, ck, 64, 64, causal=True, softmax_scale=0.5, pv_accum_dtype="fp32+fp32")
p = fake.calls[-1]["p"]
assert len(fake.calls) == n + 1 and fake.calls[-1]["fn"] == "varlen"
assert (p[0], round(p[1], 6), p[9]) == (BOTTOM, 0.5, PV_AUTO), p
expect_error(lambda: sage2.sageattn_varlen(*packed(), 64, 64, qk_quant_gran="per_block"), ValueError,
             "sage2.sageattn_varlen: qk_quant_gran='per_block'")
sage2.sageattn_varlen(*packed(), 64, 64, qk_quant_gran="per_warp", pv_accum_dtype="fp32+fp16")
assert fake.calls[-1]["p"][9] == PV_AUTO
print("VARLEN OK")
'''


def test_reference_keywords_through_the_library_calls(tmp_path):
    r = run_driver(tmp_path, DRIVER, torch_source=FAKE_TORCH_VARLEN)
    assert r.returncode == 0, r.stdout + r.stderr
    for word in ("MAPPED", "REFUSED", "ALIASES", "VARLEN OK"):
        assert word in r.stdout, r.stdout + r.stderr


def test_every_keyword_of_the_table_is_handled():
    """Each keyword the table documents is either accepted with its neutral value or mapped; none
    is passed through unexamined (a neutral call returns exactly the known options)."""
    neutral = {"qk_quant_gran": "per_thread", "pv_accum_dtype": "fp32+fp32", "quantization_backend": "cuda",
               "softmax_scale": None, "causal": False, "dropout_p": 0.0, "window_size": (-1, -1), "softcap": None,
               "alibi_slopes": None, "deterministic": False, "return_attn_probs": False}
    assert set(neutral) == set(_compat.REFERENCE_KEYWORDS)
    known = frozenset(("pv_precision", "smooth_k"))
    c, s, out = _compat.translate(False, None, dict(neutral, smooth_k=False), known)
    assert (c, s) == (False, None)
    assert out == {"pv_precision": "auto", "pv_accum": "fp32", "smooth_k": False}


@pytest.mark.parametrize("value,want", [("fp32+fp32", "auto"), ("fp32+fp16", "auto"), ("fp32", "fp16"),
                                        ("fp16", "fp16"), ("fp16+fp32", "fp16")])
def test_pv_accum_dtype_mapping(value, want):
    """Every value of the reference is accepted by sageattn on every arch (an FP8 value: the arch's
    precision, FP8 where it exists, FP16 on Ampere); the FP8 entry points run FP8 P~V for
    the values of the reference's FP8 kernels, the FP16 ones FP16 P~V for those of its FP16 kernels."""
    assert _compat.reference_pv_precision(value, "w") == want
    fp8_values = ("fp32", "fp32+fp32", "fp32+fp16")
    fp16_values = ("fp32", "fp16", "fp16+fp32")
    for kind, values, pv in (("fp8", fp8_values, "fp8"), ("fp16_cuda", fp16_values, "fp16")):
        if value in values:
            assert _compat.reference_pv_precision(value, "w", kind) == pv
        else:
            with pytest.raises(ValueError, match=re.escape("pv_accum_dtype=%r is not a value of this entry point" % value)):
                _compat.reference_pv_precision(value, "w", kind)
    assert _compat.reference_pv_precision(value, "w", "fp16_triton") == "fp16"


def test_pv_accum_dtype_mapping_is_logged_at_debug(caplog):
    """The path that runs is logged at debug level on the "sage2" logger, with the reason when it is
    more accurate than the one the value names; nothing at the default level."""
    import logging

    with caplog.at_level(logging.WARNING, logger="sage2"):
        _compat.reference_pv_precision("fp32+fp16", "sage2.sageattn_qk_int8_pv_fp8_cuda", "fp8")
    assert not caplog.records
    with caplog.at_level(logging.DEBUG, logger="sage2"):
        _compat.reference_pv_precision("fp32+fp16", "sage2.sageattn_qk_int8_pv_fp8_cuda", "fp8")
        _compat.translate(False, None, {"qk_quant_gran": "per_warp", "pv_accum_dtype": "fp16"}, frozenset())
    msgs = [r.getMessage() for r in caplog.records if r.name == "sage2" and r.levelno == logging.DEBUG]
    assert any("pv_accum_dtype='fp32+fp16' -> pv_precision='fp8', pv_accum='prefer_fp16'" in m
               and "accumulated in fp16 inside a KV tile" in m and "fp32 accumulation on sm_90a" in m for m in msgs), msgs
    assert any("pv_accum_dtype='fp16' -> pv_precision='fp16', pv_accum='prefer_fp16'" in m
               and "at least as accurate" in m for m in msgs), msgs
    assert any("qk_quant_gran='per_warp' -> per-thread" in m for m in msgs), msgs


def test_readme_shows_the_table():
    """The documentation's table (docs/integrations.md, "The reference's call form") names every keyword the code
    maps (kept true to the code)."""
    import os

    repo = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    readme = os.path.join(repo, "README.md")
    if not os.path.isfile(readme):
        pytest.skip("no README beside the tests (an installed copy)")
    doc = os.path.join(repo, "docs", "integrations.md")
    assert os.path.isfile(doc), "the repository has a README but no %s" % doc
    text = open(doc, encoding="utf-8").read()
    for key in _compat.REFERENCE_KEYWORDS:
        assert "`%s`" % key in text, key
    for name in ("sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp8_cuda",
                 "sageattn_qk_int8_pv_fp8_cuda_sm90"):
        assert name in text and callable(getattr(sage2, name))


# ---- int64 cu_seqlens (the reference and FlashAttention accept them): converted to int32 ----------------
# The fake torch's tensors carry values here (_vals) for the few operations the conversion uses.
FAKE_TORCH_INT64 = FAKE_TORCH_VARLEN + '''
CONVERSIONS = []
class _Scalar:
    def __init__(self, x): self.x = x
    def __int__(self): return int(self.x)
    def item(self): return self.x
def _vals(self): return self.__dict__.get("_v") or [0] * self.numel()
def _with(self, dtype, vals):
    t = Tensor(self.shape, dtype, self.device)
    t._v = list(vals)
    return t
def _to(self, dtype):
    CONVERSIONS.append((self.dtype, dtype))
    return _with(self, dtype, [((x + 2 ** 31) % 2 ** 32) - 2 ** 31 for x in _vals(self)])  # wraps like a cast
Tensor.min = lambda self: _Scalar(min(_vals(self)))
Tensor.max = lambda self: _Scalar(max(_vals(self)))
Tensor.to = _to
Tensor.__lt__ = lambda self, o: _with(self, "bool", [x < o for x in _vals(self)])
Tensor.__gt__ = lambda self, o: _with(self, "bool", [x > o for x in _vals(self)])
Tensor.__or__ = lambda self, o: _with(self, "bool", [a or b for a, b in zip(_vals(self), _vals(o))])
Tensor.masked_fill = lambda self, m, x: _with(self, self.dtype, [x if b else a for a, b in zip(_vals(self), _vals(m))])
'''

DRIVER_INT64 = r'''
import sys
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from fake_torch import FakeLib, T, install, expect_error, lens

fake = FakeLib()
install(fake)

def cu(vals, dtype):
    t = lens(len(vals), dtype=dtype)
    t._v = list(vals)
    return t

q, k, v = T(100, 8, 64), T(300, 2, 64), T(300, 2, 64)
cq64, ck64 = cu([0, 40, 100], torch.int64), cu([0, 100, 300], torch.int64)
n = len(fake.calls)
sage2.sageattn_varlen(q, k, v, cq64, ck64, 60, 200)
assert len(fake.calls) == n + 1 and fake.calls[-1]["fn"] == "varlen"
assert torch.CONVERSIONS == [(torch.int64, torch.int32)] * 2, torch.CONVERSIONS
ptrs = fake.calls[-1]["lens"][1:3]
assert cq64.data_ptr() not in ptrs and ck64.data_ptr() not in ptrs and all(ptrs), ptrs  # the int32 copies
sage2.sageattn_varlen(q, k, v, cq64, ck64, 60, 200)  # again: the fast path takes the converted copies too
assert len(fake.calls) == n + 2 and fake.calls[-1]["lens"][1] not in (cq64.data_ptr(), fake.calls[-2]["lens"][1])
print("INT64 OK")

# values int32 cannot hold: a ValueError naming the value, before the library
big = cu([0, 2 ** 32 + 40, 2 ** 32 + 100], torch.int64)
expect_error(lambda: sage2.sageattn_varlen(q, k, v, big, ck64, 60, 200), ValueError,
             "sage2.sageattn_varlen: cu_seqlens_q is int64 and holds %d, which int32 cannot hold" % (2 ** 32 + 100))
expect_error(lambda: sage2.sageattn_varlen(q, k, v, cq64, cu([-5, 0, 300], torch.int64), 60, 200), ValueError,
             "cu_seqlens_k is int64 and holds -5")
expect_error(lambda: sage2.sageattn_varlen(q, k, v, cq64, lens(3, dtype=torch.float16), 60, 200), TypeError,
             "cu_seqlens_k has dtype torch.float16; it must be torch.int32 (or torch.int64, converted)")
print("RANGE OK")

# under CUDA graph capture the host cannot read the values: out-of-range ones become -1 (invalid
# lengths: NaN outputs) instead of wrapping around into valid-looking ones
torch.CAPTURING[0] = True
seen = []
orig = fake._attention_varlen
sage2._varlen._fast.clear()
import sage2._lib as _lib
def spy(ctx, q_, k_, v_, o_, lens_, p_, stream):
    seen.append(lens_._obj.cu_seqlens_q)
    return orig(ctx, q_, k_, v_, o_, lens_, p_, stream)
fake.sage2_attention_varlen = spy
before = len(torch.ALLOCS)
sage2.sageattn_varlen(q, k, v, big, ck64, 60, 200)
conv = [t for t in torch.ALLOCS[before:] if t.dtype == torch.int32 and t.data_ptr() == seen[-1]]
assert conv and conv[0]._v == [0, -1, -1], [getattr(t, "_v", None) for t in torch.ALLOCS[before:]]
print("CAPTURE OK")
'''


def test_int64_cu_seqlens_are_converted_and_checked(tmp_path):
    r = run_driver(tmp_path, DRIVER_INT64, torch_source=FAKE_TORCH_INT64)
    assert r.returncode == 0, r.stdout + r.stderr
    for word in ("INT64 OK", "RANGE OK", "CAPTURE OK"):
        assert word in r.stdout, r.stdout + r.stderr
