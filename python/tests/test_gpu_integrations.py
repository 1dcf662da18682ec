"""The integrations on the GPU with the real packages (issue 25 items 1-3, 5): a tiny Llama-like
model with GQA selected by attn_implementation="sage2" against its own "sdpa" output (a padded
batch, generate(), from_pretrained); a Wan transformer (diffusers' current video DiT class) with
random weights on the "sage2" backend against "native"; yunchang's USP in one process (Ulysses and
ring layers equal sage2 itself; the ring's LSE merge of two KV halves equals one call); warm-up
filling an empty kernel cache that a second process then loads.

Everything is built from small configs with random weights (nothing is downloaded). Each test
skips (naming it) without its package, a CUDA torch, a GPU or libsage2; SAGE2_REQUIRE_GPU_TESTS=1
turns a missing library or GPU support into a failure (sage2_testutil.require_gpu)."""
import json
import os
import subprocess
import sys

import pytest

from sage2_testutil import import_or_skip as _import, report, require_gpu, torch

import sage2
from fake_torch import sage2_child_env

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.gpu
F = torch.nn.functional

COS_MODEL = 0.99   # logits / hidden states of a whole model, per sequence (real tokens)
COS_LAYER = 0.999  # one attention layer's output


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu(sage2._lib._MASK_SYMBOLS)


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))


def rel_l1(a, b):
    return float((a.double() - b.double()).abs().sum() / b.double().abs().sum().clamp_min(1e-300))


# ---- transformers --------------------------------------------------------------------------------
LENGTHS = [192, 130, 17]  # left-padded to 192, as generate() pads
N = 192


def _llama(transformers, impl):
    # GQA 8 / 2, head dim 64; initializer_range 0.05 makes attention less uniform than HF's 0.02
    cfg = transformers.LlamaConfig(hidden_size=512, intermediate_size=1024, num_hidden_layers=3,
                                   num_attention_heads=8, num_key_value_heads=2, vocab_size=2000,
                                   max_position_embeddings=1024, pad_token_id=0, initializer_range=0.05)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl).eval()


def _padded_batch(device="cuda"):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 2000, (len(LENGTHS), N), generator=g)
    mask = (torch.arange(N)[None, :] >= N - torch.tensor(LENGTHS)[:, None]).long()
    return ids.masked_fill(mask == 0, 0).to(device), mask.to(device)


@pytest.fixture(scope="module")
def llama_pair():
    require_gpu(sage2._lib._MASK_SYMBOLS)  # (module scope: before the autouse function fixture)
    transformers = _import("transformers")
    from sage2.integrations import transformers as _registers_sage2  # noqa: F401

    ref = _llama(transformers, "sdpa").to("cuda", torch.float16)
    model = _llama(transformers, "sage2").to("cuda", torch.float16)
    model.load_state_dict(ref.state_dict())
    assert model.config._attn_implementation == "sage2"
    return transformers, ref, model


def test_transformers_padded_batch_against_sdpa(llama_pair):
    transformers, ref, model = llama_pair
    from sage2.integrations import transformers as T

    ids, mask = _padded_batch()
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        T.reset_stats()
        got = model(input_ids=ids, attention_mask=mask).logits
        st = T.stats()
        nomask = ref(input_ids=ids).logits  # what ignoring the padding would give
    print("transformers %s padded batch: %s" % (transformers.__version__, st))
    assert st == {"sage2": model.config.num_hidden_layers, "fallback": {}}, st
    for b, n in enumerate(LENGTHS):
        real = slice(N - n, N)
        c = cosine(got[b, real], want[b, real])
        report("hf llama gqa 8/2 seq %d (len %d) logits vs sdpa" % (b, n), c, rel_l1(got[b, real], want[b, real]),
               float((got[b, real] - want[b, real]).abs().max()))
        assert torch.isfinite(got[b, real]).all()
        assert c >= COS_MODEL, (b, n, c)
        if n < N:  # the mask matters: sage2 must be far closer than ignoring it
            cn = cosine(nomask[b, real], want[b, real])
            assert 1 - c < 0.25 * (1 - cn), (b, c, cn)


