"""sage2.sageattn on the GPU: accuracy against torch SDPA in float64, layouts, GQA, causal
alignments, LSE, strided inputs, streams, CUDA graphs, torch.compile, autograd guard.

Every test here skips (with the reason) without a CUDA torch, a GPU or libsage2."""
import threading

import pytest

from sage2_testutil import (
    COS_4BIT,
    COS_8BIT,
    COS_8BIT_FEW_KEYS,
    LSE_8BIT,
    RELL1_8BIT,
    RELL1_8BIT_FEW_KEYS,
    activation_like,
    capture_graph,
    lse_error,
    metrics,
    reference,
    report,
    require_gpu,
    torch,
)

import sage2

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


def _report(name, cos, rel, mx, lse_err=None):
    report(name, cos, rel, mx, lse_err)


def _check_8bit(cos, rel, few_keys=False):
    if few_keys:
        assert cos >= COS_8BIT_FEW_KEYS and rel <= RELL1_8BIT_FEW_KEYS, (cos, rel)
    else:
        assert cos >= COS_8BIT and rel <= RELL1_8BIT, (cos, rel)


# ---- accuracy matrix vs torch SDPA (float64) ---------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_matches_sdpa_fp64(dtype, layout, d, causal):
    b, h, n = 2, 4, 1536
    q, k, v = activation_like(b, h, h, n, n, d, dtype=dtype, layout=layout, seed=d + 7 * causal)
    out, lse = sage2.sageattn(q, k, v, tensor_layout=layout, is_causal=causal, return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape and out.is_contiguous()
    assert lse.dtype == torch.float32 and lse.shape == (b, h, n)
    ref, ref_lse = reference(q, k, v, layout, is_causal=causal)
    cos, rel, mx = metrics(out, ref, layout)
    le = lse_error(lse, ref_lse)
    _report("sdpa-fp64 %s %s d=%d causal=%d" % (dtype, layout, d, causal), cos, rel, mx, le)
    _check_8bit(cos, rel)
    assert le <= LSE_8BIT


def test_default_call_is_sdpa_drop_in():
    """sageattn(q, k, v, is_causal=...) in HND replaces F.scaled_dot_product_attention(q, k, v, is_causal=...)."""
    q, k, v = activation_like(1, 8, 8, 2048, 2048, 128, seed=3)
    for causal in (False, True):
        ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        out = sage2.sageattn(q, k, v, is_causal=causal)
        cos, rel, mx = metrics(out, ref)
        _report("drop-in causal=%d" % causal, cos, rel, mx)
        _check_8bit(cos, rel)
        # and it is as close to fp64 as torch's own fp16 SDPA is, within the quantization budget
        sd = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        cos_t, _, _ = metrics(sd, ref)
        assert cos >= cos_t - 1e-4


# ---- GQA / MQA ----------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("hq,hkv", [(8, 2), (8, 1), (6, 3)])
def test_gqa(layout, hq, hkv):
    q, k, v = activation_like(2, hq, hkv, 1024, 1024, 128, layout=layout, seed=hq * 10 + hkv)
    out, lse = sage2.sageattn(q, k, v, tensor_layout=layout, return_lse=True)
    ref, ref_lse = reference(q, k, v, layout)
    cos, rel, mx = metrics(out, ref, layout)
    le = lse_error(lse, ref_lse)
    _report("gqa %s %d/%d" % (layout, hq, hkv), cos, rel, mx, le)
    _check_8bit(cos, rel)
    assert le <= LSE_8BIT


# ---- causal alignments with Nq != Nk ----------------------------------------------------------
@pytest.mark.parametrize("nq,nk", [(512, 2048), (2048, 512), (1000, 1000)])
@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
def test_causal_alignment(nq, nk, alignment):
    q, k, v = activation_like(1, 4, 4, nq, nk, 128, seed=nq + nk)
    out, lse = sage2.sageattn(q, k, v, is_causal=True, causal_alignment=alignment, return_lse=True)
    ref, ref_lse = reference(q, k, v, is_causal=True, alignment=alignment)
    cos, rel, mx = metrics(out, ref)
    le = lse_error(lse, ref_lse)
    _report("causal %s nq=%d nk=%d" % (alignment, nq, nk), cos, rel, mx, le)
    # Causal rows see few keys near the diagonal: the C++ suite's "few keys" bounds apply.
    _check_8bit(cos, rel, few_keys=True)
    assert le <= LSE_8BIT
    if alignment == "bottom_right" and nq > nk:
        dead = nq - nk  # these query rows see no key: O = 0, LSE = -inf
        assert torch.count_nonzero(out[:, :, :dead]) == 0
        assert torch.isneginf(lse[:, :, :dead]).all()
    # The other alignment gives a different answer whenever Nq != Nk (the option is not ignored).
    if nq != nk:
        other = "bottom_right" if alignment == "top_left" else "top_left"
        out2 = sage2.sageattn(q, k, v, is_causal=True, causal_alignment=other)
        assert not torch.equal(out, out2)


def test_top_left_matches_torch_is_causal_when_lengths_differ():
    q, k, v = activation_like(1, 4, 4, 700, 1800, 64, seed=11)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    cos, rel, _ = metrics(sage2.sageattn(q, k, v, is_causal=True), ref)
    _check_8bit(cos, rel, few_keys=True)


# ---- options ------------------------------------------------------------------------------------
def test_sm_scale():
    q, k, v = activation_like(1, 4, 4, 1024, 1024, 64, seed=5)
    for scale in (0.05, 0.2):
        out, lse = sage2.sageattn(q, k, v, sm_scale=scale, return_lse=True)
        ref, ref_lse = reference(q, k, v, sm_scale=scale)
        cos, rel, mx = metrics(out, ref)
        le = lse_error(lse, ref_lse)
        _report("sm_scale %.2f" % scale, cos, rel, mx, le)
        _check_8bit(cos, rel, few_keys=scale > 0.15)
        assert le <= LSE_8BIT


@pytest.mark.parametrize("opts", [dict(smooth_v=True), dict(smooth_q=True), dict(smooth_k=False, qk_bits=8),
                                  dict(qk_bits=4)], ids=["smooth_v", "smooth_q", "no_smooth_k", "int4"])
def test_options(opts):
    q, k, v = activation_like(1, 4, 4, 1024, 1024, 128, seed=21)
    out, lse = sage2.sageattn(q, k, v, return_lse=True, **opts)
    ref, ref_lse = reference(q, k, v)
    cos, rel, mx = metrics(out, ref)
    le = lse_error(lse, ref_lse)
    _report("options %s" % opts, cos, rel, mx, le)
    if opts.get("qk_bits") == 4:
        assert cos >= COS_4BIT
    elif opts.get("smooth_k") is False:
        assert cos >= 0.999  # without smoothing, K's channel bias costs INT8 accuracy (sanity bound)
    else:
        _check_8bit(cos, rel)
        assert le <= LSE_8BIT


def test_other_head_dims():
    for d in (32, 80, 96, 160, 256):
        q, k, v = activation_like(1, 2, 2, 1024, 1024, d, seed=d)
        ref, _ = reference(q, k, v)
        cos, rel, mx = metrics(sage2.sageattn(q, k, v), ref)
        _report("head dim %d" % d, cos, rel, mx)
        _check_8bit(cos, rel)


# ---- strided inputs ---------------------------------------------------------------------------
def test_non_contiguous_inputs():
    b, h, n, d = 2, 4, 1024, 64
    # packed qkv [B, N, 3, H, D]: q/k/v are NHD views with a 3*H*D token stride
    qkv = torch.cat([t.unsqueeze(2) for t in activation_like(b, h, h, n, n, d, layout="NHD", seed=2)], dim=2)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    assert not q.is_contiguous() and q.stride(-1) == 1
    out = sage2.sageattn(q, k, v, tensor_layout="NHD")
    ref, _ = reference(q, k, v, "NHD")
    cos, rel, mx = metrics(out, ref, "NHD")
    _report("packed qkv NHD views", cos, rel, mx)
    _check_8bit(cos, rel)
    contig = sage2.sageattn(q.contiguous(), k.contiguous(), v.contiguous(), tensor_layout="NHD")
    print("strided == contiguous bit for bit:", torch.equal(out, contig))
    torch.testing.assert_close(out, contig, rtol=1e-3, atol=1e-2)
    # the same memory viewed as HND ([B, H, N, D] with strides of a transposed tensor)
    out_h = sage2.sageattn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), tensor_layout="HND")
    assert out_h.shape == (b, h, n, d) and out_h.is_contiguous()
    torch.testing.assert_close(out_h, out.transpose(1, 2), rtol=1e-3, atol=1e-2)
    # padded sequence stride and a sliced head range
    big = torch.zeros(b, h + 2, n + 64, d, dtype=torch.float16, device="cuda")
    qh, kh, vh = activation_like(b, h, h, n, n, d, seed=4)
    qs = big[:, 1:h + 1, 32:32 + n]
    qs.copy_(qh)
    out_s = sage2.sageattn(qs, kh, vh)
    torch.testing.assert_close(out_s, sage2.sageattn(qh, kh, vh), rtol=1e-3, atol=1e-2)


