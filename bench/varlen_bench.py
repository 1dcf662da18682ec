#!/usr/bin/env python3
"""Variable-length batches (issue 17): sage2.sageattn_varlen against the dense call and torch SDPA.

    PYTHONPATH=python SAGE2_LIBRARY=build/libsage2.so python3 bench/varlen_bench.py --out FILE [--run ID]

Two measurements (hd 128, fp16, Hq = Hkv = 32 unless options say otherwise), both directions:
  equal  B sequences of N tokens each: sage2.sageattn on the dense [B, H, N, D] tensors (method
         "sage2") vs sage2.sageattn_varlen on the same tokens packed [B*N, H, D] with
         cu_seqlens = 0, N, 2N, ... (method "sage2_varlen")
  mixed  sequences of random lengths in [--min-len, --max-len] (fixed --seed) that add up to
         --mixed-total tokens: sage2.sageattn_varlen on the packed tokens ("sage2_varlen"),
         torch SDPA on the zero-padded dense batch [B, H, max len, D] with a boolean key-padding
         mask, causal combined into it (torch picks the backend; "sdpa"), and sage2.sageattn on
         the same padded batch with kv_lens (the key-padding form; "sage2_kv_lens")
TOPS = 4 * sum_b(Nq_b * Nk_b) * H * D / time, halved when causal: the useful work of the
sequences, the same for every method of a row (padding costs the padded methods time, not TOPS).

Timing, as bench/scoreboard_bench.py: CUDA events around each call (synchronised per call), median
of --reps after --warmup calls (--rounds R: the methods of a row alternate in R rounds of reps/R
calls, the median over all); the L2 cache is not flushed unless --flush-l2 MB is given. Inputs:
randn, seeded by the shape. A measurement that fails (e.g. a libsage2 without
sage2_attention_varlen) is logged and skipped.

Records (one JSON object per line, appended to --out): run, method, mode "e2e", head_dim, causal,
seq_len (N; for mixed the longest sequence, the padded length), batch (number of sequences), heads,
heads_kv, dtype, tops, ms, device, command, commit, plus varlen: true (every record of this
benchmark, so tools that read sage2 e2e cells can leave them out), lengths "equal"|"mixed",
total_tokens, seq_lens (mixed), call (what was timed), reps, warmup, flush_l2_mb.
--dry-run writes fake records (dry_run: true, run id "dry-...") under /tmp only, without a GPU.
"""
import argparse
import datetime
import json
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import random
import shlex
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scoreboard_bench import device_name, event_times_ms, git_commit, ints, short_device  # noqa: E402

T0 = time.time()
DTYPES = ("fp16", "bf16")


def log(msg):
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


def useful_ops(lens_q, lens_k, heads, d, causal):
    """4 * sum_b(Nq_b * Nk_b) * H * D, halved when causal."""
    work = sum(a * b for a, b in zip(lens_q, lens_k))
    return 4.0 * work * heads * d / (2.0 if causal else 1.0)


def mixed_lengths(total, lo, hi, seed):
    """Random lengths in [lo, hi] adding up to exactly `total` (total >= lo; fixed seed)."""
    if total < lo or lo < 1 or hi < 2 * lo:
        raise SystemExit("--mixed-total must be >= --min-len >= 1 and --max-len >= 2 * --min-len")
    rng = random.Random(seed)
    out, left = [], total
    while left > 0:
        n = min(rng.randint(lo, hi), left)
        rest = left - n
        if 0 < rest < lo:  # never leave a tail shorter than lo
            n = left if left <= hi else left - lo
        out.append(n)
        left -= n
    return out


