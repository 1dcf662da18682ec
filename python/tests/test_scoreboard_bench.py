"""bench/scoreboard_bench.py without a GPU: the alternating rounds and the medians (a scripted
backend), the kernel-name filters, failure handling, and the whole --dry-run through
bench/scoreboard_run.sh, whose records ../shared/tools/scoreboard.py must score in every group."""
import json
import os
import subprocess
import sys

import checkout_script
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# SAGE2_SOURCE_DIR: the checkout, when these tests run from a copy (scripts/test_wheel.sh)
REPO = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(REPO, "bench", "scoreboard_bench.py")
SCOREBOARD = os.path.join(os.path.dirname(REPO), "shared", "tools", "scoreboard.py")


@pytest.fixture(scope="module")
def sb():
    return checkout_script.load("bench/scoreboard_bench.py")


class Scripted:
    """A backend whose round values are given per method: e2e_times returns [v - 1, v, v + 100]
    (median v, mean not v), profile_calls two calls whose attention kernels take a and 3a us
    (median 2a) next to a quantize kernel; every step is logged."""

    def __init__(self, e2e, att, fail=None, alive=True):
        self.e2e, self.att, self.fail, self._alive = e2e, att, fail or {}, alive
        self.log, self.n = [], {}

    def inputs(self, cell):
        self.log.append(("inputs", tuple(cell["shape"])))

    def warmup(self, m, causal, n):
        self.log.append(("warm-up", m))

    def _next(self, m, what):
        i = self.n.get((m, what), 0)
        self.n[(m, what)] = i + 1
        if self.fail.get((m, what)) == i:
            raise RuntimeError("scripted failure of %s %s call %d" % (m, what, i))
        return i

    def e2e_times(self, m, causal, reps):
        i = self._next(m, "e2e")
        self.log.append(("e2e", m))
        v = self.e2e[m][i]
        return [v - 1.0, v, v + 100.0]

    def profile_calls(self, m, causal, calls):
        i = self._next(m, "profile")
        self.log.append(("profile", m))
        a = self.att[m][i]
        name = "sage2_attention_wgmma" if m == "sage2" else "void qk_int8_sv_f8_attn_kernel<128u>(CUtensorMap)"
        return [{name: [a, 1], "sage2_quantize_q": [10.0, 1]}, {name: [3 * a, 1], "sage2_quantize_q": [30.0, 1]}]

    def alive(self):
        return self._alive

    def after_failure(self):
        self.log.append(("after_failure",))


def cell(methods, kernel=("sage2", "sage2_ref")):
    c = dict(kind="attn", shape=[4, 32, 32, 4096, 4096, 128], causal=False, methods=list(methods),
             kernel=[m for m in kernel if m in methods], prof_calls=2, reps=3, warmup=1, stages=True)
    c["label"] = "hd128 full N 4096"
    return c


def quiet(*a):
    pass


def test_round_order_rotates(sb):
    m = ["sage2", "sage2_ref", "cudnn", "fa2"]
    orders = [sb.round_order(m, r) for r in range(4)]
    assert orders[0] == m and orders[1] == ["sage2_ref", "cudnn", "fa2", "sage2"]
    for i, name in enumerate(m):  # every method in every place once over len(m) rounds
        assert sorted(o.index(name) for o in orders) == [0, 1, 2, 3], name
    assert sb.round_order(["a", "b"], 1) == ["b", "a"] and sb.round_order(["a", "b"], 2) == ["a", "b"]


