"""A Hugging Face encoder through sage2.patch_sdpa() on the GPU (issue 17): a padded batch whose
attention masks the model builds itself reaches sage2 (no fallback), and the hidden states of the
real tokens match the unpatched model.

The models are built from small configs with random weights (nothing is downloaded), run in fp16
with attn_implementation="sdpa". initializer_range 0.05 (HF's default is 0.02) makes attention
less uniform, so that the padding matters: the test checks that ignoring the mask would change the
real tokens' states far more than sage2's quantization does.

transformers 4.57.6 (scripts/hf_wheelhouse.sh installs it offline) passes BERT/RoBERTa's padding
mask to SDPA as an additive [B, 1, N, N] tensor of the model's dtype (0 / finfo.min), which
sage2 takes as a broadcast view (stride 0 on heads); other versions may pass bool masks.

Skips (with the reason) without transformers, a CUDA torch, a GPU, libsage2, or a libsage2 that
has sage2_attention_masked."""
import os

import pytest

from sage2_testutil import report, require_gpu, torch

import sage2

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here needs the hub
transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                   "(scripts/hf_wheelhouse.sh fetches wheels for an offline install)")

F = torch.nn.functional
pytestmark = pytest.mark.gpu

COS_MODEL = 0.99  # per sequence, real tokens' last hidden states
LENGTHS = [384, 160, 40, 1]  # the first sequence is unpadded; one of a single token
N = 384


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu(sage2._lib._MASK_SYMBOLS)


MODELS = {
    # name: (config class, model class, hidden, heads, layers)
    "bert-12x64": ("BertConfig", "BertModel", 768, 12, 4),
    "roberta-4x64": ("RobertaConfig", "RobertaModel", 256, 4, 3),
}


def build(name):
    cfg_cls, model_cls, hidden, heads, layers = MODELS[name]
    cfg = getattr(transformers, cfg_cls)(hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=layers,
                                         intermediate_size=4 * hidden, vocab_size=4096, max_position_embeddings=N + 2,
                                         initializer_range=0.05, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(cfg, add_pooling_layer=False).eval()
    assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
    return model, cfg


def batch(cfg, device="cuda"):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, cfg.vocab_size, (len(LENGTHS), N), generator=g)
    mask = (torch.arange(N)[None, :] < torch.tensor(LENGTHS)[:, None]).long()  # zeros at the end of rows
    ids = ids.masked_fill(mask == 0, cfg.pad_token_id)
    return ids.to(device), mask.to(device)


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))


def hidden(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).last_hidden_state


@pytest.mark.parametrize("name", sorted(MODELS))
def test_padded_batch_through_patch_sdpa(name):
    model, cfg = build(name)
    ids, mask = batch(cfg)
    model = model.to("cuda", torch.float16)
    ref16 = hidden(model, ids, mask)  # torch's SDPA, fp16

    seen = []  # what the model handed to SDPA while patched
    with sage2.patch_sdpa() as p:
        patched = F.scaled_dot_product_attention

        def spy(query, key, value, attn_mask=None, *args, **kwargs):
            seen.append((tuple(query.shape), None if attn_mask is None else
                         (attn_mask.dtype, tuple(attn_mask.shape), attn_mask.stride())))
            return patched(query, key, value, attn_mask, *args, **kwargs)

        F.scaled_dot_product_attention = spy
        try:
            got = hidden(model, ids, mask)
        finally:
            F.scaled_dot_product_attention = patched
    stats = p.stats.as_dict()
    print("%s (transformers %s): %s; masks passed to SDPA: %s" % (name, transformers.__version__, stats,
                                                                   sorted(set(m for _, m in seen), key=str)))
    assert stats["fallback"] == {}, stats
    assert stats["sage2"] >= cfg.num_hidden_layers and stats["sage2"] == len(seen), (stats, len(seen))
    assert all(m is not None for _, m in seen), "a padded batch reached SDPA without a mask"

    model = model.float()  # fp32 references: with the padding, and without it
    ref32 = hidden(model, ids, mask)
    nomask32 = hidden(model, ids, None)
    assert got.dtype == torch.float16 and got.shape == ref16.shape
    assert torch.isfinite(got).all(), "non-finite hidden states (padded positions included)"
    for b, n in enumerate(LENGTHS):
        c16 = cosine(got[b, :n], ref16[b, :n])
        c32 = cosine(got[b, :n], ref32[b, :n])
        t32 = cosine(ref16[b, :n], ref32[b, :n])
        err = got[b, :n].float() - ref32[b, :n]
        report("hf %s seq %d (len %d) vs fp32" % (name, b, n), c32,
               float(err.abs().sum() / ref32[b, :n].abs().sum()), float(err.abs().max()))
        print("%s seq %d len %d: cos vs torch fp16 %.6f, vs fp32 %.6f (torch fp16 vs fp32 %.6f)" % (
            name, b, n, c16, c32, t32))
        assert c16 >= COS_MODEL, (name, b, n, c16)
        assert c32 >= COS_MODEL, (name, b, n, c32)
        if n < N:  # the mask matters for this sequence: sage2 must be far closer than ignoring it would be
            cn = cosine(nomask32[b, :n], ref32[b, :n])
            assert 1.0 - c32 < 0.25 * (1.0 - cn), "%s seq %d: sage2 %.6f vs fp32, without the mask %.6f" % (
                name, b, c32, cn)


def test_unpadded_batch_has_no_fallback():
    model, cfg = build("bert-12x64")
    ids, _ = batch(cfg)
    ones = torch.ones_like(ids)
    model = model.to("cuda", torch.float16)
    ref = hidden(model, ids, ones)
    with sage2.patch_sdpa() as p:
        got = hidden(model, ids, ones)
    assert p.stats.fallback == {} and p.stats.sage2 >= cfg.num_hidden_layers, p.stats
    for b in range(len(LENGTHS)):
        assert cosine(got[b], ref[b]) >= COS_MODEL