def test_rejects_last_dim_stride_and_expanded_views():
    q, k, v = activation_like(1, 2, 2, 256, 256, 64, seed=1)
    sq = q[:, :, :64].transpose(2, 3)  # [1, 2, 64, 64] whose last dim has stride 64
    with pytest.raises(ValueError, match="q must have a contiguous last dim"):
        sage2.sageattn(sq, k, v)
    with pytest.raises(ValueError, match="k has stride 0"):
        sage2.sageattn(q.expand(1, 2, 256, 64), k[:, :1].expand(1, 2, 256, 64), v)


# ---- outputs, determinism, empty inputs ----------------------------------------------------------
def test_deterministic_and_output_layout():
    q, k, v = activation_like(2, 4, 2, 512, 768, 128, layout="NHD", seed=9)
    a = sage2.sageattn(q, k, v, tensor_layout="NHD")
    b = sage2.sageattn(q, k, v, tensor_layout="NHD")
    assert torch.equal(a, b)
    assert a.shape == (2, 512, 4, 128) and a.is_contiguous() and a.dtype == torch.float16
    assert sage2.sageattn(q, k, v, tensor_layout="NHD", return_lse=True)[1].shape == (2, 4, 512)


def test_fast_path_hits_and_gives_the_same_bits():
    """The second call of a signature takes the cached fast path (no argument checks again) and
    gives the same bits and LSE as the first; other strides or options miss."""
    from sage2 import _attention as A
    from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)

    q, k, v = activation_like(1, 4, 2, 300, 500, 64, seed=21)
    a, la = sage2.sageattn(q, k, v, is_causal=True, return_lse=True)
    n = len(A._fast)
    calls = []
    orig = C._normalize
    C._normalize = lambda *args: calls.append(1) or orig(*args)
    try:
        for _ in range(3):
            q2, k2, v2 = (torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)
                          for t in (q, k, v))  # other memory, the same strides
            b, lb = sage2.sageattn(q2, k2, v2, is_causal=True, return_lse=True)
            assert torch.equal(a, b) and torch.equal(la, lb)
        assert calls == [] and len(A._fast) == n
        sage2.sageattn(q, k, v, is_causal=False)  # another signature: checked, then cached
        assert calls == [1] and len(A._fast) == n + 1
    finally:
        C._normalize = orig


