"""What a new user sees from the Python side, without torch or a GPU: `python -m sage2 info` without
a driver gives the cause and the SAGE2_LIBCUDA hint (as the C++ sage2-info does); the console
script sage2-py-info run bare prints the info under its own name (not another program's usage, not
exit 2); messages of the package never cite internal issue numbers; errors from the library do not
carry the library's internal "sage2 <status>:" prefix."""
import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

import sage2
from fake_torch import sage2_child_env
from sage2 import _info, _lib

PKG = os.path.dirname(os.path.abspath(sage2.__file__))
PYTHON_DIR = os.path.dirname(PKG)


def _run(args, env_extra=None, code=None):
    env = sage2_child_env(extra=env_extra)
    cmd = [sys.executable] + (["-c", code] if code is not None else ["-m", "sage2"]) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _need_library():
    try:
        return _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])


# ---- the driver line of `python -m sage2 info` ---------------------------------------------------
def test_info_without_a_driver_gives_the_cause_and_the_hint():
    _need_library()
    r = _run(["info"], {"SAGE2_LIBCUDA": "/nonexistent/libcuda.so.1"})
    assert r.returncode == 3, r.stdout + r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("driver: ")]
    assert len(line) == 1, r.stdout
    assert line[0].startswith("driver: no CUDA driver found: could not load /nonexistent/libcuda.so.1 ("), line
    assert "SAGE2_LIBCUDA" in line[0] and "sage2 no_driver" not in line[0], line


def test_no_driver_text_adds_the_hint_when_the_cause_lacks_it(monkeypatch):
    def fails(reason):
        def context(i):
            raise _lib.error_for_status(3, reason, "sage2_context_create")
        return context

    monkeypatch.setattr(_lib, "context", fails("sage2 no_driver: no CUDA driver found: could not load x.so (gone); "
                                               "install the NVIDIA driver or set SAGE2_LIBCUDA"))
    assert _info._no_driver() == ("no CUDA driver found: could not load x.so (gone); install the NVIDIA driver or set "
                                  "SAGE2_LIBCUDA")
    monkeypatch.setattr(_lib, "context", fails("sage2 driver_error: cuInit failed: CUDA_ERROR_NO_DEVICE"))
    text = _info._no_driver()
    assert text.startswith("no CUDA driver found: cuInit failed: CUDA_ERROR_NO_DEVICE; SAGE2_LIBCUDA names"), text


# ---- sage2-py-info -------------------------------------------------------------------------------
PY_INFO = textwrap.dedent("""
    import sys
    sys.argv = ["/venv/bin/sage2-py-info"] + sys.argv[1:]
    from sage2.__main__ import py_info
    sys.exit(py_info())
""")


def test_sage2_py_info_bare_prints_the_info_under_its_own_name():
    r = _run([], {"SAGE2_LIBCUDA": "/nonexistent/libcuda.so.1"}, code=PY_INFO)
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1, 3, 4), out  # what `info` exits with; never 2 (usage)
    assert "usage:" not in out and "python -m sage2" not in out, out
    assert re.search(r"^sage2 (\S+ \(library: |library: NOT FOUND)", r.stdout, re.M), out
    r = _run(["--help"], code=PY_INFO)
    assert r.returncode == 0 and r.stdout.startswith("usage: sage2-py-info"), r.stdout + r.stderr


def test_python_m_sage2_bare_is_info_and_json_works_either_way():
    r = _run([], {"SAGE2_LIBCUDA": "/nonexistent/libcuda.so.1"})
    assert r.returncode != 2 and "usage:" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert re.search(r"^sage2 ", r.stdout, re.M), r.stdout
    for args in (["--json"], ["info", "--json"]):
        r = _run(args)
        assert r.stdout.lstrip().startswith("{") and '"library"' in r.stdout, (args, r.stdout + r.stderr)


def test_the_wheel_points_sage2_py_info_at_py_info():
    repo = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(PYTHON_DIR)
    path = os.path.join(repo, "pyproject.toml")
    if not os.path.isfile(path):
        pytest.skip("no pyproject.toml beside the tests")
    text = open(path, encoding="utf-8").read()
    assert re.search(r'^sage2-py-info = "sage2.__main__:py_info"$', text, re.M), "sage2-py-info entry point"


# ---- messages ------------------------------------------------------------------------------------
def _strings(path):
    """(line, text) of every string constant of a source file (docstrings included; comments are not
    strings)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_message_of_the_package_cites_an_internal_issue_number():
    bad = []
    for d, dirs, files in os.walk(PKG):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                for line, text in _strings(path):
                    if re.search(r"\bissues? #?\d+", text):
                        bad.append("%s:%d: %r" % (os.path.relpath(path, PKG), line, text[:80]))
    assert not bad, "internal issue numbers in user-visible strings:\n" + "\n".join(bad)


def test_library_errors_lose_the_internal_status_prefix():
    e = _lib.error_for_status(1, "sage2 invalid_argument: arch 'sm_75' is not supported (sm_80 or newer)",
                              "sage2_tune")
    assert isinstance(e, ValueError) and e.status_name == "invalid_argument"
    assert str(e) == "sage2_tune: arch 'sm_75' is not supported (sm_80 or newer) [invalid_argument]", str(e)
    assert e.reason == "arch 'sm_75' is not supported (sm_80 or newer)"
    e = _lib.error_for_status(9, "sage2 internal: boom", "f")
    assert str(e) == "f: boom [internal]"
    assert str(_lib.error_for_status(5, "nvrtc log: sage2 invalid_argument: x", "g")) == \
        "g: nvrtc log: sage2 invalid_argument: x [compile_error]"  # only a leading prefix is the library's


def test_a_real_library_error_reads_without_the_prefix():
    _need_library()
    code = textwrap.dedent("""
        import sage2
        from sage2 import _lib
        try:
            _lib.context(0)
        except sage2.Sage2Error as e:
            print("ERR", str(e))
    """)
    r = _run([], {"SAGE2_LIBCUDA": "/nonexistent/libcuda.so.1"}, code=code)
    assert "ERR sage2_context_create: no CUDA driver found" in r.stdout, r.stdout + r.stderr
    assert "sage2 no_driver:" not in r.stdout and r.stdout.rstrip().endswith("[no_driver]"), r.stdout
