"""sage2.sageattn_varlen and sageattn(kv_lens=...) on the GPU.

The library's contract: each sequence of a variable-length batch is computed exactly as a dense
call on that sequence alone would be (its own quantization groups, smoothing means and scales,
its own causal mask), so the outputs equal per-sequence sage2.sageattn calls bit for bit (with
smooth_q off, which varlen always is). Also: accuracy per sequence against torch SDPA in float32,
LSE against torch.logsumexp, lengths 0 and 1 and one long sequence among short ones, GQA/MQA,
both causal alignments, the key-padding form, CUDA graph replay with new lengths of the same
totals, torch.compile, and invalid lengths turning the outputs into NaN.

Every test here skips (with the reason) without a CUDA torch, a GPU, libsage2, or a libsage2 that
has sage2_attention_varlen."""
import math
import os

import pytest

from sage2_testutil import (COS_8BIT, LSE_8BIT, RELL1_8BIT, activation_like, capture_graph, metrics, reference, report,
                            require_gpu, torch)

import sage2

F = torch.nn.functional
pytestmark = pytest.mark.gpu

COS_VARLEN = 0.99  # per sequence vs fp32 SDPA (short sequences see few keys: the "sharp" regime)
LSE_FEW_KEYS = 0.5  # LSE bound where a sequence has < 64 keys (test_gpu_attention's odd-size bound)


def lse_bound(lk):
    return LSE_8BIT if lk >= 64 else LSE_FEW_KEYS


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu(sage2._lib._VARLEN_SYMBOLS)


# ---- inputs and references ------------------------------------------------------------------------
def cu_of(lengths):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device="cuda")


def packed_inputs(lens_q, lens_k, hq=8, hkv=8, d=128, dtype=torch.float16, seed=0):
    """(q [total_q, Hq, D], k, v [total_k, Hkv, D], cu_q, cu_k), contiguous."""
    tq, tk = sum(lens_q), sum(lens_k)
    q, k, v = activation_like(1, hq, hkv, max(tq, 1), max(tk, 1), d, dtype=dtype, layout="NHD", seed=seed)
    return q[0, :tq], k[0, :tk], v[0, :tk], cu_of(lens_q), cu_of(lens_k)


def spans(lens):
    out, at = [], 0
    for n in lens:
        out.append((at, at + n))
        at += n
    return out


def visible(lq, lk, is_causal, alignment, device="cuda"):
    """Boolean [lq, lk]: which keys each query row sees."""
    if not is_causal:
        return torch.ones(lq, lk, dtype=torch.bool, device=device)
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    shift = (lk - lq) if alignment == "bottom_right" else 0
    return j <= i + shift


def reference_fp32(q, k, v, is_causal=False, alignment="top_left", sm_scale=None):
    """One sequence, q [lq, Hq, D], k/v [lk, Hkv, D]: (out [lq, Hq, D] fp32, lse [Hq, lq] fp32).
    The output is torch SDPA's in float32 (boolean mask); rows that see no key get 0 and -inf."""
    lq, hq, d = q.shape
    lk, hkv, _ = k.shape
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    qh = q.float().transpose(0, 1)  # [Hq, lq, D]
    kh = k.float().transpose(0, 1).repeat_interleave(hq // hkv, dim=0)
    vh = v.float().transpose(0, 1).repeat_interleave(hq // hkv, dim=0)
    mask = visible(lq, lk, is_causal, alignment)
    seen = mask.any(-1)  # [lq]
    scores = (qh @ kh.transpose(-1, -2)) * scale
    lse = torch.logsumexp(scores.masked_fill(~mask, -math.inf), dim=-1)  # [Hq, lq]
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale)
    out = torch.where(seen[None, :, None], out.nan_to_num(0.0), torch.zeros_like(out))
    return out.transpose(0, 1), lse


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))


def lse_err(lse, ref):
    finite = torch.isfinite(ref)
    assert torch.equal(finite, torch.isfinite(lse)), "LSE -inf pattern differs from the reference"
    return float((lse[finite] - ref[finite]).abs().max()) if finite.any() else 0.0


