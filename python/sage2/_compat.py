"""The reference package's call form (SageAttention, ``sageattention``) and FlashAttention-style
keywords, mapped onto sage2's own arguments — or refused with a message naming the value.

Code written for the reference passes keywords sage2.sageattn does not define (``qk_quant_gran``,
``pv_accum_dtype``, ``quantization_backend``), and wrappers written for FlashAttention pass
``softmax_scale``, ``causal``, ``dropout_p``, ``window_size`` ... . ``translate`` maps every such
keyword (``REFERENCE_KEYWORDS``) or raises: nothing is silently ignored. ``reference_pv_options``
is the ``pv_accum_dtype`` rule of each of the reference's entry points (``reference_pv_precision``:
its P~V precision alone). docs/integrations.md's table
("The reference's call form") states both, row by row; python/tests/test_reference_keywords_table.py
parses it and checks every row against these functions. Each mapping that changes what the
reference would have run is logged at debug level on the ``sage2`` logger, naming the path that runs.
Pure Python over plain values: no torch needed (tests run it with the fake torch).
"""
from ._logging import logger

__all__ = ["REFERENCE_KEYWORDS", "PV_ACCUM_DTYPES", "PV_PATHS", "translate", "reference_pv_precision",
           "reference_pv_options"]

# The keywords of the reference and of FlashAttention that translate() maps or refuses.
REFERENCE_KEYWORDS = ("qk_quant_gran", "pv_accum_dtype", "quantization_backend", "softmax_scale", "causal",
                      "dropout_p", "window_size", "softcap", "alibi_slopes", "deterministic", "return_attn_probs")

# Every value the reference gives pv_accum_dtype (its FP16 kernels: "fp32", "fp16", "fp16+fp32"; its
# FP8 kernels: "fp32", "fp32+fp32", "fp32+fp16"). The first part is the accumulator of the P~V mma,
# the second the buffer it is added to. sage2 has fp16 accumulation inside a KV tile, flushed into
# fp32 between tiles (pv_accum="fp16": the reference's "fp32+fp16" with FP8 P~V, "fp16+fp32" with
# FP16), on every mma.sync arch but sm_90a: the fp16-accumulator values map to pv_accum=
# "prefer_fp16" (that path where the arch offers it, fp32 accumulation elsewhere, which is at least
# as accurate); "fp16" (the reference accumulates all keys in fp16) gets the per-tile flush too.
PV_ACCUM_DTYPES = ("fp32", "fp16", "fp16+fp32", "fp32+fp32", "fp32+fp16")

# sage2's P~V paths (pv_precision) in words, for messages and the debug log.
PV_PATHS = {"fp16": "FP16 P~V with fp32 accumulation",
            "fp8": "FP8 P~V with two-level fp32 accumulation (the reference's 'fp32+fp32')",
            ("fp16", "prefer_fp16"): "FP16 P~V accumulated in fp16 inside a KV tile, flushed into fp32 between "
                                     "tiles (fp32 accumulation on sm_90a)",
            ("fp8", "prefer_fp16"): "FP8 P~V accumulated in fp16 inside a KV tile, flushed into fp32 between tiles "
                                    "(the reference's 'fp32+fp16'; fp32 accumulation on sm_90a)"}
PV_PATHS["auto"] = "the arch's P~V precision (FP8 with two-level fp32 accumulation; FP16 on Ampere)"
PV_PATHS[("auto", "prefer_fp16")] = ("the arch's P~V precision (FP8; FP16 on Ampere) accumulated in fp16 inside a KV "
                                     "tile, flushed into fp32 between tiles (fp32 accumulation on sm_90a)")
PV_PATHS[("auto", "fp32")] = PV_PATHS["auto"]
PV_PATHS[("fp16", "fp32")] = PV_PATHS["fp16"]
PV_PATHS[("fp8", "fp32")] = PV_PATHS["fp8"]

# kind of entry point -> {pv_accum_dtype: sage2 pv_precision, or None: refused}; the accumulation
# is _ACCUM_BY_VALUE's (not for fp16_triton, which ignores the keyword as the reference does).
#   sageattn:    sage2.sageattn / sageattn_varlen (the reference's sageattn takes no such keyword):
#                the value says which of the reference's kernels was meant; an FP8 value gives
#                pv_precision="auto" (FP8 where the arch has it, FP16 P~V on Ampere: more accurate), so
#                every value runs on every arch, as the reference's sageattn does.
#   fp16_cuda:   sageattn_qk_int8_pv_fp16_cuda, FP16 P~V; the FP8 values are refused (as the reference does).
#   fp16_triton: sageattn_qk_int8_pv_fp16_triton, FP16 P~V; the reference ignores the keyword there.
#   fp8:         sageattn_qk_int8_pv_fp8_cuda and _sm90, FP8 P~V; the FP16-accumulator values are refused
#                (the reference has no such kernel either).
_PV_BY_KIND = {
    "sageattn": {"fp32": "fp16", "fp16": "fp16", "fp16+fp32": "fp16", "fp32+fp32": "auto", "fp32+fp16": "auto"},
    "fp16_cuda": {"fp32": "fp16", "fp16": "fp16", "fp16+fp32": "fp16", "fp32+fp32": None, "fp32+fp16": None},
    "fp16_triton": {v: "fp16" for v in PV_ACCUM_DTYPES},
    "fp8": {"fp32": "fp8", "fp16": None, "fp16+fp32": None, "fp32+fp32": "fp8", "fp32+fp16": "fp8"},
}
# pv_accum_dtype -> sage2's pv_accum
_ACCUM_BY_VALUE = {"fp32": "fp32", "fp32+fp32": "fp32", "fp16": "prefer_fp16", "fp16+fp32": "prefer_fp16",
                   "fp32+fp16": "prefer_fp16"}
