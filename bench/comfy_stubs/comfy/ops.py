"""Stub of comfy.ops: the layer namespace attention.py builds its modules from, and the SDPA and GQA
helpers its attention functions call. scaled_dot_product_attention counts its calls in SDPA_CALLS
(ComfyUI's attention_pytorch, which attention_sage falls back to, calls it)."""
import torch

SDPA_CALLS = [0]


class disable_weight_init:
    Linear = torch.nn.Linear
    Conv2d = torch.nn.Conv2d
    Conv3d = torch.nn.Conv3d
    GroupNorm = torch.nn.GroupNorm
    LayerNorm = torch.nn.LayerNorm
    Embedding = torch.nn.Embedding


manual_cast = disable_weight_init


def scaled_dot_product_attention(q, k, v, *args, **kwargs):
    SDPA_CALLS[0] += 1
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, *args, **kwargs)


def repeat_kv_for_gqa(k, v, heads, dim):
    """k, v with their head axis `dim` repeated up to `heads` heads (grouped-query attention)."""
    n = k.shape[dim]
    if n == heads:
        return k, v
    return k.repeat_interleave(heads // n, dim=dim), v.repeat_interleave(heads // n, dim=dim)
