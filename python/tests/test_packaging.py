"""Versions and NVRTC discovery, without torch and without a GPU (they run from a source checkout
and from an installed wheel alike).

The NVIDIA-wheel cases build a fake site-packages: a `torch` package whose import fails (so no real
torch is needed or used) next to `nvidia/<layout>/lib/libnvrtc.so.N`, a symbolic link to the NVRTC
this process loaded. They check which file the library loads and the rule it gives."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import sage2
from fake_torch import sage2_child_env
from sage2 import _lib

PKG_DIR = os.path.dirname(os.path.abspath(sage2.__file__))
PKG_PARENT = os.path.dirname(PKG_DIR)  # python/ in a checkout, site-packages or --target DIR


def _need_library():
    try:
        return _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])


def _need_nvrtc():
    _need_library()
    try:
        return _lib.nvrtc_library()[0]
    except sage2.Sage2Error as e:
        pytest.skip("no NVRTC here: %s" % str(e).splitlines()[0])


def _env(extra=None, drop=("SAGE2_LIBNVRTC",), pythonpath=()):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # the library this process loaded, so the child tests the same one
    if _lib.library_path():
        env["SAGE2_LIBRARY"] = _lib.library_path()
    # the folders given, then where this process found sage2; not the PYTHONPATH this process was
    # given (the NVRTC cases must see their fake site's torch and no other)
    env = sage2_child_env(first=list(pythonpath), base=env, inherit_pythonpath=False)
    env.update(extra or {})
    return env


def _python(code, env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=120)


def _info_json(env):
    r = subprocess.run([sys.executable, "-m", "sage2", "info", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode in (0, 3, 4), r.stdout + r.stderr
    return json.loads(r.stdout)


def _fake_site(tmp_path, torch_cuda, layouts, nvrtc):
    """A site-packages with a torch that cannot be imported (torch/version.py says `torch_cuda`)
    and, for each of `layouts` ("cu13", "cu12"), NVIDIA's libnvrtc path linked to `nvrtc`."""
    site = tmp_path / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise ImportError('a stand-in torch for sage2 tests')\n")
    (site / "torch" / "version.py").write_text("cuda = %r\n" % torch_cuda)
    paths = {}
    for lay in layouts:
        rel = {"cu13": ("nvidia", "cu13", "lib", "libnvrtc.so.13"),
               "cu12": ("nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12")}[lay]
        p = site.joinpath(*rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        if nvrtc is None:
            p.write_text("not a shared library")
        else:
            p.symlink_to(nvrtc)
        paths[lay] = str(p)
    return str(site), paths


# ---- versions ---------------------------------------------------------------------------------
def test_version_is_the_library_version():
    _need_library()
    assert sage2.__version__ == _lib.version() == sage2.library_version()
    assert _lib.package_version() == sage2.__version__
    cmake = os.path.join(os.path.dirname(PKG_PARENT), "CMakeLists.txt")
    if os.path.isfile(cmake):  # a checkout: the single source
        with open(cmake) as f:
            m = re.search(r"project\(\s*sage2\s+VERSION\s+([0-9][0-9.]*)", f.read())
        assert m and m.group(1) == sage2.__version__


def test_a_package_paired_with_another_library_version_fails_at_import(tmp_path):
    _need_library()
    pkg = tmp_path / "pkg" / "sage2"
    shutil.copytree(PKG_DIR, str(pkg), ignore=shutil.ignore_patterns("*.so", "*.so.*", "__pycache__"))
    (pkg / "_version.py").write_text('__version__ = "9.9.9"\n')
    env = _env()
    env["PYTHONPATH"] = str(tmp_path / "pkg")
    r = _python("""
        try:
            import sage2
        except ImportError as e:
            print("IMPORT-ERROR:" + str(e))
        else:
            print("IMPORTED", sage2.__version__)
    """, env)
    assert "IMPORT-ERROR:" in r.stdout, r.stdout + r.stderr
    msg = r.stdout
    assert "9.9.9" in msg and ("libsage2 it loaded is version %s" % _lib.version()) in msg, msg
    assert _lib.library_path() in msg, msg  # names the library file too
    # the same copy with its matching version imports
    (pkg / "_version.py").write_text('__version__ = "%s"\n' % _lib.version())
    r = _python("import sage2; print('IMPORTED', sage2.__version__)", env)
    assert "IMPORTED %s" % _lib.version() in r.stdout, r.stdout + r.stderr


# ---- NVRTC discovery --------------------------------------------------------------------------
def test_nvrtc_info_names_file_and_rule():
    nvrtc = _need_nvrtc()
    f, rule, _ = _lib.nvrtc_library()
    assert os.path.exists(f) and "libnvrtc" in os.path.basename(f)
    assert rule
    facts = _info_json(_env())
    assert facts["nvrtc_file"] and facts["nvrtc_rule"]
    r = subprocess.run([sys.executable, "-m", "sage2", "info"], capture_output=True, text=True, env=_env(),
                       timeout=120)
    assert ("NVRTC: " in r.stdout) and (" from %s (" % nvrtc) in r.stdout, r.stdout


@pytest.mark.parametrize("torch_cuda,expect", [("13.0", "cu13"), ("12.8", "cu12"), (None, "cu13")])
def test_nvrtc_from_torch_wheel_prefers_torch_cuda_major(tmp_path, torch_cuda, expect):
    nvrtc = _need_nvrtc()
    site, paths = _fake_site(tmp_path, torch_cuda, ["cu13", "cu12"], nvrtc)
    facts = _info_json(_env(pythonpath=[site]))
    assert facts["nvrtc_file"] == paths[expect], facts
    major = {"cu13": 13, "cu12": 12}[expect]
    assert facts["nvrtc_rule"].startswith("torch's NVIDIA wheel, CUDA %d layout, next to " % major), facts
    assert os.path.join(site, "torch") in facts["nvrtc_rule"]


def test_nvrtc_cuda12_layout_alone(tmp_path):
    nvrtc = _need_nvrtc()
    site, paths = _fake_site(tmp_path, "13.0", ["cu12"], nvrtc)
    facts = _info_json(_env(pythonpath=[site]))
    assert facts["nvrtc_file"] == paths["cu12"], facts
    # the CUDA 13 layout was looked at first and is reported as passed over
    assert os.path.join(site, "nvidia", "cu13", "lib", "libnvrtc.so.13") in facts["nvrtc_passed_over"]


def test_sage2_libnvrtc_comes_before_torch_wheel(tmp_path):
    nvrtc = _need_nvrtc()
    site, _ = _fake_site(tmp_path, "13.0", ["cu13"], nvrtc)
    facts = _info_json(_env({"SAGE2_LIBNVRTC": nvrtc}, pythonpath=[site]))
    assert facts["nvrtc_file"] == nvrtc and facts["nvrtc_rule"] == "$SAGE2_LIBNVRTC", facts


def test_broken_torch_wheel_nvrtc_falls_back_and_says_why(tmp_path):
    _need_nvrtc()
    site, paths = _fake_site(tmp_path, "13.0", ["cu13"], None)  # a file that is not a library
    facts = _info_json(_env(pythonpath=[site]))
    assert facts["nvrtc_file"] and facts["nvrtc_file"] != paths["cu13"], facts
    assert paths["cu13"] + " (torch's NVIDIA wheel, CUDA 13 layout" in facts["nvrtc_passed_over"], facts


def test_missing_nvrtc_lists_every_place_looked(tmp_path):
    """Every libnvrtc is > 50 MB: capping the address space just above what the process uses makes
    each one fail to map, which is what a machine without NVRTC looks like to dlopen."""
    _need_nvrtc()
    site, paths = _fake_site(tmp_path, "13.0", ["cu13", "cu12"], _lib.nvrtc_library()[0])
    r = _python("""
        import resource
        import sage2
        from sage2 import _lib
        _lib.lib()
        with open("/proc/self/status") as f:
            vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
        cap = vm + (32 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        try:
            _lib.nvrtc_library()
        except sage2.Sage2Error as e:
            print("ERR " + e.status_name + " " + str(e))
        else:
            print("LOADED")
    """, _env({"SAGE2_LIBNVRTC": "/nonexistent/libnvrtc.so.13"}, drop=(), pythonpath=[site]))
    out = r.stdout
    assert out.startswith("ERR nvrtc_missing"), out + r.stderr
    looked = ["/nonexistent/libnvrtc.so.13 ($SAGE2_LIBNVRTC)",
              paths["cu13"] + " (torch's NVIDIA wheel, CUDA 13 layout",
              paths["cu12"] + " (torch's NVIDIA wheel, CUDA 12 layout",
              "libnvrtc.so.13 (system library name", "libnvrtc.so.12 (system library name",
              "libnvrtc.so (system library name"]
    at = [out.find(s) for s in looked]
    assert all(a >= 0 for a in at), out
    assert at == sorted(at), out  # in the order tried
    assert "SAGE2_LIBNVRTC" in out.split("tried")[0]  # says how to fix it


def test_candidates_cannot_be_added_after_nvrtc_is_loaded():
    _need_nvrtc()
    L = _lib.lib()
    st = L.sage2_nvrtc_add_candidate(b"/late/libnvrtc.so.13", b"late")
    assert st == 2 and "/late/libnvrtc.so.13" in _lib.last_error()


def test_wheel_candidates_without_torch_are_empty_or_real(tmp_path):
    """Without torch on sys.path only NVIDIA wheel files that exist are proposed."""
    code = """
        import sys
        sys.modules.pop("torch", None)
        from sage2 import _lib
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            import os
            c = _lib.nvrtc_wheel_candidates()
            assert all(os.path.isfile(p) for p, _ in c), c
            print("OK", len(c))
        else:
            print("OK torch present")
    """
    r = _python(code, _env())
    assert r.stdout.startswith("OK"), r.stdout + r.stderr
