"""The integrations without a GPU (issue 25 items 1-3), with the real packages when they are
installed (each test skips naming the missing one): "sage2" is registered with transformers'
attention and mask interfaces and with diffusers' dispatcher, a model selects it by name, and on
the CPU every call goes to torch unchanged and counted (so the outputs equal the model's own
"sdpa" / "native" ones exactly); yunchang's USP classes call sage2 (a CPU tensor reaches
sage2.sageattn, which names it) without flash-attn. GPU numerics: test_gpu_integrations.py."""
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
from sage2_testutil import import_or_skip as _import  # noqa: E402


os.environ.setdefault("HF_HUB_OFFLINE", "1")


# ---- transformers --------------------------------------------------------------------------------
def _llama(transformers, impl):
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
                                   num_key_value_heads=2, vocab_size=500, max_position_embeddings=256, pad_token_id=0)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl).eval()


def test_transformers_registration():
    transformers = _import("transformers")
    from sage2.integrations import transformers as T
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert "sage2" in ALL_ATTENTION_FUNCTIONS.valid_keys()
    assert ALL_ATTENTION_FUNCTIONS["sage2"].__name__ == "sage2_attention_forward"
    assert ALL_MASK_ATTENTION_FUNCTIONS["sage2"] is ALL_MASK_ATTENTION_FUNCTIONS["sdpa"]
    fn = T.register("sage2_fp16_test", pv_precision="fp16")
    assert ALL_ATTENTION_FUNCTIONS["sage2_fp16_test"] is fn
    with pytest.raises(ValueError, match="pv_precision='fp17'"):
        T.register("sage2_bad_test", pv_precision="fp17")
    T.register("sage2_per_warp_test", qk_quant_gran="per_warp")  # the reference's value: per thread is finer
    with pytest.raises(ValueError, match="qk_quant_gran='per_block'"):
        T.register("sage2_bad_test", qk_quant_gran="per_block")
    for bad in ("my_sdpa", "flash_sage", "org/kernel", ""):
        with pytest.raises(ValueError, match="name="):
            T.register(bad)
    assert transformers.__version__ == T.TRANSFORMERS_VERSION


def test_transformers_model_by_name_falls_back_on_cpu(tmp_path):
    transformers = _import("transformers")
    from sage2.integrations import transformers as T

    ref = _llama(transformers, "sdpa")
    model = _llama(transformers, "sage2")
    assert model.config._attn_implementation == "sage2"
    model.load_state_dict(ref.state_dict())
    ids = torch.randint(5, 500, (3, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :9] = 0  # left padding, as generate() pads
    mask[2, :20] = 0
    T.reset_stats()
    with torch.no_grad():
        a = ref(input_ids=ids, attention_mask=mask).logits
        b = model(input_ids=ids, attention_mask=mask).logits
    assert torch.equal(a, b)
    assert T.stats() == {"sage2": 0, "fallback": {"dtype": 2}}, T.stats()  # fp32 on the CPU: torch, counted
    g_ref = ref.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
    g = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
    assert torch.equal(g, g_ref)
    assert T.stats()["sage2"] == 0 and T.stats()["fallback"]["dtype"] == 2 + 2 * 4
    ref.save_pretrained(str(tmp_path))
    loaded = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), attn_implementation="sage2")
    assert loaded.config._attn_implementation == "sage2"


def test_transformers_sage2_branch_with_an_exact_stand_in(monkeypatch):
    """The branch that calls sage2, on the CPU: sageattn replaced by exact attention (torch SDPA in
    fp32 with the arguments sage2 would get) and the CPU/fp32 fallback reasons lifted. The model's
    logits and greedy generation must then equal its own "sdpa" ones — which checks what the
    integration hands sage2 (layout, causal rule, GQA, masks, scale, the output's layout), and the
    counting: prefill calls to sage2, masked decode steps to torch."""
    transformers = _import("transformers")
    from sage2.integrations import transformers as T

    calls = []

    def exact(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, attn_mask=None, **options):
        assert tensor_layout == "HND" and not options
        assert not (is_causal and attn_mask is not None)
        calls.append((q.shape[2], k.shape[2], is_causal, attn_mask is not None))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                                                scale=sm_scale, enable_gqa=True)

    real_unsupported = T._unsupported

    def cpu_ok(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal=False):
        why = real_unsupported(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal)
        return None if why in ("dtype", "device") else why

    monkeypatch.setattr(T, "sageattn", exact)
    monkeypatch.setattr(T, "_unsupported", cpu_ok)
    ref = _llama(transformers, "sdpa")
    model = _llama(transformers, "sage2")
    model.load_state_dict(ref.state_dict())
    ids = torch.randint(5, 500, (3, 24), generator=torch.Generator().manual_seed(1))
    layers = model.config.num_hidden_layers
    for name, mask in (("padded", torch.ones_like(ids).index_fill_(1, torch.arange(9), 0)),
                       ("unpadded", torch.ones_like(ids))):
        T.reset_stats()
        calls.clear()
        with torch.no_grad():
            torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits,
                                       ref(input_ids=ids, attention_mask=mask).logits, rtol=1e-5, atol=1e-5)
        assert T.stats() == {"sage2": layers, "fallback": {}}, (name, T.stats())
        assert calls[0] == (24, 24, name == "unpadded", name == "padded"), (name, calls[0])
        T.reset_stats()
        g = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
        assert torch.equal(g, ref.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, do_sample=False))
        want = ({"sage2": layers, "fallback": {"masked decode": 3 * layers}} if name == "padded"
                else {"sage2": 4 * layers, "fallback": {}})
        assert T.stats() == want, (name, T.stats())


