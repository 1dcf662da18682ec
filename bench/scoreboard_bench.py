#!/usr/bin/env python3
"""Every cell of ../shared/tools/scoreboard.py in one benchmark run (started by bench/scoreboard_run.sh).

Records follow DESIGN.md "Benchmark records" and go to OUT/<group>.jsonl as each cell completes.
Every record carries `run` (one id for the whole run), `commit` (sage2.build_commit() of the libsage2
the measuring process loaded, never `git` of a checkout), `env` (the SAGE2_* variables set),
`rounds`, `device`, `command`, `dtype` "fp16".

Methods, all on the SAME seeded inputs within a cell (randn fp16, q, k and v drawn one after another
from a generator seeded by the shape, so never Q = K = V), in the SAME process:
  sage2      sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=c)
  sage2_ref  sageattention.sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="HND", is_causal=c)
             (the reference, ../shared/anchors/sageattention-ref; head dims 64 and 128 only)
  cudnn, fa2 torch SDPA with that one backend forced (torch.nn.attention.sdpa_kernel); enable_gqa
             when Hq != Hkv
Rounds (--rounds, >= 3 to count): in round r every method of the cell runs once, in the cell's
method order rotated left by r (round_order), so each method takes a different place each round.
A method's round value is the median of --reps timed calls; its record's value is the median over
the rounds (per-round values in `round_ms` / `round_us`).
Modes:
  e2e        CUDA events around each call as the user makes it (synchronised per call); before each
             timed call a --flush-l2 MB buffer is overwritten and synchronised, outside the timed span.
  kernel     "timing": "cupti": device time of the attention kernel(s) inside the same user call
             (its exposed part: from the later of its start and the end of every kernel that
             started before it; kernel_table),
             read with torch.profiler (ProfilerActivity.CUDA): one session per method per round around
             --prof-calls further calls (their mean), made after that round's timed calls (never
             around a timed call), each after the same L2 flush (whose kernels, named by a profile of
             the flush alone at start, are left out). Kernels counted: sage2 — names starting with
             "sage2_attention" (the families' entry points sage2_attention_wgmma / _mma, kernels/family_*.cpp);
             sage2_ref — names matching r"qk_int\\w*_attn_kernel" (its qk_int8_sv_f8_attn_kernel<...>,
             csrc/qattn/qk_int_sv_f8_cuda_sm90.cu; not its triton quant_*_kernel or fused ones).
             A group with kernel cells starts the profiler once before any timed call, so all its
             rounds run alike; the host, decode and small groups never start it.
  stages     (sage2, with kernel) every kernel of those profiled calls, per call: `kernels`
             {name: us}, `launches` {name: count}, `gpu_us` (all of them), `attention_us`,
             `prologue_us` (gpu_us - attention_us: the quantize / ΔS stages).
  decode_us  Hq 32, Hkv 8, hd 128, B 4, (Nq, Nk) = (1,4096) (1,32768) (16,4096) (128,8192),
             non-causal: sage2, cudnn, fa2 (a backend that refuses is logged and gets no record);
             fields nq, nk, hq, hkv, us.
  host_us    B=1 H=1 N=128 d=64: --host-calls back-to-back calls, one synchronise, wall time /
             calls, rounds alternating as above: sage2, fa2, cudnn; and sage2_cpp, the C++
             Context::attention number of build/bench/sage2-bench-attention --modes host.
  small      e2e records with "shape": "small" (not scored; sage2 vs cudnn): B1 H28 hd128 N3000
             causal, B2 H40 hd64 N6000, B64 H12 hd64 N197.
  real       e2e records of the scoreboard's REAL shapes (bench/stage_profile.py SHAPES: Flux-1024,
             SDXL-1024, Qwen2.5-7B prefill 4K, Whisper-large encoder, DiT-XL/2-512, BERT-large 512),
             sage2 vs cudnn, in each shape's dtype, with "shape" (its name), "kv_heads" and "dtype".
Cells: hd 64/128 x causal 0/1 x N 1K..32K at B 4, H 32 (sage2, sage2_ref, cudnn, fa2 e2e; sage2 and
sage2_ref kernel; sage2 stages); heads: hd 96/192/256 non-causal N 4K..32K (sage2 and cudnn e2e,
sage2 kernel and stages).
Processes: one per group of cells (host, decode, one per head dim x causal, heads, small, the C++
step), every method inside it, so a CUDA fault loses one group only; the parent then re-runs the
rest of that group without the method that was running (read from OUT/.state-<group>.json).
No group or cell starts after --budget-s. The default run is estimated at about 3 minutes on an
H100 plus the JIT compiles of a cold kernel cache (--dry-run prints the estimate; not yet timed).
--dry-run writes fake records (dry_run: true, run id "dry-...") under /tmp only, without a GPU.
"""
import argparse
import datetime
import json
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (also when this file is imported as a module)
from stage_profile import SHAPES as STAGE_SHAPES  # noqa: E402 (stdlib imports only: no torch here)

SEQS = [1024, 2048, 4096, 8192, 16384, 32768]
METHODS = ["sage2", "sage2_ref", "cudnn", "fa2"]
MODES = ["host", "e2e", "kernel", "decode", "small", "real"]
# The scoreboard's real shapes: their (b, h, hkv, hd, n, causal, dtype) live in bench/stage_profile.py.
REAL_NAMES = ["flux-1024", "sdxl-1024", "qwen2.5-7b-prefill-4k", "whisper-large-enc", "dit-xl-512", "bert-large-512"]
REF_DIMS = (64, 128)  # the reference raises "Unsupported head_dim" elsewhere
DECODE = "1x4096,1x32768,16x4096,128x8192"
# (batch, heads, head_dim, N, causal): shapes users reported, e2e only (scoreboard.py skips them).
SMALL = [(1, 28, 128, 3000, True), (2, 40, 64, 6000, False), (64, 12, 64, 197, False)]
HOST_SHAPE = (1, 1, 1, 128, 128, 64)  # b, hq, hkv, nq, nk, d
T0 = time.time()

# Which profiled kernels are "the attention kernel(s)" of a method (docstring: kernel).
_REF_KERNEL = re.compile(r"qk_int\w*_attn_kernel")


def is_attention_kernel(method, name):
    if method == "sage2":
        return name.startswith("sage2_attention")
    if method == "sage2_ref":
        return bool(_REF_KERNEL.search(name))
    return False


def log(msg):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%SZ")
    print("[%6.1fs %s] %s" % (time.time() - T0, now, msg), flush=True)


def ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def add_shape_args(ap, head_dims="64,128", seq_lens="2048,8192"):
    """The shape and repetition options the per-cell benchmark scripts share (pv_precision_bench,
    ptx_bench): head dims, lengths, causal 0/1, batch, heads, rounds, reps per round."""
    ap.add_argument("--head-dims", default=head_dims)
    ap.add_argument("--seq-lens", default=seq_lens)
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)


def names(s, allowed, what):
    out = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in out if x not in allowed]
    if bad:
        raise SystemExit("unknown %s %s (known: %s)" % (what, ",".join(bad), ",".join(allowed)))
    return out


def ops(b, h, nq, nk, d, causal):
    """4·B·H·Nq·Nk·d, halved when causal (the scoreboard's TOPS convention)."""
    return 4.0 * b * h * nq * nk * d / (2.0 if causal else 1.0)


def median(xs):
    return statistics.median(xs)


def round_order(methods, r):
    """Round r's method order: the list rotated left by r, so over len(methods) rounds every method
    runs once in every place (and with two methods, every other round reverses the order)."""
    if not methods:
        return []
    k = r % len(methods)
    return list(methods[k:]) + list(methods[:k])


def first_line(e):
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else ""


def event_times_ms(torch, fn, reps, warmup, flush=None):
    """Milliseconds of `reps` calls of fn(), each between two CUDA events and synchronised (after
    `warmup` calls; `flush`: a tensor zeroed before each call, outside the timed span)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        if flush is not None:
            flush.zero_()
        torch.cuda.synchronize()  # the flush must not hide the call's host time
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def short_device(name):
    m = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Z]?)\b", name or "")
    return m.group(1).lower() if m else (re.sub(r"[^a-z0-9]+", "", (name or "gpu").lower())[:12] or "gpu")


def sage2_env():
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("SAGE2_")}


# ---- the measurement, the same for the GPU and the dry run -----------------------------------------------
def measure_cell(bk, cell, rounds, state=None, say=log):
    """Runs one cell: warm-up calls of every method, then `rounds` rounds; in round r every method
    still standing runs its timed e2e calls in round_order(methods, r), then the profiled methods
    (cell["kernel"]) their profiled calls in the same order (bk.profile_calls gives one {kernel name:
    [us, launches]} per call, or one for the mean call; the round's value is their median). Returns
    {method: result} where result holds the per-round lists e2e / kernel (ms) and stages (per-round
    {name: [us, launches]}), kernel_names, `failed` (why the method stopped, or None) and
    `prof_failed` (why its profiling stopped, or None). A method whose call raises is
    dropped for the rest of the cell (its lists stay short, so it gets no record); a profiling
    failure drops only its kernel/stages values. When the CUDA context is gone the exception is
    re-raised (the process ends; the parent re-runs the rest of the group without that method).
    state(method, phase) is called before each step."""
    methods = list(cell["methods"])
    profiled = [m for m in methods if m in cell.get("kernel", ())]
    res = {m: dict(e2e=[], kernel=[], stages=[], kernel_names=set(), failed=None, prof_failed=None)
           for m in methods}
    causal, reps, warm = bool(cell["causal"]), cell["reps"], cell["warmup"]

    def guard(m, phase, thunk):
        if state:
            state(m, phase)
        try:
            return thunk()
        except Exception as e:  # noqa: BLE001 - any failure of one method's call
            if not bk.alive():
                say("CUDA context lost during %s %s of %s: %s: %s" % (m, phase, cell["label"], type(e).__name__,
                                                                     first_line(e)))
                raise
            why = "%s: %s" % (type(e).__name__, first_line(e))
            if phase == "profile":
                res[m]["prof_failed"] = why
            else:
                res[m]["failed"] = why
            say("FAILED %s %s of %s: %s (no %s record for it)" % (m, phase, cell["label"], why,
                                                                 "kernel/stages" if phase == "profile" else "any"))
            bk.after_failure()
            return None

    if state:
        state(None, "inputs")
    try:
        bk.inputs(cell)
    except Exception as e:  # noqa: BLE001 - e.g. out of memory: no method of this cell runs
        if not bk.alive():
            raise
        say("FAILED inputs of %s: %s: %s" % (cell["label"], type(e).__name__, first_line(e)))
        for m in methods:
            res[m]["failed"] = "inputs: %s" % first_line(e)
        bk.after_failure()
        return res
    for m in methods:
        guard(m, "warm-up", lambda m=m: bk.warmup(m, causal, warm))
    for r in range(rounds):
        order = [m for m in round_order(methods, r) if res[m]["failed"] is None]
        for m in order:
            t = guard(m, "e2e", lambda m=m: bk.e2e_times(m, causal, reps))
            if t is not None:
                res[m]["e2e"].append(median(t))
        for m in order:
            if m not in profiled or res[m]["failed"] or res[m]["prof_failed"]:
                continue
            calls = guard(m, "profile", lambda m=m: bk.profile_calls(m, causal, cell["prof_calls"]))
            if calls is None:
                continue
            att, names_ = [], set()
            for c in calls:
                hit = {k: v for k, v in c.items() if is_attention_kernel(m, k)}
                if not hit:
                    res[m]["prof_failed"] = "no attention kernel among %s" % sorted(c)[:8]
                    say("FAILED %s profile of %s: %s" % (m, cell["label"], res[m]["prof_failed"]))
                    break
                names_.update(hit)
                att.append(sum(v[0] for v in hit.values()))
            else:
                res[m]["kernel"].append(median(att) / 1e3)
                res[m]["kernel_names"].update(names_)
                keys = sorted({k for c in calls for k in c})
                res[m]["stages"].append({k: [median([c.get(k, [0.0, 0])[0] for c in calls]),
                                             max(c.get(k, [0.0, 0])[1] for c in calls)] for k in keys})
    return res


def measure_host(bk, methods, rounds, calls, state=None, say=log):
    """host_us of each method: 50 warm-up calls each, then `rounds` rounds of one loop of `calls`
    calls per method in round_order. Returns {method: [us per round]} (short lists for failures)."""
    out = {m: [] for m in methods}
    dead = set()
    if state:
        state(None, "inputs")
    bk.inputs(dict(shape=HOST_SHAPE, causal=False))
    for r in range(-1, rounds):
        for m in (methods if r < 0 else round_order(methods, r)):
            if m in dead:
                continue
            if state:
                state(m, "host")
            try:
                if r < 0:
                    bk.host_loop(m, 50)
                else:
                    out[m].append(bk.host_loop(m, calls))
            except Exception as e:  # noqa: BLE001
                if not bk.alive():
                    raise
                dead.add(m)
                say("FAILED %s host_us: %s: %s" % (m, type(e).__name__, first_line(e)))
                bk.after_failure()
    return out


# ---- measurement backends: Real (torch on the GPU) and Fake (--dry-run) --------------------------------
class Real:
    def __init__(self, cfg, profiling=True):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.profiler import ProfilerActivity, profile
        self.torch, self.F, self.sdpa_kernel = torch, F, sdpa_kernel
        self.profile, self.activity = profile, ProfilerActivity.CUDA
        self.backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}
        torch.cuda.init()
        self.device = torch.cuda.get_device_name(0)
        mb = cfg["flush_mb"]
        self.flush = torch.empty(mb << 20, dtype=torch.uint8, device="cuda") if mb else None
        self.key, self.qkv = None, None
        # The flush's own kernel names, to leave them out of the profiled calls' kernels (the flush
        # runs inside the profiler session, between the calls). This first session also starts
        # CUPTI up before any timed call, so every round of a profiled group runs after it alike;
        # groups without kernel cells (host, decode, small) never start the profiler.
        self.flush_names = set()
        if profiling:
            with self.profile(activities=[self.activity]) as prof:
                if self.flush is not None:
                    self.flush.zero_()
                torch.cuda.synchronize()
            self.flush_names = set(kernel_table(prof))
            log("profiler started; L2 flush kernels left out of the profiles: %s" % (sorted(self.flush_names) or "none"))

    def commit(self):
        try:
            import sage2
            return sage2.build_commit()
        except Exception as e:  # noqa: BLE001 - no usable libsage2: its methods fail on their own, loudly
            log("cannot ask libsage2 for its commit: %s: %s" % (type(e).__name__, first_line(e)))
            return None

    def inputs(self, cell):
        key = tuple(cell["shape"])  # (b, hq, hkv, nq, nk, d)
        dt = cell.get("dtype", "fp16")
        if (key, dt) != self.key:
            self.qkv = None  # free the previous shape first
            b, hq, hkv, nq, nk, d = key
            g = self.torch.Generator(device="cuda")
            g.manual_seed(zlib.crc32(repr(key).encode()))
            tdt = self.torch.bfloat16 if dt == "bf16" else self.torch.float16
            mk = lambda h, n: self.torch.randn(b, h, n, d, generator=g, device="cuda", dtype=tdt)
            self.qkv, self.key = (mk(hq, nq), mk(hkv, nk), mk(hkv, nk)), (key, dt)
            assert len({t.data_ptr() for t in self.qkv}) == 3

    def call(self, method, causal):
        """(fn, context manager held around the calls) on the current inputs."""
        import contextlib
        q, k, v = self.qkv
        if method == "sage2":
            import sage2
            return (lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)), contextlib.nullcontext()
        if method == "sage2_ref":
            from sageattention import sageattn_qk_int8_pv_fp8_cuda_sm90 as ref
            return (lambda: ref(q, k, v, tensor_layout="HND", is_causal=causal)), contextlib.nullcontext()
        if method in self.backends:
            kw = {"enable_gqa": True} if q.size(1) != k.size(1) else {}
            F = self.F
            # Entered once around a loop of calls, not per call: its cost is not the backend's.
            return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)), \
                self.sdpa_kernel([self.backends[method]])
        raise ValueError("no method %s" % method)

    def warmup(self, method, causal, n):
        fn, ctx = self.call(method, causal)
        with ctx:
            for _ in range(n):
                fn()
            self.torch.cuda.synchronize()

    def e2e_times(self, method, causal, reps):
        fn, ctx = self.call(method, causal)
        with ctx:
            return event_times_ms(self.torch, fn, reps, 1, self.flush)

    def profile_calls(self, method, causal, calls):
        """[{kernel name: [device us, launches]} of the mean call]: one torch.profiler session (CUDA
        activity only) around `calls` calls, each after the L2 flush and a synchronise; the flush's
        kernels (self.flush_names) are left out, the rest divided by `calls`."""
        torch = self.torch
        fn, ctx = self.call(method, causal)
        with ctx:
            torch.cuda.synchronize()
            with self.profile(activities=[self.activity]) as prof:
                for _ in range(calls):
                    if self.flush is not None:
                        self.flush.zero_()
                    torch.cuda.synchronize()
                    fn()
                    torch.cuda.synchronize()
        return [{k: [us / calls, n / calls] for k, (us, n) in kernel_table(prof).items() if k not in self.flush_names}]

    def host_loop(self, method, calls):
        fn, ctx = self.call(method, False)
        with ctx:
            self.torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            self.torch.cuda.synchronize()
            return (time.perf_counter() - t) / calls * 1e6

    def alive(self):
        try:
            self.torch.cuda.synchronize()
            return True
        except Exception:  # noqa: BLE001
            return False

    def after_failure(self):
        try:
            self.torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass


def kernel_table(prof):
    """{name: [exposed device time in us, launches]} of the GPU kernels of a torch.profiler session.
    A kernel's exposed time is the part of its span after every kernel that started before it has
    ended: kernels launched to overlap the previous one (sage2's programmatic dependent launch on
    sm_90) start early and wait, and counting their whole span would count that wait twice. Without
    overlap it is the kernel's device time. Falls back to the self device time (key_averages) when
    the events carry no time ranges."""
    spans = []
    try:
        for e in prof.events():
            dt = getattr(e, "device_type", None)
            if str(getattr(dt, "name", dt)).upper() != "CUDA":
                continue
            tr = getattr(e, "time_range", None)
            if tr is None or tr.end <= tr.start:
                continue
            spans.append((float(tr.start), float(tr.end), e.name))
    except Exception:  # noqa: BLE001
        spans = []
    if spans:
        spans.sort()
        out, frontier = {}, float("-inf")
        for start, end, name in spans:
            exposed = max(0.0, end - max(start, frontier))
            frontier = max(frontier, end)
            acc = out.setdefault(name, [0.0, 0])
            acc[0] += exposed
            acc[1] += 1
        return out
    out = {}
    for e in prof.key_averages():
        dt = getattr(e, "device_type", None)
        if str(getattr(dt, "name", dt)).upper() != "CUDA":
            continue
        us = None
        for attr in ("self_device_time_total", "self_cuda_time_total"):
            us = getattr(e, attr, None)
            if us is not None:
                break
        if us and us > 0:
            out[e.key] = [float(us), int(e.count)]
    return out


# Made-up H100-like speeds for --dry-run: plausible magnitudes so that the time estimate means something.
FAKE_TOPS = {("sage2", "kernel"): 780, ("sage2_ref", "kernel"): 780, ("sage2", "e2e"): 640,
             ("sage2_ref", "e2e"): 600, ("cudnn", "e2e"): 560, ("fa2", "e2e"): 340}
FAKE_HOST_US = {"sage2": 31.0, "fa2": 17.0, "cudnn": 19.0, "sage2_cpp": 26.0}
FAKE_REF_KERNEL = ("void qk_int8_sv_f8_attn_kernel<128u, 128u, 128u, 64u, 128u, (QuantGranularity)3, "
                   "(QuantGranularity)3, float, false, __half, (MaskMode)0, true, false>(CUtensorMap, CUtensorMap, "
                   "CUtensorMap, float*, float*, float*, __half*, float*, unsigned int, unsigned int, float)")


class Fake:
    """--dry-run: made-up times with a few per cent of seeded noise, and an estimate of the real
    run's time (calls, L2 flushes, profiler sessions, process starts; not the JIT compiles)."""
    PROFILE_S = 0.1  # a guess of one torch.profiler session's start + stop
    START_S = 8.0     # a guess of one process's torch import, CUDA init, first calls

    def __init__(self, cfg):
        self.device = "DRY-RUN (no GPU)"
        # For the tests of the parent's recovery: "METHOD@CELL LABEL" makes this process die (exit 3,
        # as a CUDA fault ends a real worker) in that method's first timed call of that cell.
        self.die = os.environ.get("SCOREBOARD_DRY_RUN_DIE", "")
        self.flush_s = (cfg["flush_mb"] << 20) / 2.5e12 + 20e-6
        self.gpu_s, self.prof_s, self.cell = 0.0, 0.0, None
        self.rng = random.Random(1)

    def commit(self):
        try:
            import sage2
            return sage2.build_commit()
        except Exception as e:  # noqa: BLE001 - no library here: say so, keep going
            log("dry run: no libsage2 to ask for its commit (%s); records say 'unknown'" % first_line(e))
            return "unknown"

    def inputs(self, cell):
        self.cell = cell
        self.rng = random.Random(zlib.crc32(repr(tuple(cell["shape"])).encode()))

    def _ms(self, method, mode):
        b, hq, hkv, nq, nk, d = self.cell["shape"]
        c = bool(self.cell["causal"])
        if method == "sage2_ref" and d not in REF_DIMS:
            raise RuntimeError("Unsupported head_dim: %d" % d)
        if self.cell["kind"] == "decode":  # K and V read once at ~2.5 TB/s, plus a made-up fixed cost
            return 2 * b * hkv * nk * d * 2 / 2.5e12 * 1e3 + {"sage2": 0.12, "cudnn": 0.03, "fa2": 0.02}[method]
        tops = FAKE_TOPS[(method, mode)] * (0.75 if d < 128 else 1.0) * nq / (nq + 1500.0)
        return ops(b, hq, nq, nk, d, c) / (tops * 1e12) * 1e3 + (0.02 if mode == "e2e" else 0.0)

    def _noisy(self, ms):
        return ms * (1.0 + 0.03 * self.rng.uniform(-1, 1))

    def warmup(self, method, causal, n):
        self.gpu_s += n * self._ms(method, "e2e") / 1e3

    def e2e_times(self, method, causal, reps):
        if self.die and self.die == "%s@%s" % (method, self.cell["label"]):
            print("dry run: simulated crash in %s" % self.die, flush=True)
            os._exit(3)
        ms = self._ms(method, "e2e")
        self.gpu_s += (reps + 1) * (ms / 1e3 + self.flush_s)
        return [self._noisy(ms) for _ in range(reps)]

    def profile_calls(self, method, causal, calls):
        att = self._ms(method, "kernel")
        e2e = self._ms(method, "e2e")
        self.gpu_s += calls * (e2e / 1e3 + self.flush_s)
        self.prof_s += self.PROFILE_S
        out = []
        for _ in range(calls):
            a = self._noisy(att) * 1e3
            pro = max(e2e * 1e3 - a, 10.0)
            if method == "sage2":
                out.append({"sage2_channel_stats": [0.26 * pro, 1], "sage2_quantize_k": [0.24 * pro, 1],
                            "sage2_quantize_v": [0.26 * pro, 1], "sage2_quantize_q": [0.24 * pro, 1],
                            "sage2_attention_wgmma": [a, 1]})
            else:
                out.append({"triton_quant_query_per_thread_int8_kernel": [0.3 * pro, 1],
                            "quant_key_per_thread_int8_kernel": [0.3 * pro, 1],
                            "void MeanScaleKernel<64u, false, __half>(...)": [0.4 * pro, 1], FAKE_REF_KERNEL: [a, 1]})
        return out

    def host_loop(self, method, calls):
        us = FAKE_HOST_US[method]
        self.gpu_s += calls * us / 1e6
        return self._noisy(us)

    def alive(self):
        return True

    def after_failure(self):
        pass


# ---- one worker process: one group of cells, every method inside it --------------------------------------
def label_of(cell):
    b, hq, hkv, nq, nk, d = cell["shape"]
    s = "hd%d %s N %d" % (d, "causal" if cell["causal"] else "full", nk)
    if nq != nk:
        s += " Nq %d" % nq
    if (b, hq) != (4, 32) or hkv != hq:
        s += " (B %d, H %d%s)" % (b, hq, "/%d" % hkv if hkv != hq else "")
    return s


def records_of_cell(cell, res, rounds):
    """The records of one measured cell: only methods (and modes) that completed every round."""
    b, hq, hkv, nq, nk, d = cell["shape"]
    causal = bool(cell["causal"])
    kind = cell["kind"]
    recs = []
    for m, r in res.items():
        if len(r["e2e"]) == rounds:
            ms = median(r["e2e"])
            if kind == "decode":
                gbps = 2.0 * b * hkv * nk * d * 2 / (ms * 1e-3) / 1e9
                recs.append(dict(method=m, mode="decode_us", us=round(ms * 1e3, 2), ms=round(ms, 5), nq=nq, nk=nk,
                                 hq=hq, hkv=hkv, head_dim=d, causal=False, seq_len=nk, batch=b, heads=hq,
                                 gbps=round(gbps, 1), round_us=[round(x * 1e3, 2) for x in r["e2e"]]))
            else:
                rec = dict(method=m, mode="e2e", head_dim=d, causal=causal, seq_len=nk, batch=b, heads=hq,
                           tops=round(ops(b, hq, nq, nk, d, causal) / (ms * 1e-3) / 1e12, 2), ms=round(ms, 4),
                           round_ms=[round(x, 4) for x in r["e2e"]])
                if kind == "small":
                    rec["shape"] = "small"
                if kind == "real":
                    rec.update(shape=cell["name"], kv_heads=hkv, dtype=cell["dtype"])
                recs.append(rec)
        if len(r["kernel"]) == rounds:
            ms = median(r["kernel"])
            recs.append(dict(method=m, mode="kernel", timing="cupti", head_dim=d, causal=causal, seq_len=nk, batch=b,
                             heads=hq, tops=round(ops(b, hq, nq, nk, d, causal) / (ms * 1e-3) / 1e12, 2),
                             ms=round(ms, 4), round_ms=[round(x, 4) for x in r["kernel"]],
                             kernels=sorted(r["kernel_names"]), prof_calls=cell["prof_calls"]))
            if m == "sage2" and cell.get("stages") and len(r["stages"]) == rounds:
                keys = sorted({k for st in r["stages"] for k in st})
                per = {k: round(median([st.get(k, [0.0, 0])[0] for st in r["stages"]]), 2) for k in keys}
                launches = {k: round(max(st.get(k, [0.0, 0])[1] for st in r["stages"]), 2) for k in keys}
                totals = [sum(v[0] for v in st.values()) for st in r["stages"]]
                atts = [sum(v[0] for k, v in st.items() if is_attention_kernel(m, k)) for st in r["stages"]]
                gpu, att = median(totals), median(atts)
                recs.append(dict(method=m, mode="stages", timing="cupti", head_dim=d, causal=causal, seq_len=nk,
                                 batch=b, heads=hq, kernels=per, launches=launches, gpu_us=round(gpu, 2),
                                 attention_us=round(att, 2), prologue_us=round(gpu - att, 2),
                                 prof_calls=cell["prof_calls"]))
    return recs


def cell_line(cell, res, rounds):
    """One log line per method of a measured cell."""
    b, hq, hkv, nq, nk, d = cell["shape"]
    lines = []
    for m, r in res.items():
        if r["failed"] and len(r["e2e"]) < rounds:
            continue
        parts = []
        if len(r["e2e"]) == rounds:
            ms = median(r["e2e"])
            val = ("%9.1f us" % (ms * 1e3)) if cell["kind"] == "decode" else \
                ("%9.3f ms %7.1f TOPS" % (ms, ops(b, hq, nq, nk, d, cell["causal"]) / (ms * 1e-3) / 1e12))
            parts.append("e2e %s [%s]" % (val, " ".join("%.4g" % x for x in r["e2e"])))
        if len(r["kernel"]) == rounds:
            ms = median(r["kernel"])
            parts.append("kernel %.3f ms %.1f TOPS" % (ms, ops(b, hq, nq, nk, d, cell["causal"]) / (ms * 1e-3) / 1e12))
        lines.append("  %-9s %s" % (m, " | ".join(parts)))
    return lines


def worker(cfg, group, cells):
    bk = Fake(cfg) if cfg["dry_run"] else Real(cfg, profiling=any(c.get("kernel") for c in cells))
    commit = bk.commit()
    env = sage2_env()
    if commit is None:
        log("WARNING: the loaded libsage2 predates sage2_build_commit(): records carry commit null and "
            "scoreboard.py will not count them")
    elif commit == "unknown" or commit.endswith("-dirty"):
        log("note: the loaded libsage2 reports commit '%s'" % commit)
    log("group %s: %d cells, libsage2 commit %s, env %s" % (group, len(cells), commit, json.dumps(env)))
    base = dict(run=cfg["run"], commit=commit, env=env, rounds=cfg["rounds"], dtype="fp16", device=bk.device,
                command=cfg["command"])
    if cfg["dry_run"]:
        base["dry_run"] = True
    state_path = os.path.join(cfg["out"], ".state-%s.json" % group)
    failures = 0
    with open(os.path.join(cfg["out"], group + ".jsonl"), "a") as f:
        def emit(rec):
            r = dict(base)
            r.update(rec)
            f.write(json.dumps(r) + "\n")
            f.flush()

        for i, cell in enumerate(cells):
            if time.time() > cfg["deadline"]:
                log("budget spent: %s and the rest of group %s skipped" % (cell["label"], group))
                failures += 1
                break

            def state(m, phase, i=i):
                with open(state_path, "w") as sf:
                    json.dump({"cell": i, "method": m, "phase": phase}, sf)

            try:
                if cell["kind"] == "host":
                    res = measure_host(bk, cell["methods"], cfg["rounds"], cfg["host_calls"], state)
                else:
                    res = measure_cell(bk, cell, cfg["rounds"], state)
            except Exception as e:  # noqa: BLE001 - re-raised only when the CUDA context is gone
                log("group %s stops in %s: %s: %s" % (group, cell["label"], type(e).__name__, first_line(e)))
                f.flush()
                os._exit(3)  # the parent re-runs the rest of the group without the method (state file)
            if cell["kind"] == "host":
                for m, us in res.items():
                    if len(us) != cfg["rounds"]:
                        failures += 1
                        continue
                    v = median(us)
                    log("  %-9s host_us %7.2f us per call [%s]" % (m, v, " ".join("%.2f" % x for x in us)))
                    emit(dict(method=m, mode="host_us", us=round(v, 3), ms=round(v * 1e-3, 6), head_dim=64, causal=False,
                              seq_len=128, batch=1, heads=1, calls=cfg["host_calls"],
                              round_us=[round(x, 3) for x in us]))
                continue
            failures += sum(1 for r in res.values() if r["failed"] or r["prof_failed"])
            log("%s  (%d rounds x %d reps, order rotating)" % (cell["label"], cfg["rounds"], cell["reps"]))
            for line in cell_line(cell, res, cfg["rounds"]):
                print(line, flush=True)
            for rec in records_of_cell(cell, res, cfg["rounds"]):
                rec.update(reps=cell["reps"], flush_l2_mb=cfg["flush_mb"])
                emit(rec)
    try:
        os.remove(state_path)
    except OSError:
        pass
    if cfg["dry_run"]:
        log("group %s: estimated time of the real run: %.1f s of calls + %.1f s of profiler sessions + ~%.0f s "
            "to start the process (JIT compiles not counted)" % (group, bk.gpu_s, bk.prof_s, Fake.START_S))
        with open(os.path.join(cfg["out"], ".estimate-%s" % group), "w") as ef:
            ef.write("%.3f\n" % (bk.gpu_s + bk.prof_s + Fake.START_S))
    return failures


# ---- the plan: groups of cells -----------------------------------------------------------------------------
def plan(cfg):
    """[(group, [cell])] in priority order: a run cut short by the budget keeps whole groups."""
    M, modes = cfg["methods"], cfg["modes"]
    B, H = cfg["batch"], cfg["heads"]
    pc = cfg["prof_calls"] if "kernel" in modes else 0

    def cell(kind, shape, causal, methods, kernel=(), reps=None, **extra):
        long_ = max(shape[3], shape[4]) >= 16384
        c = dict(kind=kind, shape=list(shape), causal=bool(causal), methods=list(methods),
                 kernel=[m for m in kernel if m in methods] if pc else [], prof_calls=pc,
                 reps=reps or (cfg["reps_long"] if long_ else cfg["reps"]), warmup=2 if long_ else 3, **extra)
        c["stages"] = "sage2" in c["kernel"]
        c["label"] = label_of(c)
        return c

    groups = []
    if "host" in modes:
        hm = [m for m in ("sage2", "fa2", "cudnn") if m in M]
        if hm:
            groups.append(("host", [dict(kind="host", shape=list(HOST_SHAPE), causal=False, methods=hm,
                                         label="host_us B1 H1 N128 d64")]))
    if "decode" in modes:
        dm = [m for m in ("sage2", "cudnn", "fa2") if m in M]
        cs = [cell("decode", (cfg["decode_batch"], H, cfg["decode_kv_heads"], nq, nk, 128), False, dm,
                   reps=cfg["decode_reps"]) for nq, nk in cfg["decode"]]
        if dm and cs:
            groups.append(("decode", cs))
    if "e2e" in modes or "kernel" in modes:
        for d in cfg["head_dims"]:
            for c in cfg["causal"]:
                ms = [m for m in METHODS if m in M and (m != "sage2_ref" or d in REF_DIMS)]
                if "e2e" not in modes:  # kernel only: the profiled methods alone
                    ms = [m for m in ms if m in ("sage2", "sage2_ref")]
                if ms:
                    groups.append(("hd%d_%s" % (d, "causal" if c else "full"),
                                   [cell("attn", (B, H, H, n, n, d), c, ms, kernel=("sage2", "sage2_ref"))
                                    for n in cfg["seq_lens"]]))
        hm = [m for m in ("sage2", "cudnn") if m in M and ("e2e" in modes or m == "sage2")]
        cs = [cell("attn", (B, H, H, n, n, d), False, hm, kernel=("sage2",))
              for d in cfg["extra_head_dims"] for n in cfg["extra_seq_lens"]]
        if hm and cs:
            groups.append(("heads", cs))
    if "real" in modes:
        rm = [m for m in ("sage2", "cudnn") if m in M]
        cs = []
        for name in REAL_NAMES:
            b, h, hk, d, n, causal, dt = STAGE_SHAPES[name]
            cs.append(cell("real", (b, h, hk, n, n, d), causal, rm, name=name, dtype=dt))
        if rm:
            groups.append(("real", cs))
    if "small" in modes:
        sm = [m for m in ("sage2", "cudnn") if m in M]
        if sm:
            groups.append(("small", [cell("small", (b, h, h, n, n, d), c, sm, reps=cfg["small_reps"])
                                     for b, h, d, n, c in SMALL]))
    return groups


# ---- the C++ bench (sage2_cpp host_us) ----------------------------------------------------------------------
def fake_cpp(cfg, argv, path, commit):
    """What sage2-bench-attention --modes host would write, with a made-up time (dry run)."""
    a = dict(zip(argv[1::2], argv[2::2]))  # every option of ours takes a value
    r = dict(run=cfg["run"], commit=commit, rounds=3, dry_run=True, dtype="fp16", device="DRY-RUN (no GPU)",
             command=a["--command"], method="sage2_cpp", mode="host_us", us=FAKE_HOST_US["sage2_cpp"], ms=0.026,
             head_dim=64, causal=False, seq_len=128, batch=1, heads=1, calls=int(a["--host-calls"]))
    with open(path, "a") as f:
        f.write(json.dumps(r) + "\n")
    log("sage2_cpp host_us %.2f us per call (fake)" % r["us"])


def annotate_cpp(path, env):
    """Adds `env` to the C++ bench's records (it reports run, commit and rounds itself)."""
    try:
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        log("cannot read %s: %s" % (path, e))
        return
    with open(path, "w") as f:
        for r in recs:
            r.setdefault("env", env)
            f.write(json.dumps(r) + "\n")


def run_proc(cmd, timeout, env=None):
    """Runs cmd, streaming its output into the log; kills it after timeout seconds. Returns rc."""
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
                             start_new_session=True)  # its own process group: a timeout kills all of it
    except OSError as e:
        log("cannot start %s: %s" % (cmd[0], e))
        return 127

    def pump():
        for line in p.stdout:
            print("    " + line.rstrip(), flush=True)
    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        rc = p.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            p.kill()
        p.wait()
        log("killed after %.0f s (time budget)" % timeout)
        rc = 124
    t.join(timeout=5)
    return rc


