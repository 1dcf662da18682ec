"""The reference's call form (issue 25 item 4), without a GPU and without torch: the fake torch and
fake library of fake_torch.py. Each mapped keyword value must reach the library as the sage2
parameter the README's table says (causal mode, sm_scale, P~V precision); each refused value must
raise before the library is called, with a message naming the value; the aliases under the
reference's function names fix their P~V precision."""
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
    (dict(pv_accum_dtype="fp32+fp32"), (NONE, 0.0, 1, 0, PV_FP8)),
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
    (dict(qk_quant_gran="per_warp"), ValueError, "qk_quant_gran='per_warp'"),
    (dict(qk_quant_gran="per_block"), ValueError, "qk_quant_gran='per_block'"),
    (dict(pv_accum_dtype="fp16"), ValueError, "pv_accum_dtype='fp16'"),
    (dict(pv_accum_dtype="fp16+fp32"), ValueError, "pv_accum_dtype='fp16+fp32'"),
    (dict(pv_accum_dtype="fp32+fp16"), ValueError, "pv_accum_dtype='fp32+fp16'"),
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
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp16"), "pv_accum_dtype='fp16'"),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp16+fp32"), "pv_accum_dtype='fp16+fp32'"),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(pv_accum_dtype="fp32+fp32"), "pv_accum_dtype='fp32+fp32'"),
    (sage2.sageattn_qk_int8_pv_fp16_cuda, dict(qk_quant_gran="per_warp"), "qk_quant_gran='per_warp'"),
    (sage2.sageattn_qk_int8_pv_fp8_cuda, dict(pv_accum_dtype="fp32+fp16"), "pv_accum_dtype='fp32+fp16'"),
    (sage2.sageattn_qk_int8_pv_fp8_cuda_sm90, dict(qk_quant_gran="per_warp"), "qk_quant_gran='per_warp'"),
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
assert (p[0], round(p[1], 6), p[9]) == (BOTTOM, 0.5, PV_FP8), p
expect_error(lambda: sage2.sageattn_varlen(*packed(), 64, 64, qk_quant_gran="per_warp"), ValueError,
             "sage2.sageattn_varlen: qk_quant_gran='per_warp'")
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
    assert out == {"pv_precision": "fp8", "smooth_k": False}


@pytest.mark.parametrize("value,want", [("fp32+fp32", "fp8"), ("fp32", "fp16")])
def test_pv_accum_dtype_mapping(value, want):
    assert _compat.reference_pv_precision(value, "w") == want
    assert _compat.reference_pv_precision(value, "w", fp8_function=True) == "fp8"


def test_readme_shows_the_table():
    """The README's table names every keyword the code maps (kept true to the code)."""
    import os

    repo = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    readme = os.path.join(repo, "README.md")
    if not os.path.isfile(readme):
        pytest.skip("no README beside the tests (an installed copy)")
    text = open(readme, encoding="utf-8").read()
    for key in _compat.REFERENCE_KEYWORDS:
        assert "`%s`" % key in text, key
    for name in ("sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp8_cuda",
                 "sageattn_qk_int8_pv_fp8_cuda_sm90"):
        assert name in text and callable(getattr(sage2, name))
