"""sage2.sageattn on decode-like calls (few query rows per kv head: issue 22 item 4) on the GPU.

Such calls take the direct path on small_q_path="auto" (no quantization: split-KV attention from
the fp16/bf16 inputs with fp16/bf16 P and fp32 accumulation), so they meet the fp16/bf16
contract of FlashAttention rather than the 8-bit one: vs exact fp64 attention, fp16 cos >= 0.99999
and rel-L1 <= 1.5e-3, bf16 cos >= 0.9999 and rel-L1 <= 1e-2 (u = 2^-11 / 2^-8: output rounding
u/2 on average plus a P-rounding term of the same size, with margin); LSE within 2e-3; and no
worse than torch's own SDPA in the input dtype by more than a rounding's worth.

Every test here skips (with the reason) without a CUDA torch, a GPU or libsage2."""
import pytest

from sage2_testutil import activation_like, capture_graph, lse_error, metrics, reference, report, require_gpu, torch

import sage2

pytestmark = pytest.mark.gpu

F = torch.nn.functional


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


def _bounds(dtype):
    return (0.99999, 1.5e-3) if dtype == torch.float16 else (0.9999, 1e-2)


def _sdpa(q, k, v, layout, **kw):
    """torch SDPA in the input dtype (its fastest backend), HND output."""
    qh, kh, vh = (t if layout == "HND" else t.transpose(1, 2) for t in (q, k, v))
    return F.scaled_dot_product_attention(qh, kh, vh, enable_gqa=True, **kw)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("nq,nk,hq,hkv,d", [(1, 4096, 32, 8, 128), (1, 33000, 8, 1, 64), (3, 1000, 8, 2, 80),
                                            (16, 4096, 32, 8, 128), (64, 17, 4, 4, 256), (1, 1, 8, 8, 128)],
                         ids=["1x4K-gqa4", "1x33K-mqa", "3x1000", "16x4K", "64x17-hd256", "1x1"])