def test_empty_inputs():
    q, k, v = activation_like(1, 2, 2, 64, 64, 64, seed=1)
    out, lse = sage2.sageattn(q[:, :, :0], k, v, return_lse=True)
    assert out.shape == (1, 2, 0, 64) and lse.shape == (1, 2, 0)
    out, lse = sage2.sageattn(q, k[:, :, :0], v[:, :, :0], return_lse=True)
    assert torch.count_nonzero(out) == 0 and torch.isneginf(lse).all()


def test_one_token_and_odd_sizes():
    for nq, nk, d in ((1, 1, 64), (17, 33, 72), (129, 1, 128)):
        q, k, v = activation_like(1, 2, 2, nq, nk, d, seed=nq)
        ref, ref_lse = reference(q, k, v)
        out, lse = sage2.sageattn(q, k, v, return_lse=True)
        cos, rel, mx = metrics(out, ref)
        _report("odd nq=%d nk=%d d=%d" % (nq, nk, d), cos, rel, mx)
        assert cos >= 0.999 and lse_error(lse, ref_lse) <= 0.5


# ---- streams, threads ---------------------------------------------------------------------------
def test_runs_on_current_stream():
    q, k, v = activation_like(2, 8, 8, 2048, 2048, 128, seed=13)
    expected = sage2.sageattn(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        qq = torch.empty_like(q)
        for _ in range(4):  # keep the side stream busy before the copy lands
            qq.copy_(q * 0)
        qq.copy_(q)
        out = sage2.sageattn(qq, k, v)  # must be ordered after the copy on stream s
    s.synchronize()
    assert torch.equal(out, expected)


def test_threads_share_contexts():
    q, k, v = activation_like(1, 4, 4, 1024, 1024, 64, seed=17)
    expected = sage2.sageattn(q, k, v)
    torch.cuda.synchronize()
    results, errors = [None] * 4, []

    def work(i):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                results[i] = sage2.sageattn(q, k, v)
            s.synchronize()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for r in results:
        assert torch.equal(r, expected)


# ---- CUDA graphs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("capture_error_mode", ["global", "thread_local"])
def test_cuda_graph_capture_and_replay_with_new_values(capture_error_mode):
    """torch.cuda.graph's default capture mode is "global" (the strictest: any unsafe CUDA call
    from any thread fails the capture); "thread_local" is what the C++ suite uses."""
    shape = dict(b=2, hq=8, hkv=4, nq=1024, nk=1024, d=128)
    q, k, v = activation_like(*shape.values(), seed=100)
    sq, sk, sv = q.clone(), k.clone(), v.clone()
    g, (gout, glse) = capture_graph(lambda: sage2.sageattn(sq, sk, sv, is_causal=True, return_lse=True),
                                    capture_error_mode)
    previous = None
    for seed in (101, 102, 103):
        nq, nk, nv = activation_like(*shape.values(), seed=seed)
        sq.copy_(nq)
        sk.copy_(nk)
        sv.copy_(nv)
        g.replay()
        torch.cuda.synchronize()
        eager, eager_lse = sage2.sageattn(nq, nk, nv, is_causal=True, return_lse=True)
        print("graph replay seed %d == eager bit for bit: %s" % (seed, torch.equal(gout, eager)))
        torch.testing.assert_close(gout, eager, rtol=1e-3, atol=1e-2)
        torch.testing.assert_close(glse, eager_lse, rtol=1e-5, atol=1e-4)
        if previous is not None:
            assert not torch.equal(gout, previous), "the replay did not see the new values"
        previous = gout.clone()
        ref, ref_lse = reference(nq, nk, nv, is_causal=True)
        cos, rel, mx = metrics(gout, ref)
        le = lse_error(glse, ref_lse)
        _report("graph replay seed %d" % seed, cos, rel, mx, le)
        _check_8bit(cos, rel)
        assert le <= LSE_8BIT


# ---- torch.compile ---------------------------------------------------------------------------------
def test_torch_compile_fullgraph():
    torch._dynamo.reset()

    def block(x, wq, wk, wv):
        b, n, _ = x.shape
        q = (x @ wq).view(b, n, 8, 64)
        k = (x @ wk).view(b, n, 8, 64)
        v = (x @ wv).view(b, n, 8, 64)
        o = sage2.sageattn(q, k, v, tensor_layout="NHD", is_causal=True)
        return o.reshape(b, n, 512).float().sum(-1)

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(2, 1024, 512, device="cuda", generator=g).half()
    ws = [(torch.randn(512, 512, device="cuda", generator=g) / 512 ** 0.5).half() for _ in range(3)]
    compiled = torch.compile(block, fullgraph=True)
    got = compiled(x, *ws)
    want = block(x, *ws)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=5e-2)
    x2 = torch.randn(2, 1024, 512, device="cuda", generator=g).half()
    torch.testing.assert_close(compiled(x2, *ws), block(x2, *ws), rtol=1e-3, atol=5e-2)


