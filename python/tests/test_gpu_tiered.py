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

from sage2_testutil import COS_8BIT, RELL1_8BIT, require_gpu, torch  # noqa: F401  (skips without torch)

import sage2
from fake_torch import sage2_child_env

pytestmark = pytest.mark.gpu

CHILD = textwrap.dedent("""
    import json, time
    import torch
    import sage2
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 4, 1000, 88, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())

    def errors(o):
        d = o.double()
        rel = ((d - ref).abs().sum() / ref.abs().sum()).item()
        cos = torch.nn.functional.cosine_similarity(d.flatten(), ref.flatten(), dim=0).item()
        return rel, cos

    t0 = time.perf_counter()
    first = sage2.sageattn(q, k, v)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    errs, calls, out = [errors(first)], 1, first
    deadline = time.perf_counter() + 60   # the optimized kernels serve within ~3 s on an H200 host
    while torch.equal(out, first) and time.perf_counter() < deadline:
        time.sleep(0.01)
        out = sage2.sageattn(q, k, v)
        errs.append(errors(out))
        calls += 1
    again = sage2.sageattn(q, k, v)
    print("RESULT " + json.dumps(dict(first_s=first_s, calls=calls, changed=not torch.equal(out, first),
                                      stable=torch.equal(again, out), errs=[errs[0], errs[-1]],
                                      worst_rel=max(e[0] for e in errs), worst_cos=min(e[1] for e in errs),
                                      stats=sage2.stats()["process"])))
""")


def test_default_tiered_first_call_is_accurate_and_the_optimized_kernels_take_over(tmp_path):
    require_gpu()
    env = sage2_child_env(extra={"SAGE2_CACHE_DIR": str(tmp_path / "cache")})
    env.pop("SAGE2_TIERED_COMPILE", None)  # the default
    env.pop("SAGE2_DISABLE_DISK_CACHE", None)
    if sage2.library_path() and os.path.sep in sage2.library_path():
        env["SAGE2_LIBRARY"] = sage2.library_path()  # the library this suite tests
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert "no sage2-jit-worker" not in r.stderr, "the library has no sage2-jit-worker beside it:\n" + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout + r.stderr
    res = json.loads(lines[-1][len("RESULT "):])
    print("tiered (default):", {k: res[k] for k in ("first_s", "calls", "errs", "stats")})
    # The quick first tier at hd 88 is the direct path (unquantized); then the quantized optimized
    # kernels: another result, each within the 8-bit accuracy the suite holds every call to.
    assert res["changed"], res
    assert res["stable"], res  # the optimized plan keeps serving
    assert res["worst_cos"] >= COS_8BIT and res["worst_rel"] <= RELL1_8BIT, res
    assert res["stats"]["compiled"] >= 2, res  # quick kernels, then the optimized ones