def test_transformers_softcap_is_refused():
    _import("transformers")
    from sage2.integrations import transformers as T

    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(ValueError, match="softcap"):
        T.attention_forward(torch.nn.Module(), q, q, q, None, softcap=30.0)


# ---- diffusers -----------------------------------------------------------------------------------
def _wan(diffusers):
    torch.manual_seed(0)
    return diffusers.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=32,
                                           in_channels=4, out_channels=4, text_dim=32, freq_dim=16, ffn_dim=64,
                                           num_layers=1, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                           rope_max_seq_len=256).eval()


def test_diffusers_registration_and_fallback_on_cpu():
    diffusers = _import("diffusers")
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry, attention_backend

    from sage2.integrations import diffusers as D

    assert AttentionBackendName("sage2") is D.BACKEND is AttentionBackendName.SAGE2
    assert "sage2" in {m.value for m in AttentionBackendName.__members__.values()}
    assert _AttentionBackendRegistry._backends[D.BACKEND] is D.sage2_attention
    assert _AttentionBackendRegistry._supported_arg_names[D.BACKEND] >= {"query", "key", "value", "attn_mask",
                                                                         "is_causal", "scale", "return_lse"}
    model = _wan(diffusers)
    x = torch.randn(1, 4, 2, 8, 8, generator=torch.Generator().manual_seed(2))
    t = torch.tensor([500])
    enc = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a = model(hidden_states=x, timestep=t, encoder_hidden_states=enc, return_dict=False)[0]
        D.reset_stats()
        model.set_attention_backend("sage2")
        b = model(hidden_states=x, timestep=t, encoder_hidden_states=enc, return_dict=False)[0]
        with attention_backend("sage2"):
            pass  # the context manager accepts the name too
    assert torch.equal(a, b)
    assert D.stats() == {"sage2": 0, "fallback": {"dtype": 2}}, D.stats()  # self + cross attention, fp32 CPU
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(ValueError, match="native backend has no return_lse"):
        D.sage2_attention(q, q, q, return_lse=True)
    with pytest.raises(ValueError, match="context parallelism"):
        D.sage2_attention(q, q, q, _parallel_config=object())


# ---- yunchang ------------------------------------------------------------------------------------
def test_yunchang_calls_sage2_without_flash_attn(tmp_path):
    yunchang = _import("yunchang")
    import torch.distributed as dist

    from sage2.integrations import yunchang as Y

    q = torch.zeros(1, 8, 2, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="dropout_p=0.1"):
        Y.attn_forward(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match=r"window_size=\(64, 0\)"):
        Y.attn_forward(q, q, q, window_size=(64, 0))
    with pytest.raises(ValueError, match="ring_impl_type='zigzag'"):
        Y.long_context_attention(ring_impl_type="zigzag")
    if dist.is_initialized():
        pytest.skip("a process group exists already")
    dist.init_process_group("gloo", init_method="file://%s" % (tmp_path / "pg"), rank=0, world_size=1)
    try:
        yunchang.set_seq_parallel_pg(1, 1, 0, 1)
        for layer in (Y.long_context_attention(), Y.ulysses_attention()):
            # the CPU tensor reaches sage2.sageattn, which names it: sage2 is the attention called
            with pytest.raises(ValueError, match="sage2.sageattn: q is on device 'cpu'"):
                layer(q, q, q)
    finally:
        dist.destroy_process_group()


# ---- the sage2 branches with exact stand-ins (CPU): what the integrations hand sage2 -----------------
def _exact_sageattn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, attn_mask=None,
                    **options):
    """sage2.sageattn's contract computed exactly in fp64 on the CPU (the reference keywords mapped
    by sage2's own translation): [B, N, H, D] for "NHD", LSE [B, H, N]."""
    from sage2 import _compat

    known = frozenset(("causal_alignment", "qk_bits", "pv_precision", "smooth_q", "smooth_k", "smooth_v",
                       "small_q_path"))
    is_causal, sm_scale, options = _compat.translate(is_causal, sm_scale, options, known)
    align = options.get("causal_alignment", "top_left")
    if tensor_layout == "NHD":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    qd, kd, vd = (t.double() for t in (q, k, v))
    g = qd.shape[1] // kd.shape[1]
    kd, vd = kd.repeat_interleave(g, 1), vd.repeat_interleave(g, 1)
    s = qd @ kd.transpose(-1, -2) * (sm_scale or qd.shape[-1] ** -0.5)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.double()
    if is_causal:
        nq, nk = s.shape[-2], s.shape[-1]
        off = nk - nq if align == "bottom_right" else 0
        s = s.masked_fill(torch.arange(nk)[None, :] > torch.arange(nq)[:, None] + off, float("-inf"))
    lse = torch.logsumexp(s, -1)
    out = (torch.softmax(s, -1) @ vd).to(q.dtype)
    if tensor_layout == "NHD":
        out = out.transpose(1, 2).contiguous()
    return (out, lse.float()) if return_lse else out


