"""What sage2 sees on this machine (``python -m sage2 info``)."""
import glob
import json
import os

from . import _lib


def _tuning_files(cache_dir):
    """Tuning-DB files: $SAGE2_TUNING_DB if set, else JSON files in the cache directory whose
    name mentions tuning (tuning.json, tuning_db.json, autotune*.json, ...)."""
    env = os.environ.get("SAGE2_TUNING_DB")
    if env:
        return [env] if os.path.isfile(env) else []
    if not cache_dir or not os.path.isdir(cache_dir):
        return []
    found = []
    for p in sorted(glob.glob(os.path.join(cache_dir, "**", "*.json"), recursive=True)):
        if "tun" in os.path.basename(p).lower():
            found.append(p)
    return found


def _tuning_entries(path):
    """(list of short entry descriptions, problem text or None)."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return [], "unreadable: %s" % e
    items = data
    if isinstance(data, dict):
        for k in ("entries", "records", "configs", "results"):
            if isinstance(data.get(k), (list, dict)):
                items = data[k]
                break
    out = []
    if isinstance(items, dict):
        for k, v in items.items():
            out.append("%s -> %s" % (k, json.dumps(v, sort_keys=True)[:160]))
    elif isinstance(items, list):
        for v in items:
            out.append(json.dumps(v, sort_keys=True)[:200])
    else:
        return [], "unrecognised format"
    return out, None


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
    try:
        maj, mnr, drv = _lib.version_info()
        r["nvrtc"] = "%d.%d" % (maj, mnr) if maj else "not found (kernels only from the disk cache)"
        r["driver"] = ("CUDA %d.%d (%d)" % (drv // 1000, (drv % 1000) // 10, drv)) if drv else "no CUDA driver found"
    except _lib.Sage2Error as e:
        r["nvrtc"] = r["driver"] = str(e)
    try:
        import torch

        r["torch"] = "%s (CUDA %s)" % (torch.__version__, torch.version.cuda)
    except ImportError:
        r["torch"] = "not installed"
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
        entries, problem = _tuning_entries(p)
        tuned.append({"file": p, "entries": entries, "problem": problem})
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
        lines.append("device %d: %s, arch %s%s" % (d["ordinal"], d["name"], d["arch"], extra))
    lines.append("cache directory: %s (%d kernel entries)" % (r["cache_dir"], r["kernel_entries"]))
    if not r["tuning"] or all(not t["entries"] and not t["problem"] for t in r["tuning"]):
        lines.append("tuned entries: none")
    else:
        for t in r["tuning"]:
            if t["problem"]:
                lines.append("tuned entries: %s: %s" % (t["file"], t["problem"]))
                continue
            lines.append("tuned entries: %d in %s" % (len(t["entries"]), t["file"]))
            for e in t["entries"][:40]:
                lines.append("  " + e)
            if len(t["entries"]) > 40:
                lines.append("  ... %d more" % (len(t["entries"]) - 40))
    return "\n".join(lines)