# Varlen calls run the split stage over every key of each sequence; the default dense path (auto)
# takes k̄ and V's scale with headroom from a sample of 64-key units (docs/numerics.md, "Sampled statistics").
# So a sequence's result equals the dense call on its slices bit for bit when this process's dense
# calls run the split path too (SAGE2_QUANT_PATH=split), and otherwise within the accuracy bounds
# both are held to (below, and the dense suite).
DENSE_IS_SPLIT = os.environ.get("SAGE2_QUANT_PATH", "").lower() == "split"


def same_bits_as_dense(lk):
    return DENSE_IS_SPLIT or lk == 0


def per_sequence_sageattn(q, k, v, lens_q, lens_k, **kw):
    """sage2.sageattn on each sequence's slices (NHD with batch 1): [(out [lq, Hq, D], lse [Hq, lq])]."""
    res = []
    for (a, b), (c, e) in zip(spans(lens_q), spans(lens_k)):
        # small_q_path="quantized": varlen is always quantized; short sequences would take the direct path
        o, l = sage2.sageattn(q[a:b][None], k[c:e][None], v[c:e][None], tensor_layout="NHD", return_lse=True,
                              smooth_q=False, small_q_path="quantized", **kw)
        res.append((o[0], l[0]))
    return res


def check_against_dense_and_sdpa(name, q, k, v, cu_q, cu_k, lens_q, lens_k, is_causal=False,
                                 alignment="top_left", **kw):
    out, lse = sage2.sageattn_varlen(q, k, v, cu_q, cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                                     is_causal=is_causal, causal_alignment=alignment, return_lse=True, **kw)
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    assert lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32
    dense = per_sequence_sageattn(q, k, v, lens_q, lens_k, is_causal=is_causal, causal_alignment=alignment, **kw)
    worst_cos, worst_rel, worst_abs, worst_lse = 1.0, 0.0, 0.0, 0.0
    for s, ((a, b), (c, e), (do, dl)) in enumerate(zip(spans(lens_q), spans(lens_k), dense)):
        o, l = out[a:b], lse[:, a:b]
        # the contract: bit for bit the dense call on the sequence alone where that takes every key
        # too (else both are held to the bounds against fp32 attention: below, and the dense suite)
        if same_bits_as_dense(e - c):
            assert torch.equal(o, do), "%s: sequence %d (lq %d, lk %d) differs from sageattn on its slices" % (
                name, s, b - a, e - c)
            assert torch.equal(l, dl), "%s: sequence %d LSE differs from sageattn's" % (name, s)
        if b == a:
            continue
        if e == c:  # queries without keys: O = 0, LSE = -inf
            assert torch.count_nonzero(o) == 0 and torch.isneginf(l).all()
            continue
        ref, ref_lse = reference_fp32(q[a:b], k[c:e], v[c:e], is_causal, alignment, kw.get("sm_scale"))
        le = lse_err(l, ref_lse)
        assert le <= lse_bound(e - c), "%s: sequence %d (lq %d, lk %d) LSE error %.4f" % (name, s, b - a, e - c, le)
        worst_lse = max(worst_lse, le)
        if ref.abs().max() > 0:
            c_ = cosine(o, ref)
            worst_cos = min(worst_cos, c_)
            worst_rel = max(worst_rel, float((o.float() - ref).abs().sum() / ref.abs().sum()))
            worst_abs = max(worst_abs, float((o.float() - ref).abs().max()))
            assert c_ >= COS_VARLEN, "%s: sequence %d (lq %d, lk %d) cosine %.5f" % (name, s, b - a, e - c, c_)
        else:
            assert torch.count_nonzero(o) == 0
    report("varlen %s (worst sequence)" % name, worst_cos, worst_rel, worst_abs, worst_lse)
    return out, lse