def test_rounds_alternate_and_values_are_medians_over_rounds(sb):
    methods = ["sage2", "cudnn", "fa2"]
    bk = Scripted(e2e={"sage2": [5.0, 1.0, 2.0], "cudnn": [4.0, 4.5, 9.0], "fa2": [7.0, 6.0, 8.0]},
                  att={"sage2": [100.0, 400.0, 200.0]})
    c = cell(methods)
    res = sb.measure_cell(bk, c, 3, say=quiet)
    steps = [s for s in bk.log if s[0] in ("e2e", "profile")]
    # each round: every method's timed calls in the rotated order, then the profiled calls
    assert steps == [("e2e", "sage2"), ("e2e", "cudnn"), ("e2e", "fa2"), ("profile", "sage2"),
                     ("e2e", "cudnn"), ("e2e", "fa2"), ("e2e", "sage2"), ("profile", "sage2"),
                     ("e2e", "fa2"), ("e2e", "sage2"), ("e2e", "cudnn"), ("profile", "sage2")]
    assert bk.log[0] == ("inputs", (4, 32, 32, 4096, 4096, 128))
    assert [s[1] for s in bk.log if s[0] == "warm-up"] == methods
    assert res["sage2"]["e2e"] == [5.0, 1.0, 2.0]  # per round: the median of its calls
    recs = {(r["method"], r["mode"]): r for r in sb.records_of_cell(c, res, 3)}
    assert recs[("sage2", "e2e")]["ms"] == 2.0  # median over rounds (first round 5, mean 2.67)
    assert recs[("cudnn", "e2e")]["ms"] == 4.5 and recs[("fa2", "e2e")]["ms"] == 7.0
    assert recs[("sage2", "e2e")]["round_ms"] == [5.0, 1.0, 2.0]
    tops = 4.0 * 4 * 32 * 4096 * 4096 * 128 / (2.0e-3) / 1e12
    assert abs(recs[("sage2", "e2e")]["tops"] - tops) < 0.01
    # kernel: per round the median over the profiled calls (2a), then the median over rounds
    k = recs[("sage2", "kernel")]
    assert k["timing"] == "cupti" and k["round_ms"] == [0.2, 0.8, 0.4] and k["ms"] == 0.4
    assert k["kernels"] == ["sage2_attention_wgmma"]
    st = recs[("sage2", "stages")]
    assert st["kernels"] == {"sage2_attention_wgmma": 400.0, "sage2_quantize_q": 20.0}
    assert st["gpu_us"] == 420.0 and st["attention_us"] == 400.0 and st["prologue_us"] == 20.0
    assert st["launches"] == {"sage2_attention_wgmma": 1, "sage2_quantize_q": 1}
    assert ("cudnn", "kernel") not in recs and ("fa2", "stages") not in recs


def test_a_failing_method_gets_no_record_and_the_others_go_on(sb):
    methods = ["sage2", "sage2_ref", "cudnn"]
    bk = Scripted(e2e={"sage2": [1.0, 2.0, 3.0], "sage2_ref": [2.0, 2.0, 2.0], "cudnn": [3.0, 3.0, 3.0]},
                  att={"sage2": [1.0, 1.0, 1.0], "sage2_ref": [5.0, 6.0, 7.0]},
                  fail={("cudnn", "e2e"): 1, ("sage2_ref", "profile"): 2})
    c = cell(methods)
    res = sb.measure_cell(bk, c, 3, say=quiet)
    assert res["cudnn"]["failed"].startswith("RuntimeError: scripted failure")
    assert res["sage2_ref"]["failed"] is None and res["sage2_ref"]["prof_failed"]
    # the failed method is not called again in the cell
    assert sum(1 for s in bk.log if s == ("e2e", "cudnn")) == 1
    recs = {(r["method"], r["mode"]) for r in sb.records_of_cell(c, res, 3)}
    assert recs == {("sage2", "e2e"), ("sage2", "kernel"), ("sage2", "stages"), ("sage2_ref", "e2e")}


def test_a_lost_context_ends_the_process(sb):
    bk = Scripted(e2e={"sage2": [1.0] * 3}, att={"sage2": [1.0] * 3}, fail={("sage2", "e2e"): 0}, alive=False)
    with pytest.raises(RuntimeError):
        sb.measure_cell(bk, cell(["sage2"]), 3, say=quiet)


