"""sage2.warmup's argument checks and the console-script shims (issue 25 item 5), no GPU needed.
The warm-up itself (kernels compiled, the second run fast) is in test_gpu_integrations.py."""
import json
import os
import subprocess
import sys

import pytest

import sage2
from fake_torch import sage2_child_env
from sage2 import _tools, _warmup

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(sage2.__file__)))


def test_combinations():
    c = _warmup.check_warmup_args((64, 128), ("fp16", "bfloat16"), (False, True), (1024,), (False,), {})
    assert len(c) == 8
    assert c[0] == (64, "float16", False, 1024, False) and c[-1] == (128, "bfloat16", True, 1024, False)
    assert _warmup.check_warmup_args(96, "bf16", True, 4096, True, {}) == [(96, "bfloat16", True, 4096, True)]
    # duplicates of one dtype are one
    assert len(_warmup.check_warmup_args(64, ("fp16", "float16", "half"), False, 8, False, {})) == 1


@pytest.mark.parametrize("kw,exc,text", [
    (dict(head_dims=()), ValueError, "head_dims is empty"),
    (dict(head_dims=(64, "128")), TypeError, "head_dims must be ints, got '128'"),
    (dict(head_dims=(0,)), ValueError, "head dim 0 is outside 1..512"),
    (dict(head_dims=(1024,)), ValueError, "head dim 1024"),
    (dict(dtypes=("float32",)), ValueError, "dtypes has 'float32'"),
    (dict(dtypes=(3,)), ValueError, "dtypes has 3"),
    (dict(causal=("yes",)), TypeError, "causal must hold bools, got 'yes'"),
    (dict(seq_lens=(0,)), ValueError, "seq_lens must be positive ints, got 0"),
    (dict(seq_lens=(1.5,)), ValueError, "got 1.5"),
    (dict(return_lse=(1,)), TypeError, "return_lse must hold bools, got 1"),
])
def test_bad_arguments_are_named(kw, exc, text):
    args = dict(head_dims=(64,), dtypes=("fp16",), causal=(False,), seq_lens=(128,), return_lse=(False,))
    args.update(kw)
    with pytest.raises(exc, match=text.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        _warmup.check_warmup_args(args["head_dims"], args["dtypes"], args["causal"], args["seq_lens"],
                                  args["return_lse"], {})


def test_masks_are_not_warmup_options():
    with pytest.raises(ValueError, match="attn_mask / kv_lens"):
        _warmup.check_warmup_args(64, "fp16", False, 128, False, {"attn_mask": None})


def test_warmup_checks_before_torch():
    """A bad argument is named even where torch is missing (nothing is imported before the checks)."""
    with pytest.raises(ValueError, match="head dim 0"):
        sage2.warmup(head_dims=(0,))


def test_warmup_without_torch_says_so(tmp_path):
    stub = tmp_path / "torch"
    stub.mkdir()
    (stub / "__init__.py").write_text("raise ImportError('no torch here (test stub)')\n")
    env = sage2_child_env(first=[tmp_path])
    r = subprocess.run([sys.executable, "-c", "import sage2\ntry:\n    sage2.warmup()\nexcept ImportError as e:\n"
                        "    print('ERR', e)\n"], capture_output=True, text=True, env=env, timeout=60)
    assert "ERR sage2.warmup needs PyTorch" in r.stdout, r.stdout + r.stderr


def _need_tool(name):
    p = _tools.tool_path(name)
    if p is None:
        pytest.skip("sage2-%s is not built here (wheel: sage2/_bin; checkout: build/tools)" % name)
    return p


def test_shim_runs_the_program():
    _need_tool("info")
    env = sage2_child_env()
    r = subprocess.run([sys.executable, "-c", "import sys; from sage2._tools import info; sys.exit(info(['--archs']))"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sm_90a" in r.stdout and "Hopper" in r.stdout, r.stdout


def test_shim_passes_exit_codes_and_arguments():
    _need_tool("cache")
    env = sage2_child_env()
    r = subprocess.run([sys.executable, "-c", "import sys; from sage2._tools import cache; sys.exit(cache(['bogus']))"],
                       capture_output=True, text=True, env=env, timeout=120)
    direct = subprocess.run([_tools.tool_path("cache"), "bogus"], capture_output=True, text=True, timeout=120)
    assert r.returncode == direct.returncode != 0
    assert r.stderr == direct.stderr


def test_missing_program_is_explained(tmp_path, monkeypatch):
    monkeypatch.setattr(_tools, "tool_path", lambda name: None)
    assert _tools.autotune(["--help"]) == 127


def test_console_scripts_are_declared():
    pyproject = os.path.join(os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(PYTHON_DIR), "pyproject.toml")
    if not os.path.isfile(pyproject):
        pytest.skip("no pyproject.toml beside the tests (an installed copy)")
    text = open(pyproject, encoding="utf-8").read()
    for name in ("autotune", "cache", "info"):
        assert 'sage2-%s = "sage2._tools:%s"' % (name, name) in text
        assert callable(getattr(_tools, name))


def test_shim_points_the_program_at_torchs_nvrtc(tmp_path, monkeypatch):
    """The first existing NVIDIA-wheel NVRTC goes to SAGE2_LIBNVRTC; a value the user set stays."""
    from sage2 import _lib

    present = tmp_path / "libnvrtc.so.13"
    present.write_text("")
    monkeypatch.setattr(_lib, "nvrtc_wheel_candidates", lambda: [(str(tmp_path / "missing.so"), "a"),
                                                                  (str(present), "b")])
    env = {}
    _tools._nvrtc_hint(env)
    assert env == {"SAGE2_LIBNVRTC": str(present)}
    env = {"SAGE2_LIBNVRTC": "/mine/libnvrtc.so"}
    _tools._nvrtc_hint(env)
    assert env == {"SAGE2_LIBNVRTC": "/mine/libnvrtc.so"}


def test_cache_list_and_info_agree_on_a_default_cache_not_created_yet(tmp_path):
    """sage2-info reports a default cache directory nothing was stored in yet as 0 entries;
    sage2-cache list says the same and exits 0 (issue 42). --dir / $SAGE2_CACHE_DIR naming a
    missing directory stay an error (a mistyped name, most often: tests/cpu/tools/test_sage2_cache.cpp)."""
    _need_tool("cache")
    help_text = subprocess.run([_tools.tool_path("cache"), "--help"], capture_output=True, text=True,
                               timeout=120).stdout
    if "a default directory not created yet" not in help_text:
        pytest.skip("this sage2-cache predates issue 42 (rebuild it: cmake --build build --target sage2-cache)")
    env = sage2_child_env(extra={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    env.pop("SAGE2_CACHE_DIR", None)
    default = str(tmp_path / "xdg" / "sage2")
    code = "import sys; from sage2._tools import cache; sys.exit(cache())"
    r = subprocess.run([sys.executable, "-c", code, "list"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "cache directory: %s (does not exist yet: nothing has been cached in it)\n0 entries, 0 B\n" \
        % default, r.stdout
    r = subprocess.run([sys.executable, "-c", code, "list", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout) == {"dir": default, "total_bytes": 0, "entries": []}, r.stdout
    assert not os.path.exists(default)  # nothing created
    if _tools.tool_path("info"):
        r = subprocess.run([_tools.tool_path("info")], capture_output=True, text=True, env=env, timeout=120)
        assert "disk cache: %s (0 entries, 0 invalid)" % default in r.stdout, r.stdout + r.stderr
