"""Library notices through Python's logging (issue 25 item 6), no GPU needed: a notice the library
emits on the CPU (an unknown SAGE2_QUANT_PATH value, warned once, then at debug) must arrive as a
record of the "sage2" logger at the matching level and not on stderr; sage2.set_log_level sets the
library's and the logger's level; after the callback is removed the library writes stderr again.
The argument checks of set_log_level need no library."""
import logging
import os
import subprocess
import sys
import textwrap

import pytest

import sage2
from fake_torch import sage2_child_env
from sage2 import _lib, _logging

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(_lib.__file__)))


def _need_library():
    try:
        L = _lib.lib()
    except sage2.LibraryNotFoundError as e:
        pytest.skip("libsage2 not found: %s" % str(e).splitlines()[0])
    if not hasattr(L, "sage2_set_log_callback"):
        pytest.skip("this libsage2 (%s) predates sage2_set_log_callback" % _lib.library_path())
    return L


@pytest.mark.parametrize("level,code", [("error", 0), ("warning", 1), ("WARN", 1), ("info", 2), ("debug", 3),
                                        (logging.DEBUG, 3), (logging.INFO, 2), (logging.WARNING, 1),
                                        (logging.ERROR, 0), (logging.CRITICAL, 0), (5, 3)])
def test_level_names(level, code):
    assert _logging._level_code(level) == code


@pytest.mark.parametrize("bad,exc,text", [("verbose", ValueError, "level='verbose'"), (1.5, TypeError, "float"),
                                          (True, TypeError, "bool")])
def test_bad_level_is_named(bad, exc, text):
    with pytest.raises(exc, match=text):
        sage2.set_log_level(bad)


DRIVER = textwrap.dedent(r'''
    import ctypes, logging, sys
    import sage2
    from sage2 import _lib, _logging
    records = []
    class H(logging.Handler):
        def emit(self, r):
            records.append((r.levelno, r.getMessage()))
    logging.getLogger("sage2").addHandler(H())
    L = _lib.lib()
    assert _logging._installed, "the callback was not installed when the library loaded"
    L.sage2_context_options_init.argtypes = [ctypes.c_void_p]
    L.sage2_context_options_resolve.argtypes = [ctypes.c_void_p]
    buf = ctypes.create_string_buffer(256)
    def resolve():
        L.sage2_context_options_init(buf)
        L.sage2_context_options_resolve(buf)
    resolve()                                   # first time: a warning
    print("AFTER1", records)
    assert records == [(logging.WARNING, "SAGE2_QUANT_PATH='bogus' is not one of auto, split, fused, cluster, onepass; "
                                         "using auto")], records
    resolve()                                   # second time: debug, below the default level
    assert len(records) == 1, records
    sage2.set_log_level("debug")
    assert logging.getLogger("sage2").level == logging.DEBUG
    resolve()
    assert len(records) == 2 and records[1][0] == logging.DEBUG and "bogus" in records[1][1], records
    sage2.set_log_level("error")
    resolve()
    assert len(records) == 2, records
    sage2.set_log_level(None)                   # back to SAGE2_LOG_LEVEL (unset: warn), logger NOTSET
    assert logging.getLogger("sage2").level == logging.NOTSET
    _logging._uninstall()                       # stderr again
    sage2.set_log_level("debug")
    resolve()
    assert len(records) == 2, records
    print("DONE")
''')


def test_notices_reach_the_sage2_logger_not_stderr(tmp_path):
    _need_library()
    env = sage2_child_env(extra={"SAGE2_QUANT_PATH": "bogus", "SAGE2_LIBRARY": _lib.library_path()})
    env.pop("SAGE2_LOG_LEVEL", None)
    r = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "DONE" in r.stdout, r.stdout + r.stderr
    # only the notice after the callback was removed went to stderr, in the library's own format
    lines = [ln for ln in r.stderr.splitlines() if "SAGE2_QUANT_PATH" in ln]
    assert lines == ["sage2 debug: SAGE2_QUANT_PATH='bogus' is not one of auto, split, fused, cluster, onepass; using auto"], \
        r.stderr


def test_register_spills_are_debug_notices():
    """The compiler reports a spilling kernel at debug (source check: the message is built in one
    place, jit/compiler.cpp)."""
    src = os.path.join(os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(PYTHON_DIR), "jit", "compiler.cpp")
    if not os.path.isfile(src):
        pytest.skip("no source tree beside the tests")
    text = open(src, encoding="utf-8").read()
    i = text.index('" spills registers ("')
    assert text.rfind("log::debug(", 0, i) > text.rfind("log::warn(", 0, i), "the spill notice is not at debug"
