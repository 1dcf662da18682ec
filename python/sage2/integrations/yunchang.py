"""sage2 as the attention of yunchang's sequence parallelism (USP: Ulysses all-to-all, ring, and
their hybrid — what xDiT builds on), without flash-attn:

    from sage2.integrations.yunchang import long_context_attention, ulysses_attention
    yunchang.set_seq_parallel_pg(ulysses_degree, ring_degree, rank, world_size)
    usp = long_context_attention()          # out = usp(q, k, v, causal=False)  q: [B, N/P, H, D] per rank

yunchang takes a custom attention through ``attn_processor`` with ``attn_type=None``: its kernel
selector (``yunchang.kernels.select_flash_attn_impl``) returns the processor for a type it does not
know, and its "basic" ring merges the processor's (out, lse) blocks with ``update_out_and_lse``.
``attn_forward`` is that processor: FlashAttention's call form on [B, N, H, D] tensors, returning
the output and the LSE as fp32 [B, H, N] (natural log of the sum of exp(scale·qk) — the layout and
meaning the merge expects). ``UlyssesAttention`` has no processor argument, so
``Sage2UlyssesAttention`` builds it with a torch backend and replaces its attention function.
flash-attn is never imported (yunchang imports it only when installed). Inference only: sage2 has
no backward pass. Only the "basic" ring carries the processor (zigzag / stripe call flash-attn).
"""
import functools

import torch.distributed as dist

import yunchang
from yunchang import LongContextAttention, UlyssesAttention
from yunchang.comm.all_to_all import SeqAllToAll4D
from yunchang.kernels import AttnType

from .._attention import sageattn

__all__ = ["attn_forward", "long_context_attention", "ulysses_attention", "Sage2UlyssesAttention",
           "Sage2LongContextAttention"]


def attn_forward(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                 alibi_slopes=None, deterministic=False, return_softmax=False, return_attn_probs=False,
                 **sage2_options):
    """FlashAttention's forward call form over sage2: q [B, Nq, Hq, D], k/v [B, Nk, Hkv, D] (NHD);
    returns (out [B, Nq, Hq, D], lse fp32 [B, Hq, Nq]). ``causal`` is FlashAttention's (bottom-right)
    mask; dropout, windows, soft-capping, ALiBi and attention probabilities raise ValueError naming
    the value (sage2.sageattn's mapping of these keywords)."""
    if return_softmax:
        raise ValueError("sage2 yunchang processor: return_softmax=True is not supported (the probabilities are "
                         "never formed)")
    return sageattn(q, k, v, "NHD", False, softmax_scale, True, causal=causal, dropout_p=dropout_p,
                    window_size=window_size, softcap=softcap or None, alibi_slopes=alibi_slopes,
                    deterministic=deterministic, return_attn_probs=return_attn_probs, **sage2_options)


def _processor(options):
    if not options:
        return attn_forward
    from .. import _core

    opts = dict(options)  # checked now, not at the first call
    _core._normalize_scalars(False, None, True, opts, "sage2.integrations.yunchang")
    return functools.partial(attn_forward, **opts)


def long_context_attention(ring_impl_type="basic", scatter_idx=2, gather_idx=1, use_sync=False, **sage2_options):
    """yunchang's ``LongContextAttention`` (USP: Ulysses across the Ulysses group, ring across the ring
    group — set them with ``yunchang.set_seq_parallel_pg`` first) with sage2 as its attention.
    ``sage2_options``: sageattn's options (pv_precision, qk_bits, smooth_v ...)."""
    if ring_impl_type != "basic":
        raise ValueError("sage2.integrations.yunchang: ring_impl_type=%r; only 'basic' passes a custom attention "
                         "to its blocks (yunchang's zigzag and stripe rings call flash-attn)" % (ring_impl_type,))
    return Sage2LongContextAttention(scatter_idx=scatter_idx, gather_idx=gather_idx, ring_impl_type="basic",
                                     use_sync=use_sync, attn_type=None, attn_processor=_processor(sage2_options))


class Sage2LongContextAttention(LongContextAttention):
    """yunchang's ``LongContextAttention`` with sage2 as its processor. With a ring of one rank (USP in
    its Ulysses-only configuration) there is nothing to merge, so the call skips yunchang's ring
    function, which would still round-trip the output through fp32 (``update_out_and_lse``):
    all-to-all, one sage2 call, all-to-all. Every other configuration is yunchang's own forward."""

    def forward(self, query, key, value, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False, *args):
        ring = self.ring_pg
        if self.use_pack_qkv or return_attn_probs or (ring is not None and dist.get_world_size(ring) != 1):
            return super().forward(query, key, value, dropout_p, softmax_scale, causal, window_size, softcap,
                                   alibi_slopes, deterministic, return_attn_probs, *args)
        a2a = SeqAllToAll4D.apply
        q, k, v = (a2a(self.ulysses_pg, t, self.scatter_idx, self.gather_idx, self.use_sync)
                   for t in (query, key, value))
        if softmax_scale is None:
            softmax_scale = q.shape[-1] ** -0.5  # as yunchang's ring function sets it
        out, _ = self.attn_processor(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal,
                                     window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
                                     deterministic=deterministic)
        return a2a(self.ulysses_pg, out, self.gather_idx, self.scatter_idx, self.use_sync)


class Sage2UlyssesAttention(UlyssesAttention):
    """yunchang's ``UlyssesAttention`` (all-to-all over ``sequence_process_group``) computing with sage2."""

    def __init__(self, sequence_process_group=None, scatter_idx=2, gather_idx=1, use_sync=False, **sage2_options):
        # TORCH_FLASH only lets the parent's constructor finish without flash-attn; its attention
        # function is replaced at once.
        super().__init__(sequence_process_group, scatter_idx, gather_idx, use_sync, attn_type=AttnType.TORCH_FLASH)
        self.attn_fn = _processor(sage2_options)


def ulysses_attention(sequence_process_group=None, scatter_idx=2, gather_idx=1, use_sync=False, **sage2_options):
    """``Sage2UlyssesAttention`` over ``sequence_process_group`` (None: the default group)."""
    return Sage2UlyssesAttention(sequence_process_group, scatter_idx, gather_idx, use_sync, **sage2_options)


YUNCHANG_VERSION = getattr(yunchang, "__version__", "unknown")