# ---- the packed form --------------------------------------------------------------------------------
MIXED = [0, 1, 37, 2048, 5, 128, 1, 300]  # 0 and 1, one long among short ones


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
def test_self_attention_mixed_lengths(dtype, d):
    q, k, v, cq, ck = packed_inputs(MIXED, MIXED, d=d, dtype=dtype, seed=d)
    check_against_dense_and_sdpa("self %s d=%d" % (dtype, d), q, k, v, cq, ck, MIXED, MIXED)


def test_cross_lengths_with_empty_key_sets():
    lens_q = [3, 0, 500, 1, 64, 129]
    lens_k = [700, 9, 0, 1, 1, 1500]  # sequence 2 has queries but no key: O = 0, LSE = -inf
    q, k, v, cq, ck = packed_inputs(lens_q, lens_k, seed=3)
    out, lse = check_against_dense_and_sdpa("cross", q, k, v, cq, ck, lens_q, lens_k)
    a, b = spans(lens_q)[2]
    assert torch.count_nonzero(out[a:b]) == 0 and torch.isneginf(lse[:, a:b]).all()


@pytest.mark.parametrize("hq,hkv", [(8, 2), (8, 1), (6, 3)])
def test_gqa(hq, hkv):
    lens = [17, 1000, 1, 256]
    q, k, v, cq, ck = packed_inputs(lens, lens, hq=hq, hkv=hkv, seed=hq * 10 + hkv)
    check_against_dense_and_sdpa("gqa %d/%d" % (hq, hkv), q, k, v, cq, ck, lens, lens)


@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
def test_causal_alignments(alignment):
    lens_q = [1, 300, 1200, 64, 0, 7]
    lens_k = [1, 1000, 400, 64, 5, 1]  # lq < lk, lq > lk (bottom-right: first rows see nothing), equal
    q, k, v, cq, ck = packed_inputs(lens_q, lens_k, hq=8, hkv=4, seed=11)
    out, _ = check_against_dense_and_sdpa("causal %s" % alignment, q, k, v, cq, ck, lens_q, lens_k,
                                          is_causal=True, alignment=alignment)
    other = "bottom_right" if alignment == "top_left" else "top_left"
    out2 = sage2.sageattn_varlen(q, k, v, cq, ck, is_causal=True, causal_alignment=other)
    assert not torch.equal(out, out2), "causal_alignment was ignored"


@pytest.mark.parametrize("opts", [dict(sm_scale=0.05), dict(smooth_v=True), dict(smooth_k=False),
                                  dict(qk_bits=8), dict(qk_bits=4)], ids=["scale", "smooth_v", "no_smooth_k", "int8",
                                                                          "int4"])
def test_options_match_dense(opts):
    lens = [200, 1, 900]
    q, k, v, cq, ck = packed_inputs(lens, lens, seed=21)
    out, lse = sage2.sageattn_varlen(q, k, v, cq, ck, return_lse=True, **opts)
    for (a, b), (do, dl) in zip(spans(lens), per_sequence_sageattn(q, k, v, lens, lens, **opts)):
        if same_bits_as_dense(b - a):
            assert torch.equal(out[a:b], do) and torch.equal(lse[:, a:b], dl), opts


def test_max_seqlen_hints_do_not_change_the_result():
    lens = [5, 1500, 33]
    q, k, v, cq, ck = packed_inputs(lens, lens, seed=4)
    base = sage2.sageattn_varlen(q, k, v, cq, ck)
    for mq, mk in ((1500, 1500), (None, None), (0, 0), (64, 64)):  # 64: a bound below the real maximum
        out = sage2.sageattn_varlen(q, k, v, cq, ck, max_seqlen_q=mq, max_seqlen_k=mk)
        torch.testing.assert_close(out, base, rtol=1e-3, atol=1e-2)
        print("max_seqlen (%s, %s) == unknown bit for bit: %s" % (mq, mk, torch.equal(out, base)))