def test_transformers_generate_against_sdpa(llama_pair):
    """generate() with a padded batch (decode steps with a mask go to torch, counted) and with an
    unpadded one (decode steps take sage2's direct small-Nq path, no quantization): every step's
    scores equal the "sdpa" model's at the same step, as long as both generated the same tokens
    before it (greedy decoding of a random model may take another token at a near tie; the first
    step always compares)."""
    transformers, ref, model = llama_pair
    from sage2.integrations import transformers as T

    steps = 8
    ids, mask = _padded_batch()
    kw = dict(max_new_tokens=steps, min_new_tokens=steps, do_sample=False, output_scores=True,
              return_dict_in_generate=True)
    for name, m in (("padded", mask), ("unpadded", torch.ones_like(mask))):
        T.reset_stats()
        out = model.generate(input_ids=ids, attention_mask=m, **kw)
        st = T.stats()
        want = ref.generate(input_ids=ids, attention_mask=m, **kw)
        print("transformers %s generate (%s): %s" % (transformers.__version__, name, st))
        layers = model.config.num_hidden_layers
        if name == "padded":
            assert st == {"sage2": layers, "fallback": {"masked decode": layers * (steps - 1)}}, st
        else:
            assert st == {"sage2": layers * steps, "fallback": {}}, st
        seq, seq_ref = out.sequences[:, N:], want.sequences[:, N:]
        compared, worst = 0, 1.0
        for s in range(steps):
            for b in range(len(LENGTHS)):
                if torch.equal(seq[b, :s], seq_ref[b, :s]):
                    worst = min(worst, cosine(out.scores[s][b], want.scores[s][b]))
                    compared += 1
        print("  %d of %d step scores compared (same tokens before them), worst cosine %.6f; tokens equal: %.2f"
              % (compared, steps * len(LENGTHS), worst, float((seq == seq_ref).float().mean())))
        assert compared >= len(LENGTHS) and worst >= COS_MODEL, (name, compared, worst)


def test_transformers_from_pretrained(llama_pair, tmp_path):
    transformers, ref, model = llama_pair
    ref.save_pretrained(str(tmp_path))
    loaded = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), attn_implementation="sage2")
    loaded = loaded.to("cuda", torch.float16).eval()
    assert loaded.config._attn_implementation == "sage2"
    ids, mask = _padded_batch()
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids, attention_mask=mask).logits,
                           model(input_ids=ids, attention_mask=mask).logits)


def test_transformers_encoder_by_name():
    """A BERT encoder (bidirectional masks, no causal) by name on a padded batch. transformers 4.x's
    BERT picks attention classes itself, not through AttentionInterface: there it skips (use
    sage2.patch_sdpa, test_gpu_hf_model.py)."""
    transformers = _import("transformers")
    from sage2.integrations import transformers as T

    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers %s: BERT does not use AttentionInterface (sage2.patch_sdpa serves it)"
                    % transformers.__version__)
    kw = dict(hidden_size=768, num_attention_heads=12, num_hidden_layers=4, intermediate_size=3072, vocab_size=4096,
              max_position_embeddings=512, initializer_range=0.05)
    torch.manual_seed(0)
    ref = transformers.AutoModel.from_config(transformers.BertConfig(**kw), attn_implementation="sdpa",
                                             add_pooling_layer=False).eval().to("cuda", torch.float16)
    model = transformers.AutoModel.from_config(transformers.BertConfig(**kw), attn_implementation="sage2",
                                               add_pooling_layer=False).eval().to("cuda", torch.float16)
    model.load_state_dict(ref.state_dict())
    lengths = [384, 160, 40]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 4096, (3, 384), generator=g).cuda()
    mask = (torch.arange(384)[None, :] < torch.tensor(lengths)[:, None]).long().cuda()
    T.reset_stats()
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).last_hidden_state
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
    assert T.stats() == {"sage2": 4, "fallback": {}}, T.stats()
    for b, n in enumerate(lengths):
        c = cosine(got[b, :n], want[b, :n])
        report("hf bert by name seq %d (len %d) vs sdpa" % (b, n), c, rel_l1(got[b, :n], want[b, :n]),
               float((got[b, :n] - want[b, :n]).abs().max()))
        assert c >= COS_MODEL, (b, n, c)


