"""Library notices through Python's ``logging`` (logger ``"sage2"``) instead of stderr.

When the binding loads libsage2 it registers a callback (sage2_set_log_callback): every notice
the library's level lets through (SAGE2_LOG_LEVEL, default warn; or sage2.set_log_level) becomes a
record of the ``sage2`` logger at the matching level, so an application's logging configuration
decides where it goes. Without any logging configuration Python prints WARNING and above to stderr
(its last-resort handler), as the library did. Register spill notices are debug records.

    sage2.set_log_level("debug")   # library and logger: compile times, plans, spills
    logging.getLogger("sage2").addHandler(...)
"""
import atexit
import ctypes
import logging

# sage2.set_log_level lives in _lib.py (it needs the loaded library); this module imports nothing of
# the package, so _lib can import it (issue 26: the package's imports go one way only).

__all__ = ["logger", "install", "LEVELS"]

logger = logging.getLogger("sage2")

# sage2 level (C) -> logging level, and the names set_log_level takes.
_TO_LOGGING = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}
LEVELS = {"error": 0, "warning": 1, "warn": 1, "info": 2, "debug": 3}
_FROM_LOGGING = ((logging.DEBUG, 3), (logging.INFO, 2), (logging.WARNING, 1))

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def _on_notice(level, message, _user):
    # Runs on whatever thread called into the library; an exception must never cross into C.
    try:
        text = message.decode("utf-8", "replace") if message else ""
        logger.log(_TO_LOGGING.get(level, logging.WARNING), "%s", text)
    except Exception:  # noqa: BLE001 - logging failures are not the caller's problem
        pass


_callback = _CALLBACK(_on_notice)  # kept alive for the process: the library holds the pointer
_installed = []


def install(L):
    """Routes the library's notices to the ``sage2`` logger (called when the library is loaded).
    Returns False for a library that predates sage2_set_log_callback (it keeps writing stderr)."""
    if not hasattr(L, "sage2_set_log_callback"):
        return False
    L.sage2_set_log_callback.restype = ctypes.c_int
    L.sage2_set_log_callback.argtypes = [_CALLBACK, ctypes.c_void_p]
    if L.sage2_set_log_callback(_callback, None) != 0:
        return False
    if not _installed:
        atexit.register(_uninstall)
    _installed[:] = [L]
    return True


def _uninstall():
    # At interpreter exit: notices from the library's own teardown go to stderr, not into a
    # Python that is being finalized.
    for L in _installed:
        try:
            L.sage2_set_log_callback(_CALLBACK(), None)
        except Exception:  # noqa: BLE001
            pass
    del _installed[:]


def _level_code(level):
    if isinstance(level, str):
        code = LEVELS.get(level.lower())
        if code is None:
            raise ValueError("sage2.set_log_level: level=%r; expected one of %s, a logging level or None"
                             % (level, ", ".join(sorted(LEVELS))))
        return code
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError("sage2.set_log_level: level must be a str, a logging level (int) or None, got %s"
                        % type(level).__name__)
    for threshold, code in _FROM_LOGGING:
        if level <= threshold:
            return code
    return 0