def test_int64_cu_seqlens_give_the_int32_result():
    """int64 lengths (the reference's and FlashAttention's callers pass them) are converted: the same
    bits as int32; a value int32 cannot hold is a ValueError naming it."""
    lens = [7, 300, 64]
    q, k, v, cq, ck = packed_inputs(lens, lens, seed=5)
    base = sage2.sageattn_varlen(q, k, v, cq, ck, is_causal=True)
    out = sage2.sageattn_varlen(q, k, v, cq.long(), ck.long(), is_causal=True)
    assert torch.equal(out, base)
    big = ck.long().clone()
    big[-1] += 2 ** 32
    with pytest.raises(ValueError, match="cu_seqlens_k is int64 and holds %d" % int(big[-1])):
        sage2.sageattn_varlen(q, k, v, cq, big)


def test_packed_qkv_views_and_output():
    lens = [100, 1, 700]
    q, k, v, cq, ck = packed_inputs(lens, lens, hq=4, hkv=4, d=64, seed=6)
    qkv = torch.stack([q, k, v], dim=1)  # [total, 3, H, D]: views with a 3*H*D token stride
    qv, kv_, vv = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    assert not qv.is_contiguous()
    out = sage2.sageattn_varlen(qv, kv_, vv, cq, ck)
    assert out.shape == q.shape and out.is_contiguous()
    contig = sage2.sageattn_varlen(q, k, v, cq, ck)
    print("strided == contiguous bit for bit:", torch.equal(out, contig))
    torch.testing.assert_close(out, contig, rtol=1e-3, atol=1e-2)


def test_deterministic_and_on_the_current_stream():
    lens = [1, 513, 64]
    q, k, v, cq, ck = packed_inputs(lens, lens, seed=8)
    expected = sage2.sageattn_varlen(q, k, v, cq, ck)
    assert torch.equal(sage2.sageattn_varlen(q, k, v, cq, ck), expected)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        qq = torch.empty_like(q)
        for _ in range(4):
            qq.copy_(q * 0)
        qq.copy_(q)
        cq2 = torch.zeros_like(cq)
        cq2.copy_(cq)
        out = sage2.sageattn_varlen(qq, k, v, cq2, ck)  # ordered after the copies on stream s
    s.synchronize()
    assert torch.equal(out, expected)


def test_empty_batches():
    q, k, v, cq, ck = packed_inputs([0, 0], [4, 4], seed=1)
    out, lse = sage2.sageattn_varlen(q, k, v, cq, ck, return_lse=True)
    assert out.shape == (0, 8, 128) and lse.shape == (8, 0)
    q, k, v, cq, ck = packed_inputs([3, 2], [0, 0], seed=1)
    out, lse = sage2.sageattn_varlen(q, k, v, cq, ck, return_lse=True)
    assert torch.count_nonzero(out) == 0 and torch.isneginf(lse).all()


def test_fast_path_hits_and_gives_the_same_bits():
    """The second call of a signature takes the cached fast path (no argument checks again) and gives
    the same bits and LSE as the first, for both forms; new lengths of the same signature are read
    on the device as by a checked call; another max_seqlen_q is another signature."""
    from sage2 import _attention as A, _varlen as VL
    from sage2 import _core as C  # the shared helpers (_normalize, _raw_stream, ...)

    lens = [100, 1, 700, 37]
    q, k, v, cq, ck = packed_inputs(lens, lens, hq=8, hkv=2, seed=60)
    kw = dict(max_seqlen_q=700, max_seqlen_k=700, is_causal=True, return_lse=True)
    a, la = sage2.sageattn_varlen(q, k, v, cq, ck, **kw)
    qh, kh, vh = activation_like(2, 4, 2, 128, 512, 64, seed=61)
    kvl = torch.tensor([512, 100], dtype=torch.int32, device="cuda")
    b, lb = sage2.sageattn(qh, kh, vh, kv_lens=kvl, return_lse=True)
    n = len(VL._fast)
    calls = []
    orig_packed, orig_dense = VL._normalize_packed, C._normalize
    VL._normalize_packed = lambda *args: calls.append("packed") or orig_packed(*args)
    C._normalize = lambda *args: calls.append("kv") or orig_dense(*args)
    try:
        for _ in range(3):
            q2, k2, v2, qh2, kh2, vh2 = (torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
                                         .copy_(t) for t in (q, k, v, qh, kh, vh))  # other memory, same strides
            a2, la2 = sage2.sageattn_varlen(q2, k2, v2, cq.clone(), ck.clone(), **kw)
            assert torch.equal(a, a2) and torch.equal(la, la2)
            b2, lb2 = sage2.sageattn(qh2, kh2, vh2, kv_lens=kvl.clone(), return_lse=True)
            assert torch.equal(b, b2) and torch.equal(lb, lb2)
        assert calls == [] and len(VL._fast) == n
        lens2 = [700, 37, 100, 1]
        fast, fast_lse = sage2.sageattn_varlen(q, k, v, cu_of(lens2), cu_of(lens2), **kw)
        assert calls == []
        VL._fast.clear()
        checked, checked_lse = sage2.sageattn_varlen(q, k, v, cu_of(lens2), cu_of(lens2), **kw)
        assert calls == ["packed"] and torch.equal(fast, checked) and torch.equal(fast_lse, checked_lse)
        assert not torch.equal(fast, a)
        sage2.sageattn_varlen(q, k, v, cq, ck, **dict(kw, max_seqlen_q=64))
        assert calls == ["packed", "packed"]
    finally:
        VL._normalize_packed, C._normalize = orig_packed, orig_dense