def test_inputs_that_cannot_be_made_skip_the_cell(sb):
    class NoInputs(Scripted):
        def inputs(self, cell):
            raise MemoryError("CUDA out of memory")
    bk = NoInputs(e2e={"sage2": [1.0] * 3, "cudnn": [1.0] * 3}, att={})
    c = cell(["sage2", "cudnn"])
    res = sb.measure_cell(bk, c, 3, say=quiet)
    assert all(r["failed"].startswith("inputs") for r in res.values())
    assert sb.records_of_cell(c, res, 3) == [] and ("after_failure",) in bk.log


def test_a_profile_without_the_attention_kernel_is_not_a_kernel_record(sb):
    class NoKernel(Scripted):
        def profile_calls(self, m, causal, calls):
            return [{"sage2_quantize_q": [10.0, 1]}] * calls
    bk = NoKernel(e2e={"sage2": [1.0] * 3}, att={})
    c = cell(["sage2"])
    res = sb.measure_cell(bk, c, 3, say=quiet)
    assert "no attention kernel" in res["sage2"]["prof_failed"]
    assert [(r["method"], r["mode"]) for r in sb.records_of_cell(c, res, 3)] == [("sage2", "e2e")]


def test_kernel_name_filters(sb):
    assert sb.is_attention_kernel("sage2", "sage2_attention_wgmma")
    assert sb.is_attention_kernel("sage2", "sage2_attention_mma")
    for other in ("sage2_quantize_q", "sage2_channel_stats", "sage2_delta_s"):
        assert not sb.is_attention_kernel("sage2", other)
    ref = ("void qk_int8_sv_f8_attn_kernel<128u, 128u, 128u, 64u, 128u, (QuantGranularity)3, (QuantGranularity)3, "
           "float, false, __half, (MaskMode)0, true, false>(CUtensorMap, CUtensorMap, CUtensorMap, float*)")
    assert sb.is_attention_kernel("sage2_ref", ref)
    for other in ("quant_query_per_thread_int8_kernel", "quant_key_per_thread_int8_kernel",
                  "void MeanScaleKernel<64u, false, __half>(__half*, signed char*, float*, float*, float, unsigned int)",
                  "void TransposePadPermuteKernel<64u, 64u, false, __half>(__half*)", "sage2_attention_wgmma"):
        assert not sb.is_attention_kernel("sage2_ref", other), other


def test_host_rounds_alternate(sb):
    class Host:
        def __init__(self):
            self.log, self.v = [], {"sage2": iter([0, 30.0, 10.0, 20.0]), "fa2": iter([0, 5.0, 6.0, 7.0])}

        def inputs(self, cell):
            assert tuple(cell["shape"]) == sb.HOST_SHAPE

        def host_loop(self, m, calls):
            self.log.append((m, calls))
            return next(self.v[m])

        def alive(self):
            return True
    bk = Host()
    res = sb.measure_host(bk, ["sage2", "fa2"], 3, 1000, say=quiet)
    assert bk.log == [("sage2", 50), ("fa2", 50), ("sage2", 1000), ("fa2", 1000), ("fa2", 1000), ("sage2", 1000),
                      ("sage2", 1000), ("fa2", 1000)]
    assert res == {"sage2": [30.0, 10.0, 20.0], "fa2": [5.0, 6.0, 7.0]}


def _dry_run(out, env_extra=None, *args):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run(["bash", os.path.join(REPO, "bench", "scoreboard_run.sh"), "--dry-run", "--out", str(out),
                           *args], capture_output=True, text=True, env=env, timeout=300)


def _records(out):
    recs = []
    for name in os.listdir(out):
        if name.endswith(".jsonl"):
            with open(os.path.join(out, name)) as f:
                recs += [json.loads(line) for line in f if line.strip()]
    return recs


