"""The `sageattention` drop-in (python/sageattention_shim) under its real clients, on the GPU machine
(issue 32, Targets, first bullet). scripts/gpu_dropin_clients.sh installs the drop-in the way a user
does (pip, as the distribution `sageattention`) and runs the parts:

    python bench/dropin_clients.py env       --out DIR               versions -> DIR/env.json
    python bench/dropin_clients.py diffusers --out DIR               -> DIR/diffusers.json
    python bench/dropin_clients.py comfy     --out DIR --comfy .comfy -> DIR/comfy.json
    torchrun --nproc_per_node 2 bench/dropin_clients_usp.py --out DIR  (yunchang) -> DIR/yunchang.json
    python bench/dropin_clients.py summary   --out DIR               -> DIR/summary.txt (exit 1 if a target fails)

diffusers: its own availability / version check of `sageattention` (diffusers.utils
is_sageattention_available / is_sageattention_version, attention_dispatch._CAN_USE_SAGE_ATTN), the
functions attention_dispatch bound at import being the drop-in's, then dispatch_attention_fn with
backend "sage" and "sage_varlen" (and the four "_sage_qk_*" backends, reported as extras) against
"native" on DiT attention shapes, and whole DiT transformers with random weights (Wan 2.x, Flux)
switched with set_attention_backend. Bars: sage2's own diffusers-backend bars
(python/tests/test_gpu_integrations.py): cos >= 0.999 for one attention call (COS_LAYER), >= 0.99 for
a whole model's output (COS_MODEL), against "native".

comfy: ComfyUI's real comfy/ldm/modules/attention.py (every copy under --comfy, git-ignored) imported
with the stubs in bench/comfy_stubs, its attention_sage called on ComfyUI's call shapes (SD1.5 / SDXL
UNet self- and cross-attention, Flux and Wan DiT attention), fp16 and bf16; a fallback (attention_sage
catching an exception and running attention_pytorch) is counted from ComfyUI's own error log line and
from the stub comfy.ops.scaled_dot_product_attention; target 0. Accuracy: cos against fp32 SDPA.

Every sage part counts the calls that reach sage2 (sage2's entry points wrapped: the drop-in looks
them up at each call) and the calls of torch's scaled_dot_product_attention made meanwhile (0 when
the sage path ran), and keeps the distinct debug lines of the "sage2" logger (which path ran).

--fake-sage2 (any part): sage2's entry points replaced by an fp32 PyTorch attention, so that the
harness runs end to end on a CPU machine; the results say so and prove nothing about sage2.
"""
import argparse
import collections
import contextlib
import glob
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import platform
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PYTHON_DIR = os.path.join(REPO, "python")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

COS_LAYER = 0.999  # one attention call vs diffusers "native" (test_gpu_integrations.py COS_LAYER)
COS_MODEL = 0.99   # a whole model's output vs "native" (test_gpu_integrations.py COS_MODEL)
COS_USP = 0.9999   # yunchang on 2 GPUs vs full attention (issue 32's target)
COS_COMFY = COS_LAYER  # ComfyUI's attention_sage (one attention call) vs fp32 SDPA

ENTRY_POINTS = ("sageattn", "sageattn_varlen", "sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton",
                "sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90")


# ---- small helpers ------------------------------------------------------------------------------
def cosine(a, b):
    import torch
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))


def rel_l1(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().sum() / b.abs().sum().clamp_min(1e-300))


def max_abs(a, b):
    return float((a.detach().double() - b.detach().double()).abs().max())


def dist_version(name):
    try:
        return importlib.metadata.version(name)
    except Exception:  # noqa: BLE001
        return None


class Log:
    """print() to stdout and to a log file."""

    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8") if path else None

    def __call__(self, *a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=False, default=str)
        f.write("\n")
    os.replace(tmp, path)


# ---- counting what reaches sage2 ---------------------------------------------------------------
class DebugLines(logging.Handler):
    """The distinct messages of the "sage2" logger at debug level (which path ran, mappings)."""

    def __init__(self, limit=200):
        super().__init__(logging.DEBUG)
        self.lines = collections.OrderedDict()
        self.limit = limit

    def emit(self, record):
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            msg = str(record.msg)
        if msg in self.lines:
            self.lines[msg] += 1
        elif len(self.lines) < self.limit:
            self.lines[msg] = 1


class Warnings:
    """The distinct Python warnings raised while the clients run (e.g. the drop-in dropping a keyword
    a client passes), still shown as usual."""

    def __init__(self):
        import warnings
        self.seen = collections.OrderedDict()
        self._show = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            key = "%s: %s (%s:%s)" % (category.__name__, message, os.path.basename(filename), lineno)
            self.seen[key] = self.seen.get(key, 0) + 1
            return self._show(message, category, filename, lineno, file, line)
        warnings.showwarning = show


class Calls:
    """Counts the calls of sage2's entry points (the drop-in calls them through the module, so the
    wrappers see every call) and of torch's scaled_dot_product_attention; ``window()`` gives the
    counts of a stretch of code. ``sdpa`` is the unwrapped SDPA for the harness's own references."""

    def __init__(self):
        self.counts = collections.Counter()
        self.sdpa = None
        self.debug = DebugLines()
        self.warnings = Warnings()

    def install(self, sage2, torch_module):
        for name in ENTRY_POINTS:
            orig = getattr(sage2, name)
            if getattr(orig, "_dropin_counted", False):
                continue
            setattr(sage2, name, self._wrap("sage2." + name, orig))
        F = torch_module.nn.functional
        self.sdpa = getattr(F.scaled_dot_product_attention, "_dropin_orig", F.scaled_dot_product_attention)
        if not getattr(F.scaled_dot_product_attention, "_dropin_counted", False):
            F.scaled_dot_product_attention = self._wrap("torch.sdpa", F.scaled_dot_product_attention)
        lg = logging.getLogger("sage2")
        lg.addHandler(self.debug)
        lg.setLevel(logging.DEBUG)

    def _wrap(self, key, fn):
        counts = self.counts

        def wrapper(*a, **kw):
            counts[key] += 1
            return fn(*a, **kw)
        wrapper._dropin_counted = True
        wrapper._dropin_orig = fn
        wrapper.__name__ = getattr(fn, "__name__", key)
        wrapper.__doc__ = getattr(fn, "__doc__", None)
        return wrapper

    @contextlib.contextmanager
    def window(self):
        before = collections.Counter(self.counts)
        got = {}
        try:
            yield got
        finally:
            got.update({k: v - before.get(k, 0) for k, v in self.counts.items() if v - before.get(k, 0)})