def test_custom_op_schema_and_fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = torch.ops.sage2.sageattn
    assert "sage2::sageattn" in str(op.default._schema)
    q, k, v = activation_like(1, 4, 2, 128, 256, 64, layout="NHD", seed=1)
    real_out, real_lse = op(q, k, v, "NHD", 1, 0.0, True, 0, 0, 0, 0, True, False)
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        fo, fl = op(fq, fk, fv, "NHD", 1, 0.0, True, 0, 0, 0, 0, True, False)
    assert fo.shape == real_out.shape and fo.stride() == real_out.stride() and fo.dtype == real_out.dtype
    assert fl.shape == real_lse.shape and fl.dtype == real_lse.dtype


# ---- autograd guard ------------------------------------------------------------------------------
def test_no_backward_says_so():
    q, k, v = activation_like(1, 2, 2, 128, 128, 64, seed=1)
    q.requires_grad_(True)
    out = sage2.sageattn(q, k, v)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="no backward"):
        out.float().sum().backward()
    with torch.no_grad():
        assert not sage2.sageattn(q, k, v).requires_grad


# ---- the SDPA patch ------------------------------------------------------------------------------
def test_patch_sdpa_routes_and_falls_back():
    F = torch.nn.functional
    q, k, v = activation_like(1, 4, 4, 1024, 1024, 64, seed=8)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    original = F.scaled_dot_product_attention
    with sage2.patch_sdpa() as p:
        assert F.scaled_dot_product_attention is not original
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        mask = torch.ones(1024, 1024, dtype=torch.bool, device="cuda").tril()
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        f32 = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert F.scaled_dot_product_attention is original
    # masks go to sage2 too (test_gpu_mask.py); fp32 falls back
    assert p.stats.sage2 == 2 and p.stats.fallback == {"dtype": 1}, p.stats
    _check_8bit(*metrics(out, ref)[:2])
    _check_8bit(*metrics(masked, ref)[:2], few_keys=True)  # the tril mask is is_causal's
    assert f32.dtype == torch.float32


# ---- errors from the library are mapped ----------------------------------------------------------
def test_library_errors_are_mapped_with_last_error_text():
    q = torch.zeros(1, 1, 16, 1024, dtype=torch.float16, device="cuda")  # head dim 1024 > 512
    with pytest.raises(sage2.InvalidArgumentError) as ei:
        sage2.sageattn(q, q, q)
    assert isinstance(ei.value, ValueError)
    assert ei.value.status_name == "invalid_argument"
    assert "1024" in str(ei.value) and "sage2_" in str(ei.value)
