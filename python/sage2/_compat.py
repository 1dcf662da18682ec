"""The reference package's call form (SageAttention, ``sageattention``) and FlashAttention-style
keywords, mapped onto sage2's own arguments — or refused with a message naming the value.

Code written for the reference passes keywords sage2.sageattn does not define (``qk_quant_gran``,
``pv_accum_dtype``, ``quantization_backend``), and wrappers written for FlashAttention pass
``softmax_scale``, ``causal``, ``dropout_p``, ``window_size`` ... . ``translate`` maps every such
keyword (the table ``REFERENCE_KEYWORDS``, shown in the README) or raises: nothing is silently
ignored. Pure Python over plain values: no torch needed (tests run it with the fake torch).
"""

__all__ = ["REFERENCE_KEYWORDS", "translate", "reference_pv_precision"]

# keyword -> what sage2 does with it (the README's table is this text).
REFERENCE_KEYWORDS = {
    "qk_quant_gran": "'per_thread': accepted (sage2 quantizes Q and K per thread, always); 'per_warp': ValueError "
                     "(no per-warp granularity in sage2)",
    "pv_accum_dtype": "'fp32+fp32' -> pv_precision='fp8' (FP8 P~V, two-level fp32 accumulation); 'fp32' -> "
                      "pv_precision='fp16' (FP16 P~V, fp32 accumulation; in the fp8 aliases: 'fp8'); 'fp16', "
                      "'fp16+fp32', 'fp32+fp16': ValueError (sage2 has no fp16 accumulation)",
    "quantization_backend": "'cuda' or 'triton': accepted (which of the reference's quantization kernels ran; "
                            "sage2 always quantizes in its own kernels)",
    "softmax_scale": "-> sm_scale (ValueError when both are given and differ)",
    "causal": "-> is_causal, with causal_alignment='bottom_right' (FlashAttention's mask) unless causal_alignment "
              "is given (ValueError when is_causal says otherwise)",
    "dropout_p": "0 / 0.0: accepted; > 0: ValueError (inference only)",
    "window_size": "(-1, -1) or None: accepted; a window: ValueError (no sliding window)",
    "softcap": "None or 0.0: accepted; > 0: ValueError (no score soft-capping)",
    "alibi_slopes": "None: accepted; a tensor: ValueError (no ALiBi)",
    "deterministic": "accepted (sage2's forward pass is deterministic)",
    "return_attn_probs": "False: accepted; True: ValueError (the probabilities are never formed)",
}

_PV_ACCUM = {"fp32+fp32": "fp8", "fp32": "fp16"}
_PV_ACCUM_FP16 = ("fp16", "fp16+fp32", "fp32+fp16")


def _is_zero(x):
    return x is None or (not isinstance(x, bool) and isinstance(x, (int, float)) and x == 0)


def reference_pv_precision(pv_accum_dtype, where, fp8_function=False):
    """sage2's pv_precision for a reference ``pv_accum_dtype`` (fp8_function: the value was given to
    one of the reference's FP8 entry points, where 'fp32' still means FP8 P~V)."""
    if pv_accum_dtype in _PV_ACCUM:
        if fp8_function:
            return "fp8"
        return _PV_ACCUM[pv_accum_dtype]
    if pv_accum_dtype in _PV_ACCUM_FP16:
        raise ValueError("%s: pv_accum_dtype=%r is not supported: sage2 accumulates P~V in fp32 only (use 'fp32' "
                         "for FP16 P~V or 'fp32+fp32' for FP8 P~V)" % (where, pv_accum_dtype))
    raise ValueError("%s: pv_accum_dtype=%r; expected 'fp32' or 'fp32+fp32' (the reference's values sage2 maps)"
                     % (where, pv_accum_dtype))


