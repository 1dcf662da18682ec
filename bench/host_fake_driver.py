#!/usr/bin/env python3
"""sage2's own host work per attention call, without a GPU (issue 15 item 2).

Builds the fake CUDA driver of tests/cpu/fake_driver.hpp (plus a tensor-map encoder
and counters), then times B=1 H=1 N=128 d=64 calls back to back:
  - C++: build/bench/sage2-bench-attention --modes host --host-calls N (Context::attention);
  - Python: sage2.sageattn through the real libsage2, with the metadata-only fake torch of
    python/tests/test_fast_path.py (its allocator hands out two addresses per shape in turn, like
    torch's caching allocator in a loop).
The fake driver's calls cost almost nothing and no kernel runs, so the numbers are sage2's CPU
work alone: on a GPU add the driver's launches and pointer queries, torch's allocations, and note
that host_us there is bounded below by the GPU time of the call's kernels. At exit the fake driver
prints how many launches, tensor-map encodes and pointer queries it saw.

  python3 bench/host_fake_driver.py [--build build] [--calls 20000] [--python-dir python]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXTRA_C = r'''
CUresult cuTensorMapEncodeTiled(void* m, int dt, unsigned r, void* g, const void* d, const void* s, const void* b,
                                const void* e, int i, int sw, int l2, int oob) {
  (void)dt; (void)r; (void)g; (void)d; (void)s; (void)b; (void)e; (void)i; (void)sw; (void)l2; (void)oob;
  memset(m, 0, 128); g_tma++; return 0; }
#include <stdio.h>
__attribute__((destructor)) static void fake_report(void) {
  fprintf(stderr, "[fake driver] launches %ld, tensor-map encodes %ld, pointer queries %ld\n", g_launches, g_tma, g_ptr); }
'''

PY_BENCH = r'''
import itertools, sys, time
import torch, sage2
_pool = {}
_new = torch.empty
def empty(shape, dtype=None, device=None):
    t = _new(shape, dtype=dtype, device=device)
    c = _pool.setdefault((tuple(shape), dtype), itertools.cycle([t._ptr, t._ptr + 0x100000]))
    t._ptr = next(c)
    return t
torch.empty = empty
torch.ALLOCS = type("Discard", (), {"append": staticmethod(lambda t: None)})()
q, k, v = (torch.Tensor((1, 1, 128, 64), torch.float16, "cuda:0") for _ in range(3))
for _ in range(50):
    sage2.sageattn(q, k, v)
n = int(sys.argv[1])
r = []
for _ in range(3):
    t = time.perf_counter()
    for _ in range(n):
        sage2.sageattn(q, k, v)
    r.append((time.perf_counter() - t) / n * 1e6)
t = time.perf_counter()
for _ in range(n):
    torch.empty((1, 1, 128, 64), dtype=torch.float16, device=q.device)
e = (time.perf_counter() - t) / n * 1e6
print("python sageattn: %.2f us per call (%d calls x 3, median; the fake torch.empty alone costs %.2f us)"
      % (sorted(r)[1], n, e))
'''


def fake_driver_source():
    src = open(os.path.join(ROOT, "tests", "cpu", "fake_driver.hpp"), encoding="utf-8").read()
    fake = src.split('const char* kFakeSource = R"FAKE(')[1].split(')FAKE";')[0]
    fake = fake.replace("static double g_clock_ms = 0;",
                        "static double g_clock_ms = 0;\nstatic long g_launches = 0, g_tma = 0, g_ptr = 0;", 1)
    fake = fake.replace("g_clock_ms += 0.002 + smem * 1e-6;", "g_clock_ms += 0.002 + smem * 1e-6; g_launches++;", 1)
    fake = fake.replace("  (void)p;\n  for (unsigned i = 0; i < n; ++i)", "  (void)p; g_ptr++;\n  for (unsigned i = 0; i < n; ++i)", 1)
    fake += EXTRA_C
    have = set(re.findall(r"CUresult (cu\w+)\(", fake))
    header = open(os.path.join(ROOT, "base", "driver.hpp"), encoding="utf-8").read()
    for name in re.findall(r"X\((cu\w+)\)", header):
        if name not in have:
            fake += "CUresult %s() { return 801; }\n" % name
            have.add(name)
    return fake


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python-dir", default=os.path.join(ROOT, "python"))
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sage2-host-fake-") as tmp:
        c = os.path.join(tmp, "fake_cuda.c")
        lib = os.path.join(tmp, "libcuda_fake.so")
        with open(c, "w") as f:
            f.write(fake_driver_source())
        subprocess.check_call(["cc", "-shared", "-fPIC", "-O2", "-o", lib, c])
        env = dict(os.environ, SAGE2_LIBCUDA=lib)
        print("== C++ Context::attention", flush=True)
        subprocess.call([os.path.join(a.build, "bench", "sage2-bench-attention"), "--modes", "host",
                         "--host-calls", str(a.calls)], env=env)
        sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
        from test_fast_path import FAKE_TORCH  # noqa: E402  (no torch needed)

        pkg = os.path.join(tmp, "faketorch")
        os.makedirs(os.path.join(pkg, "torch", "nn"))
        with open(os.path.join(pkg, "torch", "__init__.py"), "w") as f:
            f.write(FAKE_TORCH + "\nfrom . import nn\n")
        with open(os.path.join(pkg, "torch", "nn", "__init__.py"), "w") as f:
            f.write("from . import functional\n")
        with open(os.path.join(pkg, "torch", "nn", "functional.py"), "w") as f:
            f.write("def scaled_dot_product_attention(*a, **k): raise RuntimeError\n")
        env["PYTHONPATH"] = os.pathsep.join([pkg, a.python_dir])
        env.setdefault("SAGE2_LIBRARY", os.path.join(a.build, "libsage2.so"))
        print("== Python sage2.sageattn", flush=True)
        return subprocess.call([sys.executable, "-c", PY_BENCH, str(a.calls)], env=env)


if __name__ == "__main__":
    sys.exit(main())
