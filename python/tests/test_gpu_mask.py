"""sage2.sageattn(attn_mask=...) on the GPU (issue 17).

Accuracy against torch SDPA in float32 on the same (fp16/bf16) inputs, per batch element (cosine
>= 0.99, as test_gpu_varlen.py judges sequences that may see few keys), LSE against
torch.logsumexp of the masked scores: bool key padding [B,1,1,N], Hugging-Face-style additive
padding (0 / finfo.min), causal + padding [B,1,N,N] (and [B,1,1,N] with is_causal, which sage2
combines), prefix-LM, random bool masks with at least one visible key per row, rows that see no
key (exactly 0, LSE -inf), GQA, bf16, 2-D and 3-D masks; an all-True mask gives the bits of the
call without a mask; CUDA graph replay with new mask contents; torch.compile(fullgraph=True);
patch_sdpa.

Every test here skips (with the reason) without a CUDA torch, a GPU, libsage2, or a libsage2 that
has sage2_attention_masked."""
import math

import pytest

from sage2_testutil import LSE_8BIT, activation_like, capture_graph, report, require_gpu, to_hnd, torch

import sage2

F = torch.nn.functional
pytestmark = pytest.mark.gpu

COS_MASK = 0.99  # per batch element vs fp32 SDPA (masked rows may see few keys: the "sharp" regime)
LSE_FEW_KEYS = 0.5  # LSE bound of rows that see < 64 keys (test_gpu_attention's odd-size bound)


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu(sage2._lib._MASK_SYMBOLS)


# ---- masks ------------------------------------------------------------------------------------------
def key_padding(lengths, n, device="cuda"):
    """Bool [B, 1, 1, n]: key j of batch b takes part iff j < lengths[b]."""
    j = torch.arange(n, device=device)
    return (j[None, :] < torch.tensor(lengths, device=device)[:, None])[:, None, None, :]


def hf_additive(lengths, n, dtype, device="cuda"):
    """Hugging Face's padding mask: [B, 1, 1, n] of 0 (attend) / finfo(dtype).min (padding)."""
    return torch.zeros(len(lengths), 1, 1, n, dtype=dtype, device=device).masked_fill(
        ~key_padding(lengths, n, device), torch.finfo(dtype).min)


def causal(nq, nk, device="cuda"):
    return torch.ones(nq, nk, dtype=torch.bool, device=device).tril()


def prefix_lm(prefixes, n, device="cuda"):
    """Bool [B, 1, n, n]: the first prefixes[b] tokens see each other, later ones are causal."""
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    p = torch.tensor(prefixes, device=device)[:, None, None]
    return ((j <= i)[None] | (j < p))[:, None]


def random_bool(shape, density, seed, device="cuda"):
    """Bool mask of `shape` with about `density` visible keys and at least one per row."""
    g = torch.Generator(device=device).manual_seed(seed)
    m = torch.rand(shape, generator=g, device=device) < density
    col = torch.randint(0, shape[-1], tuple(shape[:-1]) + (1,), generator=g, device=device)
    return m.scatter(-1, col, True)


# ---- the fp32 reference -------------------------------------------------------------------------------
def reference_fp32(q, k, v, mask, layout="HND", is_causal=False, sm_scale=None):
    """torch SDPA in float32 on the same inputs: (out [B,Hq,Nq,D] HND fp32, lse [B,Hq,Nq], number of
    visible keys [B,Hq,Nq]). Rows that see no key get 0 (torch gives NaN there; sage2 gives 0)."""
    q, k, v = (to_hnd(t, layout).float() for t in (q, k, v))
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    m = mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    m = m.expand(b, hq, nq, nk)
    if m.dtype == torch.bool:
        bias = torch.zeros(m.shape, device=q.device).masked_fill(~m, -math.inf)
    else:
        bias = m.float()
    if is_causal:
        bias = bias.masked_fill(~causal(nq, nk, q.device), -math.inf)
    nvis = (bias > -math.inf).sum(-1)
    lse = torch.logsumexp((q @ k.transpose(-1, -2)) * scale + bias, dim=-1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
    out = torch.where((nvis > 0)[..., None], out, torch.zeros_like(out))
    return out, lse, nvis


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))