def test_diffusers_sage2_branch_with_an_exact_stand_in(monkeypatch):
    diffusers = _import("diffusers")
    from sage2.integrations import diffusers as D

    real_unsupported = D._unsupported
    monkeypatch.setattr(D, "sageattn", _exact_sageattn)
    monkeypatch.setattr(D, "_unsupported", lambda *a: None if real_unsupported(*a) in ("dtype", "device")
                        else real_unsupported(*a))
    model = _wan(diffusers)
    x = torch.randn(1, 4, 2, 8, 8, generator=torch.Generator().manual_seed(2))
    t = torch.tensor([500])
    enc = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model.set_attention_backend("native")
        a = model(hidden_states=x, timestep=t, encoder_hidden_states=enc, return_dict=False)[0]
        model.set_attention_backend("sage2")
        D.reset_stats()
        b = model(hidden_states=x, timestep=t, encoder_hidden_states=enc, return_dict=False)[0]
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    assert D.stats() == {"sage2": 2, "fallback": {}}, D.stats()
    # a [B, Nk] key mask and GQA through the dispatcher, with the LSE
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    q = torch.randn(2, 12, 4, 16, generator=torch.Generator().manual_seed(4))
    kv = torch.randn(2, 10, 2, 16, generator=torch.Generator().manual_seed(5))
    keep = torch.ones(2, 10, dtype=torch.bool)
    keep[1, 6:] = False
    got = dispatch_attention_fn(q, kv, kv, attn_mask=keep, enable_gqa=True, backend="sage2")
    want = dispatch_attention_fn(q, kv, kv, attn_mask=keep, enable_gqa=True, backend="native")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    out, lse = dispatch_attention_fn(q, kv, kv, enable_gqa=True, backend="sage2", attention_kwargs={"return_lse": True})
    assert lse.shape == (2, 4, 12)


_USP_WORKER = r"""
import os, sys, torch, torch.distributed as dist
rank, world, init, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[5])
import test_integrations as TI
from sage2.integrations import yunchang as Y
import yunchang
Y.sageattn = TI._exact_sageattn          # exact attention with sage2's contract, on the CPU
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
torch.manual_seed(0)
B, N, H, D = 1, 32, 4, 16
q, k, v = (torch.randn(B, N, H, D, dtype=torch.float32) for _ in range(3))
shard = N // world
ql, kl, vl = (t[:, rank * shard:(rank + 1) * shard] for t in (q, k, v))
if mode == "ulysses":
    layer = Y.ulysses_attention(dist.group.WORLD)
else:
    u = world if mode == "usp" else 1
    yunchang.set_seq_parallel_pg(u, world // u, rank, world)
    layer = Y.long_context_attention()
    if mode == "usp":  # a ring of one: sage2's shortcut, never yunchang's ring function
        def refuse(*a, **k):
            raise AssertionError("yunchang's LongContextAttention.forward ran for a ring of one")
        yunchang.LongContextAttention.forward = refuse
worst = 0.0
for causal in (False, True):
    with torch.no_grad():
        out = layer(ql, kl, vl, causal=causal)
    full = TI._exact_sageattn(q, k, v, "NHD", causal)
    worst = max(worst, float((out - full[:, rank * shard:(rank + 1) * shard]).abs().max()))
print("RANK", rank, mode, "max abs diff", worst)
assert worst < 1e-5, worst
dist.destroy_process_group()
"""


@pytest.mark.parametrize("mode", ["ulysses", "ring", "usp"])
def test_yunchang_usp_on_two_cpu_processes_with_an_exact_stand_in(tmp_path, mode):
    """yunchang's Ulysses / ring / USP layers with sage2's processor on two gloo processes, sage2's
    sageattn replaced by exact attention: the sharded result equals full attention — which checks
    the call form and the LSE ([B, H, N], natural log, scale included) the ring merges, and the
    causal alignment of the ring's diagonal blocks."""
    _import("yunchang")
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "worker.py"
    script.write_text(_USP_WORKER)
    from fake_torch import sage2_child_env

    env = sage2_child_env(first=[here, os.path.dirname(here)])
    init = "file://%s" % (tmp_path / "pg")
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", init, mode, here], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env) for r in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, o in zip(procs, outs):
        assert p.returncode == 0, o
        assert "max abs diff" in o, o