def test_dry_run_records_are_scored_in_every_group(sb, tmp_path):
    if not os.path.realpath(str(tmp_path)).startswith(os.path.realpath("/tmp") + os.sep):
        pytest.skip("the dry run writes only under /tmp")
    out = tmp_path / "sb"
    r = _dry_run(out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    recs = _records(str(out))
    runs = {x["run"] for x in recs}
    assert len(runs) == 1 and next(iter(runs)).startswith("dry-")
    for x in recs:
        assert x.get("dry_run") is True and x.get("commit") and x.get("rounds") == 3, x
        if x["method"] != "sage2_cpp":
            assert isinstance(x.get("env"), dict) and x["env"].get("SAGE2_LIBRARY"), x
        if x["mode"] == "kernel":
            assert x["timing"] == "cupti" and x["kernels"], x
    modes = {(x["method"], x["mode"]) for x in recs}
    for want in [("sage2", "e2e"), ("sage2_ref", "e2e"), ("cudnn", "e2e"), ("fa2", "e2e"), ("sage2", "kernel"),
                 ("sage2_ref", "kernel"), ("sage2", "stages"), ("sage2", "decode_us"), ("cudnn", "decode_us"),
                 ("fa2", "decode_us"), ("sage2", "host_us"), ("fa2", "host_us"), ("cudnn", "host_us"),
                 ("sage2_cpp", "host_us")]:
        assert want in modes, want
    assert sum(1 for x in recs if x.get("shape") == "small") == 6
    assert (out / "summary.txt").exists() and "s2/cu" in (out / "summary.txt").read_text()
    if not os.path.exists(SCOREBOARD):
        pytest.skip("no %s to score the records" % SCOREBOARD)
    s = subprocess.run([sys.executable, SCOREBOARD, "--results", str(out)], capture_output=True, text=True,
                       timeout=120).stdout
    # Every group scoreboard_run.sh measures is scored from the dry run. The scoreboard's `ptx` group
    # (the sm_80/sm_89 paths beside the reference's PTX kernels) is not measured by this driver yet
    # (issue 31 item 3), so it is the one group allowed to have no run.
    sections = {blk.split()[0]: blk for blk in s.split("== ")[1:] if blk.strip()}
    for g in ("kernel", "e2e", "hidden", "small", "heads", "decode", "host", "real"):
        assert g in sections, s
        assert "(run None)" not in sections[g].split("\n")[0] and "no run" not in sections[g], sections[g]
    assert set(sections) <= {"kernel", "e2e", "hidden", "small", "heads", "decode", "host", "ptx", "real"}, sorted(sections)
    # the real shapes in their own dtypes, named
    real = [x for x in recs if x.get("shape") not in (None, "small") and x["mode"] == "e2e"]
    assert {x["shape"] for x in real} == {"flux-1024", "sdxl-1024", "qwen2.5-7b-prefill-4k", "whisper-large-enc",
                                          "dit-xl-512", "bert-large-512"}
    assert {x["method"] for x in real} == {"sage2", "cudnn"}
    assert all(x["dtype"] == ("bf16" if x["shape"] in ("flux-1024", "qwen2.5-7b-prefill-4k") else "fp16") for x in real)
    assert all(x["kv_heads"] == (4 if x["shape"] == "qwen2.5-7b-prefill-4k" else x["heads"]) for x in real)


def test_dry_run_recovers_from_a_crashed_group(sb, tmp_path):
    if not os.path.realpath(str(tmp_path)).startswith(os.path.realpath("/tmp") + os.sep):
        pytest.skip("the dry run writes only under /tmp")
    out = tmp_path / "sb"
    r = _dry_run(out, {"SCOREBOARD_DRY_RUN_DIE": "sage2_ref@hd64 full N 4096"}, "--modes", "e2e,kernel",
                 "--head-dims", "64", "--causal", "0", "--seq-lens", "1024,2048,4096,8192", "--extra-head-dims", "")
    assert r.returncode == 1, r.stdout[-3000:]  # incomplete, said so
    assert "died (rc 3) in hd64 full N 4096, method sage2_ref" in r.stdout, r.stdout[-3000:]
    got = {(x["method"], x["mode"], x["seq_len"]) for x in _records(str(out))}
    for n in (1024, 2048, 4096, 8192):
        for m in ("sage2", "cudnn", "fa2"):
            assert (m, "e2e", n) in got, (m, n)
        assert ("sage2", "kernel", n) in got
        assert (("sage2_ref", "e2e", n) in got) == (n < 4096), n


# ---- the GPU path (class Real) against a fake torch, a fake sage2 and a fake reference ------------------------
# Only what scoreboard_bench's Real uses: it checks the calls are made as documented (the same
# distinct inputs for every method, sdpa_kernel entered with the forced backend, enable_gqa only
# with GQA, the L2 flush before each timed and each profiled call, the profiler around the
# profiled calls alone) and that the records come out whole.
FAKE_TORCH_BENCH = r'''
import contextlib, itertools
float16, uint8 = "float16", "uint8"
LOG = []
_ptr = itertools.count(1)
class Tensor:
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self._p = tuple(shape), dtype, next(_ptr) * 4096
    def data_ptr(self): return self._p
    def size(self, i=None): return self.shape if i is None else self.shape[i]
    def zero_(self):
        LOG.append(("flush", self.shape[0]))
        if hasattr(__import__("torch"), "KERNELS"):
            KERNELS.append("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>>")
        return self
def empty(n, dtype=None, device=None): return Tensor((n,), dtype)
class Generator:
    def __init__(self, device=None): self.seed = None
    def manual_seed(self, s): self.seed = s
def randn(*shape, generator=None, device=None, dtype=None):
    assert generator is not None and generator.seed is not None and device == "cuda" and dtype == float16
    return Tensor(shape, dtype)
class _Event:
    def __init__(self, enable_timing=False): pass
    def record(self): pass
    def synchronize(self): pass
    def elapsed_time(self, other): return 1.5
class cuda:
    Event = _Event
    @staticmethod
    def init(): pass
    @staticmethod
    def get_device_name(i=0): return "NVIDIA H100 80GB HBM3 (fake)"
    @staticmethod
    def synchronize(): pass
    @staticmethod
    def empty_cache(): pass
'''
FAKE_TORCH_NN = r'''
from . import functional, attention
'''
FAKE_TORCH_F = r'''
import torch
def scaled_dot_product_attention(q, k, v, is_causal=False, **kw):
    torch.LOG.append(("sdpa", torch.BACKEND[-1] if torch.BACKEND else None, is_causal, tuple(sorted(kw)),
                      q.data_ptr(), k.data_ptr(), v.data_ptr()))
    if torch.BACKEND and torch.BACKEND[-1] == "CUDNN_ATTENTION" and kw.get("enable_gqa"):
        raise RuntimeError("No available kernel. Aborting execution.")
    torch.KERNELS.append("flash_fwd_kernel" if torch.BACKEND and torch.BACKEND[-1] == "FLASH_ATTENTION" else "cudnn_kernel")
    return q
'''
FAKE_TORCH_ATTN = r'''
import contextlib, torch
class SDPBackend:
    CUDNN_ATTENTION, FLASH_ATTENTION = "CUDNN_ATTENTION", "FLASH_ATTENTION"
torch.BACKEND = []
@contextlib.contextmanager
def sdpa_kernel(backends):
    torch.BACKEND.append(backends[0])
    try:
        yield
    finally:
        torch.BACKEND.pop()
'''
FAKE_TORCH_PROFILER = r'''
import torch
torch.KERNELS = []
class ProfilerActivity:
    CUDA = "CUDA"
class _Dev:
    name = "CUDA"
class _Avg:
    def __init__(self, key, us, n):
        self.key, self.self_device_time_total, self.count, self.device_type = key, us, n, _Dev()
class profile:
    def __init__(self, activities=None):
        assert activities == [ProfilerActivity.CUDA]
    def __enter__(self):
        torch.LOG.append(("profile",))
        del torch.KERNELS[:]
        return self
    def __exit__(self, *a):
        self.names = list(torch.KERNELS)
        torch.LOG.append(("/profile",))
    def key_averages(self):
        out = {}
        for n in self.names:
            out[n] = out.get(n, 0) + 1
        return [_Avg(n, 100.0 * c, c) for n, c in out.items()]
'''
FAKE_SAGE2 = r'''
import torch
def build_commit(): return "0123456789abcdef0123456789abcdef01234567"
def sageattn(q, k, v, tensor_layout="HND", is_causal=False):
    assert tensor_layout == "HND"
    torch.LOG.append(("sage2", is_causal, q.data_ptr(), k.data_ptr(), v.data_ptr()))
    torch.KERNELS.extend(["sage2_channel_stats", "sage2_quantize_q", "sage2_attention_wgmma"])
    return q
'''
FAKE_REF = r'''
import torch
def sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="HND", is_causal=False):
    torch.LOG.append(("ref", is_causal, q.data_ptr(), k.data_ptr(), v.data_ptr()))
    torch.KERNELS.extend(["quant_query_per_thread_int8_kernel", "void qk_int8_sv_f8_attn_kernel<64u>(CUtensorMap)"])
    return q
'''
REAL_DRIVER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import importlib.util, torch
spec = importlib.util.spec_from_file_location("sb", sys.argv[2])
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
out = sys.argv[3]
cfg = dict(out=out, run="test-run", dry_run=False, methods=sb.METHODS, modes=sb.MODES, head_dims=[64], seq_lens=[1024],
           causal=[1], extra_head_dims=[], extra_seq_lens=[], batch=4, heads=32, rounds=3, reps=4, reps_long=2,
           prof_calls=2, flush_mb=1, host_calls=7, decode=[(1, 4096)], decode_batch=4, decode_kv_heads=8,
           decode_reps=3, small_reps=2, t0=0, deadline=1e18, command="test")
groups = dict(sb.plan(cfg))
for g in ("host", "decode", "hd64_causal"):
    torch.LOG.clear()
    assert sb.worker(cfg, g, groups[g]) == (1 if g == "decode" else 0), g
    json.dump(torch.LOG, open(out + "/log-" + g + ".json", "w"), default=str)
print("OK")
'''


def test_real_backend_against_fake_torch(sb, tmp_path):
    pkg = tmp_path / "fake"
    for rel, text in {"torch/__init__.py": FAKE_TORCH_BENCH + "\nfrom . import nn, profiler\n",
                      "torch/nn/__init__.py": FAKE_TORCH_NN, "torch/nn/functional.py": FAKE_TORCH_F,
                      "torch/nn/attention.py": FAKE_TORCH_ATTN, "torch/profiler.py": FAKE_TORCH_PROFILER,
                      "sage2/__init__.py": FAKE_SAGE2, "sageattention/__init__.py": FAKE_REF}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    (tmp_path / "driver.py").write_text(REAL_DRIVER)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(pkg), SAGE2_TEST_MARK="1")
    r = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(pkg), BENCH, str(out)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
    assert "FAILED cudnn warm-up of hd128 full N 4096 Nq 1" in r.stdout and "No available kernel" in r.stdout
    recs = _records(str(out))
    for x in recs:
        assert x["run"] == "test-run" and x["commit"] == "0123456789abcdef0123456789abcdef01234567" and x["rounds"] == 3
        assert x["env"]["SAGE2_TEST_MARK"] == "1" and "dry_run" not in x
    got = {(x["method"], x["mode"]) for x in recs}
    assert got == {("sage2", "host_us"), ("fa2", "host_us"), ("cudnn", "host_us"),
                   ("sage2", "decode_us"), ("fa2", "decode_us"),  # cuDNN refused GQA: no record
                   ("sage2", "e2e"), ("sage2_ref", "e2e"), ("cudnn", "e2e"), ("fa2", "e2e"),
                   ("sage2", "kernel"), ("sage2_ref", "kernel"), ("sage2", "stages")}, got
    by = {(x["method"], x["mode"]): x for x in recs}
    assert by[("sage2", "e2e")]["ms"] == 1.5 and by[("sage2", "e2e")]["causal"] is True
    assert by[("sage2", "kernel")]["ms"] == 0.1 and by[("sage2", "stages")]["launches"]["sage2_quantize_q"] == 1 and by[("sage2", "kernel")]["kernels"] == ["sage2_attention_wgmma"]
    assert by[("sage2_ref", "kernel")]["kernels"] == ["void qk_int8_sv_f8_attn_kernel<64u>(CUtensorMap)"]
    assert by[("sage2", "stages")]["kernels"] == {"sage2_attention_wgmma": 100.0, "sage2_channel_stats": 100.0,
                                                  "sage2_quantize_q": 100.0}
    assert by[("sage2", "decode_us")]["us"] == 1500.0 and by[("sage2", "decode_us")]["hkv"] == 8

    log = json.loads((out / "log-hd64_causal.json").read_text())
    calls = [e for e in log if e[0] in ("sage2", "ref", "sdpa")]
    ptrs = {tuple(e[-3:]) for e in calls}
    assert len(ptrs) == 1 and len(set(next(iter(ptrs)))) == 3  # the same q, k, v for all, all distinct
    for e in calls:
        if e[0] == "sdpa":
            assert e[1] in ("CUDNN_ATTENTION", "FLASH_ATTENTION") and e[2] is True and e[3] == []
    # profiled calls: one session per method and round, each call after a flush; the flush's kernel
    # is left out (stages above), the times are per call
    sessions = [[x[0] for x in log[i + 1:i + 6]] for i, e in enumerate(log) if e[0] == "profile"]
    assert sessions[0][:2] == ["flush", "/profile"]  # at start: the flush alone, to learn its kernel names
    for g in ("host", "decode"):  # no kernel cells there: the profiler is never started
        assert not any(e[0] == "profile" for e in json.loads((out / ("log-%s.json" % g)).read_text())), g
    assert len(sessions) == 1 + 2 * 3  # then 2 methods x 3 rounds
    for x in sessions[1:]:
        assert x in (["flush", m, "flush", m, "/profile"] for m in ("sage2", "ref")), x
    dec = json.loads((out / "log-decode.json").read_text())
    assert any(e[0] == "sdpa" and e[1] == "FLASH_ATTENTION" and e[3] == ["enable_gqa"] for e in dec)


def test_kernel_table_counts_only_the_exposed_part_of_overlapping_kernels(sb):
    """A kernel launched to overlap its predecessor (programmatic dependent launch) starts early and
    waits: only its span after the earlier kernels ended counts; without overlap, its whole span."""
    class Ev:
        def __init__(self, name, start, end):
            self.name, self.device_type = name, "CUDA"
            self.time_range = type("R", (), {"start": start, "end": end})()

    class Prof:
        def events(self):
            return [Ev("sage2_channel_stats", 0, 30), Ev("sage2_quantize_k", 25, 60),
                    Ev("sage2_attention_wgmma", 50, 150), Ev("sage2_attention_wgmma", 200, 260)]

    t = sb.kernel_table(Prof())
    assert t["sage2_channel_stats"] == [30.0, 1]
    assert t["sage2_quantize_k"] == [30.0, 1]  # 25..60 after 0..30: 30 us exposed
    assert t["sage2_attention_wgmma"] == [90.0 + 60.0, 2]  # 60..150, then 200..260 alone
