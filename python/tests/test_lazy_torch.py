"""``import sage2`` and the console scripts do not import torch (issue 42 item 4): the scripts
(sage2-info, sage2-cache, sage2-autotune, sage2-py-info) took seconds from a wheel and printed
torch's warnings. The torch-facing names (sageattn, sageattn_varlen, patch_sdpa ...) import torch
on first use and are plain module attributes from then on; where torch is imported before sage2,
they are bound at import as before, and where torch is imported after sage2, right after torch's
import (torch.ops.sage2.* exist whenever torch does).

Each case runs in a subprocess (fake_torch.run_driver): with the suite's fake torch — an importable
torch, so any import of it shows in sys.modules whether or not a real torch is installed — and with
whatever torch this environment has (a real one on a GPU machine). The console scripts' shims are
called as their entry points are (``sys.exit(info())``) with os.execve replaced, so what they do
before handing over to the C++ program runs, and sys.modules is read after it."""
import os
import subprocess
import sys
import textwrap

import pytest

from fake_torch import FAKE_TORCH_VARLEN, run_driver, sage2_child_env

import sage2
from sage2 import _lib

# The torch-facing names of sage2 (everything else of __all__ needs no torch).
TORCH_NAMES = ("sageattn", "sageattn_varlen", "scaled_dot_product_attention", "patch_sdpa",
               "sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp8_cuda",
               "sageattn_qk_int8_pv_fp8_cuda_sm90")

SCRIPTS = r'''
import os, sys
import sage2
assert "torch" not in sys.modules, "import sage2 imported torch"
from sage2 import _tools
from sage2.__main__ import py_info

handed = []


def execve(path, argv, env):  # the shim's last step: record it instead of running the program
    handed.append((path, argv))
    assert "torch" not in sys.modules, "sage2-%s imported torch before exec" % os.path.basename(path)
    raise SystemExit(0)


os.execve = execve
found = _tools.tool_path
_tools.tool_path = lambda name: found(name) or "/nonexistent/sage2-" + name  # reach exec without a build too
for name in ("info", "cache", "autotune"):
    sys.argv = ["sage2-" + name, "--help"]
    try:
        sys.exit(getattr(_tools, name)())  # what the console script's wrapper runs
    except SystemExit as e:
        assert e.code == 0, (name, e.code)
    assert handed and handed[-1][1][1:] == ["--help"], handed
    assert "torch" not in sys.modules, "sage2-%s imported torch" % name
sys.argv = ["sage2-py-info", "--help"]
try:
    py_info()
except SystemExit as e:
    assert e.code == 0, e.code
assert "torch" not in sys.modules, "sage2-py-info --help imported torch"
assert len(handed) == 3, handed

# every public name that needs no torch is there without importing it
torch_names = set(TORCH_NAMES_HERE)
for name in sage2.__all__:
    if name not in torch_names:
        getattr(sage2, name)
sage2.stats()
sage2.set_log_level("warning")
assert "torch" not in sys.modules, "a name that needs no torch imported it"
assert not torch_names & set(vars(sage2)), "bound before first use"
assert torch_names <= set(dir(sage2))

# the first use of a torch-facing name imports torch (where it is importable) and binds them all
import importlib.util
has_torch = importlib.util.find_spec("torch") is not None
f = sage2.sageattn
assert ("torch" in sys.modules) == has_torch, has_torch
assert torch_names <= set(vars(sage2)), "the names are plain module attributes after first use"
if has_torch and sage2._torch is not None:
    import torch
    from sage2 import _attention, _varlen
    assert f is _attention.sageattn and sage2.sageattn_varlen is _varlen.sageattn_varlen
    assert sage2._core is sys.modules["sage2._core"] and sage2.sdpa is sys.modules["sage2.sdpa"]
    assert callable(torch.ops.sage2.sageattn)  # the custom op is registered
else:
    try:
        f()
    except ImportError as e:
        assert str(e).startswith("sage2.sageattn needs PyTorch: "), str(e)
    else:
        raise AssertionError("sageattn without torch did not raise")
print("OK", has_torch)
'''.replace("TORCH_NAMES_HERE", repr(TORCH_NAMES))


def _library_env():
    lp = _lib.library_path()
    # the library this process loaded (the import checks its version); else none
    return {"SAGE2_LIBRARY": lp if lp and os.path.sep in lp else "/nonexistent/libsage2.so"}


def test_import_and_console_scripts_do_not_import_an_importable_torch(tmp_path):
    r = run_driver(tmp_path, SCRIPTS, torch_source=FAKE_TORCH_VARLEN, env=_library_env())
    assert r.returncode == 0 and "OK True" in r.stdout, r.stdout + r.stderr


def test_import_and_console_scripts_do_not_import_this_environments_torch(tmp_path):
    """The same with the torch this environment has, if any (a real one on a GPU machine)."""
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(SCRIPTS))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=sage2_child_env(extra=_library_env()), timeout=300)
    assert r.returncode == 0 and "OK " in r.stdout, r.stdout + r.stderr