def test_decode_matches_fp64(dtype, layout, nq, nk, hq, hkv, d):
    b = 2
    q, k, v = activation_like(b, hq, hkv, nq, nk, d, dtype=dtype, layout=layout, seed=nq * 7 + nk + d)
    out, lse = sage2.sageattn(q, k, v, tensor_layout=layout, return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape and out.is_contiguous()
    ref, ref_lse = reference(q, k, v, layout)
    cos, rel, mx = metrics(out, ref, layout)
    le = lse_error(lse, ref_lse)
    cos_t, rel_t, _ = metrics(_sdpa(q, k, v, layout), ref)
    report("decode %s %s nq=%d nk=%d %d/%d d=%d (sdpa %s: cos %.7f rel %.2e)" % (dtype, layout, nq, nk, hq, hkv, d,
                                                                             dtype, cos_t, rel_t), cos, rel, mx, le)
    cmin, rmax = _bounds(dtype)
    assert cos >= cmin and rel <= rmax, (cos, rel)
    assert le <= 2e-3, le
    assert rel <= 2 * rel_t + 2e-4, ("worse than torch SDPA in %s" % dtype, rel, rel_t)
    # Auto took the direct path: the same bits as forcing it, not those of the quantized path.
    assert torch.equal(out, sage2.sageattn(q, k, v, tensor_layout=layout, small_q_path="direct"))


@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
@pytest.mark.parametrize("nq,nk", [(1, 5000), (16, 300), (64, 17), (3, 2000)])
def test_decode_causal(alignment, nq, nk):
    q, k, v = activation_like(1, 16, 4, nq, nk, 128, seed=nq + nk)
    out, lse = sage2.sageattn(q, k, v, is_causal=True, causal_alignment=alignment, return_lse=True)
    ref, ref_lse = reference(q, k, v, is_causal=True, alignment=alignment)
    cos, rel, mx = metrics(out, ref)
    le = lse_error(lse, ref_lse)  # also: the -inf pattern (rows without keys) equals the reference's
    report("decode causal %s nq=%d nk=%d" % (alignment, nq, nk), cos, rel, mx, le)
    if ref.abs().max() > 0:
        assert cos >= 0.99999 and rel <= 1.5e-3, (cos, rel)
    assert le <= 2e-3
    if alignment == "bottom_right" and nq > nk:
        dead = nq - nk  # these rows see no key: O = 0, LSE = -inf
        assert torch.count_nonzero(out[:, :, :dead]) == 0
        assert torch.isneginf(lse[:, :, :dead]).all()


def test_strided_views_and_sm_scale():
    # a packed KV cache [B, N, 2, Hkv, D] read through NHD views; q a slice of a wider tensor
    b, hq, hkv, nk, d = 2, 16, 4, 3000, 128
    q, k, v = activation_like(b, hq, hkv, 1, nk, d, layout="NHD", seed=5)
    kv = torch.stack([k, v], dim=2)
    kview, vview = kv[:, :, 0], kv[:, :, 1]
    assert not kview.is_contiguous()
    big = torch.zeros(b, 1, hq + 3, d, dtype=q.dtype, device="cuda")
    big[:, :, 1:hq + 1] = q
    qview = big[:, :, 1:hq + 1]
    out = sage2.sageattn(qview, kview, vview, tensor_layout="NHD", sm_scale=0.07)
    ref, _ = reference(q, k, v, "NHD", sm_scale=0.07)
    cos, rel, mx = metrics(out, ref, "NHD")
    report("decode strided NHD views sm_scale 0.07", cos, rel, mx)
    assert cos >= 0.99999 and rel <= 1.5e-3, (cos, rel)
    assert torch.equal(out, sage2.sageattn(q, k, v, tensor_layout="NHD", sm_scale=0.07))


def test_paths_agree_and_the_override_works():
    q, k, v = activation_like(2, 32, 8, 1, 4096, 128, seed=9)
    ref, _ = reference(q, k, v)
    direct = sage2.sageattn(q, k, v, small_q_path="direct")
    quant = sage2.sageattn(q, k, v, small_q_path="quantized")
    assert not torch.equal(direct, quant)
    cd, rd, _ = metrics(direct, ref)
    cq, rq, _ = metrics(quant, ref)
    report("decode direct vs fp64", cd, rd, 0.0)
    report("decode quantized vs fp64", cq, rq, 0.0)
    assert rd < rq  # the direct path is the more accurate one
    with pytest.raises(ValueError, match="small_q_path='direct'"):
        sage2.sageattn(q, k, v, small_q_path="direct", kv_lens=torch.full((2,), 4096, dtype=torch.int32,
                                                                          device="cuda"))


def test_decode_in_a_cuda_graph():
    q, k, v = activation_like(1, 32, 8, 1, 8192, 128, seed=3)
    sq, sk, sv = q.clone(), k.clone(), v.clone()
    g, (gout, glse) = capture_graph(lambda: sage2.sageattn(sq, sk, sv, return_lse=True))
    for seed in (11, 12):
        nq, nk, nv = activation_like(1, 32, 8, 1, 8192, 128, seed=seed)
        sq.copy_(nq)
        sk.copy_(nk)
        sv.copy_(nv)
        g.replay()
        torch.cuda.synchronize()
        eager, eager_lse = sage2.sageattn(nq, nk, nv, return_lse=True)
        assert torch.equal(gout, eager) and torch.equal(glse, eager_lse)


def test_patch_sdpa_sends_decode_to_sage2():
    q, k, v = activation_like(4, 32, 8, 1, 4096, 128, seed=17)
    with sage2.patch_sdpa() as p:
        out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert p.stats.as_dict()["sage2"] == 1, p.stats
    ref, _ = reference(q, k, v)
    cos, rel, mx = metrics(out, ref)
    report("decode through patch_sdpa", cos, rel, mx)
    assert cos >= 0.99999 and rel <= 1.5e-3