# ---- measurement backends ------------------------------------------------------------------------
class Real:
    def __init__(self, cfg):
        import torch
        import torch.nn.functional as F
        import sage2
        self.torch, self.F, self.sage2 = torch, F, sage2
        torch.cuda.init()
        self.dtype = torch.float16 if cfg["dtype"] == "fp16" else torch.bfloat16
        mb = cfg["flush_mb"]
        self.flush = torch.empty(mb << 20, dtype=torch.uint8, device="cuda") if mb else None

    def _randn(self, key, *shape):
        g = self.torch.Generator(device="cuda")
        g.manual_seed(zlib.crc32(repr(key).encode()))
        return self.torch.randn(*shape, generator=g, device="cuda", dtype=self.dtype)

    def prepare_equal(self, b, hq, hkv, n, d):
        """Dense HND tensors and the same tokens packed [B*N, H, D]."""
        torch = self.torch
        q = self._randn(("q", b, hq, n, d), b, hq, n, d)
        k = self._randn(("k", b, hkv, n, d), b, hkv, n, d)
        v = self._randn(("v", b, hkv, n, d), b, hkv, n, d)
        pack = lambda t: t.transpose(1, 2).reshape(b * n, t.shape[1], d).contiguous()  # noqa: E731
        cu = torch.arange(0, (b + 1) * n, n, dtype=torch.int32, device="cuda")
        self.inputs = dict(q=q, k=k, v=v, qp=pack(q), kp=pack(k), vp=pack(v), cu=cu, n=n)

    def prepare_mixed(self, lens, hq, hkv, d):
        """Packed tokens [total, H, D], the same tokens zero-padded [B, H, max, D], the masks."""
        torch = self.torch
        total, b, m = sum(lens), len(lens), max(lens)
        qp = self._randn(("mq", total, hq, d), total, hq, d)
        kp = self._randn(("mk", total, hkv, d), total, hkv, d)
        vp = self._randn(("mv", total, hkv, d), total, hkv, d)
        cu = [0]
        for n in lens:
            cu.append(cu[-1] + n)
        pads = []
        for t, h in ((qp, hq), (kp, hkv), (vp, hkv)):
            pad = torch.zeros(b, m, h, d, dtype=self.dtype, device="cuda")
            for i, n in enumerate(lens):
                pad[i, :n] = t[cu[i]:cu[i + 1]]
            pads.append(pad.transpose(1, 2).contiguous())  # [B, H, max, D]
        kv_lens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        keys = torch.arange(m, device="cuda")[None, :] < kv_lens[:, None]  # [B, max]
        causal = torch.ones(m, m, dtype=torch.bool, device="cuda").tril()
        self.inputs = dict(qp=qp, kp=kp, vp=vp, cu=torch.tensor(cu, dtype=torch.int32, device="cuda"), m=m,
                           qd=pads[0], kd=pads[1], vd=pads[2], kv_lens=kv_lens,
                           mask=keys[:, None, None, :],  # key padding, broadcast over heads and rows
                           mask_causal=keys[:, None, None, :] & causal[None, None])

    def fn(self, method, lengths, causal):
        s, x = self.sage2, self.inputs
        if lengths == "equal":
            if method == "sage2":
                return lambda: s.sageattn(x["q"], x["k"], x["v"], tensor_layout="HND", is_causal=causal)
            if method == "sage2_varlen":
                n = x["n"]
                return lambda: s.sageattn_varlen(x["qp"], x["kp"], x["vp"], x["cu"], x["cu"], max_seqlen_q=n,
                                                 max_seqlen_k=n, is_causal=causal)
        else:
            if method == "sage2_varlen":
                m = x["m"]
                return lambda: s.sageattn_varlen(x["qp"], x["kp"], x["vp"], x["cu"], x["cu"], max_seqlen_q=m,
                                                 max_seqlen_k=m, is_causal=causal)
            if method == "sage2_kv_lens":
                return lambda: s.sageattn(x["qd"], x["kd"], x["vd"], tensor_layout="HND", is_causal=causal,
                                          kv_lens=x["kv_lens"])
            if method == "sdpa":
                mask = x["mask_causal"] if causal else x["mask"]
                gqa = x["qd"].shape[1] != x["kd"].shape[1]
                kw = {"enable_gqa": True} if gqa else {}
                return lambda: self.F.scaled_dot_product_attention(x["qd"], x["kd"], x["vd"], attn_mask=mask, **kw)
        raise ValueError("no method %s for %s lengths" % (method, lengths))

    def median_ms(self, fn, reps, warmup):
        times = self.times_ms(fn, reps, warmup)
        times.sort()
        return times[len(times) // 2]

    def times_ms(self, fn, reps, warmup):
        return event_times_ms(self.torch, fn, reps, warmup, self.flush)

    def release(self):
        self.inputs = None
        try:
            self.torch.cuda.empty_cache()
        except Exception:
            pass


class Fake:
    """--dry-run: made-up H100-like speeds, so the records and the flow can be checked without a GPU."""
    SPEED = {"sage2": 600e12, "sage2_varlen": 560e12, "sage2_kv_lens": 480e12, "sdpa": 250e12}

    def __init__(self, cfg):
        pass

    def prepare_equal(self, b, hq, hkv, n, d):
        self.lens, self.hd = [n] * b, (hq, d)

    def prepare_mixed(self, lens, hq, hkv, d):
        self.lens, self.hd = lens, (hq, d)

    def fn(self, method, lengths, causal):
        m = max(self.lens)
        padded = method in ("sdpa", "sage2_kv_lens")  # these compute the padding too
        work = useful_ops([m] * len(self.lens) if padded else self.lens, [m] * len(self.lens) if padded else self.lens,
                          self.hd[0], self.hd[1], causal)
        return lambda: work / self.SPEED[method] * 1e3

    def median_ms(self, fn, reps, warmup):
        return fn()

    def times_ms(self, fn, reps, warmup):
        return [fn()] * reps

    def release(self):
        pass


# ---- the runs -------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSONL file the records are appended to (folders created)")
    ap.add_argument("--run", default="", help="run id (default: UTC minute + device short name + '-varlen')")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device-name", default="auto", help="the record's device field; auto: nvidia-smi, else torch")
    ap.add_argument("--parts", default="equal,mixed")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=0, help="0: as --heads")
    ap.add_argument("--dtype", default="fp16", choices=DTYPES)
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--batch", type=int, default=4, help="equal: the number of sequences")
    ap.add_argument("--seq-lens", default="1024,4096,16384", help="equal: N per sequence")
    ap.add_argument("--mixed-total", type=int, default=16384, help="mixed: tokens in all")
    ap.add_argument("--min-len", type=int, default=256)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0, help="mixed: seed of the lengths")
    ap.add_argument("--flush-l2", type=int, default=0, help="MB overwritten before each timed call (0: off)")
    ap.add_argument("--command", default="", help="recorded in every record (default: this command line)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleave the methods of a row in this many rounds of reps/rounds calls each (the "
                         "median over all rounds): drifts of the GPU clock hit every method alike")
    ap.add_argument("--dry-run", action="store_true", help="fake timings, no GPU; --out must be under /tmp")
    a = ap.parse_args()

    out = os.path.abspath(a.out)
    if a.dry_run:
        tmp = os.path.realpath(tempfile.gettempdir()) + os.sep
        if not os.path.realpath(out).startswith(tmp):
            raise SystemExit("--dry-run writes only under %s (fake records must never reach bench/results)" % tmp)
    parts = [p.strip() for p in a.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in ("equal", "mixed")]
    if bad:
        raise SystemExit("unknown part %s (known: equal, mixed)" % ",".join(bad))
    hq, d = a.heads, a.head_dim
    hkv = a.kv_heads or hq
    if hq % hkv:
        raise SystemExit("--heads %d is not a multiple of --kv-heads %d" % (hq, hkv))
    if a.dry_run:
        dev = "DRY-RUN (no GPU)"
    else:
        dev = device_name() if a.device_name == "auto" else a.device_name
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    run = a.run or "%s-%s-varlen" % (stamp, "cpu" if a.dry_run else short_device(dev))
    if a.dry_run and not run.startswith("dry-"):
        run = "dry-" + run
    command = a.command or "python3 bench/varlen_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    base = dict(run=run, mode="e2e", head_dim=d, heads=hq, heads_kv=hkv, dtype=a.dtype, device=dev,
                command=command, varlen=True, reps=a.reps, warmup=a.warmup, flush_l2_mb=a.flush_l2, rounds=a.rounds)
    commit = git_commit()
    if commit:
        base["commit"] = commit
    if a.dry_run:
        base["dry_run"] = True
    cfg = dict(dtype=a.dtype, flush_mb=a.flush_l2)
    bk = Fake(cfg) if a.dry_run else Real(cfg)
    calls = {"sage2": "sage2.sageattn (dense, HND)", "sage2_varlen": "sage2.sageattn_varlen (packed)",
             "sage2_kv_lens": "sage2.sageattn (padded, HND, kv_lens)",
             "sdpa": "F.scaled_dot_product_attention (padded, boolean key-padding mask)"}
    causal_list = [bool(c) for c in ints(a.causal)]
    jobs = []  # (lengths, per-sequence lengths, methods)
    if "equal" in parts:
        for n in ints(a.seq_lens):
            jobs.append(("equal", [n] * a.batch, ["sage2", "sage2_varlen"]))
    if "mixed" in parts:
        jobs.append(("mixed", mixed_lengths(a.mixed_total, a.min_len, a.max_len, a.seed),
                     ["sage2_varlen", "sdpa", "sage2_kv_lens"]))
    log("run %s on %s -> %s" % (run, dev, out))
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    failures = 0
    with open(out, "a") as f:
        for lengths, lens, methods in jobs:
            try:
                if lengths == "equal":
                    bk.prepare_equal(len(lens), hq, hkv, lens[0], d)
                else:
                    bk.prepare_mixed(lens, hq, hkv, d)
            except Exception as e:
                failures += 1
                log("FAILED inputs %s %s: %s: %s" % (lengths, lens[:4], type(e).__name__, e))
                bk.release()
                continue
            if lengths == "mixed":
                log("mixed lengths (seed %d, %d sequences, %d tokens): %s" % (a.seed, len(lens), sum(lens), lens))
            for causal in causal_list:
                ops = useful_ops(lens, lens, hq, d, causal)
                row = []
                pooled = {}
                if a.rounds > 1:  # ABAB…: every method's calls spread over the same stretch of time
                    fns = {}
                    for m in methods:
                        try:
                            fns[m] = bk.fn(m, lengths, causal)
                        except Exception:  # noqa: BLE001 - measured (and reported) below
                            pass
                    per = max(1, a.reps // a.rounds)
                    for r in range(a.rounds):
                        for m, fn in fns.items():
                            try:
                                pooled.setdefault(m, []).extend(bk.times_ms(fn, per, a.warmup if r == 0 else 1))
                            except Exception:  # noqa: BLE001
                                pooled.pop(m, None)
                                fns[m] = None
                        fns = {m: fn for m, fn in fns.items() if fn is not None}
                for m in methods:
                    try:
                        if m in pooled:
                            t = sorted(pooled[m])
                            ms = t[len(t) // 2]
                        else:
                            ms = bk.median_ms(bk.fn(m, lengths, causal), a.reps, a.warmup)
                    except Exception as e:
                        failures += 1
                        text = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
                        log("FAILED %s %s causal=%d: %s: %s" % (m, lengths, causal, type(e).__name__, text))
                        continue
                    tops = ops / (ms * 1e-3) / 1e12
                    rec = dict(base, method=m, causal=causal, seq_len=max(lens), batch=len(lens),
                               tops=round(tops, 2), ms=round(ms, 4), lengths=lengths, total_tokens=sum(lens),
                               call=calls[m])
                    if lengths == "mixed":
                        rec.update(seq_lens=lens, seed=a.seed)
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    row.append("%s %.3f ms %.1f TOPS" % (m, ms, tops))
                log("%-5s B=%-3d N=%-6d causal=%d  %s" % (lengths, len(lens), max(lens), causal, " | ".join(row)))
            bk.release()
    log("done in %.0f s%s" % (time.time() - T0, ", %d measurement(s) failed" % failures if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