def run_group(cfg, group, cells):
    """Runs a group's worker; when it dies (a CUDA fault, a crash) it re-runs the group's remaining
    cells without the method that was running (OUT/.state-<group>.json). Returns (rc, notes)."""
    notes = []
    state_path = os.path.join(cfg["out"], ".state-%s.json" % group)
    todo = cells
    while True:
        left = cfg["deadline"] - time.time()
        if left <= 0:
            notes.append("%s: budget spent before it started" % group)
            return 1, notes
        try:
            os.remove(state_path)
        except OSError:
            pass
        rc = run_proc([sys.executable, "-u", os.path.abspath(__file__), "--out", cfg["out"], "--worker", group,
                       "--config", json.dumps(dict(cfg, cells=todo))], left + 90)
        if rc in (0, 1, 124):
            if rc:
                notes.append("%s: rc %d" % (group, rc))
            return rc, notes
        try:
            with open(state_path) as f:
                st = json.load(f)
            i, m = int(st["cell"]), st["method"]
            todo[i]
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            notes.append("%s: died (rc %d), nothing to resume" % (group, rc))
            return rc, notes
        msg = "%s: died (rc %d) in %s, method %s (%s)" % (group, rc, todo[i]["label"], m, st.get("phase"))
        notes.append(msg)
        if m is None:  # not in a method's call (e.g. making the inputs): the cell is skipped
            log(msg + "; the group goes on after that cell")
            todo = todo[i + 1:]
            if not todo:
                return rc, notes
            continue
        log(msg + "; its remaining cells run again without %s" % m)
        rest = []
        for c in todo[i:]:
            c = dict(c, methods=[x for x in c["methods"] if x != m], kernel=[x for x in c.get("kernel", []) if x != m])
            c["stages"] = c.get("stages") and "sage2" in c["kernel"]
            if c["methods"]:
                rest.append(c)
        if not rest:
            return rc, notes
        todo = rest