# ---- the fake sage2 of --fake-sage2 (CPU runs of the harness only) ---------------------------------
def install_fake_sage2(sage2):
    """Replace sage2's entry points by an fp32 PyTorch attention with their call forms (layouts,
    causal incl. FlashAttention's keywords, scale, attn_mask, return_lse, varlen). For running this
    harness where there is no GPU: a run with it says FAKE everywhere and proves nothing."""
    import torch

    def _attend(q, k, v, causal, scale, mask):  # HND, fp32
        if k.shape[1] != q.shape[1]:
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        if causal:
            nq, nk = s.shape[-2], s.shape[-1]
            keep = torch.ones(nq, nk, dtype=torch.bool, device=s.device).tril(nk - nq)
            s = s.masked_fill(~keep, float("-inf"))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.float()
        lse = torch.logsumexp(s, dim=-1)
        return torch.matmul(torch.softmax(s, dim=-1), v), lse

    def sageattn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, **kw):
        is_causal = bool(is_causal or kw.get("causal"))
        if sm_scale is None:
            sm_scale = kw.get("softmax_scale")
        if sm_scale is None:
            sm_scale = q.shape[-1] ** -0.5
        nhd = tensor_layout == "NHD"
        qh, kh, vh = ((t.transpose(1, 2) if nhd else t).float() for t in (q, k, v))
        o, lse = _attend(qh, kh, vh, is_causal, sm_scale, kw.get("attn_mask"))
        o = (o.transpose(1, 2) if nhd else o).to(q.dtype)
        return (o, lse) if return_lse else o

    def sageattn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, is_causal=False,
                        sm_scale=None, smooth_k=True, **kw):
        outs = []
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        for i in range(len(cq) - 1):
            qs, ks, vs = q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None], v[ck[i]:ck[i + 1]][None]
            outs.append(sageattn(qs, ks, vs, "NHD", is_causal, sm_scale)[0])
        return torch.cat(outs, 0)

    def ref_api(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, **kw):
        return sageattn(q, k, v, tensor_layout, is_causal, sm_scale, return_lse, **kw)

    sage2.sageattn = sageattn
    sage2.sageattn_varlen = sageattn_varlen
    for name in ENTRY_POINTS[2:]:
        setattr(sage2, name, ref_api)
    sage2._DROPIN_FAKE = True


# ---- environment ---------------------------------------------------------------------------------
def import_dropin():
    """The installed drop-in, checked to be sage2's (not the reference package)."""
    import sageattention
    return dict(module_file=sageattention.__file__, version=getattr(sageattention, "__version__", None),
                distribution_version=dist_version("sageattention"),
                is_sage2_dropin=bool(getattr(sageattention, "SAGE2_SHIM", False)),
                other_installations=sageattention.other_installations()
                if hasattr(sageattention, "other_installations") else None)


