"""python -m sage2 info  — library version and build commit, NVRTC and driver versions, devices and
their arch, the kernel cache directory and tuned entries. Exit 0 when a usable GPU was found, 1 when
the library is missing, 3 without a CUDA driver, 4 when no device is usable."""
import argparse
import json
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m sage2", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    p_info = sub.add_parser("info", help="what sage2 sees on this machine")
    p_info.add_argument("--json", action="store_true", help="print the facts as JSON")
    args = ap.parse_args(argv)
    if args.cmd != "info":
        ap.print_help()
        return 2
    from ._info import collect, format_info

    r = collect()
    print(json.dumps(r, indent=2, default=str) if args.json else format_info(r))
    if r.get("library") is None:
        return 1
    if str(r.get("driver", "")).startswith("no CUDA driver"):
        return 3
    return 0 if any("error" not in d for d in r.get("devices", [])) else 4


if __name__ == "__main__":
    sys.exit(main())
