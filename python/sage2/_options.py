"""sageattn's options (passed through ``**options``) with their defaults. Plain data with no
imports, so what needs the names without torch can have them (sage2.OPTIONS when torch is
missing, the ``sageattention`` drop-in, the tests of docs/integrations.md's keyword table)."""

__all__ = ["OPTIONS"]

OPTIONS = {
    "causal_alignment": "top_left",  # torch SDPA's is_causal; "bottom_right" = FlashAttention's
    "qk_bits": None,                 # None: auto (8), or 4 / 8 (4: not on Blackwell)
    "pv_precision": None,            # None / "auto" (fp16 on Ampere, else fp8), "fp8" or "fp16"
    "pv_accum": None,                # None / "auto" (the arch's), "fp32", "fp16" (inside a tile; not sm_90a)
                                     # or "prefer_fp16" (fp16 where offered, else fp32)
    "smooth_q": None,                # None: auto (on with 4-bit), True, False
    "smooth_k": True,
    "smooth_v": False,
    "small_q_path": "auto",          # "auto", "quantized" or "direct" (dense calls; see sageattn)
}
