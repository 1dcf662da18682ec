"""Bad input raises TypeError/ValueError naming the argument, before anything reaches the GPU.

The cases that do not need CUDA tensors (types, dtypes, ranks, devices) run with a CPU torch;
the rest need a GPU and skip without one."""
import pytest

from sage2_testutil import require_gpu, torch

import sage2


def _t(*shape, dtype=torch.float16, device="cpu"):
    return torch.zeros(*shape, dtype=dtype, device=device)


# ---- without a GPU ------------------------------------------------------------------------------
def test_not_a_tensor():
    q = _t(1, 2, 8, 16)
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        sage2.sageattn([1.0], q, q)
    with pytest.raises(TypeError, match="v must be a torch.Tensor"):
        sage2.sageattn(q, q, None)


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_rank(which):
    args = {"q": _t(1, 2, 8, 16), "k": _t(1, 2, 8, 16), "v": _t(1, 2, 8, 16)}
    args[which] = _t(2, 8, 16)
    with pytest.raises(ValueError, match="%s must be 4-D" % which):
        sage2.sageattn(args["q"], args["k"], args["v"])


@pytest.mark.parametrize("which", ["q", "k", "v"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8])
def test_dtype(which, dtype):
    args = {"q": _t(1, 2, 8, 16), "k": _t(1, 2, 8, 16), "v": _t(1, 2, 8, 16)}
    args[which] = _t(1, 2, 8, 16, dtype=dtype)
    with pytest.raises(TypeError, match="%s has dtype" % which):
        sage2.sageattn(args["q"], args["k"], args["v"])


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_cpu_tensors_are_rejected(which):
    if torch.cuda.is_available():
        dev = "cuda"
    else:
        dev = "cpu"
    args = {"q": _t(1, 2, 8, 16, device=dev), "k": _t(1, 2, 8, 16, device=dev), "v": _t(1, 2, 8, 16, device=dev)}
    args[which] = _t(1, 2, 8, 16)
    if dev == "cpu" and which != "q":
        # all on the CPU: q is named first
        which = "q"
    with pytest.raises(ValueError, match="%s is on device 'cpu'" % which):
        sage2.sageattn(args["q"], args["k"], args["v"])


def test_custom_op_is_registered():
    assert hasattr(torch.ops.sage2, "sageattn")
    assert sorted(sage2.OPTIONS) == ["causal_alignment", "pv_accum", "pv_precision", "qk_bits", "small_q_path", "smooth_k",
                                     "smooth_q", "smooth_v"]


def test_fake_tensors_give_output_shapes_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 4, 100, 64, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(2, 2, 300, 64, dtype=torch.bfloat16, device="cuda")
        out, lse = sage2.sageattn(q, k, k, return_lse=True, is_causal=True)
        assert out.shape == (2, 4, 100, 64) and out.dtype == torch.bfloat16 and out.device.type == "cuda"
        assert lse.shape == (2, 4, 100) and lse.dtype == torch.float32
        qn = torch.empty(2, 100, 4, 64, dtype=torch.float16, device="cuda")
        kn = torch.empty(2, 300, 2, 64, dtype=torch.float16, device="cuda")
        assert sage2.sageattn(qn, kn, kn, tensor_layout="NHD").shape == (2, 100, 4, 64)
        with pytest.raises(ValueError, match="tensor_layout"):
            sage2.sageattn(q, k, k, tensor_layout="BHSD")


def test_sdpa_wrapper_falls_back_on_cpu():
    q = torch.randn(1, 2, 8, 16)
    ref = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    with sage2.patch_sdpa() as p:
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert torch.equal(out, ref)
    assert p.stats.sage2 == 0 and p.stats.fallback == {"dtype": 1}


# ---- with a GPU ------------------------------------------------------------------------------------
def _cuda_args(layout="HND", b=1, hq=4, hkv=2, nq=64, nk=96, d=64, dtype=torch.float16):
    def mk(h, n):
        shape = (b, h, n, d) if layout == "HND" else (b, n, h, d)
        return torch.randn(*shape, dtype=dtype, device="cuda")

    return mk(hq, nq), mk(hkv, nk), mk(hkv, nk)