def check(name, out, lse, q, k, v, mask, layout="HND", is_causal=False, sm_scale=None):
    """out (and lse, if not None) of sage2 against the fp32 reference; returns the worst cosine."""
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    ref, ref_lse, nvis = reference_fp32(q, k, v, mask, layout, is_causal, sm_scale)
    o = to_hnd(out, layout).float()
    assert torch.isfinite(o).all(), "%s: non-finite outputs" % name
    dead = nvis == 0
    if dead.any():  # rows that see no key: exactly 0, LSE -inf
        assert torch.count_nonzero(o[dead]) == 0, "%s: rows without a visible key are not 0" % name
        if lse is not None:
            assert torch.isneginf(lse[dead]).all(), "%s: rows without a visible key have LSE != -inf" % name
    worst_cos, worst_rel, worst_abs = 1.0, 0.0, 0.0
    for bi in range(o.shape[0]):
        if ref[bi].abs().max() == 0:
            assert torch.count_nonzero(o[bi]) == 0, "%s: batch %d sees no key but is not 0" % (name, bi)
            continue
        c = cosine(o[bi], ref[bi])
        worst_cos = min(worst_cos, c)
        worst_rel = max(worst_rel, float((o[bi] - ref[bi]).abs().sum() / ref[bi].abs().sum()))
        worst_abs = max(worst_abs, float((o[bi] - ref[bi]).abs().max()))
        assert c >= COS_MASK, "%s: batch %d cosine %.5f" % (name, bi, c)
    le = None
    if lse is not None:
        assert lse.shape == nvis.shape and lse.dtype == torch.float32
        finite = torch.isfinite(ref_lse)
        assert torch.equal(finite, torch.isfinite(lse)), "%s: LSE -inf pattern differs from the reference" % name
        err = (lse - ref_lse).abs().masked_fill(~finite, 0.0)
        le = float(err.max()) if finite.any() else 0.0
        many = nvis >= 64
        if many.any():
            assert float(err[many].max()) <= LSE_8BIT, (name, float(err[many].max()))
        if (finite & ~many).any():
            assert float(err[finite & ~many].max()) <= LSE_FEW_KEYS, (name, float(err[finite & ~many].max()))
    report("mask %s (worst batch)" % name, worst_cos, worst_rel, worst_abs, le)
    return worst_cos


# ---- padding ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("d", [64, 128])
def test_bool_key_padding(dtype, layout, d):
    n, lengths = 1024, [1024, 517, 1]
    q, k, v = activation_like(3, 8, 8, n, n, d, dtype=dtype, layout=layout, seed=d + 3)
    mask = key_padding(lengths, n)
    out, lse = sage2.sageattn(q, k, v, tensor_layout=layout, attn_mask=mask, return_lse=True)
    check("bool padding %s %s d=%d" % (dtype, layout, d), out, lse, q, k, v, mask, layout)


@pytest.mark.parametrize("dtype,mask_dtype", [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                                              (torch.float16, torch.float32), (torch.bfloat16, torch.float32)],
                         ids=["fp16-f16mask", "bf16-bf16mask", "fp16-f32mask", "bf16-f32mask"])
def test_additive_hf_padding(dtype, mask_dtype):
    """0 / finfo(mask dtype).min, as Hugging Face models build it (min: not -inf)."""
    n, lengths = 768, [768, 300, 40, 700]
    q, k, v = activation_like(4, 4, 4, n, n, 64, dtype=dtype, seed=11)
    mask = hf_additive(lengths, n, mask_dtype)
    out, lse = sage2.sageattn(q, k, v, attn_mask=mask, return_lse=True)
    check("additive padding %s mask %s" % (dtype, mask_dtype), out, lse, q, k, v, mask)
    # the same keys as the bool mask: the same attention up to the score rounding of the bias
    b = sage2.sageattn(q, k, v, attn_mask=key_padding(lengths, n))
    assert cosine(out, b) >= 0.9999


def test_additive_values_are_added():
    """A finite, non-trivial additive bias (ALiBi-like slopes per head, [1, H, N, N] fp32) is added to
    the scaled scores."""
    h, n = 4, 512
    q, k, v = activation_like(2, h, h, n, n, 64, seed=12)
    i = torch.arange(n, device="cuda")
    dist = (i[None, :] - i[:, None]).abs().float()
    slopes = torch.tensor([0.5 ** (j + 1) for j in range(h)], device="cuda")
    bias = (-slopes[:, None, None] * dist)[None]  # [1, H, N, N]
    out, lse = sage2.sageattn(q, k, v, attn_mask=bias, return_lse=True)
    check("alibi f32 [1,H,N,N]", out, lse, q, k, v, bias)
    plain = sage2.sageattn(q, k, v)
    assert cosine(out, plain) < 0.999, "the bias changed nothing"