# ---- invalid lengths: found on the device, outputs NaN ----------------------------------------------
@pytest.mark.parametrize("bad", [[0, 50, 30, 100], [1, 50, 60, 100], [0, 50, 60, 101]],
                         ids=["decreasing", "not_from_0", "past_the_end"])
def test_invalid_cu_seqlens_give_nan(bad):
    q, k, v, _, ck = packed_inputs([40, 10, 50], [40, 10, 50], seed=2)
    cq = torch.tensor(bad, dtype=torch.int32, device="cuda")
    out, lse = sage2.sageattn_varlen(q, k, v, cq, ck, return_lse=True)  # no error: nothing is read on the host
    torch.cuda.synchronize()
    assert torch.isnan(out).all() and torch.isnan(lse).all()
    out, lse = sage2.sageattn_varlen(q, k, v, ck, cq, return_lse=True)  # the same in cu_seqlens_k
    assert torch.isnan(out).all() and torch.isnan(lse).all()


def test_invalid_kv_lens_give_nan():
    q, k, v = activation_like(2, 4, 4, 64, 128, 64, seed=2)
    for bad in ([129, 5], [-1, 5]):
        kv = torch.tensor(bad, dtype=torch.int32, device="cuda")
        out, lse = sage2.sageattn(q, k, v, kv_lens=kv, return_lse=True)
        assert torch.isnan(out).all() and torch.isnan(lse).all(), bad


# ---- the key-padding form: sageattn(kv_lens=...) ------------------------------------------------------
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("causal", [None, "top_left", "bottom_right"])
def test_kv_lens_matches_sliced_sageattn(layout, causal):
    b, hq, hkv, nq, nk, d = 5, 8, 2, 300, 1100, 128
    q, k, v = activation_like(b, hq, hkv, nq, nk, d, layout=layout, seed=31)
    kv = [1100, 0, 1, 77, 640]
    kv_lens = torch.tensor(kv, dtype=torch.int32, device="cuda")
    kw = dict(is_causal=causal is not None, causal_alignment=causal or "top_left")
    out, lse = sage2.sageattn(q, k, v, tensor_layout=layout, kv_lens=kv_lens, return_lse=True, **kw)
    assert out.shape == q.shape and out.is_contiguous() and lse.shape == (b, hq, nq)
    for i, n in enumerate(kv):
        if layout == "HND":
            ks, vs = k[i:i + 1, :, :n], v[i:i + 1, :, :n]
        else:
            ks, vs = k[i:i + 1, :n], v[i:i + 1, :n]
        o, l = sage2.sageattn(q[i:i + 1], ks, vs, tensor_layout=layout, return_lse=True, smooth_q=False,
                              small_q_path="quantized", **kw)
        if same_bits_as_dense(n):
            assert torch.equal(out[i:i + 1], o), "batch %d (kv_len %d) differs from sageattn on its slice" % (i, n)
            assert torch.equal(lse[i:i + 1], l), "batch %d LSE" % i
        o, l = out[i:i + 1], lse[i:i + 1]  # the key-padded call's own result against fp32 attention
        if n == 0:
            assert torch.count_nonzero(o) == 0 and torch.isneginf(l).all()
        else:
            qs = q[i] if layout == "NHD" else q[i].transpose(0, 1)
            kk = (ks[0] if layout == "NHD" else ks[0].transpose(0, 1))
            vv = (vs[0] if layout == "NHD" else vs[0].transpose(0, 1))
            ref, ref_lse = reference_fp32(qs, kk, vv, kw["is_causal"], kw["causal_alignment"])
            oo = o[0] if layout == "NHD" else o[0].transpose(0, 1)
            if ref.abs().max() > 0:
                assert cosine(oo, ref) >= COS_VARLEN, (i, n)
            assert lse_err(l[0], ref_lse) <= lse_bound(n)


