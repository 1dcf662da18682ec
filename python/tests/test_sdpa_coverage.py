"""patch_sdpa on GPUs sage2 cannot run (issue 23), without torch and without a GPU: fake_torch.py's
fake torch and a fake library, in a subprocess.

What it pins down: a call on a device whose sage2 context is refused as unsupported (a GPU older
than sage2's arch table) goes to torch's SDPA, counted under "unsupported GPU", and the device is
asked once; a call the library refuses as unsupported on that GPU (e.g. qk_bits=4 on Blackwell,
pv_precision='fp8' on Ampere) goes to torch under "unsupported on this GPU"; other devices and
calls still go to sage2; pv_precision reaches the library in sage2_attention_params.pv_precision.
Also: the sage2_attention_params layout (pv_precision appended) and the pv constants match the
header as a C compiler sees them."""
import ctypes

from fake_torch import FAKE_TORCH_MASK, c_layout, run_driver

from sage2 import _lib

FAKE_FUNCTIONAL = '''
CALLS = []
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 **kw):
    CALLS.append(query.device)
    return "torch sdpa"
'''

DRIVER = r'''
import ctypes, sys
sys.path.insert(0, sys.argv[1])
import torch
import torch.nn.functional as F
import sage2
from sage2 import _lib, sdpa
from fake_torch import FakeLib, T, install

fake = FakeLib()
install(fake)
asked = []
def context(i):
    asked.append(i)
    if i == 1:
        raise _lib.UnsupportedError("device 1 (Tesla T4) is sm_75: older than sage2 supports", 2, "sage2_context_create")
    return ctypes.c_void_p(0x1000 + i)
_lib.context = context

def qkv(dev):
    return tuple(torch.Tensor((1, 2, 64, 64), torch.float16, dev) for _ in range(3))

with sage2.patch_sdpa() as p:
    out0 = F.scaled_dot_product_attention(*qkv("cuda:0"))
    assert out0 != "torch sdpa" and out0.shape == (1, 2, 64, 64)
    assert F.scaled_dot_product_attention(*qkv("cuda:1")) == "torch sdpa"
    assert F.scaled_dot_product_attention(*qkv("cuda:1")) == "torch sdpa"
    assert asked.count(1) == 1, asked  # the refusal is remembered per device
    assert p.stats.as_dict() == {"sage2": 1, "fallback": {"unsupported GPU": 2}}, p.stats

# the library refuses the call itself as unsupported on this GPU: torch computes it
fake.fail = _lib.SAGE2_ERROR_UNSUPPORTED
with sage2.patch_sdpa(qk_bits=4) as p:
    assert F.scaled_dot_product_attention(*qkv("cuda:0")) == "torch sdpa"
    assert p.stats.as_dict() == {"sage2": 0, "fallback": {"unsupported on this GPU": 1}}, p.stats
fake.fail = 0

# pv_precision reaches the library; qk_bits keeps its C value
with sage2.patch_sdpa(pv_precision="fp16") as p:
    F.scaled_dot_product_attention(*qkv("cuda:0"))
    assert p.stats.sage2 == 1
rec = fake.calls[-1]
assert rec["p"][9] == _lib.SAGE2_PV_FP16 and rec["p"][2] == 0, rec["p"]
sage2.sageattn(*qkv("cuda:0"), pv_precision="fp8", qk_bits=8)
assert fake.calls[-1]["p"][9] == _lib.SAGE2_PV_FP8 and fake.calls[-1]["p"][2] == 8
try:
    sage2.sageattn(*qkv("cuda:0"), pv_precision="bf16")
    raise AssertionError("pv_precision='bf16' accepted")
except ValueError as e:
    assert "pv_precision='bf16'" in str(e)
# pv_accum reaches the library (sage2_attention_params.pv_accum), beside pv_precision
sage2.sageattn(*qkv("cuda:0"), pv_precision="fp8", pv_accum="fp16")
assert fake.calls[-1]["p"][11] == 2 and fake.calls[-1]["p"][9] == _lib.SAGE2_PV_FP8, fake.calls[-1]["p"]
sage2.sageattn(*qkv("cuda:0"))
assert fake.calls[-1]["p"][11] == 0
sage2.sageattn_qk_int8_pv_fp8_cuda(*qkv("cuda:0"))  # the reference's default "fp32+fp16"
assert fake.calls[-1]["p"][11] == 3 and fake.calls[-1]["p"][9] == _lib.SAGE2_PV_FP8, fake.calls[-1]["p"]
sage2.sageattn_qk_int8_pv_fp8_cuda(*qkv("cuda:0"), pv_accum_dtype="fp32+fp32")
assert fake.calls[-1]["p"][11] == 1
try:
    sage2.sageattn(*qkv("cuda:0"), pv_accum="bf16")
    raise AssertionError("pv_accum='bf16' accepted")
except ValueError as e:
    assert "pv_accum='bf16'" in str(e)
print("SDPA COVERAGE OK")
'''


def test_patch_sdpa_falls_back_on_unsupported_gpus(tmp_path):
    r = run_driver(tmp_path, DRIVER, torch_source=FAKE_TORCH_MASK, functional=FAKE_FUNCTIONAL)
    assert r.returncode == 0 and "SDPA COVERAGE OK" in r.stdout, r.stdout + r.stderr


def test_attention_params_layout_and_pv_constants_match_the_header(tmp_path):
    fields = [f for f, _ in _lib.AttentionParams._fields_]
    assert fields[-3:] == ["pv_precision", "small_q_path", "pv_accum"]  # appended, in this order
    got = c_layout(tmp_path, "sage2_attention_params", fields,
                   constants=(("auto", "SAGE2_PV_AUTO"), ("fp8", "SAGE2_PV_FP8"), ("fp16", "SAGE2_PV_FP16"),
                              ("acc_auto", "SAGE2_PV_ACCUM_AUTO"), ("acc_fp32", "SAGE2_PV_ACCUM_FP32"),
                              ("acc_fp16", "SAGE2_PV_ACCUM_FP16"), ("acc_prefer", "SAGE2_PV_ACCUM_PREFER_FP16")))
    assert got["size"] == ctypes.sizeof(_lib.AttentionParams)
    for f in fields:
        assert got[f] == getattr(_lib.AttentionParams, f).offset, f
    assert (got["auto"], got["fp8"], got["fp16"]) == (_lib.SAGE2_PV_AUTO, _lib.SAGE2_PV_FP8, _lib.SAGE2_PV_FP16)
    # the Python option's codes (sage2._core._PV_ACCUMS, no torch needed here) are the header's
    assert (got["acc_auto"], got["acc_fp32"], got["acc_fp16"], got["acc_prefer"]) == (0, 1, 2, 3)