CASES = [
    # (description, mutation of (q, k, v, kwargs), exception, message regex)
    ("k dtype differs", lambda q, k, v, kw: (q, k.bfloat16(), v, kw), TypeError, "k has dtype torch.bfloat16 but q"),
    ("v dtype differs", lambda q, k, v, kw: (q, k, v.bfloat16(), kw), TypeError, "v has dtype"),
    ("layout string", lambda q, k, v, kw: (q, k, v, dict(kw, tensor_layout="BHND")), ValueError, "tensor_layout='BHND'"),
    ("layout lower case", lambda q, k, v, kw: (q, k, v, dict(kw, tensor_layout="hnd")), ValueError, "tensor_layout"),
    ("layout type", lambda q, k, v, kw: (q, k, v, dict(kw, tensor_layout=1)), TypeError, "tensor_layout must be a str"),
    ("k batch", lambda q, k, v, kw: (q, torch.cat([k, k]), v, kw), ValueError, "k has batch 2 but q has 1"),
    ("v batch", lambda q, k, v, kw: (q, k, torch.cat([v, v]), kw), ValueError, "v has batch 2"),
    ("k head dim", lambda q, k, v, kw: (q, k[..., :32], v, kw), ValueError, "k has head dim 32 but q has 64"),
    ("v head dim", lambda q, k, v, kw: (q, k, v[..., :32], kw), ValueError, "v has head dim 32"),
    ("v tokens", lambda q, k, v, kw: (q, k, v[:, :, :50], kw), ValueError, "v has 2 heads x 50 tokens but k has 2 x 96"),
    ("q heads not multiple", lambda q, k, v, kw: (q[:, :3], k, v, kw), ValueError, "q has 3 heads, not a multiple"),
    ("q last dim stride", lambda q, k, v, kw: (q[:, :, :64].transpose(2, 3), k, v, kw), ValueError,
     "q must have a contiguous last dim"),
    ("k broadcast", lambda q, k, v, kw: (q, k[:, :1].expand(-1, 2, -1, -1), v, kw), ValueError, "k has stride 0"),
    ("is_causal type", lambda q, k, v, kw: (q, k, v, dict(kw, is_causal="yes")), TypeError, "is_causal must be a bool"),
    ("is_causal 2", lambda q, k, v, kw: (q, k, v, dict(kw, is_causal=2)), TypeError, "is_causal"),
    ("sm_scale 0", lambda q, k, v, kw: (q, k, v, dict(kw, sm_scale=0.0)), ValueError, "sm_scale=0.0"),
    ("sm_scale negative", lambda q, k, v, kw: (q, k, v, dict(kw, sm_scale=-1.0)), ValueError, "sm_scale"),
    ("sm_scale nan", lambda q, k, v, kw: (q, k, v, dict(kw, sm_scale=float("nan"))), ValueError, "sm_scale"),
    ("sm_scale inf", lambda q, k, v, kw: (q, k, v, dict(kw, sm_scale=float("inf"))), ValueError, "sm_scale"),
    ("sm_scale str", lambda q, k, v, kw: (q, k, v, dict(kw, sm_scale="0.1")), TypeError, "sm_scale must be"),
    ("return_lse", lambda q, k, v, kw: (q, k, v, dict(kw, return_lse="no")), TypeError, "return_lse"),
    ("alignment", lambda q, k, v, kw: (q, k, v, dict(kw, is_causal=True, causal_alignment="bottom")), ValueError,
     "causal_alignment='bottom'"),
    ("qk_bits 3", lambda q, k, v, kw: (q, k, v, dict(kw, qk_bits=3)), ValueError, "qk_bits=3"),
    ("qk_bits str", lambda q, k, v, kw: (q, k, v, dict(kw, qk_bits="8")), ValueError, "qk_bits"),
    ("smooth_q", lambda q, k, v, kw: (q, k, v, dict(kw, smooth_q=1)), TypeError, "smooth_q=1"),
    ("smooth_k", lambda q, k, v, kw: (q, k, v, dict(kw, smooth_k=None)), TypeError, "smooth_k=None"),
    ("smooth_v", lambda q, k, v, kw: (q, k, v, dict(kw, smooth_v="on")), TypeError, "smooth_v"),
    ("pv_precision", lambda q, k, v, kw: (q, k, v, dict(kw, pv_precision="fp32")), ValueError, "pv_precision='fp32'"),
    ("pv_precision type", lambda q, k, v, kw: (q, k, v, dict(kw, pv_precision=16)), ValueError, "pv_precision=16"),
    ("small_q_path value", lambda q, k, v, kw: (q, k, v, dict(kw, small_q_path="fast")), ValueError,
     "small_q_path='fast'"),
    ("small_q_path type", lambda q, k, v, kw: (q, k, v, dict(kw, small_q_path=2)), ValueError, "small_q_path=2"),
    ("small_q_path direct with attn_mask", lambda q, k, v, kw: (q, k, v, dict(
        kw, small_q_path="direct", attn_mask=torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device="cuda"))),
     ValueError, "small_q_path='direct' takes dense calls only"),
    # (pv_accum_dtype is the reference's keyword, mapped since issue 25: test_reference_kwargs.py)
    ("unknown option", lambda q, k, v, kw: (q, k, v, dict(kw, pv_accum_dtpye="fp32")), TypeError,
     "unexpected option 'pv_accum_dtpye'"),
    ("reference keyword, value it never had", lambda q, k, v, kw: (q, k, v, dict(kw, pv_accum_dtype="fp64")),
     ValueError, "pv_accum_dtype='fp64'; expected one of the reference's values"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_on_gpu(case):
    require_gpu()
    _, mutate, exc, msg = case
    q, k, v = _cuda_args()
    q, k, v, kw = mutate(q, k, v, {})
    torch.cuda.synchronize()
    with pytest.raises(exc, match=msg):
        sage2.sageattn(q, k, v, **kw)


def test_nhd_shape_errors_name_the_layout():
    require_gpu()
    q, k, v = _cuda_args("NHD")
    # an HND tensor passed with tensor_layout="NHD": heads and tokens swapped
    with pytest.raises(ValueError, match="layout NHD|tensor_layout='NHD'"):
        sage2.sageattn(q, k.transpose(1, 2), v.transpose(1, 2), tensor_layout="NHD")


def test_valid_calls_accept_every_documented_option():
    require_gpu()
    q, k, v = _cuda_args()
    for kw in (dict(), dict(is_causal=True), dict(is_causal=1), dict(sm_scale=0.1), dict(sm_scale=1),
               dict(qk_bits=8), dict(qk_bits=None), dict(smooth_q=None), dict(smooth_q=False), dict(smooth_k=True),
               dict(smooth_v=False), dict(is_causal=True, causal_alignment="bottom_right"),
               dict(causal_alignment="top_left"), dict(pv_precision=None), dict(pv_precision="auto"),
               dict(pv_precision="fp16"), dict(pv_precision="fp16", is_causal=True, smooth_v=True),
               dict(small_q_path="auto"), dict(small_q_path=None),
               dict(small_q_path="quantized"), dict(small_q_path="direct")):
        out = sage2.sageattn(q, k, v, **kw)
        assert out.shape == q.shape


def test_tensors_on_different_devices_are_rejected():
    require_gpu()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (found %d)" % torch.cuda.device_count())
    q, k, v = _cuda_args()
    with pytest.raises(ValueError, match="k is on cuda:1 but q is on cuda:0"):
        sage2.sageattn(q.to("cuda:0"), k.to("cuda:1"), v.to("cuda:0"))
    with pytest.raises(ValueError, match="v is on cuda:1 but q is on cuda:0"):
        sage2.sageattn(q.to("cuda:0"), k.to("cuda:0"), v.to("cuda:1"))
    # and a call on the second device works there (its own context)
    out = sage2.sageattn(q.to("cuda:1"), k.to("cuda:1"), v.to("cuda:1"))
    assert out.device == torch.device("cuda:1")
    torch.testing.assert_close(out.to("cuda:0"), sage2.sageattn(q, k, v), rtol=1e-3, atol=1e-2)


def test_dynamo_traces_one_opaque_node_fullgraph():
    """torch.compile(fullgraph=True) sees sageattn as one sage2::sageattn node (no graph break).
    Traced with fake CUDA tensors, so this runs without a GPU; the GPU suite runs it for real."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    def f(q, k, v):
        o, lse = sage2.sageattn(q, k, v, tensor_layout="NHD", is_causal=True, return_lse=True, qk_bits=8,
                                causal_alignment="bottom_right", smooth_v=True)
        return o * 2, lse

    torch._dynamo.reset()
    with FakeTensorMode():
        q = torch.empty(1, 128, 4, 64, dtype=torch.float16, device="cuda")
        k = torch.empty(1, 256, 2, 64, dtype=torch.float16, device="cuda")
        o, lse = torch.compile(f, backend=backend, fullgraph=True)(q, k, k)
    assert o.shape == (1, 128, 4, 64) and lse.shape == (1, 4, 128)
    assert len(graphs) == 1
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "sage2" in str(n.target)]
    assert len(calls) == 1
    assert list(calls[0].args[3:]) == ["NHD", 2, 0.0, True, 8, 0, 0, 0, True, True, 0]  # ..., small_q_path auto
    torch._dynamo.reset()
