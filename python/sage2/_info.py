"""What sage2 sees on this machine (``python -m sage2 info``)."""
import glob
import json
import os
import sys

from . import _lib


def _tuning_files(cache_dir):
    """Tuning databases: the JSON files of the cache directory whose name starts with "tuning"
    (sage2-autotune writes <cache dir>/tuning-v1-<device>-<arch>.json, and a context reads its
    device's file there; no variable points elsewhere, so neither does this)."""
    if not cache_dir or not os.path.isdir(cache_dir):
        return []
    return sorted(glob.glob(os.path.join(cache_dir, "tuning*.json")))


def _tile(t):
    if not isinstance(t, dict):
        return "?"
    return "bq%s.bk%s.w%s.s%s" % (t.get("bq"), t.get("bk"), t.get("warps"), t.get("stages"))


def _describe_entry(e):
    """One line for an entry of the sage2-tuning schema (autotune/tuning_db.hpp)."""
    flags = "".join(n for n, k in (("Q", "smooth_q"), ("K", "smooth_k"), ("V", "smooth_v")) if e.get(k))
    s = "%s %s d%s %s int%s smooth[%s] q~%s kv~%s gqa~%s -> %s" % (
        e.get("family", "?"), e.get("dtype", "?"), e.get("head_dim", "?"), "causal" if e.get("causal") else "full",
        e.get("qk_bits", "?"), flags or "-", e.get("q_bucket", "?"), e.get("kv_bucket", "?"), e.get("gqa_bucket", "?"),
        _tile(e.get("tile")))
    if isinstance(e.get("tops"), (int, float)):
        s += " %.0f TOPS" % e["tops"]
    h = e.get("heuristic")
    if isinstance(h, dict) and h.get("tops"):
        s += " (default %s %.0f TOPS)" % (_tile(h.get("tile")), h["tops"])
    return s