def part_env(args, log):
    info = dict(python=sys.version.split()[0], platform=platform.platform(), cwd=os.getcwd(),
                argv=sys.argv, time_utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    try:
        import torch
        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=torch.cuda.is_available(),
                    gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                    capability=[list(torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())])
        if torch.cuda.is_available():
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as e:  # noqa: BLE001
        info["torch_error"] = repr(e)
    for mod in ("triton", "diffusers", "yunchang", "einops", "numpy", "huggingface_hub", "PIL", "flit_core"):
        try:
            m = importlib.import_module(mod)
            info[mod] = getattr(m, "__version__", "?")
        except Exception as e:  # noqa: BLE001
            info[mod] = "missing (%s)" % e.__class__.__name__
    import sage2
    info["sage2"] = dict(version=sage2.__version__, file=sage2.__file__)
    for key, fn in (("library", "library_path"), ("build_commit", "build_commit"),
                    ("library_version", "library_version")):
        try:
            info["sage2"][key] = getattr(sage2, fn)()
        except Exception as e:  # noqa: BLE001
            info["sage2"][key] = "error: %s" % e
    try:
        info["repo_commit"] = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                                             text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        info["repo_commit"] = None
    try:
        info["dropin"] = import_dropin()
    except Exception as e:  # noqa: BLE001
        info["dropin"] = dict(error="%s: %s" % (e.__class__.__name__, e))
    info["env"] = {k: os.environ.get(k) for k in ("SAGE2_LIBRARY", "SAGE2_CACHE_DIR", "PYTHONPATH", "NCCL_NVLS_ENABLE",
                                                   "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                                                   "DIFFUSERS_ATTN_CHECKS")}
    info["fake_sage2"] = bool(args.fake_sage2)
    for k, v in info.items():
        log("%-14s %s" % (k, json.dumps(v, default=str)))
    write_json(os.path.join(args.out, "env.json"), info)
    return 0 if isinstance(info.get("dropin"), dict) and info["dropin"].get("is_sage2_dropin") else 1


def setup_part(args):
    """torch, sage2 (counted; faked with --fake-sage2), the device."""
    import torch
    import sage2
    if args.fake_sage2:
        install_fake_sage2(sage2)
    calls = Calls()
    calls.install(sage2, torch)
    if not args.fake_sage2:
        try:
            sage2.set_log_level("debug")  # the library's notices (plans, compiles) -> the "sage2" logger
        except Exception as e:  # noqa: BLE001
            print("note: sage2.set_log_level('debug'): %s" % e, flush=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and not args.fake_sage2:
        print("note: no CUDA device: every sage2 call will fail (use --fake-sage2 to exercise the harness)",
              flush=True)
    return torch, sage2, calls, dev


def make_qkv(torch, shape_q, shape_kv, dtype, device, seed, layout="NHD"):
    """q, k, v with per-channel biases (what smoothing is for), as in sage2's own GPU tests; shapes in
    ``layout`` ([B, N, H, D] for NHD, [B, H, N, D] for HND)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    hd = -2 if layout == "NHD" else 1  # the head axis

    def t(shape, scale, bias):
        x = torch.randn(*shape, generator=g) * scale
        bshape = [1] * len(shape)
        bshape[hd], bshape[-1] = shape[hd], shape[-1]
        return (x + bias * torch.randn(*bshape, generator=g)).to(device=device, dtype=dtype)

    return t(shape_q, 1.0, 0.5), t(shape_kv, 1.0, 1.0), t(shape_kv, 1.0, 0.5)


def ref_attention(calls, torch, q, k, v, layout="NHD", causal=False, key_lens=None):
    """fp32 SDPA (the harness's own reference; not counted)."""
    if layout == "NHD":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = (t.float() for t in (q, k, v))
    mask = None
    if key_lens is not None:
        nk = k.shape[2]
        mask = (torch.arange(nk, device=q.device)[None, :] < torch.tensor(key_lens, device=q.device)[:, None])
        mask = mask[:, None, None, :]
    o = calls.sdpa(q, k, v, attn_mask=mask, is_causal=causal)
    return o.transpose(1, 2) if layout == "NHD" else o


def run_case(log, rec_list, name, fn, check):
    """Runs fn() -> dict, check(dict) -> (pass, why); an exception is a failed case with its text."""
    t0 = time.time()
    try:
        r = fn()
        ok, why = check(r)
        r.update(name=name, passed=bool(ok), why=why, seconds=round(time.time() - t0, 3))
    except Exception as e:  # noqa: BLE001
        r = dict(name=name, passed=False, why="exception", seconds=round(time.time() - t0, 3),
                 error="%s: %s" % (e.__class__.__name__, e), traceback=traceback.format_exc(limit=8))
    rec_list.append(r)
    brief = {k: r[k] for k in ("cos_vs_native", "cos_vs_fp32", "rel_l1_vs_native", "calls", "why") if k in r}
    log("  %-4s %-48s %s" % ("ok" if r["passed"] else "FAIL", name, json.dumps(brief, default=str)))
    if not r["passed"] and "error" in r:
        log("       " + r["error"])
    return r


# ---- diffusers ------------------------------------------------------------------------------------
DISPATCH_CASES = [
    # name, B, Nq, Nk, H, D, dtype, causal, key_lens
    ("flux_joint_4608_h24_d128", 1, 4608, 4608, 24, 128, "bfloat16", False, None),   # Flux 1024^2: 4096 + 512 text
    ("sd3_joint_4429_h24_d64", 2, 4429, 4429, 24, 64, "float16", False, None),       # SD3 1024^2: 4096 + 333 text
    ("wan_self_6240_h12_d128", 1, 6240, 6240, 12, 128, "bfloat16", False, None),     # Wan 2.x small video
    ("wan_cross_6240x512_h12_d128", 1, 6240, 512, 12, 128, "bfloat16", False, None),  # its text cross-attention
    ("causal_2048_h8_d64", 2, 2048, 2048, 8, 64, "float16", True, None),
    ("masked_keys_1024x512_h8_d64", 2, 1024, 512, 8, 64, "float16", False, (512, 300)),  # sage_varlen's key mask
]
TARGET_BACKENDS = ("sage", "sage_varlen")
EXTRA_BACKENDS = ("_sage_qk_int8_pv_fp8_cuda", "_sage_qk_int8_pv_fp8_cuda_sm90", "_sage_qk_int8_pv_fp16_cuda",
                  "_sage_qk_int8_pv_fp16_triton")
EXPECTED_ENTRY = {"sage": "sage2.sageattn", "sage_varlen": "sage2.sageattn_varlen",
                  "_sage_qk_int8_pv_fp8_cuda": "sage2.sageattn_qk_int8_pv_fp8_cuda",
                  "_sage_qk_int8_pv_fp8_cuda_sm90": "sage2.sageattn_qk_int8_pv_fp8_cuda_sm90",
                  "_sage_qk_int8_pv_fp16_cuda": "sage2.sageattn_qk_int8_pv_fp16_cuda",
                  "_sage_qk_int8_pv_fp16_triton": "sage2.sageattn_qk_int8_pv_fp16_triton"}


def _sage_calls(got):
    return {k: v for k, v in got.items() if k.startswith("sage2.")}


def part_diffusers(args, log):
    torch, sage2, calls, dev = setup_part(args)
    rec = dict(part="diffusers", fake_sage2=bool(args.fake_sage2), device=dev, bars=dict(cos_layer=COS_LAYER,
                                                                                        cos_model=COS_MODEL),
               checks={}, dispatch=[], models=[], errors=[])
    out_path = os.path.join(args.out, "diffusers.json")
    try:
        import diffusers
        import diffusers.models.attention_dispatch as AD
        from diffusers.utils import import_utils as IU
        from diffusers.utils import is_sageattention_available, is_sageattention_version
        import sageattention
        rec["versions"] = dict(diffusers=diffusers.__version__, torch=torch.__version__, sage2=sage2.__version__,
                               sageattention=getattr(sageattention, "__version__", None),
                               sageattention_dist=dist_version("sageattention"))
        ck = rec["checks"]
        ck["is_sageattention_available"] = bool(is_sageattention_available())
        ck["version_diffusers_read"] = getattr(IU, "_sageattention_version", None)
        ck["required_version"] = getattr(AD, "_REQUIRED_SAGE_VERSION", None)
        ck["is_sageattention_version_ge_required"] = bool(is_sageattention_version(">=", ck["required_version"]))
        ck["_CAN_USE_SAGE_ATTN"] = bool(AD._CAN_USE_SAGE_ATTN)
        ck["dropin_is_sage2"] = bool(getattr(sageattention, "SAGE2_SHIM", False))
        ck["dropin_file"] = sageattention.__file__
        ck["dispatch_bound_dropin_functions"] = all(
            getattr(AD, n, None) is getattr(sageattention, n) for n in sageattention.__all__)
        req = {}
        for b in TARGET_BACKENDS + EXTRA_BACKENDS:
            try:
                AD._check_attention_backend_requirements(AD.AttentionBackendName(b))
                req[b] = "ok"
            except Exception as e:  # noqa: BLE001
                req[b] = "%s: %s" % (e.__class__.__name__, e)
        ck["backend_requirements"] = req
        ck["passed"] = (ck["is_sageattention_available"] and ck["is_sageattention_version_ge_required"]
                        and ck["_CAN_USE_SAGE_ATTN"] and ck["dropin_is_sage2"] and ck["dispatch_bound_dropin_functions"]
                        and all(req[b] == "ok" for b in TARGET_BACKENDS))
        log("diffusers %s sees sageattention %s (required >= %s): available %s, _CAN_USE_SAGE_ATTN %s, bound to the "
            "drop-in %s, backend requirements %s" % (diffusers.__version__, ck["version_diffusers_read"],
                                                     ck["required_version"], ck["is_sageattention_available"],
                                                     ck["_CAN_USE_SAGE_ATTN"], ck["dispatch_bound_dropin_functions"],
                                                     req))
        write_json(out_path, rec)

        # ---- dispatch_attention_fn, one attention call per (case, backend)
        log("dispatch_attention_fn vs backend 'native' (bar cos >= %g):" % COS_LAYER)
        for i, (name, B, Nq, Nk, H, D, dt, causal, key_lens) in enumerate(DISPATCH_CASES):
            dtype = getattr(torch, dt)
            if dev == "cpu":  # keep CPU runs (harness checks) short
                Nq, Nk = min(Nq, 512), min(Nk, 256 if key_lens else 512)
                key_lens = (Nk, Nk // 2) if key_lens else None
                dtype = torch.float32 if dtype == torch.float16 else dtype
            q, k, v = make_qkv(torch, (B, Nq, H, D), (B, Nk, H, D), dtype, dev, 100 + i)
            mask = None
            if key_lens is not None:
                mask = torch.arange(Nk, device=dev)[None, :] < torch.tensor(key_lens, device=dev)[:, None]
            with torch.no_grad():
                native = AD.dispatch_attention_fn(q, k, v, attn_mask=mask, is_causal=causal, backend="native")
                ref = ref_attention(calls, torch, q, k, v, causal=causal, key_lens=key_lens)
            shape = dict(B=B, Nq=Nq, Nk=Nk, H=H, D=D, dtype=str(dtype).replace("torch.", ""), causal=causal,
                         key_lens=key_lens, layout="NHD")
            for backend in TARGET_BACKENDS + EXTRA_BACKENDS:
                if mask is not None and backend != "sage_varlen":
                    continue  # diffusers' other sage backends refuse attn_mask (as with the reference package)

                def fn(backend=backend):
                    with torch.no_grad(), calls.window() as got:
                        out = AD.dispatch_attention_fn(q, k, v, attn_mask=mask, is_causal=causal, backend=backend)
                    return dict(backend=backend, target=backend in TARGET_BACKENDS, shape=shape,
                                cos_vs_native=cosine(out, native), rel_l1_vs_native=rel_l1(out, native),
                                max_abs_vs_native=max_abs(out, native), cos_vs_fp32=cosine(out, ref),
                                rel_l1_vs_fp32=rel_l1(out, ref), native_cos_vs_fp32=cosine(native, ref),
                                finite=bool(torch.isfinite(out).all()), out_shape=list(out.shape),
                                calls=_sage_calls(got), sdpa_calls=got.get("torch.sdpa", 0))

                def check(r, backend=backend):
                    want = EXPECTED_ENTRY[backend]
                    if r["calls"].get(want, 0) != 1:
                        return False, "%s called %d times, not once" % (want, r["calls"].get(want, 0))
                    if r["sdpa_calls"]:
                        return False, "torch SDPA ran %d times" % r["sdpa_calls"]
                    if not r["finite"] or r["out_shape"] != list(native.shape):
                        return False, "output not finite or of another shape"
                    if r["cos_vs_native"] < COS_LAYER:
                        return False, "cos %.6f < %g" % (r["cos_vs_native"], COS_LAYER)
                    return True, ""
                run_case(log, rec["dispatch"], "%s/%s" % (name, backend), fn, check)
            write_json(out_path, rec)

        # ---- return_lse through the "sage" backend (diffusers' context-parallel merge reads it)
        def fn_lse():
            B, N, H, D = 2, 2048, 8, 128
            q, k, v = make_qkv(torch, (B, N, H, D), (B, N, H, D), torch.bfloat16, dev, 7)
            with torch.no_grad(), calls.window() as got:
                out, lse = AD.dispatch_attention_fn(q, k, v, backend="sage", attention_kwargs={"return_lse": True})
            qh, kh = q.transpose(1, 2).float(), k.transpose(1, 2).float()
            ref_lse = torch.logsumexp(torch.matmul(qh, kh.transpose(-1, -2)) * D ** -0.5, dim=-1)
            return dict(backend="sage", target=True, shape=dict(B=B, N=N, H=H, D=D, dtype="bfloat16"),
                        lse_shape=list(lse.shape), lse_dtype=str(lse.dtype),
                        lse_max_abs_vs_fp32=max_abs(lse, ref_lse), finite=bool(torch.isfinite(lse).all()),
                        calls=_sage_calls(got), sdpa_calls=got.get("torch.sdpa", 0))

        def check_lse(r):
            ok = (r["lse_shape"] == [2, 8, 2048] and r["finite"] and r["lse_max_abs_vs_fp32"] <= 0.25
                  and r["calls"].get("sage2.sageattn", 0) == 1 and not r["sdpa_calls"])
            return ok, "" if ok else "lse shape %s, max |lse - fp32| %.4f" % (r["lse_shape"], r["lse_max_abs_vs_fp32"])
        run_case(log, rec["dispatch"], "return_lse_2048_h8_d128/sage", fn_lse, check_lse)
        write_json(out_path, rec)

        # ---- whole DiT transformers with random weights, set_attention_backend
        log("DiT transformers (random weights) with set_attention_backend vs 'native' (bar cos >= %g):" % COS_MODEL)
        for mname, build in (("wan", _wan_model), ("flux", _flux_model)):
            try:
                model, inputs, n_attn = build(torch, diffusers, dev, small=dev == "cpu")
            except Exception as e:  # noqa: BLE001
                rec["models"].append(dict(name=mname, passed=False, why="model build failed",
                                          error="%s: %s" % (e.__class__.__name__, e),
                                          traceback=traceback.format_exc(limit=8)))
                log("  FAIL %s: build failed: %s" % (mname, e))
                continue
            with torch.no_grad():
                model.set_attention_backend("native")
                want = model(**inputs, return_dict=False)[0]
            for backend in TARGET_BACKENDS:
                def fn(backend=backend, model=model, inputs=inputs, want=want, mname=mname, n_attn=n_attn):
                    model.set_attention_backend(backend)
                    with torch.no_grad(), calls.window() as got:
                        got_out = model(**inputs, return_dict=False)[0]
                    model.set_attention_backend("native")
                    return dict(model=mname, backend=backend, target=True, attention_layers_per_forward=n_attn,
                                out_shape=list(got_out.shape), cos_vs_native=cosine(got_out, want),
                                rel_l1_vs_native=rel_l1(got_out, want), max_abs_vs_native=max_abs(got_out, want),
                                finite=bool(torch.isfinite(got_out).all()), calls=_sage_calls(got),
                                sdpa_calls=got.get("torch.sdpa", 0))

                def check(r, backend=backend):
                    want_entry = EXPECTED_ENTRY[backend]
                    if r["calls"].get(want_entry, 0) != r["attention_layers_per_forward"]:
                        return False, "%s called %d times, %d attention calls per forward" % (
                            want_entry, r["calls"].get(want_entry, 0), r["attention_layers_per_forward"])
                    if r["sdpa_calls"]:
                        return False, "torch SDPA ran %d times" % r["sdpa_calls"]
                    if not r["finite"]:
                        return False, "output not finite"
                    if r["cos_vs_native"] < COS_MODEL:
                        return False, "cos %.6f < %g" % (r["cos_vs_native"], COS_MODEL)
                    return True, ""
                run_case(log, rec["models"], "%s/%s" % (mname, backend), fn, check)
            del model
            write_json(out_path, rec)
    except Exception as e:  # noqa: BLE001
        rec["errors"].append("%s: %s\n%s" % (e.__class__.__name__, e, traceback.format_exc(limit=10)))
        log("ERROR %s: %s" % (e.__class__.__name__, e))
    rec["sage2_debug_lines"] = dict(calls.debug.lines)
    rec["python_warnings"] = dict(calls.warnings.seen)
    rec["passed"] = bool(rec["checks"].get("passed") and not rec["errors"]
                         and all(c["passed"] for c in rec["dispatch"] + rec["models"] if c.get("target", True))
                         and rec["dispatch"] and rec["models"])
    rec["extras_passed"] = all(c["passed"] for c in rec["dispatch"] if not c.get("target", True))
    write_json(out_path, rec)
    log("diffusers: %s (targets), extras %s" % ("PASS" if rec["passed"] else "FAIL",
                                               "pass" if rec["extras_passed"] else "FAIL"))
    return 0 if rec["passed"] else 1


def _wan_model(torch, diffusers, dev, small=False):
    """Wan 2.x DiT (diffusers.WanTransformer3DModel), 2 blocks, 12 heads x 128, random weights; 6
    latent frames of 26 x 40 patches (6240 video tokens) and 77 text tokens: 4 attention calls."""
    torch.manual_seed(0)
    model = diffusers.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=12 if not small else 2,
                                            attention_head_dim=128, in_channels=16, out_channels=16, text_dim=256,
                                            freq_dim=64, ffn_dim=2048 if not small else 256, num_layers=2,
                                            cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                            rope_max_seq_len=1024)
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    model = model.to(dev, dtype).eval()
    g = torch.Generator(device="cpu").manual_seed(1)
    f, h, w = (6, 52, 80) if not small else (2, 8, 8)
    x = torch.randn(1, 16, f, h, w, generator=g).to(dev, dtype)
    enc = torch.randn(1, 77, 256, generator=g).to(dev, dtype)
    t = torch.tensor([700], device=dev)
    return model, dict(hidden_states=x, timestep=t, encoder_hidden_states=enc), 4


def _flux_model(torch, diffusers, dev, small=False):
    """Flux DiT (diffusers.FluxTransformer2DModel), 1 double-stream + 2 single-stream blocks, 24 heads x
    128 (8 x 128 small), random weights; a 1024^2 image (4096 packed latents) and 512 T5 tokens: 3
    joint attention calls of 4608 tokens."""
    torch.manual_seed(0)
    heads = 24 if not small else 2
    model = diffusers.FluxTransformer2DModel(patch_size=1, in_channels=64, num_layers=1, num_single_layers=2,
                                             attention_head_dim=128, num_attention_heads=heads,
                                             joint_attention_dim=256, pooled_projection_dim=128,
                                             guidance_embeds=False, axes_dims_rope=(16, 56, 56))
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    model = model.to(dev, dtype).eval()
    g = torch.Generator(device="cpu").manual_seed(2)
    side, ntxt = (64, 512) if not small else (8, 16)
    x = torch.randn(1, side * side, 64, generator=g).to(dev, dtype)
    enc = torch.randn(1, ntxt, 256, generator=g).to(dev, dtype)
    pooled = torch.randn(1, 128, generator=g).to(dev, dtype)
    img_ids = torch.zeros(side, side, 3)
    img_ids[..., 1] = torch.arange(side)[:, None]
    img_ids[..., 2] = torch.arange(side)[None, :]
    img_ids = img_ids.reshape(-1, 3).to(dev)
    txt_ids = torch.zeros(ntxt, 3, device=dev)
    t = torch.tensor([0.7], device=dev, dtype=dtype)
    return model, dict(hidden_states=x, encoder_hidden_states=enc, pooled_projections=pooled, timestep=t,
                       img_ids=img_ids, txt_ids=txt_ids), 3


# ---- ComfyUI --------------------------------------------------------------------------------------
STUBS = os.path.join(HERE, "comfy_stubs")

# ComfyUI's call shapes: (name, dtype list, B, Nq, Nk, heads, dim_head, skip_reshape, mask)
#   UNet (comfy/ldm/modules/attention.py CrossAttention): q/k/v [B, N, heads*dim_head] (skip_reshape False)
#   SD1.5 512^2 (latent 64^2): 8 heads, 320/640/1280 channels -> dim_head 40/80/160; text 77 x 768
#   SDXL 1024^2 (latent 128^2): dim_head 64, 640/1280 channels -> 10/20 heads; text 77 x 2048
#   Flux (comfy/ldm/flux/math.py): [B, 24, 4096 + 512, 128] HND, skip_reshape=True
#   Wan 2.1 (comfy/ldm/wan/model.py): [B, N, heads*128] flattened, 12 heads (1.3B) / 40 heads (14B); text 512
COMFY_SHAPES = [
    ("sd15_self_64x64_h8_d40", 2, 4096, 4096, 8, 40, False),
    ("sd15_cross_64x64_h8_d40", 2, 4096, 77, 8, 40, False),
    ("sd15_self_32x32_h8_d80", 2, 1024, 1024, 8, 80, False),
    ("sd15_cross_32x32_h8_d80", 2, 1024, 77, 8, 80, False),
    ("sd15_self_16x16_h8_d160", 2, 256, 256, 8, 160, False),
    ("sd15_cross_16x16_h8_d160", 2, 256, 77, 8, 160, False),
    ("sd15_self_8x8_h8_d160", 2, 64, 64, 8, 160, False),
    ("sd15_cross_8x8_h8_d160", 2, 64, 77, 8, 160, False),
    ("sdxl_self_64x64_h10_d64", 2, 4096, 4096, 10, 64, False),
    ("sdxl_cross_64x64_h10_d64", 2, 4096, 77, 10, 64, False),
    ("sdxl_self_32x32_h20_d64", 2, 1024, 1024, 20, 64, False),
    ("sdxl_cross_32x32_h20_d64", 2, 1024, 77, 20, 64, False),
    ("flux_joint_4608_h24_d128_HND", 1, 4608, 4608, 24, 128, True),
    ("wan13b_self_480p33f_14040_h12_d128", 1, 14040, 14040, 12, 128, False),
    ("wan13b_cross_14040x512_h12_d128", 1, 14040, 512, 12, 128, False),
    ("wan14b_self_480p17f_7800_h40_d128", 1, 7800, 7800, 40, 128, False),
    ("wan14b_cross_7800x512_h40_d128", 1, 7800, 512, 40, 128, False),
]
COMFY_DTYPES = ("float16", "bfloat16")


class ErrorLines(logging.Handler):
    """ComfyUI's own log lines of a fallback ("Error running sage attention: ...")."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def comfy_copies(root):
    """Every comfy/ldm/modules/attention.py under root, labelled by its folder under root."""
    found = sorted(glob.glob(os.path.join(root, "**", "comfy", "ldm", "modules", "attention.py"), recursive=True))
    out = []
    for path in found:
        rel = os.path.relpath(path, root)
        label = rel.split(os.sep)[0] if not rel.startswith("comfy" + os.sep) else "root"
        out.append((label, path))
    return out


def load_comfy_attention(path, label):
    """ComfyUI's attention.py at path, imported as a module of the stub package comfy.ldm.modules
    (its relative and comfy.* imports resolve to bench/comfy_stubs)."""
    if STUBS not in sys.path:
        sys.path.insert(0, STUBS)
    for pkg in ("comfy", "comfy.ldm", "comfy.ldm.modules"):
        importlib.import_module(pkg)
    name = "comfy.ldm.modules.attention_%s" % "".join(c if c.isalnum() else "_" for c in label)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def part_comfy(args, log):
    torch, sage2, calls, dev = setup_part(args)
    rec = dict(part="comfy", fake_sage2=bool(args.fake_sage2), device=dev, bar_cos=COS_COMFY, copies=[], errors=[])
    out_path = os.path.join(args.out, "comfy.json")
    errlines = ErrorLines()
    logging.getLogger().addHandler(errlines)
    copies = comfy_copies(args.comfy)
    if not copies:
        rec["errors"].append("no comfy/ldm/modules/attention.py under %s" % args.comfy)
    try:
        import sageattention
        rec["versions"] = dict(torch=torch.__version__, sage2=sage2.__version__,
                               sageattention=getattr(sageattention, "__version__", None))
    except Exception as e:  # noqa: BLE001
        rec["errors"].append("import sageattention: %s: %s" % (e.__class__.__name__, e))
    sources = os.path.join(args.comfy, "SOURCES.txt")
    if os.path.isfile(sources):
        rec["sources"] = open(sources, encoding="utf-8").read()
    for label, path in copies:
        crec = dict(label=label, path=path, cases=[], masked=[])
        rec["copies"].append(crec)
        try:
            A = load_comfy_attention(path, label)
            ops = sys.modules["comfy.ops"]
        except Exception as e:  # noqa: BLE001
            crec["error"] = "import failed: %s: %s" % (e.__class__.__name__, e)
            crec["traceback"] = traceback.format_exc(limit=8)
            log("ComfyUI %s: import FAILED: %s" % (label, e))
            continue
        import sageattention as dropin
        crec["sage_attention_is_available"] = bool(getattr(A, "SAGE_ATTENTION_IS_AVAILABLE", False))
        crec["sage_attention_supports_mask"] = getattr(A, "SAGE_ATTENTION_SUPPORTS_MASK", "n/a (older file)")
        crec["sageattn_is_dropin"] = getattr(A, "sageattn", None) is dropin.sageattn
        crec["optimized_attention_is_attention_sage"] = getattr(A, "optimized_attention", None) is A.attention_sage
        crec["registered_sage"] = getattr(A, "REGISTERED_ATTENTION_FUNCTIONS", {}).get("sage") is A.attention_sage
        log("ComfyUI %s (%s): SAGE_ATTENTION_IS_AVAILABLE %s, sageattn is the drop-in %s, optimized_attention is "
            "attention_sage %s, SAGE_ATTENTION_SUPPORTS_MASK %s" % (
                label, path, crec["sage_attention_is_available"], crec["sageattn_is_dropin"],
                crec["optimized_attention_is_attention_sage"], crec["sage_attention_supports_mask"]))
        for i, (name, B, Nq, Nk, H, D, skip) in enumerate(COMFY_SHAPES):
            for dt in COMFY_DTYPES:
                dtype = getattr(torch, dt)
                if dev == "cpu":  # CPU harness check: small
                    Nq, Nk, H = min(Nq, 256), min(Nk, 256), min(H, 4)
                    dtype = torch.float32 if dtype == torch.float16 else dtype

                def fn(name=name, B=B, Nq=Nq, Nk=Nk, H=H, D=D, skip=skip, dtype=dtype, seed=1000 + i):
                    layout = "HND" if skip else "NHD"
                    shp_q = (B, H, Nq, D) if skip else (B, Nq, H, D)
                    shp_kv = (B, H, Nk, D) if skip else (B, Nk, H, D)
                    q, k, v = make_qkv(torch, shp_q, shp_kv, dtype, dev, seed, layout=layout)
                    ref = ref_attention(calls, torch, q, k, v, layout=layout)  # NHD or HND like q
                    if not skip:  # ComfyUI's UNet / Wan form: [B, N, heads * dim_head]
                        q, k, v = (t.reshape(t.shape[0], t.shape[1], H * D) for t in (q, k, v))
                        ref = ref.reshape(B, Nq, H * D)
                    else:  # Flux: HND in, [B, N, heads * dim_head] out (skip_output_reshape False)
                        ref = ref.transpose(1, 2).reshape(B, Nq, H * D)
                    e0, s0 = len(errlines.lines), ops.SDPA_CALLS[0]
                    with torch.no_grad(), calls.window() as got:
                        out = A.attention_sage(q, k, v, H, skip_reshape=skip)
                    s1 = ops.SDPA_CALLS[0]
                    with torch.no_grad():
                        pt = A.attention_pytorch(q, k, v, H, skip_reshape=skip)
                    errs = errlines.lines[e0:]
                    fallbacks = sum(1 for m in errs if "sage attention" in m.lower())
                    return dict(shape=dict(B=B, Nq=Nq, Nk=Nk, heads=H, dim_head=D, skip_reshape=skip,
                                           dtype=str(dtype).replace("torch.", ""),
                                           q_shape=list(q.shape), kv_shape=list(k.shape)),
                                out_shape=list(out.shape), calls=_sage_calls(got),
                                sage_sdpa_calls=s1 - s0,
                                fallbacks=fallbacks, fallback_messages=errs[:3],
                                cos_vs_fp32=cosine(out, ref), rel_l1_vs_fp32=rel_l1(out, ref),
                                comfy_pytorch_cos_vs_fp32=cosine(pt, ref), cos_vs_comfy_pytorch=cosine(out, pt),
                                finite=bool(torch.isfinite(out).all()))

                def check(r):
                    if r["fallbacks"] or r["sage_sdpa_calls"]:
                        return False, "fallback to pytorch attention (%d logged, %d SDPA calls)" % (
                            r["fallbacks"], r["sage_sdpa_calls"])
                    if r["calls"].get("sage2.sageattn", 0) != 1:
                        return False, "sage2.sageattn called %d times" % r["calls"].get("sage2.sageattn", 0)
                    if not r["finite"]:
                        return False, "output not finite"
                    if r["cos_vs_fp32"] < COS_COMFY:
                        return False, "cos %.6f < %g" % (r["cos_vs_fp32"], COS_COMFY)
                    return True, ""
                run_case(log, crec["cases"], "%s/%s/%s" % (label, name, dt), fn, check)
        # a masked call (Flux / HunyuanVideo text padding): ComfyUI passes the mask to sageattn only where
        # its signature names attn_mask (newer files; the reference's sageattn does not), else it runs
        # attention_pytorch by itself: reported, not a fallback of sage2's
        for dt in COMFY_DTYPES:
            def fn_mask(dt=dt):
                dtype = getattr(torch, dt) if dev != "cpu" else torch.float32
                B, H, N, D, ntxt, real = 2, 8, 1024 + 256, 128, 256, (256, 100)
                if dev == "cpu":  # CPU harness check: small
                    N, ntxt, real = 128 + 32, 32, (32, 10)
                q, k, v = make_qkv(torch, (B, H, N, D), (B, H, N, D), dtype, dev, 77, layout="HND")
                keep = torch.ones(B, N, dtype=torch.bool, device=dev)
                for b, r in enumerate(real):
                    keep[b, r:ntxt] = False  # padded text tokens (text first, as Flux orders them)
                mask = keep[:, None, None, :]
                ref = calls.sdpa(q.float(), k.float(), v.float(), attn_mask=mask)
                e0, s0 = len(errlines.lines), ops.SDPA_CALLS[0]
                with torch.no_grad(), calls.window() as got:
                    out = A.attention_sage(q, k, v, H, mask=mask, skip_reshape=True, skip_output_reshape=True)
                errs = errlines.lines[e0:]
                return dict(shape=dict(B=B, heads=H, N=N, dim_head=D, dtype=dt, mask="bool [B,1,1,N]"),
                            calls=_sage_calls(got), pytorch_sdpa_calls=ops.SDPA_CALLS[0] - s0,
                            fallbacks=sum(1 for m in errs if "sage attention" in m.lower()),
                            fallback_messages=errs[:3], cos_vs_fp32=cosine(out, ref),
                            served_by="comfy attention_pytorch after a sage2 exception" if errs else
                            "sage2" if _sage_calls(got) else "comfy attention_pytorch")

            def check_mask(r):
                if r["fallbacks"]:
                    return False, "exception fallback"
                return r["cos_vs_fp32"] >= COS_COMFY, ""
            run_case(log, crec["masked"], "%s/masked_flux_text_padding/%s" % (label, dt), fn_mask, check_mask)
        n = len(crec["cases"])
        crec["fallbacks_total"] = sum(c.get("fallbacks", 0) for c in crec["cases"])
        crec["served_by_sage2"] = sum(1 for c in crec["cases"] if c.get("calls", {}).get("sage2.sageattn", 0) == 1
                                      and not c.get("fallbacks") and not c.get("sage_sdpa_calls"))
        crec["passed"] = bool(n and all(c["passed"] for c in crec["cases"]) and crec["sageattn_is_dropin"])
        log("ComfyUI %s: %d of %d calls served by sage2, %d fallbacks, %s" % (
            label, crec["served_by_sage2"], n, crec["fallbacks_total"], "PASS" if crec["passed"] else "FAIL"))
        write_json(out_path, rec)
    rec["sage2_debug_lines"] = dict(calls.debug.lines)
    rec["python_warnings"] = dict(calls.warnings.seen)
    rec["passed"] = bool(rec["copies"] and all(c.get("passed") for c in rec["copies"]) and not rec["errors"])
    write_json(out_path, rec)
    log("comfy: %s" % ("PASS" if rec["passed"] else "FAIL"))
    return 0 if rec["passed"] else 1


# ---- summary ---------------------------------------------------------------------------------------
def _load(out, name):
    p = os.path.join(out, name)
    if not os.path.isfile(p):
        return None
    try:
        with open(p, encoding="utf-8") as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001
        return dict(load_error=str(e))


def _fmt(x, n=6):
    return ("%%.%df" % n) % x if isinstance(x, float) else str(x)


def _fail_tail(c):
    return (" -- %s %s" % (c.get("why") or "", c.get("error", ""))).rstrip() if not c.get("passed") else ""


def _summary_warnings(rec, add):
    for w, n in (rec.get("python_warnings") or {}).items():
        add("  warning (%dx): %s" % (n, w))
    lines = rec.get("sage2_debug_lines") or {}
    if lines:
        add("  sage2 debug log: %d distinct lines (in the part's JSON, 'sage2_debug_lines'); first: %s" % (
            len(lines), next(iter(lines))[:160]))


def _summary_diffusers(d, add):
    add("[diffusers] dispatch_attention_fn / set_attention_backend vs 'native'; bars cos >= %g (one call), "
        ">= %g (model)" % (COS_LAYER, COS_MODEL))
    if not d:
        add("  no diffusers.json")
        return False
    ck = d.get("checks", {})
    add("  diffusers %s reads sageattention %s (needs >= %s): is_sageattention_available %s, version ok %s, "
        "_CAN_USE_SAGE_ATTN %s, attention_dispatch bound the drop-in's functions %s" % (
            (d.get("versions") or {}).get("diffusers"), ck.get("version_diffusers_read"), ck.get("required_version"),
            ck.get("is_sageattention_available"), ck.get("is_sageattention_version_ge_required"),
            ck.get("_CAN_USE_SAGE_ATTN"), ck.get("dispatch_bound_dropin_functions")))
    add("  backend requirements: %s" % ck.get("backend_requirements"))
    add("  %-52s %-5s %10s %9s %10s  %s" % ("case/backend", "pass", "cos/native", "relL1", "cos/fp32",
                                           "calls into sage2; torch SDPA calls"))
    for c in d.get("dispatch", []) + d.get("models", []):
        tag = "" if c.get("target", True) else " (extra)"
        if "lse_shape" in c:
            add("  %-52s %-5s lse %s %s, max |lse - fp32| %s; %s; SDPA %s%s" % (
                c["name"], "ok" if c["passed"] else "FAIL", c.get("lse_shape"), c.get("lse_dtype"),
                _fmt(c.get("lse_max_abs_vs_fp32"), 4), c.get("calls"), c.get("sdpa_calls"), _fail_tail(c)))
            continue
        add("  %-52s %-5s %10s %9s %10s  %s; SDPA %s%s%s" % (
            c["name"], "ok" if c["passed"] else "FAIL", _fmt(c.get("cos_vs_native")),
            _fmt(c.get("rel_l1_vs_native"), 5), _fmt(c.get("cos_vs_fp32")), c.get("calls"), c.get("sdpa_calls"),
            tag, _fail_tail(c)))
    _summary_warnings(d, add)
    for e in d.get("errors", []):
        add("  ERROR " + e.splitlines()[0])
    add("  -> targets %s; extras (the _sage_qk_* backends) %s" % ("PASS" if d.get("passed") else "FAIL",
                                                                  "pass" if d.get("extras_passed") else "FAIL"))
    return bool(d.get("passed"))


def _summary_yunchang(y, add):
    add("[yunchang] LongContextAttention (basic ring) with AttnType.SAGE_FP8 / SAGE_AUTO on %s rank(s) vs full fp32 "
        "SDPA on one GPU; bar cos >= %g" % ((y or {}).get("world"), COS_USP))
    if not y:
        add("  no yunchang.json")
        return False
    add("  yunchang %s on %s: HAS_SAGE_ATTENTION %s, yunchang.kernels.sageattention is the drop-in %s" % (
        (y.get("versions") or {}).get("yunchang"), y.get("gpu") or y.get("device"),
        y.get("checks", {}).get("HAS_SAGE_ATTENTION"), y.get("checks", {}).get("kernels_use_dropin")))
    add("  %-52s %-5s %10s %9s %10s %6s  %s" % ("type/mode/shape/causal", "pass", "cos/fp32", "relL1", "1GPU cos",
                                               "=1GPU", "calls into sage2 (all ranks)"))
    for c in y.get("cases", []):
        add("  %-52s %-5s %10s %9s %10s %6s  %s%s" % (
            c["name"], "ok" if c["passed"] else "FAIL", _fmt(c.get("cos_vs_fp32")), _fmt(c.get("rel_l1_vs_fp32"), 5),
            _fmt(c.get("one_gpu_cos_vs_fp32")), c.get("identical_to_one_gpu"), c.get("calls"), _fail_tail(c)))
    if y.get("cases"):
        add("  shapes: %s" % sorted({json.dumps(c.get("shape"), sort_keys=True) for c in y["cases"]}))
    for k, v in (y.get("notes") or {}).items():
        add("  note %s: %s" % (k, v))
    _summary_warnings(y, add)
    for e in y.get("errors", []):
        add("  ERROR " + e.splitlines()[0])
    add("  -> %s%s" % ("PASS" if y.get("passed") else "FAIL",
                       "" if y.get("world") == 2 else " (world %s: the target needs 2 GPUs)" % y.get("world")))
    return bool(y.get("passed")) and y.get("world") == 2


def _summary_comfy(c, add):
    add("[ComfyUI] attention_sage of ComfyUI's own attention.py on its call shapes vs fp32 SDPA; target 0 "
        "fallbacks, cos >= %g" % COS_COMFY)
    if not c:
        add("  no comfy.json")
        return False
    for cp in c.get("copies", []):
        add("  copy %s (%s): sageattn is the drop-in %s, optimized_attention is attention_sage %s, "
            "SAGE_ATTENTION_SUPPORTS_MASK %s%s" % (
                cp.get("label"), cp.get("path"), cp.get("sageattn_is_dropin"),
                cp.get("optimized_attention_is_attention_sage"), cp.get("sage_attention_supports_mask"),
                ("  IMPORT ERROR " + cp["error"]) if cp.get("error") else ""))
        add("  %-52s %-5s %10s %9s %11s %5s  %s" % ("shape/dtype", "pass", "cos/fp32", "relL1", "pt cos/fp32",
                                                   "fallb", "q shape; calls into sage2"))
        for r in cp.get("cases", []):
            add("  %-52s %-5s %10s %9s %11s %5s  %s; %s%s" % (
                r["name"].split("/", 1)[1], "ok" if r["passed"] else "FAIL", _fmt(r.get("cos_vs_fp32")),
                _fmt(r.get("rel_l1_vs_fp32"), 5), _fmt(r.get("comfy_pytorch_cos_vs_fp32")), r.get("fallbacks"),
                (r.get("shape") or {}).get("q_shape"), r.get("calls"), _fail_tail(r)))
        for r in cp.get("masked", []):
            add("  %-52s %-5s %10s  served by %s (ComfyUI decides from SAGE_ATTENTION_SUPPORTS_MASK), fallbacks %s%s"
                % (r["name"].split("/", 1)[1], "ok" if r["passed"] else "FAIL", _fmt(r.get("cos_vs_fp32")),
                   r.get("served_by"), r.get("fallbacks"), _fail_tail(r)))
        add("  -> %s: %s of %s calls served by sage2, %s fallbacks: %s" % (
            cp.get("label"), cp.get("served_by_sage2"), len(cp.get("cases", [])), cp.get("fallbacks_total"),
            "PASS" if cp.get("passed") else "FAIL"))
    _summary_warnings(c, add)
    for e in c.get("errors", []):
        add("  ERROR " + e.splitlines()[0])
    return bool(c.get("passed"))


def part_summary(args, log):
    out = args.out
    parts = [p for p in args.parts.split(",") if p]
    env = _load(out, "env.json") or {}
    lines = []
    add = lines.append
    add("sage2's `sageattention` drop-in with its real clients (issue 32, Targets, first bullet)")
    add("=" * 96)
    s2 = env.get("sage2", {}) if isinstance(env.get("sage2"), dict) else {}
    di = env.get("dropin", {}) if isinstance(env.get("dropin"), dict) else {}
    add("time (UTC)    %s" % env.get("time_utc"))
    add("GPUs          %s  capability %s" % (env.get("gpus"), env.get("capability")))
    add("python        %s   torch %s (CUDA %s)   triton %s   NCCL %s" % (
        env.get("python"), env.get("torch"), env.get("torch_cuda"), env.get("triton"), env.get("nccl")))
    add("diffusers     %s   yunchang %s   einops %s" % (env.get("diffusers"), env.get("yunchang"), env.get("einops")))
    add("sage2         %s   build commit %s   library %s" % (s2.get("version"), s2.get("build_commit"),
                                                            s2.get("library")))
    add("repo commit   %s" % env.get("repo_commit"))
    add("drop-in       sageattention %s (distribution %s) from %s; sage2's drop-in: %s; other sageattention: %s%s" % (
        di.get("version"), di.get("distribution_version"), di.get("module_file"), di.get("is_sage2_dropin"),
        di.get("other_installations"), ("  ERROR " + di["error"]) if di.get("error") else ""))
    pt = os.path.join(out, "parts.txt")
    if os.path.isfile(pt):
        add("parts         %s" % "; ".join(x for x in open(pt, encoding="utf-8").read().splitlines() if x))
    loaded = {p: _load(out, "%s.json" % p) for p in parts}
    if env.get("fake_sage2") or any((v or {}).get("fake_sage2") for v in loaded.values()):
        add("")
        add("*** FAKE sage2 (--fake-sage2): a harness check without a GPU; these numbers prove NOTHING ***")
    verdicts = []
    names = {"diffusers": ("diffusers 'sage' / 'sage_varlen' backends vs 'native' (sage2's bars)", _summary_diffusers),
             "yunchang": ("yunchang SAGE_FP8 / SAGE_AUTO, Ulysses and ring on 2 GPUs, cos >= %g vs full attention"
                          % COS_USP, _summary_yunchang),
             "comfy": ("ComfyUI attention_sage served by sage2 on its call shapes, 0 fallbacks", _summary_comfy)}
    for p in parts:
        what, fn = names[p]
        add("")
        verdicts.append((what, fn(loaded[p], add)))
    add("")
    add("Targets")
    for what, ok in verdicts:
        add("  %-4s %s" % ("PASS" if ok else "FAIL", what))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text, end="")
    return 0 if verdicts and all(ok for _, ok in verdicts) else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("env", "diffusers", "comfy", "summary"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--comfy", default=os.path.join(REPO, ".comfy"),
                    help="folder holding ComfyUI's attention.py copies")
    ap.add_argument("--fake-sage2", action="store_true", help="replace sage2 by fp32 PyTorch (harness check, no GPU)")
    ap.add_argument("--parts", default="diffusers,yunchang,comfy", help="summary: the parts that ran")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    log = Log(None)  # scripts/gpu_dropin_clients.sh sends stdout and stderr to OUT/<part>.log
    return {"env": part_env, "diffusers": part_diffusers, "comfy": part_comfy, "summary": part_summary}[args.part](
        args, log)


if __name__ == "__main__":
    sys.exit(main())