def test_kv_lens_full_length_equals_plain_call():
    q, k, v = activation_like(3, 4, 4, 256, 512, 64, seed=5)
    kv_lens = torch.full((3,), 512, dtype=torch.int32, device="cuda")
    out = sage2.sageattn(q, k, v, kv_lens=kv_lens, is_causal=True)
    plain = sage2.sageattn(q, k, v, is_causal=True, smooth_q=False, small_q_path="quantized")
    if same_bits_as_dense(512):
        torch.testing.assert_close(out, plain, rtol=0, atol=0)
    else:
        # The dense call samples k̄ and V's amax (256 of the 512 keys, V with headroom: docs/numerics.md,
        # "Sampled statistics"); the key-padded one takes every key. Two quantizations of the same
        # attention, each within the 8-bit bounds of fp64 attention.
        ref, _ = reference(q, k, v, is_causal=True)
        for name, o in (("kv_lens", out), ("dense", plain)):
            cos, rel, _ = metrics(o, ref)
            assert cos >= COS_8BIT and rel <= RELL1_8BIT, (name, cos, rel)


# ---- CUDA graphs: capture once, replay with new lengths of the same totals -----------------------------
@pytest.mark.parametrize("capture_error_mode", ["global", "thread_local"])
def test_cuda_graph_replay_with_new_lengths(capture_error_mode):
    first = [100, 1, 900, 23]
    later = [[512, 256, 255, 1], [1, 1, 1021, 1], [0, 1024, 0, 0]]  # the same total, 1024
    q, k, v, cq, ck = packed_inputs(first, first, hq=8, hkv=2, seed=40)
    sq, sk, sv = q.clone(), k.clone(), v.clone()
    g, (gout, glse) = capture_graph(
        lambda: sage2.sageattn_varlen(sq, sk, sv, cq, ck, is_causal=True, return_lse=True), capture_error_mode)
    g.replay()
    torch.cuda.synchronize()
    eager, eager_lse = sage2.sageattn_varlen(q, k, v, cu_of(first), cu_of(first), is_causal=True, return_lse=True)
    assert torch.equal(gout, eager) and torch.equal(glse, eager_lse)
    previous = gout.clone()
    for i, lens in enumerate(later):
        cq.copy_(cu_of(lens))
        ck.copy_(cu_of(lens))
        nq, nk, nv = packed_inputs(lens, lens, hq=8, hkv=2, seed=41 + i)[:3]
        sq.copy_(nq)
        sk.copy_(nk)
        sv.copy_(nv)
        g.replay()
        torch.cuda.synchronize()
        eager, eager_lse = sage2.sageattn_varlen(nq, nk, nv, cu_of(lens), cu_of(lens), is_causal=True,
                                                 return_lse=True)
        assert torch.equal(gout, eager), "replay %d with lengths %s differs from the eager call" % (i, lens)
        assert torch.equal(glse, eager_lse)
        assert not torch.equal(gout, previous), "the replay did not see the new values"
        previous = gout.clone()
        for (a, b), (do, dl) in zip(spans(lens), per_sequence_sageattn(nq, nk, nv, lens, lens, is_causal=True)):
            if same_bits_as_dense(b - a):
                assert torch.equal(gout[a:b], do) and torch.equal(glse[:, a:b], dl)


