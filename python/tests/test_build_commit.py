"""sage2.build_commit(): the commit the loaded libsage2 was built from (sage2_build_commit in the C
ABI). With the fake torch and a fake library (no torch, no GPU, no libsage2): a library without the
symbol gives None, one with it gives its string; `python -m sage2 info` prints it. With the real
library (skipped when absent): the string's format, and the same value in `python -m sage2 info`."""
import json
import re
import subprocess
import sys

import pytest

from fake_torch import FAKE_TORCH, FakeCDLL, run_driver, sage2_child_env

import sage2
from sage2 import _info, _lib

COMMIT = re.compile(r"^([0-9a-f]{40}(-dirty)?|unknown)$")

DRIVER = r'''
import sys
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from sage2 import _info
from fake_torch import FakeLib, install

old = FakeLib(varlen=False, masked=False)  # a libsage2 from before sage2_build_commit
install(old)
assert not hasattr(old, "sage2_build_commit")
assert sage2.build_commit() is None
r = {"library": "/fake/libsage2.so", "version": "0.1.0", "build_commit": sage2.build_commit(), "nvrtc": "13.0",
     "driver": "none", "torch": torch.__version__, "devices": [], "cache_dir": "disabled", "kernel_entries": 0,
     "tuning": []}
text = _info.format_info(r)
assert "build commit: not reported (this libsage2 predates sage2_build_commit)" in text, text

new = FakeLib(varlen=False, masked=False)
new.sage2_build_commit = lambda: b"0123456789abcdef0123456789abcdef01234567-dirty"
install(new)
assert sage2.build_commit() == "0123456789abcdef0123456789abcdef01234567-dirty"
r["build_commit"] = sage2.build_commit()
assert "build commit: 0123456789abcdef0123456789abcdef01234567-dirty" in _info.format_info(r)
new.sage2_build_commit = lambda: b"unknown"
assert sage2.build_commit() == "unknown"
print("OK")
'''


def test_build_commit_with_fake_torch_and_fake_library(tmp_path):
    r = run_driver(tmp_path, DRIVER, torch_source=FAKE_TORCH)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_declaration_tolerates_an_older_library():
    old = FakeCDLL(missing={"sage2_build_commit"})
    _lib._declare(old)  # must not raise
    assert "sage2_build_commit" not in vars(old)
    new = FakeCDLL()
    _lib._declare(new)
    assert new.sage2_build_commit.restype is __import__("ctypes").c_char_p
    assert new.sage2_build_commit.argtypes == []


def _need_library():
    try:
        return _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])


def test_real_library_reports_a_well_formed_commit_and_info_prints_it():
    _need_library()
    c = sage2.build_commit()
    if c is None:
        pytest.skip("this libsage2 predates sage2_build_commit")
    assert COMMIT.match(c), c
    env = sage2_child_env(extra={"SAGE2_LIBRARY": _lib.library_path()})
    r = subprocess.run([sys.executable, "-m", "sage2", "info"], capture_output=True, text=True, env=env, timeout=120)
    assert "build commit: %s\n" % c in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "sage2", "info", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert json.loads(r.stdout)["build_commit"] == c