def translate(is_causal, sm_scale, options, known, where="sage2.sageattn", fp8_function=False):
    """(is_causal, sm_scale, options) with every reference / FlashAttention keyword of ``options``
    mapped onto sage2's own; ``known``: sage2's option names (kept as they are). Raises TypeError for
    a keyword neither knows and ValueError naming a value sage2 cannot honour."""
    out = {}
    ref = {}
    for key, val in options.items():
        if key in known:
            out[key] = val
        elif key in REFERENCE_KEYWORDS:
            ref[key] = val
        else:
            raise TypeError("%s: unexpected option %r (sage2's options: %s; the reference's / FlashAttention's "
                            "keywords it maps: %s)" % (where, key, ", ".join(sorted(known)),
                                                       ", ".join(sorted(REFERENCE_KEYWORDS))))
    if "qk_quant_gran" in ref:
        g = ref["qk_quant_gran"]
        if g == "per_warp":
            raise ValueError("%s: qk_quant_gran='per_warp' is not supported: sage2 quantizes Q and K per thread "
                             "(pass 'per_thread' or leave it out)" % where)
        if g != "per_thread":
            raise ValueError("%s: qk_quant_gran=%r; expected 'per_thread' (or the reference's 'per_warp', which "
                             "sage2 does not have)" % (where, g))
    if "pv_accum_dtype" in ref:
        pv = reference_pv_precision(ref["pv_accum_dtype"], where, fp8_function)
        given = out.get("pv_precision")
        if given not in (None, "auto") and given != pv:
            raise ValueError("%s: pv_accum_dtype=%r means pv_precision=%r, but pv_precision=%r was given"
                             % (where, ref["pv_accum_dtype"], pv, given))
        out["pv_precision"] = pv
    if "quantization_backend" in ref and ref["quantization_backend"] not in ("cuda", "triton"):
        raise ValueError("%s: quantization_backend=%r; expected 'cuda' or 'triton'" % (where,
                                                                                       ref["quantization_backend"]))
    if "softmax_scale" in ref:
        s = ref["softmax_scale"]
        if sm_scale is not None and s is not None and s != sm_scale:
            raise ValueError("%s: softmax_scale=%r and sm_scale=%r disagree; give one" % (where, s, sm_scale))
        if s is not None:
            sm_scale = s
    if "causal" in ref:
        c = ref["causal"]
        if not isinstance(c, (bool, int)) or isinstance(c, int) and c not in (0, 1):
            raise TypeError("%s: causal must be a bool, got %r" % (where, c))
        if is_causal and not c:
            raise ValueError("%s: causal=%r and is_causal=%r disagree; give one" % (where, c, is_causal))
        if c:
            is_causal = True
            out.setdefault("causal_alignment", "bottom_right")  # FlashAttention's causal mask
    if "dropout_p" in ref and not _is_zero(ref["dropout_p"]):
        raise ValueError("%s: dropout_p=%r is not supported: sage2 is inference only (dropout_p must be 0)"
                         % (where, ref["dropout_p"]))
    if "window_size" in ref:
        w = ref["window_size"]
        if w is not None and tuple(w) != (-1, -1):
            raise ValueError("%s: window_size=%r is not supported: sage2 has no sliding-window attention "
                             "((-1, -1) or None)" % (where, w))
    if "softcap" in ref and not _is_zero(ref["softcap"]):
        raise ValueError("%s: softcap=%r is not supported: sage2 does not soft-cap scores (None or 0.0)"
                         % (where, ref["softcap"]))
    if "alibi_slopes" in ref and ref["alibi_slopes"] is not None:
        raise ValueError("%s: alibi_slopes is not supported: sage2 has no ALiBi bias (pass None, or an "
                         "additive attn_mask)" % where)
    if ref.get("return_attn_probs"):
        raise ValueError("%s: return_attn_probs=%r is not supported: sage2 never forms the attention "
                         "probabilities (return_lse=True gives the log-sum-exp)" % (where, ref["return_attn_probs"]))
    return is_causal, sm_scale, out