def device_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        if out:
            return out.splitlines()[0]
    except Exception:  # noqa: BLE001
        pass
    return "gpu"


# ---- the final table -------------------------------------------------------------------------------------
def load_run(out, run):
    recs = []
    for name in sorted(os.listdir(out)):
        if name.endswith(".jsonl"):
            with open(os.path.join(out, name)) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if r.get("run") == run:
                        recs.append(r)
    return recs


def summary(out, run):
    recs = load_run(out, run)
    f1 = lambda v: "%7.1f" % v if isinstance(v, (int, float)) else "%7s" % "-"
    f2 = lambda a, b: "%5.2f" % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "%5s" % "-"
    tab, stages = {}, {}
    for r in recs:
        if r.get("mode") in ("e2e", "kernel") and r.get("shape") != "small":
            tab[(r["head_dim"], bool(r["causal"]), r["seq_len"], r["method"], r["mode"])] = r.get("tops")
        if r.get("mode") == "stages":
            stages[(r["head_dim"], bool(r["causal"]), r["seq_len"])] = r
    commits = sorted({str(r.get("commit")) for r in recs})
    rounds = sorted({r.get("rounds") for r in recs if r.get("rounds") is not None})
    lines = ["run %s: %d records, commit %s, rounds %s" % (run, len(recs), ", ".join(commits) or "-",
                                                            ",".join(map(str, rounds)) or "-"),
             "TOPS (median over rounds); kernel = CUPTI device time of the attention kernel(s) in the user's call",
             "%4s %6s %6s | %7s %7s %5s | %7s %7s %7s %7s | %5s %5s | %8s" % (
                 "hd", "causal", "N", "s2 kern", "refkern", "ratio", "s2 e2e", "ref e2e", "cudnn", "fa2", "s2/cu",
                 "s2/rf", "prologue")]
    for d, c, n in sorted({k[:3] for k in tab}):
        g = lambda m, md: tab.get((d, c, n, m, md))
        st = stages.get((d, c, n))
        pro = "%7.0f%%" % (100.0 * st["prologue_us"] / st["gpu_us"]) if st and st.get("gpu_us") else "%8s" % "-"
        lines.append("%4d %6s %6d | %s %s %s | %s %s %s %s | %s %s | %s" % (
            d, "yes" if c else "no", n, f1(g("sage2", "kernel")), f1(g("sage2_ref", "kernel")),
            f2(g("sage2", "kernel"), g("sage2_ref", "kernel")), f1(g("sage2", "e2e")), f1(g("sage2_ref", "e2e")),
            f1(g("cudnn", "e2e")), f1(g("fa2", "e2e")), f2(g("sage2", "e2e"), g("cudnn", "e2e")),
            f2(g("sage2", "e2e"), g("sage2_ref", "e2e")), pro))
    if stages:
        lines.append("sage2 GPU time per call by kernel (us, CUPTI, median over rounds; sage2_ dropped from names):")
        for (d, c, n), st in sorted(stages.items()):
            pro = sorted(((k, v) for k, v in st["kernels"].items() if not is_attention_kernel("sage2", k)),
                         key=lambda kv: -kv[1])
            lines.append("  hd%-3d %-6s N %-5d %8.0f = attention %8.0f + prologue %6.0f: %s" % (
                d, "causal" if c else "full", n, st["gpu_us"], st["attention_us"], st["prologue_us"],
                ", ".join("%s %.0f" % (k[6:] if k.startswith("sage2_") else k, v) for k, v in pro)))
    host = {r["method"]: r["us"] for r in recs if r.get("mode") == "host_us"}
    if host:
        lines.append("host us per call (B=1 H=1 N=128 d=64): " + ", ".join("%s %.1f" % kv for kv in sorted(host.items()))
                     + ("  (sage2/fa2 %.2f)" % (host["sage2"] / host["fa2"]) if "sage2" in host and "fa2" in host else ""))
    dec = {}
    for r in recs:
        if r.get("mode") == "decode_us":
            dec.setdefault((r["nq"], r["nk"]), {})[r["method"]] = r["us"]
    for (nq, nk), v in sorted(dec.items()):
        best = min([v[m] for m in ("cudnn", "fa2") if m in v], default=None)
        lines.append("decode Nq %3d Nk %5d (Hq 32 / Hkv 8, hd 128, B 4): %s%s" % (
            nq, nk, ", ".join("%s %.1f us" % (m, v[m]) for m in ("sage2", "cudnn", "fa2") if m in v),
            "  time sage2/best SDPA %.2f" % (v["sage2"] / best) if best and "sage2" in v else ""))
    small = {}
    for r in recs:
        if r.get("shape") == "small":
            small.setdefault((r["batch"], r["heads"], r["head_dim"], r["seq_len"], bool(r["causal"])), {})[r["method"]] = r["ms"]
    for (b, h, d, n, c), v in sorted(small.items()):
        lines.append("small B%d H%d hd%d N%d %s: %s%s" % (
            b, h, d, n, "causal" if c else "full", ", ".join("%s %.3f ms" % (m, v[m]) for m in sorted(v)),
            "  time cudnn/sage2 %.2f" % (v["cudnn"] / v["sage2"]) if "cudnn" in v and "sage2" in v else ""))
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the records (created)")
    ap.add_argument("--run", default="", help="run id (default: UTC minute + device short name)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--seq-lens", default=",".join(map(str, SEQS)))
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--extra-head-dims", default="96,192,256", help="the heads group: non-causal, sage2 and cudnn")
    ap.add_argument("--extra-seq-lens", default="4096,8192,16384,32768")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per cell (>= 3 for scoreboard.py to count them)")
    ap.add_argument("--reps", type=int, default=10, help="timed calls per method per round")
    ap.add_argument("--reps-long", type=int, default=5, help="--reps at N >= 16K")
    ap.add_argument("--prof-calls", type=int, default=2, help="profiled calls per method per round (kernel, stages)")
    ap.add_argument("--flush-l2", type=int, default=256, help="MB overwritten before each timed call (0: off)")
    ap.add_argument("--host-calls", type=int, default=2000)
    ap.add_argument("--decode", default=DECODE, help="NqxNk cells of the decode group")
    ap.add_argument("--decode-batch", type=int, default=4)
    ap.add_argument("--decode-kv-heads", type=int, default=8)
    ap.add_argument("--decode-reps", type=int, default=30)
    ap.add_argument("--small-reps", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=420, help="no group or cell starts after this many seconds")
    ap.add_argument("--bench-bin", default="build/bench/sage2-bench-attention")
    ap.add_argument("--command", default="", help="recorded in every record (default: this command line)")
    ap.add_argument("--dry-run", action="store_true", help="fake timings, no GPU; --out must be under /tmp")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        global T0
        cfg = json.loads(a.config)
        T0 = cfg["t0"]  # one clock for the whole log
        sys.exit(1 if worker(cfg, a.worker, cfg["cells"]) else 0)

    out = os.path.abspath(a.out)
    if a.dry_run:
        tmp = os.path.realpath(tempfile.gettempdir()) + os.sep
        if not os.path.realpath(out).startswith(tmp):
            raise SystemExit("--dry-run writes only under %s (fake records must never reach bench/results)" % tmp)
    if a.rounds < 1 or a.reps < 1 or a.reps_long < 1:
        raise SystemExit("--rounds, --reps and --reps-long must be >= 1")
    os.makedirs(out, exist_ok=True)
    dev = "DRY-RUN (no GPU)" if a.dry_run else device_name()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    run = a.run or "%s-%s" % (stamp, "cpu" if a.dry_run else short_device(dev))
    if a.dry_run and not run.startswith("dry-"):
        run = "dry-" + run
    decode = []
    for x in a.decode.split(","):
        if x.strip():
            nq, _, nk = x.strip().partition("x")
            decode.append((int(nq), int(nk)))
    cfg = dict(out=out, run=run, dry_run=a.dry_run, methods=names(a.methods, METHODS, "method"),
               modes=names(a.modes, MODES, "mode"), head_dims=ints(a.head_dims), seq_lens=ints(a.seq_lens),
               causal=ints(a.causal), extra_head_dims=ints(a.extra_head_dims), extra_seq_lens=ints(a.extra_seq_lens),
               batch=a.batch, heads=a.heads, rounds=a.rounds, reps=a.reps, reps_long=a.reps_long,
               prof_calls=a.prof_calls, flush_mb=a.flush_l2, host_calls=a.host_calls, decode=decode,
               decode_batch=a.decode_batch, decode_kv_heads=a.decode_kv_heads, decode_reps=a.decode_reps,
               small_reps=a.small_reps, t0=T0, deadline=T0 + a.budget_s,
               command=a.command or "python3 bench/scoreboard_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:]))
    log("run %s on %s -> %s" % (run, dev, out))
    log("methods %s, modes %s, hd %s (+%s non-causal), N %s, %d rounds, reps %d/%d (N >= 16K), %d profiled calls, "
        "L2 flush %d MB, budget %.0f s" % (",".join(cfg["methods"]), ",".join(cfg["modes"]), a.head_dims,
                                           a.extra_head_dims, a.seq_lens, a.rounds, a.reps, a.reps_long, a.prof_calls,
                                           a.flush_l2, a.budget_s))
    if a.rounds < 3:
        log("WARNING: --rounds %d < 3: scoreboard.py will not count these records" % a.rounds)

    steps = [(g, cells) for g, cells in plan(cfg)]
    if "host" in cfg["modes"] and "sage2" in cfg["methods"]:
        steps.append(("sage2_cpp_host", None))
    notes = []
    for group, cells in steps:
        if cfg["deadline"] - time.time() <= 0:
            log("budget spent: step %s skipped" % group)
            notes.append(group + " (skipped)")
            continue
        if cells is None:  # the C++ bench
            log("== sage2_cpp host_us (%s --modes host)" % os.path.relpath(a.bench_bin))
            path = os.path.join(out, "sage2_cpp_host.jsonl")
            opts = ["--modes", "host", "--host-calls", str(a.host_calls), "--run", run]
            shown = " ".join([os.path.relpath(a.bench_bin)] + opts + ["--json", "sage2_cpp_host.jsonl"])
            argv = [a.bench_bin] + opts + ["--json", path, "--command", shown]
            if a.dry_run:
                # the commit the Python workers' libsage2 reported (the C++ bench reports its own)
                fake_cpp(cfg, argv, path, next((r["commit"] for r in load_run(out, run) if r.get("commit")),
                                               "unknown"))
                rc = 0
            else:
                rc = run_proc(argv, cfg["deadline"] - time.time() + 60)
            annotate_cpp(path, sage2_env())
            commits = {str(r.get("commit")) for r in load_run(out, run)}
            if len(commits) > 1:
                log("WARNING: the records of this run name several commits: %s (is %s from the same build as "
                    "the libsage2 the Python steps loaded?)" % (", ".join(sorted(commits)), a.bench_bin))
            if rc:
                notes.append("sage2_cpp_host: rc %d" % rc)
            continue
        log("== %s: %d cells (%s .. %s), methods %s" % (group, len(cells), cells[0]["label"], cells[-1]["label"],
                                                      ",".join(cells[0]["methods"])))
        rc, n = run_group(cfg, group, cells)
        notes += n
    log("done in %.0f s" % (time.time() - T0))
    if a.dry_run:
        est = 0.0
        for name in os.listdir(out):
            if name.startswith(".estimate-"):
                with open(os.path.join(out, name)) as f:
                    est += float(f.read())
                os.remove(os.path.join(out, name))
        log("dry run: estimated time of the real run on an H100: %.0f s (+ JIT compiles of a cold kernel cache)" % est)
    summary(out, run)
    if notes:
        log("incomplete: " + "; ".join(notes))
    sys.exit(1 if notes else 0)


if __name__ == "__main__":
    main()
