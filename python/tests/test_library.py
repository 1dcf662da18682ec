"""The ctypes layer without torch and without a GPU: library discovery, the ABI struct layout,
status-code mapping, `python -m sage2 info`. Tests that need libsage2 skip when it is absent."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import sage2
from fake_torch import sage2_child_env
from sage2 import _lib

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(_lib.__file__)))
REPO = os.path.dirname(PYTHON_DIR)
# SAGE2_SOURCE_DIR: the checkout, when the package under test is an installed wheel
HEADER = os.path.join(os.environ.get("SAGE2_SOURCE_DIR") or REPO, "include", "sage2", "sage2.h")


def _run_python(code, env_extra=None):
    env = sage2_child_env(extra=env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def _need_library():
    try:
        return _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])


def test_import_works_without_library_and_call_explains_where_it_looked():
    code = textwrap.dedent("""
        import sage2
        try:
            sage2.library_version()
        except sage2.LibraryNotFoundError as e:
            assert isinstance(e, RuntimeError)
            print("MSG:" + str(e))
        else:
            print("LOADED")
    """)
    r = _run_python(code, {"SAGE2_LIBRARY": "/nonexistent/dir/libsage2.so"})
    assert r.returncode == 0, r.stderr
    assert "MSG:" in r.stdout, r.stdout
    assert "/nonexistent/dir/libsage2.so" in r.stdout
    assert "$SAGE2_LIBRARY" in r.stdout and "no such file" in r.stdout
    assert "SAGE2_LIBRARY=/path/to/libsage2.so" in r.stdout  # tells how to fix it


def test_search_order():
    env = os.environ.get("SAGE2_LIBRARY")
    locs = _lib.search_locations()
    names = [w for w, _ in locs]
    if env:
        assert locs[0] == ("$SAGE2_LIBRARY", env)
    pkg = os.path.dirname(os.path.abspath(_lib.__file__))
    # the order of the built-in places, whatever $SAGE2_LIBRARY names (it may name build/libsage2.so
    # itself: then that path is listed twice, first as the variable's)
    builtin = [(w, p) for w, p in locs if w != "$SAGE2_LIBRARY"]
    assert len(builtin) == len(locs) - (1 if env else 0)
    assert builtin.index(("next to the package", os.path.join(pkg, "libsage2.so"))) < \
        builtin.index(("repository build", os.path.join(REPO, "build", "libsage2.so")))
    assert names[-1].startswith("ctypes.util.find_library")


def test_unloadable_file_is_reported(tmp_path):
    bad = tmp_path / "libsage2.so"
    bad.write_text("not an ELF file")
    r = _run_python("import sage2\ntry:\n    sage2.library_version()\nexcept sage2.LibraryNotFoundError as e:\n"
                    "    print('MSG:' + str(e))\n", {"SAGE2_LIBRARY": str(bad)})
    assert "cannot load" in r.stdout, r.stdout + r.stderr


def test_struct_layout_matches_the_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc or not os.path.exists(HEADER):
        pytest.skip("no C compiler or no header (%s)" % HEADER)
    src = tmp_path / "layout.c"
    fields_t = [f for f, _ in _lib.Tensor._fields_]
    fields_p = [f for f, _ in _lib.AttentionParams._fields_]
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "sage2/sage2.h"', "int main(void) {",
             'printf("sage2_tensor %zu\\n", sizeof(sage2_tensor));',
             'printf("sage2_attention_params %zu\\n", sizeof(sage2_attention_params));']
    for f in fields_t:
        lines.append('printf("sage2_tensor.%s %%zu\\n", offsetof(sage2_tensor, %s));' % (f, f))
    for f in fields_p:
        lines.append('printf("sage2_attention_params.%s %%zu\\n", offsetof(sage2_attention_params, %s));' % (f, f))
    lines += ["return 0;", "}"]
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", os.path.dirname(os.path.dirname(HEADER)), str(src), "-o", str(exe)], check=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.check_output([str(exe)], text=True).splitlines())
    assert int(got["sage2_tensor"]) == ctypes.sizeof(_lib.Tensor)
    assert int(got["sage2_attention_params"]) == ctypes.sizeof(_lib.AttentionParams)
    for f in fields_t:
        assert int(got["sage2_tensor." + f]) == getattr(_lib.Tensor, f).offset, f
    for f in fields_p:
        assert int(got["sage2_attention_params." + f]) == getattr(_lib.AttentionParams, f).offset, f


def test_params_defaults_match_the_library():
    L = _need_library()
    p = _lib.AttentionParams()
    L.sage2_attention_params_init(ctypes.byref(p))
    assert (p.causal, p.sm_scale, p.qk_bits, p.smooth_q, p.smooth_k, p.smooth_v) == (0, 0.0, 0, 0, 1, 0)
    # struct returned by value: the ctypes declaration round-trips through the library
    t = L.sage2_tensor_hnd(0x1000, 0, 1, 2, 3, 4)
    assert (t.data, t.dtype, t.batch, t.heads, t.seq, t.dim) == (0x1000, 0, 1, 2, 3, 4)
    assert (t.stride_batch, t.stride_head, t.stride_seq, t.stride_dim) == (24, 12, 4, 1)
    t = L.sage2_tensor_nhd(0x2000, 1, 1, 2, 3, 4)
    assert t.dtype == 1 and (t.stride_batch, t.stride_head, t.stride_seq, t.stride_dim) == (24, 4, 8, 1)


def test_status_codes_map_to_python_exceptions():
    L = _need_library()
    for status, name in _lib.STATUS_NAMES.items():
        assert L.sage2_status_name(status).decode() == name
    t = _lib.Tensor()
    n = ctypes.c_size_t()
    st = L.sage2_workspace_size(None, ctypes.byref(t), ctypes.byref(t), ctypes.byref(t), ctypes.byref(t), None,
                                ctypes.byref(n))
    assert st == 1
    with pytest.raises(sage2.InvalidArgumentError) as ei:
        _lib.check(st, "sage2_workspace_size")
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, sage2.Sage2Error)
    assert e.status == 1 and e.status_name == "invalid_argument"
    assert "ctx is NULL" in str(e) and "sage2_workspace_size" in str(e)
    assert isinstance(_lib.error_for_status(2, "x"), NotImplementedError)
    assert isinstance(_lib.error_for_status(8, "x"), MemoryError)
    assert type(_lib.error_for_status(5, "nvrtc log")) is sage2.Sage2Error


def test_no_driver_is_a_clear_error():
    code = textwrap.dedent("""
        import sage2
        from sage2 import _lib
        try:
            _lib.context(0)
        except sage2.Sage2Error as e:
            print("ERR", e.status_name, str(e))
    """)
    _need_library()
    r = _run_python(code, {"SAGE2_LIBCUDA": "/nonexistent/libcuda.so.1"})
    assert r.returncode == 0, r.stderr
    assert "ERR no_driver" in r.stdout, r.stdout


def test_version_info_and_default_cache_dir(tmp_path):
    _need_library()
    maj, mnr, drv = _lib.version_info()
    assert maj >= 0 and mnr >= 0 and drv >= 0
    code = "from sage2 import _lib; print(repr(_lib.default_cache_dir()))"
    r = _run_python(code, {"SAGE2_CACHE_DIR": str(tmp_path / "c"), "SAGE2_DISABLE_DISK_CACHE": ""})
    assert r.stdout.strip() == repr(str(tmp_path / "c")), r.stdout + r.stderr
    r = _run_python(code, {"SAGE2_DISABLE_DISK_CACHE": "1"})
    assert r.stdout.strip() == "''"


def _info(env_extra, *args):
    env = sage2_child_env(extra=env_extra)
    return subprocess.run([sys.executable, "-m", "sage2", "info", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_info_command(tmp_path):
    _need_library()
    cache = tmp_path / "cache"
    cache.mkdir()
    r = _info({"SAGE2_CACHE_DIR": str(cache), "SAGE2_DISABLE_DISK_CACHE": ""})
    assert r.returncode in (0, 3, 4), r.stdout + r.stderr
    out = r.stdout
    for needle in ("sage2 ", "library: ", "NVRTC: ", "driver: ", "cache directory: " + str(cache),
                   "tuned entries: none"):
        assert needle in out, out
    # a tuning DB in the cache directory is listed
    (cache / "tuning.json").write_text(json.dumps({"entries": [{"key": "attn d128 N8192", "tile": "bq128"},
                                                               {"key": "attn d64 N1024", "tile": "bq64"}]}))
    r = _info({"SAGE2_CACHE_DIR": str(cache), "SAGE2_DISABLE_DISK_CACHE": ""})
    assert "tuned entries: 2 in " + str(cache / "tuning.json") in r.stdout, r.stdout
    assert "attn d128 N8192" in r.stdout
    r = _info({"SAGE2_CACHE_DIR": str(cache)}, "--json")
    facts = json.loads(r.stdout)
    assert facts["cache_dir"] == str(cache) and len(facts["tuning"][0]["entries"]) == 2
    # the schema sage2-autotune writes (autotune/tuning_db.hpp) is described entry by entry
    (cache / "tuning.json").unlink()
    db = {"schema": "sage2-tuning", "schema_version": 1,
          "device": {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90a", "sm_count": 132},
          "library_version": "0.1.0",
          "entries": [{"family": "attn_mma", "head_dim": 128, "causal": True, "qk_bits": 8, "smooth_q": False,
                       "smooth_k": True, "smooth_v": False, "dtype": "f16", "q_bucket": 8192, "kv_bucket": 8192,
                       "gqa_bucket": 1, "tile": {"bq": 128, "bk": 64, "warps": 8, "stages": 2}, "ms": 1.0,
                       "tops": 812.4, "heuristic": {"tile": {"bq": 64, "bk": 64, "warps": 4, "stages": 2},
                                                     "ms": 1.2, "tops": 700.0}}]}
    (cache / "tuning-v1-nvidia-h100-0123abcd-sm_90a.json").write_text(json.dumps(db))
    (cache / "tuning-v1-nvidia-h100-0123abcd-sm_90a.json.lock").write_text("")
    r = _info({"SAGE2_CACHE_DIR": str(cache), "SAGE2_DISABLE_DISK_CACHE": ""})
    assert "tuned entries: 1 in " in r.stdout and "device NVIDIA H100 80GB HBM3 sm_90a" in r.stdout, r.stdout
    assert "attn_mma f16 d128 causal int8 smooth[K] q~8192 kv~8192 gqa~1 -> bq128.bk64.w8.s2 812 TOPS" \
        " (default bq64.bk64.w4.s2 700 TOPS)" in r.stdout, r.stdout


def test_info_without_library():
    r = _info({"SAGE2_LIBRARY": "/nonexistent/libsage2.so"})
    assert r.returncode == 1
    assert "NOT FOUND" in r.stdout and "/nonexistent/libsage2.so" in r.stdout