def _tuning_entries(path):
    """(header text or None, list of short entry descriptions, problem text or None)."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return None, [], "unreadable: %s" % e
    if isinstance(data, dict) and data.get("schema") == "sage2-tuning":
        dev = data.get("device") if isinstance(data.get("device"), dict) else {}
        head = "schema v%s, device %s %s, library %s" % (data.get("schema_version"), dev.get("name", "?"),
                                                         dev.get("arch", "?"), data.get("library_version", "?"))
        entries = data.get("entries")
        if not isinstance(entries, list):
            return head, [], "'entries' is not an array"
        return head, [_describe_entry(e) if isinstance(e, dict) else repr(e) for e in entries], None
    items = data.get("entries", data) if isinstance(data, dict) else data
    if isinstance(items, dict):
        return None, ["%s -> %s" % (k, json.dumps(v, sort_keys=True)[:160]) for k, v in items.items()], None
    if isinstance(items, list):
        return None, [json.dumps(v, sort_keys=True)[:200] for v in items], None
    return None, [], "unrecognised format"


_NO_DRIVER = "no CUDA driver found"
_LIBCUDA_HINT = "SAGE2_LIBCUDA names the driver library to load (default libcuda.so.1)"


def _no_driver():
    """"no CUDA driver found" with the cause the library gives when it tries to load the driver
    (the message sage2-info prints: the file it could not load and why, and the SAGE2_LIBCUDA
    hint; the hint is added when the cause lacks it)."""
    reason = ""
    try:
        _lib.context(0)
    except _lib.Sage2Error as e:
        reason = getattr(e, "reason", "") or str(e)
    if reason.startswith(_NO_DRIVER):
        reason = reason[len(_NO_DRIVER):].lstrip(":; ")
    text = _NO_DRIVER + (": " + reason if reason else "")
    if "SAGE2_LIBCUDA" not in text:
        text += "; " + _LIBCUDA_HINT
    return text


def _torch_version():
    """torch's version and CUDA version without importing torch (which takes seconds): from the
    module when something imported it already, else from torch/version.py read as text."""
    import importlib.util
    import re

    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "__version__"):
        return "%s (CUDA %s)" % (torch.__version__, getattr(getattr(torch, "version", None), "cuda", None))
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "not installed"
    text = ""
    for folder in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as f:
                text = f.read()
            break
        except OSError:
            continue
    ver = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    if ver is None:
        return "installed (version not found without importing it)"
    return "%s (CUDA %s)" % (ver.group(1), cuda.group(1) if cuda else None)


def collect():
    """A dict of facts; values that could not be obtained hold the reason as a string."""
    r = {"library": None, "library_error": None, "search": [p for _, p in _lib.search_locations()]}
    try:
        L = _lib.lib()
    except _lib.LibraryNotFoundError as e:
        r["library_error"] = str(e)
        return r
    r["library"] = _lib.library_path()
    r["version"] = _lib.version()
    r["build_commit"] = _lib.build_commit()  # None: a library older than sage2_build_commit()
    try:
        maj, mnr, drv = _lib.version_info()
        r["nvrtc"] = "%d.%d" % (maj, mnr) if maj else "not found (kernels only from the disk cache)"
        r["driver"] = ("CUDA %d.%d (%d)" % (drv // 1000, (drv % 1000) // 10, drv)) if drv else _no_driver()
    except _lib.Sage2Error as e:
        r["nvrtc"] = r["driver"] = str(e)
    # which NVRTC file and why: torch's wheel, a toolkit and $SAGE2_LIBNVRTC can each supply one
    r["nvrtc_file"] = r["nvrtc_rule"] = r["nvrtc_passed_over"] = None
    try:
        r["nvrtc_file"], r["nvrtc_rule"], r["nvrtc_passed_over"] = _lib.nvrtc_library()
    except _lib.Sage2Error as e:
        msg = str(e)
        r["nvrtc_error"] = msg.split(": ", 1)[1] if msg.startswith(e.function + ": ") else msg
    r["torch"] = _torch_version()
    try:
        r["default_cache_dir"] = _lib.default_cache_dir() or "disabled (SAGE2_DISABLE_DISK_CACHE)"
    except _lib.Sage2Error as e:
        r["default_cache_dir"] = str(e)
    n = _lib.device_count()
    r["device_count"] = n
    devices = []
    cache_dir = None
    for d in range(n):
        dev = {"ordinal": d}
        try:
            ctx = _lib.context(d)
            dev["name"], dev["arch"] = _lib.context_device(ctx)
            try:
                _, dev["sm_count"], dev["total_memory"] = _lib.context_device_props(ctx)
            except _lib.Sage2Error:
                pass
            try:  # the path this device's calls get, and whether its code is PTX (and why)
                dev["ptx"], dev["path"], dev["target_note"] = _lib.context_target(ctx)
            except _lib.Sage2Error:
                pass
            try:
                dev["cache_dir"] = _lib.context_cache_dir(ctx) or "disabled"
                if cache_dir is None and dev["cache_dir"] != "disabled":
                    cache_dir = dev["cache_dir"]
            except _lib.Sage2Error as e:
                dev["cache_dir"] = str(e)
        except _lib.Sage2Error as e:
            dev["error"] = str(e)
        devices.append(dev)
    r["devices"] = devices
    if cache_dir is None:
        dc = r.get("default_cache_dir", "")
        cache_dir = dc if dc and os.path.isabs(dc) else None
    r["cache_dir"] = cache_dir or "disabled"
    if cache_dir and os.path.isdir(cache_dir):
        r["kernel_entries"] = len(glob.glob(os.path.join(cache_dir, "*.s2c")))
    else:
        r["kernel_entries"] = 0
    tuned = []
    for p in _tuning_files(cache_dir):
        head, entries, problem = _tuning_entries(p)
        tuned.append({"file": p, "header": head, "entries": entries, "problem": problem})
    r["tuning"] = tuned
    del L
    return r


def format_info(r):
    lines = []
    if r.get("library") is None:
        lines.append("sage2 library: NOT FOUND")
        lines.append(r.get("library_error") or "")
        return "\n".join(lines)
    lines.append("sage2 %s (library: %s)" % (r["version"], r["library"]))
    if "build_commit" in r:
        lines.append("build commit: %s" % (r["build_commit"] or "not reported (this libsage2 predates "
                                                                "sage2_build_commit)"))
    if r.get("nvrtc_file"):
        lines.append("NVRTC: %s from %s (%s)" % (r["nvrtc"], r["nvrtc_file"], r["nvrtc_rule"]))
        if r.get("nvrtc_passed_over"):
            lines.append("NVRTC candidates passed over:" + r["nvrtc_passed_over"])
    elif r.get("nvrtc_error"):
        lines.append("NVRTC: %s; %s" % (r["nvrtc"], r["nvrtc_error"]))
    else:
        lines.append("NVRTC: %s" % r["nvrtc"])
    lines.append("driver: %s" % r["driver"])
    lines.append("torch: %s" % r["torch"])
    if not r["devices"]:
        lines.append("devices: none visible")
    for d in r["devices"]:
        if "error" in d:
            lines.append("device %d: unusable by sage2: %s" % (d["ordinal"], d["error"]))
            continue
        extra = ""
        if "sm_count" in d:
            extra = ", %d SMs, %.1f GiB" % (d["sm_count"], d["total_memory"] / 2.0 ** 30)
        lines.append("device %d: %s, arch %s%s%s" % (d["ordinal"], d["name"], d["arch"],
                                                   " (PTX, driver JIT)" if d.get("ptx") else "", extra))
        if d.get("path"):
            lines.append("  path: %s" % d["path"])
        if d.get("target_note"):
            lines.append("  note: %s" % d["target_note"])
    lines.append("cache directory: %s (%d kernel entries)" % (r["cache_dir"], r["kernel_entries"]))
    if not r["tuning"] or all(not t["entries"] and not t["problem"] for t in r["tuning"]):
        lines.append("tuned entries: none")
    else:
        for t in r["tuning"]:
            if t["problem"]:
                lines.append("tuned entries: %s: %s" % (t["file"], t["problem"]))
                continue
            lines.append("tuned entries: %d in %s%s" % (len(t["entries"]), t["file"],
                                                        " (%s)" % t["header"] if t.get("header") else ""))
            for e in t["entries"][:40]:
                lines.append("  " + e)
            if len(t["entries"]) > 40:
                lines.append("  ... %d more" % (len(t["entries"]) - 40))
    return "\n".join(lines)
