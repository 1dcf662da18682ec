"""python -m sage2 info  — library version and build commit, NVRTC and driver versions, devices and
their arch, the kernel cache directory and tuned entries. Exit 0 when a usable GPU was found, 1 when
the library is missing, 3 without a CUDA driver, 4 when no device is usable. Without a command it
prints the same (``sage2-py-info``, the wheel's console script, is this program)."""
import argparse
import json
import os
import sys


def _prog():
    """The name this program was started as: the console script's, else ``python -m sage2``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name and name != "__main__.py" and not name.startswith("-") else "python -m sage2"


def main(argv=None, prog=None):
    ap = argparse.ArgumentParser(prog=prog or _prog(), description="What sage2 sees on this machine: library, NVRTC, "
                                 "driver, devices, kernel cache and tuned entries (the command info, the default).")
    ap.add_argument("--json", action="store_true", help="print the facts as JSON")
    sub = ap.add_subparsers(dest="cmd")
    p_info = sub.add_parser("info", help="what sage2 sees on this machine (the default)")
    p_info.add_argument("--json", action="store_true", dest="info_json", help="print the facts as JSON")
    args = ap.parse_args(argv)
    as_json = args.json or getattr(args, "info_json", False)
    from ._info import collect, format_info

    r = collect()
    print(json.dumps(r, indent=2, default=str) if as_json else format_info(r))
    if r.get("library") is None:
        return 1
    if str(r.get("driver", "")).startswith("no CUDA driver"):
        return 3
    return 0 if any("error" not in d for d in r.get("devices", [])) else 4


def py_info(argv=None):
    """The console script sage2-py-info: ``python -m sage2`` under its own name."""
    return main(argv, prog="sage2-py-info")


if __name__ == "__main__":
    sys.exit(main())
