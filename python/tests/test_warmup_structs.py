"""The warm-up's ctypes structures (python/sage2/_lib.py WarmupOptions, WarmupSummary) match
sage2_warmup_options / sage2_warmup_summary of include/sage2/sage2.h: names, order and types from the
header text, offsets and sizes from a C compiler (issue 43)."""
import ctypes
import os
import shutil
import subprocess

import pytest

from sage2 import _lib

from test_tune_args import C_TYPES, HEADER, header_fields

STRUCTS = [("sage2_warmup_options", _lib.WarmupOptions), ("sage2_warmup_summary", _lib.WarmupSummary)]


@pytest.mark.parametrize("name,py", STRUCTS)
def test_fields_follow_the_header(name, py):
    want = header_fields(name)
    assert [n for n, _ in py._fields_] == [n for n, _ in want]
    for (field, ctype), (_, pytype) in zip(want, py._fields_):
        if ctype in C_TYPES:
            assert C_TYPES[ctype]._type_ == pytype._type_, field


@pytest.mark.parametrize("name,py", STRUCTS)
def test_layout_matches_the_compiler(tmp_path, name, py):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc or not os.path.exists(HEADER):
        pytest.skip("no C compiler or no header (%s)" % HEADER)
    fields = [n for n, _ in py._fields_]
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "sage2/sage2.h"', "int main(void) {",
             'printf("size %%zu\\n", sizeof(%s));' % name]
    lines += ['printf("%s %%zu\\n", offsetof(%s, %s));' % (f, name, f) for f in fields]
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", os.path.dirname(os.path.dirname(HEADER)), str(src), "-o", str(exe)], check=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.check_output([str(exe)], text=True).splitlines())
    assert int(got["size"]) == ctypes.sizeof(py)
    for f in fields:
        assert int(got[f]) == getattr(py, f).offset, f