# ---- diffusers -----------------------------------------------------------------------------------
def test_diffusers_wan_transformer_against_native():
    diffusers = _import("diffusers")
    from sage2.integrations import diffusers as D

    torch.manual_seed(0)
    # Wan 2.x's DiT (WanPipeline.transformer), small: 2 blocks, 12 heads x hd 128, 6240 video tokens
    # (6 frames x 26 x 40 after 1x2x2 patches) and a 77-token text for cross attention
    model = diffusers.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128,
                                            in_channels=16, out_channels=16, text_dim=256, freq_dim=64,
                                            ffn_dim=2048, num_layers=2, cross_attn_norm=True,
                                            qk_norm="rms_norm_across_heads", rope_max_seq_len=1024)
    model = model.to("cuda", torch.bfloat16).eval()
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(1, 16, 6, 52, 80, device="cuda", dtype=torch.bfloat16, generator=g)
    t = torch.tensor([700], device="cuda")
    enc = torch.randn(1, 77, 256, device="cuda", dtype=torch.bfloat16, generator=g)
    with torch.no_grad():
        model.set_attention_backend("native")
        want = model(hidden_states=x, timestep=t, encoder_hidden_states=enc, return_dict=False)[0]
        model.set_attention_backend("sage2")
        D.reset_stats()
        got = model(hidden_states=x, timestep=t, encoder_hidden_states=enc, return_dict=False)[0]
        st = D.stats()
        model.float()
        model.set_attention_backend("native")
        want32 = model(hidden_states=x.float(), timestep=t, encoder_hidden_states=enc.float(), return_dict=False)[0]
    print("diffusers %s Wan DiT: %s" % (diffusers.__version__, st))
    assert st == {"sage2": 4, "fallback": {}}, st  # self + cross attention in each of 2 blocks
    c, c32, t32 = cosine(got, want), cosine(got, want32), cosine(want, want32)
    report("diffusers wan dit bf16 vs native bf16", c, rel_l1(got, want), float((got - want).abs().max()))
    print("cos vs native bf16 %.6f, vs fp32 %.6f (native bf16 vs fp32 %.6f)" % (c, c32, t32))
    assert got.shape == want.shape and torch.isfinite(got).all()
    assert c >= COS_MODEL and c32 >= COS_MODEL, (c, c32)


def test_diffusers_backend_call_forms():
    _import("diffusers")
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    from sage2.integrations import diffusers as D

    g = torch.Generator(device="cuda").manual_seed(2)
    q = torch.randn(2, 1024, 8, 64, device="cuda", dtype=torch.float16, generator=g)
    kv = torch.randn(2, 512, 2, 64, device="cuda", dtype=torch.float16, generator=g) + 0.5
    keep = torch.ones(2, 512, dtype=torch.bool, device="cuda")
    keep[1, 300:] = False  # a [B, Nk] key mask, as diffusers' native backend reads it
    D.reset_stats()
    got = dispatch_attention_fn(q, kv, kv, attn_mask=keep, enable_gqa=True, backend="sage2")
    want = dispatch_attention_fn(q, kv, kv, attn_mask=keep, enable_gqa=True, backend="native")
    out, lse = dispatch_attention_fn(q, kv, kv, is_causal=True, enable_gqa=True, backend="sage2",
                                     attention_kwargs={"return_lse": True})
    ref = F.scaled_dot_product_attention(*(t.transpose(1, 2).float() for t in (q, kv, kv)), is_causal=True,
                                         enable_gqa=True).transpose(1, 2)
    assert D.stats() == {"sage2": 2, "fallback": {}}, D.stats()
    assert cosine(got, want) >= COS_LAYER and cosine(out, ref) >= COS_LAYER
    assert lse.shape == (2, 8, 1024) and lse.dtype == torch.float32