# ---- causal, prefix-LM ----------------------------------------------------------------------------------
def test_causal_plus_padding():
    n, lengths = 1024, [1024, 600, 129]
    q, k, v = activation_like(3, 8, 2, n, n, 128, seed=13)
    pad = key_padding(lengths, n)
    full = pad & causal(n, n)  # [B, 1, N, N]
    out, lse = sage2.sageattn(q, k, v, attn_mask=full, return_lse=True)
    check("causal+padding [B,1,N,N]", out, lse, q, k, v, full)
    # the padding with is_causal: sage2 combines both (torch SDPA refuses the pair)
    out2, lse2 = sage2.sageattn(q, k, v, attn_mask=pad, is_causal=True, return_lse=True)
    check("padding [B,1,1,N] + is_causal", out2, lse2, q, k, v, pad, is_causal=True)
    assert cosine(out, out2) >= 0.9999


def test_prefix_lm():
    n, prefixes = 1024, [0, 200, 1024]
    q, k, v = activation_like(3, 4, 4, n, n, 64, seed=14, layout="NHD")
    mask = prefix_lm(prefixes, n)
    out, lse = sage2.sageattn(q, k, v, tensor_layout="NHD", attn_mask=mask, return_lse=True)
    check("prefix-lm", out, lse, q, k, v, mask, "NHD")
    # prefix 0 is causal, prefix N is no mask at all
    causal_out = sage2.sageattn(q[:1], k[:1], v[:1], tensor_layout="NHD", is_causal=True)
    assert cosine(out[:1], causal_out) >= 0.9999
    full_out = sage2.sageattn(q[2:], k[2:], v[2:], tensor_layout="NHD")
    assert cosine(out[2:], full_out) >= 0.9999


# ---- random masks, rows without keys, GQA, shapes ----------------------------------------------------------
@pytest.mark.parametrize("density", [0.02, 0.3, 0.9])
@pytest.mark.parametrize("nq,nk", [(1024, 1024), (333, 1000), (1000, 77)])
def test_random_bool_masks(density, nq, nk):
    q, k, v = activation_like(2, 4, 4, nq, nk, 64, seed=nq + nk)
    mask = random_bool((2, 4, nq, nk), density, seed=int(density * 100) + nq)
    out, lse = sage2.sageattn(q, k, v, attn_mask=mask, return_lse=True)
    check("random bool density %.2f %dx%d" % (density, nq, nk), out, lse, q, k, v, mask)


@pytest.mark.parametrize("kind", ["bool", "additive -inf"])
def test_rows_without_visible_keys_are_zero(kind):
    n = 512
    q, k, v = activation_like(3, 4, 4, n, n, 64, seed=15)
    mask = random_bool((3, 4, n, n), 0.5, seed=16)
    mask[0, :, ::7] = False  # every 7th row of batch 0
    mask[1, 2] = False  # a whole head
    mask[2] = False  # a whole batch element
    if kind != "bool":
        mask = torch.zeros(mask.shape, device="cuda").masked_fill(~mask, -math.inf)
    out, lse = sage2.sageattn(q, k, v, attn_mask=mask, return_lse=True)
    check("rows without keys (%s)" % kind, out, lse, q, k, v, mask)
    assert torch.count_nonzero(out[2]) == 0 and torch.isneginf(lse[2]).all()
    assert torch.count_nonzero(out[1, 2]) == 0 and torch.isneginf(lse[1, 2]).all()
    assert torch.count_nonzero(out[0, :, ::7]) == 0 and torch.isneginf(lse[0, :, ::7]).all()
    assert torch.count_nonzero(out[0, :, 1::7]) > 0


