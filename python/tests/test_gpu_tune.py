"""sage2.tune on the GPU (issue 26): one tiny problem (head dim 64, fp16, no causal mask, one
sequence length of 1024, a small time budget) tuned into a temporary SAGE2_CACHE_DIR.

The run happens in a child process: the cache directory (and with it the tuning database) is
fixed when a process first creates its context for a device, which this pytest process may have
done already. Skips (with the reason) without a CUDA torch, a GPU or a libsage2 with sage2_tune."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from sage2_testutil import require_gpu, torch  # noqa: F401  (skips without torch)

import sage2
from fake_torch import sage2_child_env

pytestmark = pytest.mark.gpu

CHILD = textwrap.dedent("""
    import json, sys
    import torch
    import sage2
    kw = dict(head_dims=64, dtypes=torch.float16, causal=False, seq_lens=[1024], batch=1, heads=8, reps=5,
              warmup=1, budget_seconds=0.2, jobs=4, device=torch.cuda.current_device())
    first = sage2.tune(**kw)
    again = sage2.tune(write_db=False, **kw)   # measures only; its kernels are in the cache now
    print("RESULT " + json.dumps({"first": first, "again": again}))
""")


def test_tune_one_small_problem_into_a_temporary_cache(tmp_path):
    require_gpu(sage2._lib._TUNE_SYMBOLS)
    cache = tmp_path / "cache"
    env = sage2_child_env(extra={"SAGE2_CACHE_DIR": str(cache)})
    env.pop("SAGE2_DISABLE_DISK_CACHE", None)
    if sage2.library_path() and os.path.sep in sage2.library_path():
        env["SAGE2_LIBRARY"] = sage2.library_path()  # the library this suite tests
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout + r.stderr
    res = json.loads(lines[-1][len("RESULT "):])
    first, again = res["first"], res["again"]
    print("sage2.tune:", first, "\nagain (write_db=False):", again)

    # one specialisation (hd 64, fp16, no mask, 8-bit QK and P~V auto) x one sequence length
    assert first["problems"] == 1 and first["failures"] == 0 and first["compile_errors"] == 0, first
    assert first["written"] == 1, first
    assert first["kernels_compiled"] + first["kernels_from_cache"] >= 1, first
    assert 0 <= first["improved"] <= 1 and first["best_gain"] >= 0.0, first
    assert (first["best_gain"] > 0) == (first["improved"] == 1), first
    db = first["database"]
    assert db and os.path.isfile(db), first
    assert os.path.realpath(db).startswith(os.path.realpath(str(cache)) + os.sep), (db, str(cache))
    assert os.path.getsize(db) > 0

    assert again["problems"] == 1 and again["failures"] == 0 and again["compile_errors"] == 0, again
    assert again["written"] == 0 and again["database"] == "", again
    assert again["kernels_compiled"] == 0 and again["kernels_from_cache"] >= 1, again