def test_torch_imported_first_binds_at_import(tmp_path):
    """torch imported before sage2: the names and torch.ops.sage2.* exist right after the import."""
    r = run_driver(tmp_path, r'''
        import sys
        import torch
        import sage2
        assert "sageattn" in vars(sage2) and "sageattn_varlen" in vars(sage2) and "patch_sdpa" in vars(sage2)
        assert sage2._torch is torch and sage2._TORCH_PROBLEM is None
        assert callable(torch.ops.sage2.sageattn) and callable(torch.ops.sage2.sageattn_varlen)
        from sage2 import sageattn, _attention
        assert sageattn is _attention.sageattn
        print("OK")
    ''', torch_source=FAKE_TORCH_VARLEN)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_torch_imported_after_sage2_binds_then(tmp_path):
    """import sage2, then import torch: the names are bound and torch.ops.sage2.* registered right
    after torch's import (a torch.compile'd model may call the op without touching sage2.sageattn);
    torch keeps its own loader, and looking torch up (find_spec) imports nothing."""
    r = run_driver(tmp_path, r'''
        import importlib.util, sys
        import sage2
        assert "torch" not in sys.modules
        assert importlib.util.find_spec("torch") is not None and "torch" not in sys.modules
        assert "sageattn" not in vars(sage2)
        import torch
        assert "sageattn" in vars(sage2) and "patch_sdpa" in vars(sage2) and sage2._torch is torch
        assert callable(torch.ops.sage2.sageattn) and callable(torch.ops.sage2.sageattn_varlen)
        assert torch.__spec__.loader is torch.__loader__ and type(torch.__loader__).__name__ != "_BindAfterTorch"
        assert not any(type(f).__name__ == "_TorchImportHook" for f in sys.meta_path)  # gone once bound
        print("OK")
    ''', torch_source=FAKE_TORCH_VARLEN)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_a_torch_that_fails_to_import_after_sage2_fails_as_usual(tmp_path):
    r = run_driver(tmp_path, r'''
        import sage2
        try:
            import torch
        except ImportError as e:
            print("ERR", e)
        try:
            sage2.sageattn()
        except ImportError as e:
            print("ERR", e)
    ''', torch_source="raise ImportError('no torch here (test stub)')\n", functional="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["ERR no torch here (test stub)",
                                     "ERR sage2.sageattn needs PyTorch: import torch failed: no torch here (test stub)"], \
        r.stdout + r.stderr


@pytest.mark.parametrize("torch_source,why", [
    ("raise ImportError('no torch here (test stub)')\n", "import torch failed: no torch here (test stub)"),
    ('__version__ = "2.1.0"\n', "torch 2.1.0 is too old: sage2 needs torch >= 2.4 (torch.library.custom_op)"),
])
def test_without_a_usable_torch_the_names_say_why(tmp_path, torch_source, why):
    """The messages of a torch that fails to import or is too old are those of the eager import."""
    r = run_driver(tmp_path, r'''
        import sys
        import sage2
        from sage2 import *  # every name of __all__
        from sage2 import sageattn_qk_int8_pv_fp8_cuda, patch_sdpa
        msgs = []
        for f in (sageattn, sageattn_varlen, scaled_dot_product_attention, patch_sdpa,
                  sageattn_qk_int8_pv_fp8_cuda):
            try:
                f()
            except ImportError as e:
                msgs.append(str(e))
        assert sageattn.__name__ == "sageattn" and sageattn_qk_int8_pv_fp8_cuda.__name__ == "sageattn_qk_int8_pv_fp8_cuda"
        assert not hasattr(sage2, "SdpaPatch") and not hasattr(sage2, "_core")
        print("\n".join(msgs))
    ''', torch_source=torch_source, functional="")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines == ["sage2.%s needs PyTorch: %s" % (n, why) for n in
                     ("sageattn", "sageattn_varlen", "scaled_dot_product_attention", "patch_sdpa",
                      "sageattn_qk_int8_pv_fp8_cuda")], r.stdout + r.stderr


def test_torch_names_match_the_package():
    """TORCH_NAMES above are the package's torch-facing names of __all__ (the lazy ones)."""
    assert set(TORCH_NAMES) == set(sage2.__all__) & sage2._TORCH_NAMES


def test_python_m_sage2_info_reads_torchs_version_without_importing_it(tmp_path):
    """`python -m sage2 info` reports torch's version from torch/version.py: a torch whose import
    raises is named with its version, and the command does not fail on it (issue 42: the info
    command starts in well under a second where torch is installed)."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('sage2 info imported torch')\n")
    (fake / "version.py").write_text("__version__ = '9.8.7+cu999'\ncuda: Optional[str] = '99.9'\n")
    r = subprocess.run([sys.executable, "-m", "sage2", "info", "--json"], capture_output=True, text=True,
                       env=sage2_child_env(first=[tmp_path / "site"], extra=_library_env()), timeout=300)
    assert "imported torch" not in r.stderr, r.stderr
    out = r.stdout[r.stdout.index("{"):]
    import json

    assert json.loads(out)["torch"] == "9.8.7+cu999 (CUDA 99.9)", out