# What the reference would have run that sage2 replaces by a more accurate path (logged at debug).
_UPGRADES = {"fp16": "fp16 accumulation over all keys (sage2 flushes into fp32 per tile)"}

QK_QUANT_GRANS = ("per_thread", "per_warp")


def _is_zero(x):
    return x is None or (not isinstance(x, bool) and isinstance(x, (int, float)) and x == 0)


def reference_pv_precision(pv_accum_dtype, where, kind="sageattn"):
    """sage2's pv_precision ("fp16" or "fp8") for a reference ``pv_accum_dtype`` given to an entry
    point of ``kind`` (reference_pv_options without the accumulation)."""
    return reference_pv_options(pv_accum_dtype, where, kind)["pv_precision"]


def reference_pv_options(pv_accum_dtype, where, kind="sageattn"):
    """sage2's options {"pv_precision": "fp16" or "fp8", "pv_accum": "fp32" or "prefer_fp16"} for
    a reference ``pv_accum_dtype`` given to an entry point of ``kind`` ("sageattn", "fp16_cuda",
    "fp16_triton", "fp8"; see _PV_BY_KIND; fp16_triton gives no pv_accum: the arch's default).
    Raises ValueError naming the value when that entry point has no such value. Logs the mapping at
    debug level (the path that runs, and why when it is more accurate than the one asked for)."""
    table = _PV_BY_KIND[kind]
    if not isinstance(pv_accum_dtype, str) or pv_accum_dtype not in table:
        raise ValueError("%s: pv_accum_dtype=%r; expected one of the reference's values %s"
                         % (where, pv_accum_dtype, ", ".join(repr(v) for v in PV_ACCUM_DTYPES)))
    pv = table[pv_accum_dtype]
    if pv is None:
        ok = ", ".join(repr(v) for v, p in table.items() if p is not None)
        raise ValueError("%s: pv_accum_dtype=%r is not a value of this entry point (it runs %s; its values: %s)"
                         % (where, pv_accum_dtype, PV_PATHS[next(p for p in table.values() if p)], ok))
    out = {"pv_precision": pv}
    if kind != "fp16_triton":
        out["pv_accum"] = _ACCUM_BY_VALUE[pv_accum_dtype]
    if logger.isEnabledFor(10):  # logging.DEBUG
        why = ""
        if pv_accum_dtype in _UPGRADES:
            why = "; sage2 has no kernel with %s, this path is at least as accurate" % _UPGRADES[pv_accum_dtype]
        logger.debug("%s: pv_accum_dtype=%r -> %s: %s%s", where, pv_accum_dtype,
                     ", ".join("%s=%r" % kv for kv in out.items()), PV_PATHS[(pv, out.get("pv_accum", "fp32"))], why)
    return out


def check_qk_quant_gran(g, where):
    """The reference's qk_quant_gran: both values are accepted (sage2 quantizes Q and K per thread,
    a finer granularity than per warp); anything else raises ValueError naming the value."""
    if g not in QK_QUANT_GRANS:
        raise ValueError("%s: qk_quant_gran=%r; expected 'per_thread' or 'per_warp' (sage2 quantizes Q and K per "
                         "thread in either case)" % (where, g))
    if g == "per_warp" and logger.isEnabledFor(10):
        logger.debug("%s: qk_quant_gran='per_warp' -> per-thread quantization (finer than per warp)", where)


def translate(is_causal, sm_scale, options, known, where="sage2.sageattn"):
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
        check_qk_quant_gran(ref["qk_quant_gran"], where)
    if "pv_accum_dtype" in ref:
        for name, val in reference_pv_options(ref["pv_accum_dtype"], where).items():
            given = out.get(name)
            if val == "auto" and given is not None:
                continue  # an FP8 value leaves the precision to the arch: an explicit one wins
            if given not in (None, "auto") and given != val:
                raise ValueError("%s: pv_accum_dtype=%r means %s=%r, but %s=%r was given"
                                 % (where, ref["pv_accum_dtype"], name, val, name, given))
            out[name] = val
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