# ---- yunchang (one process; two GPUs: bench/usp_bench.py) -------------------------------------------
def test_yunchang_usp_in_one_process(tmp_path):
    yunchang = _import("yunchang")
    import torch.distributed as dist
    from yunchang.ring.utils import update_out_and_lse

    from sage2.integrations import yunchang as Y

    g = torch.Generator(device="cuda").manual_seed(3)
    B, Nn, H, D = 1, 4096, 8, 128

    def t(scale, bias):  # per-channel biases (what smoothing is for), as bench/usp_bench.py
        x = torch.randn(B, Nn, H, D, device="cuda", generator=g) * scale
        return (x + bias * torch.randn(1, 1, H, D, device="cuda", generator=g)).to(torch.bfloat16)

    q, k, v = t(1.5, 0.5), t(1.0, 2.0), t(1.0, 1.0)
    if dist.is_initialized():
        pytest.skip("a process group exists already")
    dist.init_process_group("gloo", init_method="file://%s" % (tmp_path / "pg"), rank=0, world_size=1)
    try:
        yunchang.set_seq_parallel_pg(1, 1, 0, 1)
        for causal in (False, True):
            # the layers call sage2 with return_lse (the ring merges LSEs): the same call here
            # and yunchang passes softmax_scale = D ** -0.5 explicitly
            want = sage2.sageattn(q, k, v, tensor_layout="NHD", is_causal=causal, sm_scale=D ** -0.5,
                                  return_lse=True)[0]
            with torch.no_grad():
                for name, layer in (("usp", Y.long_context_attention()), ("ulysses", Y.ulysses_attention())):
                    got = layer(q, k, v, causal=causal)
                    assert torch.equal(got, want), (name, causal, cosine(got, want))
    finally:
        dist.destroy_process_group()
    # the ring's merge of two KV halves through sage2's LSE equals one call (non-causal)
    h = Nn // 2
    o1, l1 = Y.attn_forward(q, k[:, :h], v[:, :h])
    o2, l2 = Y.attn_forward(q, k[:, h:], v[:, h:])
    out, lse = update_out_and_lse(None, None, o1, l1)
    out, lse = update_out_and_lse(out, lse, o2, l2)
    out = out.to(q.dtype)
    lse = lse.squeeze(-1).transpose(1, 2)
    full, full_lse = sage2.sageattn(q, k, v, tensor_layout="NHD", return_lse=True)
    ref = F.scaled_dot_product_attention(*(x.transpose(1, 2).float() for x in (q, k, v))).transpose(1, 2)
    c, r = cosine(out, ref), rel_l1(out, ref)
    c_full, r_full = cosine(full, ref), rel_l1(full, ref)
    report("yunchang ring merge of 2 halves vs fp32", c, r, float((out.float() - ref).abs().max()),
           float((lse - full_lse).abs().max()))
    report("  (one sage2 call on the whole sequence vs fp32)", c_full, r_full, float((full.float() - ref).abs().max()))
    # the merge adds no error of its own beyond the 8-bit one of each half: as close to exact as one call
    assert r <= 1.25 * r_full + 0.002 and 1 - c <= 1.5 * (1 - c_full) + 1e-5, (c, r, c_full, r_full)
    assert rel_l1(out, full) <= 0.011 and float((lse - full_lse).abs().max()) <= 0.25


# ---- warm-up and the tools -----------------------------------------------------------------------------
WARM = r'''
import json, sys, time, sage2
t0 = time.perf_counter()
# N 2048 x 1 head: more query rows than the direct small-Nq path takes (512 on sm_90, 64 elsewhere),
# so the quantized kernels of long calls are warmed (N 512 warms the direct path's decode kernels)
r = sage2.warmup(head_dims=(64, 128), dtypes=("bf16",), causal=(False, True), seq_lens=(2048,), return_lse=(False, True),
                 progress=True)
print("JSON" + json.dumps({"records": r, "seconds": time.perf_counter() - t0, "kernels": sage2.stats()["process"]}))
'''


def test_warmup_fills_the_cache_a_second_process_loads(tmp_path):
    env = sage2_child_env(extra=dict(SAGE2_CACHE_DIR=str(tmp_path / "cache"), SAGE2_LIBRARY=sage2.library_path()))
    runs, listed = [], []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.split("JSON", 1)[1])
        assert len(out["records"]) == 8 and "sage2 warmup [" in r.stderr  # the progress bar (forced: no terminal here)
        runs.append(out)
        listed.append(sorted(os.listdir(str(tmp_path / "cache"))))
    entries = listed[-1]
    print("warm-up: first process %.2f s, %s; second %.2f s, %s; %d cache entries"
          % (runs[0]["seconds"], runs[0]["kernels"], runs[1]["seconds"], runs[1]["kernels"], len(entries)))
    assert entries, "the cache is empty after warm-up"
    # The first process compiles what the combinations need (the library's warm-up compiles into the
    # disk cache, then loads from it); the second finds all of it there: no compile, no new entry.
    # (How much faster it is, is a benchmark's question: the times are printed above.)
    assert runs[1]["kernels"]["compiled"] == 0 and runs[1]["kernels"]["disk_loads"] > 0, runs[1]
    assert listed[1] == listed[0], "the second warm-up wrote cache entries the first did not"
    from sage2 import _tools

    if _tools.tool_path("cache") is None:
        pytest.skip("sage2-cache is not built beside this libsage2 (scripts/dev_bundle.sh copies it)")
    r = subprocess.run([sys.executable, "-c", "import sys; from sage2._tools import cache; sys.exit(cache())",
                        "list", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    entries = json.loads(r.stdout)["entries"]
    attn = {e["key"] for e in entries if e["key"].startswith("attn_")}
    # 2 head dims x 2 causal modes x with / without LSE: 8 attention kernels, all valid
    assert len(attn) >= 8 and all(e["valid"] for e in entries), sorted(attn)
