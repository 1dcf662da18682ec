"""Console scripts of the wheel: ``sage2-autotune``, ``sage2-cache`` and ``sage2-info`` exec the
C++ programs the wheel carries in ``sage2/_bin/`` (built from tools/ with the library; see
tools/CMakeLists.txt) — the same programs as a CMake install, with their options and exit codes.

Before exec the shim points the program at torch's NVRTC (the NVIDIA wheel next to torch, which a
pip-installed torch brings) through SAGE2_LIBNVRTC when that variable is unset, as the Python
binding does for itself; the program then loads that file first. Without a wheel, the tools/
folder beside the loaded libsage2 (a build folder, or scripts/dev_bundle.sh's copy of one) is used.
"""
import os
import sys

__all__ = ["autotune", "cache", "info", "tool_path"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _dirs():
    dirs = [os.path.join(_PKG_DIR, "_bin")]
    try:  # a build folder or a bundle of one (scripts/dev_bundle.sh): tools/ beside libsage2.so
        from . import _lib

        lp = _lib.library_path()
    except Exception:  # noqa: BLE001
        lp = None
    if lp and os.path.sep in lp:
        dirs.append(os.path.join(os.path.dirname(lp), "tools"))
    dirs.append(os.path.join(os.path.dirname(os.path.dirname(_PKG_DIR)), "build", "tools"))
    return dirs


def tool_path(name):
    """The program sage2-<name> this package would run, or None. Looked for in sage2/_bin (a
    wheel), then tools/ beside the loaded libsage2 (a build folder or its bundle), then
    <repo>/build/tools (a checkout). Never on PATH: that is where the shims live."""
    exe = "sage2-" + name
    for d in _dirs():
        p = os.path.join(d, exe)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _nvrtc_hint(env):
    if env.get("SAGE2_LIBNVRTC"):
        return
    try:
        from . import _lib

        for path, _rule in _lib.nvrtc_wheel_candidates():
            if os.path.isfile(path):
                env["SAGE2_LIBNVRTC"] = path
                return
    except Exception:  # noqa: BLE001 - without a hint the program searches the system as usual
        return


def _run(name, argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    path = tool_path(name)
    if path is None:
        sys.stderr.write("sage2-%s: the program is not in this installation (looked in %s). The sage2 wheel "
                         "carries it in sage2/_bin; from a source checkout build it: cmake --build build --target "
                         "sage2-%s\n" % (name, ", ".join(_dirs()), name))
        return 127
    env = dict(os.environ)
    _nvrtc_hint(env)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(path, [path] + argv, env)
    return 127  # not reached


def autotune(argv=None):
    """sage2-autotune: tune tiles on a GPU, or --compile-only to fill the kernel cache."""
    return _run("autotune", argv)


def cache(argv=None):
    """sage2-cache: list, verify, prune, clear, export and import the kernel cache."""
    return _run("cache", argv)


def info(argv=None):
    """sage2-info: library, NVRTC, driver, devices and their code paths."""
    return _run("info", argv)
