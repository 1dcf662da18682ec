"""The integrations without a GPU (issue 25 items 1-3), with the real packages when they are
installed (each test skips naming the missing one): "sage2" is registered with transformers'
attention and mask interfaces and with diffusers' dispatcher, a model selects it by name, and on
the CPU every call goes to torch unchanged and counted (so the outputs equal the model's own
"sdpa" / "native" ones exactly); yunchang's USP classes call sage2 (a CPU tensor reaches
sage2.sageattn, which names it) without flash-attn. GPU numerics: test_gpu_integrations.py."""
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")


os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _import(name):
    """The package, or a skip naming why it cannot be imported (missing, or an ImportError inside it,
    e.g. diffusers beside transformers 4.x's older huggingface_hub)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.skip("%s cannot be imported (%s); the GPU machine gets it from .wheels-int/ "
                    "(scripts/integration_wheels.sh, scripts/gpu_integrations.sh)" % (name, e))


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
    with pytest.raises(ValueError, match="qk_quant_gran='per_warp'"):
        T.register("sage2_bad_test", qk_quant_gran="per_warp")
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
