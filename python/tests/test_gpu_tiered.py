"""The tiered compile as a Python user gets it (issue 40): on by default, a call at a head dim no
cache holds returns from quick kernels while the optimized ones compile in the background, every
result is accurate, and the optimized kernels take over. (Timings are benchmarks:
scripts/gpu_cold_jit.sh.)

It runs in a child process with SAGE2_TIERED_COMPILE unset (this suite's own calls run with 0:
conftest.py) and an empty SAGE2_CACHE_DIR. Skips without a CUDA torch, a GPU or libsage2."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from sage2_testutil import COS_8BIT, RELL1_8BIT, activation_like, metrics, reference, require_gpu, torch  # noqa: F401

import sage2
from fake_torch import sage2_child_env

pytestmark = pytest.mark.gpu

CHILD = textwrap.dedent("""
    import json, sys, time
    import torch
    import sage2
    q, k, v = torch.load(sys.argv[1])
    t0 = time.perf_counter()
    first = sage2.sageattn(q, k, v)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    calls, out = 1, first
    deadline = time.perf_counter() + 60   # the optimized kernels serve within ~3 s on an H200 host
    while torch.equal(out, first) and time.perf_counter() < deadline:
        time.sleep(0.01)
        out = sage2.sageattn(q, k, v)
        calls += 1
    again = sage2.sageattn(q, k, v)
    torch.save((first.cpu(), out.cpu()), sys.argv[2])
    print("RESULT " + json.dumps(dict(first_s=first_s, calls=calls, changed=not torch.equal(out, first),
                                      stable=torch.equal(again, out), stats=sage2.stats()["process"])))
""")


def test_default_tiered_first_call_is_accurate_and_the_optimized_kernels_take_over(tmp_path):
    require_gpu()
    # a head dim no other test uses (the child's cache is empty anyway)
    q, k, v = activation_like(1, 4, 4, 1000, 1000, 88, seed=88)
    ref, _ = reference(q, k, v)
    torch.save((q, k, v), str(tmp_path / "in.pt"))
    env = sage2_child_env(extra={"SAGE2_CACHE_DIR": str(tmp_path / "cache")})
    env.pop("SAGE2_TIERED_COMPILE", None)  # the default
    env.pop("SAGE2_DISABLE_DISK_CACHE", None)
    if sage2.library_path() and os.path.sep in sage2.library_path():
        env["SAGE2_LIBRARY"] = sage2.library_path()  # the library this suite tests
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "in.pt"), str(tmp_path / "out.pt")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert "no sage2-jit-worker" not in r.stderr, "the library has no sage2-jit-worker beside it:\n" + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout + r.stderr
    res = json.loads(lines[-1][len("RESULT "):])
    first, later = torch.load(str(tmp_path / "out.pt"))
    errs = [metrics(o.cuda(), ref) for o in (first, later)]
    print("tiered (default):", res, "first call (cos, rel-L1, max abs):", errs[0], "optimized:", errs[1])
    # The quick first tier at hd 88 is the direct path (unquantized); then the quantized optimized
    # kernels: another result, each within the 8-bit accuracy the suite holds every call to.
    assert res["changed"], res
    assert res["stable"], res  # the optimized plan keeps serving
    for cos, rel, _ in errs:
        assert cos >= COS_8BIT and rel <= RELL1_8BIT, errs
    assert res["stats"]["compiled"] >= 2, res  # quick kernels, then the optimized ones