def test_cuda_graph_kv_lens():
    q, k, v = activation_like(2, 4, 4, 128, 512, 64, seed=50)
    kv = torch.tensor([512, 100], dtype=torch.int32, device="cuda")
    g, gout = capture_graph(lambda: sage2.sageattn(q, k, v, kv_lens=kv))
    for lens in ([512, 100], [3, 511], [0, 512]):
        kv.copy_(torch.tensor(lens, dtype=torch.int32, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        want = sage2.sageattn(q, k, v, kv_lens=torch.tensor(lens, dtype=torch.int32, device="cuda"))
        assert torch.equal(gout, want), lens


# ---- torch.compile, the custom op, autograd guard -------------------------------------------------------
def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    lens = [7, 600, 1, 200]
    q, k, v, cq, ck = packed_inputs(lens, lens, hq=8, hkv=2, d=64, seed=60)
    kvl = torch.tensor([100, 3], dtype=torch.int32, device="cuda")
    qh, kh, vh = activation_like(2, 4, 4, 64, 128, 64, seed=61)

    def f(q, k, v, cq, ck, qh, kh, vh, kvl):
        o = sage2.sageattn_varlen(q * 1, k, v, cq, ck, max_seqlen_q=600, max_seqlen_k=600, is_causal=True)
        o2 = sage2.sageattn(qh, kh, vh, kv_lens=kvl)
        return o.float().sum(-1), o2

    try:
        compiled = torch.compile(f, fullgraph=True)
        got, got2 = compiled(q, k, v, cq, ck, qh, kh, vh, kvl)
        want, want2 = f(q, k, v, cq, ck, qh, kh, vh, kvl)
        torch.testing.assert_close(got, want, rtol=1e-3, atol=5e-2)
        assert torch.equal(got2, want2)
        lens2 = [300, 300, 8, 200]  # new lengths, same total: no recompile needed, new result
        cq2 = cu_of(lens2)
        got3, _ = compiled(q, k, v, cq2, cq2, qh, kh, vh, kvl)
        want3, _ = f(q, k, v, cq2, cq2, qh, kh, vh, kvl)
        torch.testing.assert_close(got3, want3, rtol=1e-3, atol=5e-2)
    finally:
        torch._dynamo.reset()


def test_custom_op_and_fake_match_the_real_call():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = torch.ops.sage2.sageattn_varlen
    lens = [10, 300]
    q, k, v, cq, ck = packed_inputs(lens, lens, hq=4, hkv=2, d=64, seed=7)
    real_out, real_lse = op(q, k, v, cq, ck, None, "packed", 0, 0, 1, 0.0, True, 0, 0, 0, 2, True, False)
    assert torch.equal(real_out, sage2.sageattn_varlen(q, k, v, cq, ck, is_causal=True))
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fq, fk, fv, fcq, fck = (mode.from_tensor(t) for t in (q, k, v, cq, ck))
        fo, fl = op(fq, fk, fv, fcq, fck, None, "packed", 0, 0, 1, 0.0, True, 0, 0, 0, 2, True, False)
    assert fo.shape == real_out.shape and fo.stride() == real_out.stride() and fo.dtype == real_out.dtype
    assert fl.shape == real_lse.shape and fl.dtype == real_lse.dtype


def test_no_backward_says_so():
    lens = [16, 40]
    q, k, v, cq, ck = packed_inputs(lens, lens, hq=2, hkv=2, d=64, seed=1)
    q.requires_grad_(True)
    out = sage2.sageattn_varlen(q, k, v, cq, ck)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="no backward"):
        out.float().sum().backward()