def test_rows_masked_only_by_finfo_min_stay_finite():
    """Rows whose every key carries finfo.min (Hugging Face's padding of a fully padded row): torch
    SDPA still averages them (finfo.min is not -inf). With an f16 mask the scores survive the bias
    (|min| = 65504) and sage2 must match torch; with bf16/f32 masks the bias times log2(e) overflows
    to -inf in fp32, so sage2 may treat the row as seeing no key (0). Either way: no NaN, and the
    other rows are unaffected."""
    n = 256
    q, k, v = activation_like(2, 4, 4, n, n, 64, seed=17)
    for mdt in (torch.float16, torch.bfloat16, torch.float32):
        mask = torch.zeros(2, 1, n, n, dtype=mdt, device="cuda")
        mask[1, :, :, :] = torch.finfo(mdt).min  # batch 1: every key of every row at finfo.min
        mask[0, :, :, n // 2:] = torch.finfo(mdt).min  # batch 0: ordinary padding
        out = sage2.sageattn(q, k, v, attn_mask=mask)
        assert torch.isfinite(out).all(), mdt
        ref, _, _ = reference_fp32(q, k, v, mask)
        assert cosine(out[0], ref[0]) >= COS_MASK, mdt
        c1 = cosine(out[1], ref[1]) if torch.count_nonzero(out[1]) else 0.0
        print("finfo(%s).min rows: cosine vs torch %.5f, all zero: %s" % (mdt, c1, bool(c1 == 0.0)))
        if mdt == torch.float16:
            assert c1 >= COS_MASK


def test_gqa_per_head_masks():
    n = 768
    for layout, (hq, hkv) in (("HND", (8, 2)), ("NHD", (8, 1)), ("NHD", (6, 3))):
        q, k, v = activation_like(2, hq, hkv, n, n, 128, layout=layout, seed=hq * 10 + hkv)
        mask = random_bool((2, hq, n, n), 0.2, seed=hq + hkv) & key_padding([n, 500], n)
        out, lse = sage2.sageattn(q, k, v, tensor_layout=layout, attn_mask=mask, return_lse=True)
        check("gqa %s %d/%d per-head mask" % (layout, hq, hkv), out, lse, q, k, v, mask, layout)


def test_2d_and_3d_masks_broadcast():
    n = 640
    q, k, v = activation_like(2, 4, 2, n, n, 64, seed=18)
    m2 = random_bool((n, n), 0.4, seed=19)  # [Nq, Nk]
    m3 = random_bool((4, n, n), 0.4, seed=20)  # [Hq, Nq, Nk]
    for name, m in (("2d", m2), ("3d", m3)):
        out, lse = sage2.sageattn(q, k, v, attn_mask=m, return_lse=True)
        check("%s mask" % name, out, lse, q, k, v, m)
    # the broadcast view gives the bits of the materialised mask
    assert torch.equal(sage2.sageattn(q, k, v, attn_mask=m2), sage2.sageattn(q, k, v, attn_mask=m2.expand(2, 4, n, n)
                                                                             .contiguous()))


def test_bf16_with_additive_bf16_mask_and_sm_scale():
    n = 1024
    q, k, v = activation_like(2, 8, 8, n, n, 128, dtype=torch.bfloat16, seed=21)
    mask = torch.where(random_bool((2, 1, n, n), 0.5, seed=22), 0.0, -math.inf).to(torch.bfloat16)
    out, lse = sage2.sageattn(q, k, v, attn_mask=mask, sm_scale=0.06, return_lse=True)
    check("bf16 additive bf16 sm_scale 0.06", out, lse, q, k, v, mask, sm_scale=0.06)


# ---- a mask that masks nothing -------------------------------------------------------------------------------
@pytest.mark.parametrize("nq,nk", [(1024, 1024), (300, 1000)])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_all_true_mask_gives_the_bits_of_no_mask(nq, nk, is_causal):
    q, k, v = activation_like(2, 4, 2, nq, nk, 64, seed=23)
    plain, plain_lse = sage2.sageattn(q, k, v, is_causal=is_causal, return_lse=True)
    for mask in (torch.ones(nq, nk, dtype=torch.bool, device="cuda"),
                 torch.ones(2, 1, 1, nk, dtype=torch.bool, device="cuda"),
                 torch.ones(2, 4, nq, nk, dtype=torch.bool, device="cuda")):
        out, lse = sage2.sageattn(q, k, v, is_causal=is_causal, attn_mask=mask, return_lse=True)
        assert torch.equal(out, plain), tuple(mask.shape)
        assert torch.equal(lse, plain_lse), tuple(mask.shape)
    zero = torch.zeros(nq, nk, dtype=torch.float32, device="cuda")  # additive zeros: the same attention
    out = sage2.sageattn(q, k, v, is_causal=is_causal, attn_mask=zero)
    print("all-zero additive mask == no mask bit for bit: %s" % torch.equal(out, plain))
    assert cosine(out, plain) >= 0.99999


# ---- CUDA graphs: capture once, replay with new mask contents -----------------------------------------------------
@pytest.mark.parametrize("capture_error_mode", ["global", "thread_local"])
def test_cuda_graph_replay_with_new_mask_contents(capture_error_mode):
    b, h, n = 2, 4, 1024
    q, k, v = activation_like(b, h, h, n, n, 64, seed=30)
    masks = [key_padding([n, 300], n).expand(b, 1, n, n),
             causal(n, n).expand(b, 1, n, n),
             random_bool((b, 1, n, n), 0.05, seed=31),
             prefix_lm([100, 900], n)]
    masks[2][1, :, 5:50] = False  # rows without keys
    static = torch.empty(b, 1, n, n, dtype=torch.bool, device="cuda")  # the buffer the graph reads
    static.copy_(masks[0])
    g, (gout, glse) = capture_graph(lambda: sage2.sageattn(q, k, v, attn_mask=static, return_lse=True),
                                    capture_error_mode)
    previous = None
    for i, m in enumerate(masks + masks[:1]):
        static.copy_(m)
        g.replay()
        torch.cuda.synchronize()
        eager, eager_lse = sage2.sageattn(q, k, v, attn_mask=m.contiguous(), return_lse=True)
        assert torch.equal(gout, eager), "replay %d differs from the eager call with the same mask" % i
        assert torch.equal(glse, eager_lse), "replay %d: LSE differs" % i
        if previous is not None:
            assert not torch.equal(gout, previous), "replay %d did not see the new mask" % i
        previous = gout.clone()
        check("graph replay %d" % i, gout, glse, q, k, v, m)


# ---- torch.compile ------------------------------------------------------------------------------------------------
def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    b, h, n = 2, 8, 512
    q, k, v = activation_like(b, h, 2, n, n, 64, layout="NHD", seed=40)

    def f(q, k, v, pad, bias):
        o = sage2.sageattn(q, k, v, tensor_layout="NHD", attn_mask=pad)
        o2, lse = sage2.sageattn(q, k, v, tensor_layout="NHD", attn_mask=bias, return_lse=True)
        return o, o2, lse, o.float().sum(-1)

    pad = key_padding([n, 200], n)
    bias = hf_additive([300, n], n, torch.float16).expand(b, 1, n, n).contiguous()
    try:
        compiled = torch.compile(f, fullgraph=True)
        for pad_, bias_ in ((pad, bias), (key_padding([7, 511], n), hf_additive([n, 1], n, torch.float16)
                                                                    .expand(b, 1, n, n).contiguous())):
            got = compiled(q, k, v, pad_, bias_)
            want = f(q, k, v, pad_, bias_)
            for x, y in zip(got[:3], want[:3]):
                assert torch.equal(x, y)
            torch.testing.assert_close(got[3], want[3], rtol=1e-3, atol=5e-2)
            check("compiled padding", got[0], None, q, k, v, pad_, "NHD")
    finally:
        torch._dynamo.reset()


def test_custom_op_and_fake_match_the_real_call():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = torch.ops.sage2.sageattn_masked
    q, k, v = activation_like(2, 4, 2, 128, 256, 64, seed=41)
    mask = key_padding([256, 100], 256).expand(2, 4, 128, 256)
    real_out, real_lse = op(q, k, v, mask, "HND", 1, 0.0, True, 0, 0, 0, 0, True, False)
    assert torch.equal(real_out, sage2.sageattn(q, k, v, attn_mask=mask, is_causal=True))
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fq, fk, fv, fm = (mode.from_tensor(t) for t in (q, k, v, mask))
        fo, fl = op(fq, fk, fv, fm, "HND", 1, 0.0, True, 0, 0, 0, 0, True, False)
    assert fo.shape == real_out.shape and fo.stride() == real_out.stride() and fo.dtype == real_out.dtype
    assert fl.shape == real_lse.shape and fl.dtype == real_lse.dtype


def test_no_backward_says_so():
    q, k, v = activation_like(1, 2, 2, 128, 128, 64, seed=1)
    q.requires_grad_(True)
    out = sage2.sageattn(q, k, v, attn_mask=key_padding([100], 128))
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="no backward"):
        out.float().sum().backward()


# ---- the SDPA patch ------------------------------------------------------------------------------------------------
def test_patch_sdpa_sends_masked_calls_to_sage2():
    n = 512
    q, k, v = activation_like(2, 8, 2, n, n, 64, seed=50)
    pad = key_padding([n, 123], n)
    add = hf_additive([n, 123], n, torch.float16)
    with sage2.patch_sdpa() as p:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=pad, enable_gqa=True)
        out_add = F.scaled_dot_product_attention(q, k, v, attn_mask=add, enable_gqa=True)
        # the pair goes to torch unchanged, whatever torch makes of it (torch 2.11 computes it on
        # the H100; its documentation says it raises)
        try:
            F.scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True, enable_gqa=True)
        except RuntimeError:
            pass
    assert p.stats.as_dict() == {"sage2": 2, "fallback": {"attn_mask with is_causal": 1}}, p.stats
    assert torch.equal(out, sage2.sageattn(q, k, v, attn_mask=pad))
    check("patch_sdpa bool padding", out, None, q, k, v, pad)
    check("patch_sdpa additive padding", out_add, None, q, k, v, add)
