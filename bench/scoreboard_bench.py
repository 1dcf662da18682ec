#!/usr/bin/env python3
"""Every cell of ../shared/tools/scoreboard.py in one benchmark run (started by bench/scoreboard_run.sh).

Records (DESIGN.md "Benchmark records"; one `run` id for all) go to OUT/*.jsonl as they are measured:
  sage2     kernel   build/bench/sage2-bench-attention --modes kernel (attention stage on a quantized
                     workspace), hd 64/128 causal 0/1 N 1K..32K and hd 96/192/256 non-causal N 4K..32K
  sage2     e2e      sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=c)
  sage2_ref kernel   _qattn_sm90.qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf on inputs quantized
                     by the reference's own per_thread_int8 / per_channel_fp8 (hd 64/128)
  sage2_ref e2e      sageattention.sageattn_qk_int8_pv_fp8_cuda_sm90 (hd 64/128)
  cudnn, fa2 e2e     torch SDPA with one backend forced (cudnn also at hd 96/192/256)
  host_us            field `us`: B=1 H=1 N=128 d=64, `--host-calls` back-to-back calls and one
                     synchronise, wall time / calls, median of 3 loops: sage2 (Python), fa2, cudnn,
                     sage2_ref, and sage2_cpp (Context::attention, from the C++ bench)
  decode             (issue 15; not a scoreboard cell) Nq=1, Nk 4K/32K, Hq 32, Hkv 8, hd 128:
                     sage2 vs `sdpa` (torch default backend, enable_gqa), field `us` per call
Timing, the same for every method: CUDA events around each call, synchronised per call, median of
--reps (--reps-long at N >= 16K) after warm-up; before each timed call a --flush-l2 MB buffer is
overwritten (then synchronised) so no method is timed from a warm L2. Inputs: randn fp16, fresh per
shape, seeded by the shape (every method sees the same values).
Each method group runs in its own process (a CUDA fault loses that group only), ordered so that a
run cut short still holds complete cells; no group starts after --budget-s.
--dry-run writes fake records (dry_run: true, run id "dry-...") under /tmp only, without a GPU.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

SEQS = [1024, 2048, 4096, 8192, 16384, 32768]
METHODS = ["sage2", "sage2_ref", "cudnn", "fa2", "sdpa"]
MODES = ["host", "kernel", "e2e", "decode"]
REF_DIMS = (64, 128)  # the reference raises "Unsupported head_dim" elsewhere
T0 = time.time()


def log(msg):
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


def ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def names(s, allowed, what):
    out = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in out if x not in allowed]
    if bad:
        raise SystemExit("unknown %s %s (known: %s)" % (what, ",".join(bad), ",".join(allowed)))
    return out


def ops(b, h, n, d, causal):
    return 4.0 * b * h * n * n * d / (2.0 if causal else 1.0)


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


# ---- measurement backends: Real (torch on the GPU) and Fake (--dry-run) ------------------------------
class Real:
    def __init__(self, cfg):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch, self.F, self.sdpa_kernel = torch, F, sdpa_kernel
        self.backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}
        torch.cuda.init()
        self.device = torch.cuda.get_device_name(0)
        mb = cfg["flush_mb"]
        self.flush = torch.empty(mb << 20, dtype=torch.uint8, device="cuda") if mb else None
        self.key, self.qkv, self.prepared = None, None, {}

    def inputs(self, b, hq, hkv, nq, nk, d):
        key = (b, hq, hkv, nq, nk, d)
        if key != self.key:
            self.qkv, self.prepared = None, {}  # free the previous shape first
            g = self.torch.Generator(device="cuda")
            g.manual_seed(zlib.crc32(repr(key).encode()))
            mk = lambda h, n: self.torch.randn(b, h, n, d, generator=g, device="cuda", dtype=self.torch.float16)
            self.qkv, self.key = (mk(hq, nq), mk(hkv, nk), mk(hkv, nk)), key
        return self.qkv

    def call(self, method, mode, causal):
        """(fn, context manager held while fn is timed) on the current inputs."""
        import contextlib
        q, k, v = self.qkv
        F = self.F
        if method == "sage2":
            import sage2
            return (lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)), contextlib.nullcontext()
        if method == "sage2_ref" and mode == "kernel":
            from sageattention import _qattn_sm90
            from sageattention.quant import per_channel_fp8
            from sageattention.triton.quant_per_thread import per_thread_int8
            # Quantized exactly as sageattn_qk_int8_pv_fp8_cuda_sm90 does it (smooth K, per-thread, fp8 V).
            km = k.mean(dim=2, keepdim=True)
            q8, qs, k8, ks = per_thread_int8(q, k, km, tensor_layout="HND", BLKQ=64, WARPQ=16, BLKK=128, WARPK=128)
            v8, vs, _ = per_channel_fp8(v, tensor_layout="HND", smooth_v=False)
            o = self.torch.empty_like(q)
            scale = q.size(-1) ** -0.5
            c = int(causal)
            self.prepared["ref"] = (q8, qs, k8, ks, v8, vs, o)
            return (lambda: _qattn_sm90.qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf(
                q8, k8, v8, o, qs, ks, vs, 1, c, 3, scale, 0)), contextlib.nullcontext()
        if method == "sage2_ref":
            from sageattention import sageattn_qk_int8_pv_fp8_cuda_sm90 as ref
            return (lambda: ref(q, k, v, tensor_layout="HND", is_causal=causal)), contextlib.nullcontext()
        if method in self.backends:
            # Entered once around the timing loop, not per call: its cost is not the backend's.
            return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), \
                self.sdpa_kernel([self.backends[method]])
        if method == "sdpa":
            gqa = q.size(1) != k.size(1)
            return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)), \
                contextlib.nullcontext()
        raise ValueError("no %s %s" % (method, mode))

    def median_ms(self, method, mode, causal, reps, warmup):
        fn, ctx = self.call(method, mode, causal)
        with ctx:
            times = event_times_ms(self.torch, fn, reps, warmup, self.flush)
        times.sort()
        return times[len(times) // 2]

    def host_us(self, method, calls, repeats=3):
        fn, ctx = self.call(method, "e2e", False)
        with ctx:
            for _ in range(50):
                fn()
            self.torch.cuda.synchronize()
            us = []
            for _ in range(repeats):
                t = time.perf_counter()
                for _ in range(calls):
                    fn()
                self.torch.cuda.synchronize()
                us.append((time.perf_counter() - t) / calls * 1e6)
        us.sort()
        return us[len(us) // 2]

    def alive(self):
        try:
            self.torch.cuda.synchronize()
            return True
        except Exception:
            return False

    def after_failure(self):
        self.qkv, self.key, self.prepared = None, None, {}
        try:
            self.torch.cuda.empty_cache()
        except Exception:
            pass


# Made-up H100-like speeds for --dry-run: plausible magnitudes so the time estimate means something.
FAKE_TOPS = {("sage2", "kernel"): 700, ("sage2_ref", "kernel"): 750, ("sage2", "e2e"): 600,
             ("sage2_ref", "e2e"): 560, ("cudnn", "e2e"): 520, ("fa2", "e2e"): 360}
FAKE_HOST_US = {"sage2": 40.0, "fa2": 26.0, "cudnn": 30.0, "sage2_ref": 90.0, "sage2_cpp": 9.0}


class Fake:
    def __init__(self, cfg):
        self.device = "DRY-RUN (no GPU)"
        self.gpu_s = 0.0  # estimated GPU seconds of the real run
        self.shape = None

    def inputs(self, b, hq, hkv, nq, nk, d):
        self.shape = (b, hq, hkv, nq, nk, d)

    def median_ms(self, method, mode, causal, reps, warmup):
        b, hq, hkv, nq, nk, d = self.shape
        if nq == 1:  # decode: K and V read once at ~2.5 TB/s
            ms = 2 * b * hkv * nk * d * 2 / 2.5e12 * 1e3 + 0.02
        else:
            tops = FAKE_TOPS[(method, mode)] * (0.75 if d < 128 else 1.0) * nk / (nk + 1500.0)
            ms = ops(b, hq, nk, d, causal) / (tops * 1e12) * 1e3
        self.gpu_s += (reps + warmup) * (ms + 0.1) / 1e3
        return ms

    def host_us(self, method, calls, repeats=3):
        us = FAKE_HOST_US[method]
        self.gpu_s += (calls * repeats + 50) * us / 1e6
        return us

    def alive(self):
        return True

    def after_failure(self):
        pass


# ---- one worker process: a group of methods over its shapes -----------------------------------------
def worker(cfg, group):
    bk = Fake(cfg) if cfg["dry_run"] else Real(cfg)
    path = os.path.join(cfg["out"], group + ".jsonl")
    base = dict(run=cfg["run"], dtype="fp16", device=bk.device, command=cfg["command"])
    if cfg.get("commit"):
        base["commit"] = cfg["commit"]
    if cfg["dry_run"]:
        base["dry_run"] = True
    methods, modes = cfg["methods"], cfg["modes"]
    B, H = cfg["batch"], cfg["heads"]
    failures = 0
    with open(path, "a") as f:
        def emit(rec):
            r = dict(base)
            r.update(rec)
            f.write(json.dumps(r) + "\n")
            f.flush()

        def attempt(label, thunk):
            """Runs one measurement; a failure is logged and the worker goes on (or stops when CUDA is gone)."""
            nonlocal failures
            try:
                return thunk()
            except Exception as e:
                failures += 1
                log("FAILED %s: %s: %s" % (label, type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else ""))
                bk.after_failure()
                if not bk.alive():
                    log("CUDA context lost in group %s; its remaining shapes are skipped" % group)
                    f.flush()
                    sys.exit(3)
                return None

        def over_budget(label):
            if time.time() > cfg["deadline"]:
                log("budget spent: %s and the rest of group %s skipped" % (label, group))
                return True
            return False

        if group == "host":
            bk_shape = (1, 1, 1, 128, 128, 64)
            for m in [m for m in ("fa2", "cudnn", "sage2_ref", "sage2") if m in methods]:
                label = "%s host_us" % m
                def thunk(m=m):
                    bk.inputs(*bk_shape)
                    return bk.host_us(m, cfg["host_calls"])
                us = attempt(label, thunk)
                if us is not None:
                    log("%-9s host_us  %.2f us per call (B=1 H=1 N=128 d=64, %d calls x 3, median)" % (m, us, cfg["host_calls"]))
                    emit(dict(method=m, mode="host_us", us=round(us, 3), ms=round(us * 1e-3, 6), head_dim=64,
                              causal=False, seq_len=128, batch=1, heads=1, calls=cfg["host_calls"]))
            return failures

        if group == "decode":
            d, hq, hkv = 128, cfg["heads"], cfg["decode_kv_heads"]
            for nk in cfg["decode_kv_lens"]:
                for m in [m for m in ("sdpa", "sage2") if m in methods]:
                    label = "%s decode Nk=%d" % (m, nk)
                    if over_budget(label):
                        return failures
                    def thunk(m=m, nk=nk):
                        bk.inputs(cfg["decode_batch"], hq, hkv, 1, nk, d)
                        return bk.median_ms(m, "e2e", False, cfg["decode_reps"], 5)
                    ms = attempt(label, thunk)
                    if ms is None:
                        continue
                    gbps = 2.0 * cfg["decode_batch"] * hkv * nk * d * 2 / (ms * 1e-3) / 1e9
                    log("%-9s decode   Nq=1 Nk=%-6d Hq=%d Hkv=%d d=%d  %8.1f us  %7.0f GB/s (K+V)" % (m, nk, hq, hkv, d, ms * 1e3, gbps))
                    emit(dict(method=m, mode="decode", us=round(ms * 1e3, 2), ms=round(ms, 5), gbps=round(gbps, 1),
                              head_dim=d, causal=False, seq_len=nk, seq_len_q=1, batch=cfg["decode_batch"],
                              heads=hq, heads_kv=hkv, reps=cfg["decode_reps"], flush_l2_mb=cfg["flush_mb"]))
            return failures

        # Shape groups: (method, mode) pairs per shape, main shapes first, then the extra head dims.
        pairs = {"sage2": [("sage2", "e2e")],
                 "sage2_ref": [("sage2_ref", "kernel"), ("sage2_ref", "e2e")],
                 "torch": [("cudnn", "e2e"), ("fa2", "e2e")]}[group]
        pairs = [(m, md) for m, md in pairs if m in methods and md in modes]
        shapes = [(d, c, n, pairs) for d in cfg["head_dims"] for c in cfg["causal"] for n in cfg["seq_lens"]]
        if group == "torch":
            extra = [p for p in pairs if p[0] == "cudnn"]
            shapes += [(d, 0, n, extra) for d in cfg["extra_head_dims"] for n in cfg["extra_seq_lens"]]
        for d, causal, n, todo in shapes:
            todo = [p for p in todo if p[0] != "sage2_ref" or d in REF_DIMS]
            if not todo:
                continue
            if over_budget("hd%d causal=%d N=%d" % (d, causal, n)):
                return failures
            long_ = n >= 16384
            reps, warmup = (cfg["reps_long"], 2) if long_ else (cfg["reps"], 3)
            if attempt("inputs hd%d N=%d" % (d, n), lambda: bk.inputs(B, H, H, n, n, d) or True) is None:
                continue
            for m, mode in todo:
                label = "%s %s hd%d causal=%d N=%d" % (m, mode, d, causal, n)
                ms = attempt(label, lambda: bk.median_ms(m, mode, bool(causal), reps, warmup))
                if ms is None:
                    continue
                tops = ops(B, H, n, d, causal) / (ms * 1e-3) / 1e12
                log("%-9s %-6s hd%-3d causal=%d N=%-6d %9.3f ms %7.1f TOPS" % (m, mode, d, causal, n, ms, tops))
                emit(dict(method=m, mode=mode, head_dim=d, causal=bool(causal), seq_len=n, batch=B, heads=H,
                          tops=round(tops, 2), ms=round(ms, 4), reps=reps, flush_l2_mb=cfg["flush_mb"]))
    if cfg["dry_run"]:
        log("group %s: estimated GPU time of the real run %.1f s" % (group, bk.gpu_s))
    return failures


# ---- the C++ bench (sage2 kernel, sage2_cpp host) -------------------------------------------------------
def fake_cpp(cfg, argv, path, run_field):
    """What sage2-bench-attention would write, with made-up timings (dry run)."""
    a = dict(zip(argv[1::2], argv[2::2]))  # every option of ours takes a value
    base = dict(run=run_field, dry_run=True, dtype="fp16", device="DRY-RUN (no GPU)", command=a["--command"])
    est = 0.0
    with open(path, "a") as f:
        if int(a.get("--host-calls", 0)):
            r = dict(base, method="sage2_cpp", mode="host_us", us=FAKE_HOST_US["sage2_cpp"], ms=0.009, head_dim=64,
                     causal=False, seq_len=128, batch=1, heads=1, calls=int(a["--host-calls"]))
            f.write(json.dumps(r) + "\n")
            est += int(a["--host-calls"]) * 3 * 9e-6
        if "kernel" in a.get("--modes", "").split(","):
            reps = int(a["--reps"])
            for d in ints(a["--head-dims"]):
                for c in ints(a["--causal"]):
                    for n in ints(a["--seq-lens"]):
                        tops = FAKE_TOPS[("sage2", "kernel")] * (0.75 if d < 128 else 1.0) * n / (n + 1500.0)
                        ms = ops(cfg["batch"], cfg["heads"], n, d, c) / (tops * 1e12) * 1e3
                        est += (reps + 3) * (ms + 0.1) / 1e3
                        r = dict(base, method="sage2", mode="kernel", head_dim=d, causal=bool(c), seq_len=n,
                                 batch=cfg["batch"], heads=cfg["heads"], qk_bits=8, family="wgmma", tile="dry",
                                 ms=round(ms, 4), tops=round(tops, 2))
                        f.write(json.dumps(r) + "\n")
                        log("sage2     kernel hd%-3d causal=%d N=%-6d %9.3f ms %7.1f TOPS (fake)" % (d, c, n, ms, tops))
    log("C++ step: estimated GPU time of the real run %.1f s (plus JIT compiles)" % est)


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
        rc = p.wait()
        log("killed after %.0f s (time budget)" % timeout)
        rc = 124
    t.join(timeout=5)
    return rc


def git_commit():
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or None
    except Exception:
        return None


def device_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        if out:
            return out.splitlines()[0]
    except Exception:
        pass
    try:
        import torch
        return torch.cuda.get_device_name(0)
    except Exception:
        return "gpu"


# ---- the final table --------------------------------------------------------------------------------
def summary(out, run):
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
    cols = [("sage2", "kernel"), ("sage2_ref", "kernel"), ("sage2", "e2e"), ("sage2_ref", "e2e"), ("cudnn", "e2e"),
            ("fa2", "e2e")]
    tab = {}
    for r in recs:
        if (r.get("method"), r.get("mode")) in cols:
            tab[(r["head_dim"], bool(r["causal"]), r["seq_len"], r["method"], r["mode"])] = r.get("tops")
    lines = ["TOPS, run %s (%d records)" % (run, len(recs)),
             "%5s %6s %6s | %8s %8s | %8s %8s %8s %8s" % ("hd", "causal", "N", "s2 kern", "ref kern", "s2 e2e", "ref e2e",
                                                        "cudnn", "fa2")]
    shapes = sorted({k[:3] for k in tab})
    for d, c, n in shapes:
        vals = []
        for m, md in cols:
            v = tab.get((d, c, n, m, md))
            vals.append("%8.1f" % v if isinstance(v, (int, float)) else "%8s" % "-")
        lines.append("%5d %6s %6d | %s %s | %s" % (d, "yes" if c else "no", n, vals[0], vals[1], " ".join(vals[2:])))
    host = {r["method"]: r["us"] for r in recs if r.get("mode") == "host_us"}
    if host:
        lines.append("host us per call (B=1 H=1 N=128 d=64): " + ", ".join("%s %.1f" % kv for kv in sorted(host.items())))
    for r in sorted((r for r in recs if r.get("mode") == "decode"), key=lambda r: (r["seq_len"], r["method"])):
        lines.append("decode Nq=1 Nk=%-6d Hq=%d Hkv=%d d=%d: %-6s %8.1f us" % (r["seq_len"], r["heads"], r["heads_kv"],
                                                                            r["head_dim"], r["method"], r["us"]))
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
    ap.add_argument("--extra-head-dims", default="96,192,256", help="non-causal, sage2 kernel and cudnn only")
    ap.add_argument("--extra-seq-lens", default="4096,8192,16384,32768")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--reps-long", type=int, default=10, help="reps at N >= 16K")
    ap.add_argument("--flush-l2", type=int, default=256, help="MB overwritten before each timed call (0: off)")
    ap.add_argument("--host-calls", type=int, default=2000)
    ap.add_argument("--decode-kv-lens", default="4096,32768")
    ap.add_argument("--decode-batch", type=int, default=4)
    ap.add_argument("--decode-kv-heads", type=int, default=8)
    ap.add_argument("--decode-reps", type=int, default=50)
    ap.add_argument("--budget-s", type=float, default=420, help="no step starts after this many seconds")
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
        sys.exit(1 if worker(cfg, a.worker) else 0)

    out = os.path.abspath(a.out)
    if a.dry_run:
        tmp = os.path.realpath(tempfile.gettempdir()) + os.sep
        if not os.path.realpath(out).startswith(tmp):
            raise SystemExit("--dry-run writes only under %s (fake records must never reach bench/results)" % tmp)
    os.makedirs(out, exist_ok=True)
    dev = "DRY-RUN (no GPU)" if a.dry_run else device_name()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    run = a.run or "%s-%s" % (stamp, "cpu" if a.dry_run else short_device(dev))
    if a.dry_run and not run.startswith("dry-"):
        run = "dry-" + run
    cfg = dict(out=out, run=run, dry_run=a.dry_run, methods=names(a.methods, METHODS, "method"),
               modes=names(a.modes, MODES, "mode"), head_dims=ints(a.head_dims), seq_lens=ints(a.seq_lens),
               causal=ints(a.causal), extra_head_dims=ints(a.extra_head_dims), extra_seq_lens=ints(a.extra_seq_lens),
               batch=a.batch, heads=a.heads, reps=a.reps, reps_long=a.reps_long, flush_mb=a.flush_l2,
               host_calls=a.host_calls, decode_kv_lens=ints(a.decode_kv_lens), decode_batch=a.decode_batch,
               decode_kv_heads=a.decode_kv_heads, decode_reps=a.decode_reps, t0=T0, deadline=T0 + a.budget_s,
               command=a.command or "python3 bench/scoreboard_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:]),
               commit=git_commit())
    log("run %s on %s -> %s" % (run, dev, out))
    log("methods %s, modes %s, hd %s (+%s non-causal), N %s, reps %d/%d, L2 flush %d MB, budget %.0f s"
        % (",".join(cfg["methods"]), ",".join(cfg["modes"]), a.head_dims, a.extra_head_dims, a.seq_lens, a.reps,
           a.reps_long, a.flush_l2, a.budget_s))

    steps = []  # (label, argv or worker group); order = priority when the budget runs short
    want = lambda m, md: m in cfg["methods"] and md in cfg["modes"]
    cpp_common = ["--batch", str(a.batch), "--heads", str(a.heads), "--flush-l2", str(a.flush_l2), "--run", run]
    if want("sage2", "host"):
        steps.append(("sage2_cpp host_us", ["--modes", "host", "--host-calls", str(a.host_calls)], "sage2_cpp_host"))
    if any(m in cfg["methods"] for m in ("sage2", "sage2_ref", "cudnn", "fa2")) and "host" in cfg["modes"]:
        steps.append(("python host_us", "host", None))
    if want("sage2", "kernel"):
        kern = [(d, cfg["causal"], cfg["seq_lens"]) for d in cfg["head_dims"]]
        kern += [(d, [0], cfg["extra_seq_lens"]) for d in cfg["extra_head_dims"]]
        for d, causal, lens in kern:
            for part, reps in (([n for n in lens if n < 16384], a.reps), ([n for n in lens if n >= 16384], a.reps_long)):
                if part:
                    tag = "hd%d_n%d-%d" % (d, part[0], part[-1])
                    steps.append(("sage2 kernel " + tag,
                                  ["--modes", "kernel", "--head-dims", str(d), "--causal", ",".join(map(str, causal)),
                                   "--seq-lens", ",".join(map(str, part)), "--reps", str(reps)], "sage2_kernel_" + tag))
    if want("sage2", "e2e"):
        steps.append(("sage2 e2e", "sage2", None))
    if "sage2_ref" in cfg["methods"] and ("kernel" in cfg["modes"] or "e2e" in cfg["modes"]):
        steps.append(("sage2_ref kernel+e2e", "sage2_ref", None))
    if (want("cudnn", "e2e") or want("fa2", "e2e")):
        steps.append(("cudnn/fa2 e2e", "torch", None))
    if "decode" in cfg["modes"] and ("sage2" in cfg["methods"] or "sdpa" in cfg["methods"]):
        steps.append(("decode", "decode", None))

    failed = []
    for label, what, stem in steps:
        left = cfg["deadline"] - time.time()
        if left <= 0:
            log("budget spent: step '%s' skipped" % label)
            failed.append(label + " (skipped)")
            continue
        log("== %s" % label)
        if isinstance(what, list):  # the C++ bench
            path = os.path.join(out, stem + ".jsonl")
            argv = [a.bench_bin] + what + cpp_common + ["--json", path]
            shown = " ".join([os.path.relpath(a.bench_bin)] + what + cpp_common + ["--json", stem + ".jsonl"])
            argv += ["--command", shown]
            if a.dry_run:
                fake_cpp(cfg, argv, path, run)
                rc = 0
            else:
                rc = run_proc(argv, left + 30)
        else:
            rc = run_proc([sys.executable, "-u", os.path.abspath(__file__), "--out", out, "--worker", what,
                           "--config", json.dumps(cfg)], left + 30)
        if rc != 0:
            failed.append("%s (rc %d)" % (label, rc))
            log("step '%s' ended with rc %d; going on" % (label, rc))
    log("done in %.0f s" % (time.time() - T0))
    summary(out, run)
    if failed:
        log("incomplete: " + "; ".join(failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
