#!/usr/bin/env python3
"""Check the library's folder include graph against the layer table, cmake/layers.txt.

Every #include "folder/..." in the library's .cpp/.hpp/.cuh/.h files is an edge from the
including file's folder to the named folder. An edge is allowed when the target folder is the
same layer or one the table lists for it. Anything else (an upward include, an include of a
folder not in the table, an internal folder from a public header) is printed as file:line and
the script exits 1. `--graph` also prints the folder graph and any cycles.

Inside a folder, files must not include each other in a circle either. A header and the source
file of the same name are one unit (x.hpp declares what x.cpp defines), so x.cpp including y.hpp
while y.hpp includes x.hpp is a cycle (x -> y -> x), as is any longer circle of units; each one is
printed with the include that closes each step, and the script exits 1.

Usage: scripts/check_layers.py [--root DIR] [--graph]
"""
import argparse
import os
import re
import sys

# The one table lives in cmake/layers.txt (CMake builds the layer libraries from it too).
# Folder of each layer; `api` is the public include/sage2, except sage2/reference.hpp, which is
# the reference layer's public header. A public header (include/) includes only public headers
# ("sage2/..."), whatever layer it belongs to.
FOLDERS = {"api": "include/sage2"}
FILE_LAYERS = {"include/sage2/reference.hpp": "reference"}


def load_table(root):
    layers = {}
    with open(os.path.join(root, "cmake", "layers.txt"), encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, _, deps = line.partition(":")
            layers[name.strip()] = deps.split()
    return layers


EXTS = (".cpp", ".hpp", ".cuh", ".h")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder(layer):
    return FOLDERS.get(layer, layer)


def layer_of_file(rel, layers):
    """Layer of a file path relative to the root (None when outside every layer)."""
    if rel in FILE_LAYERS:
        return FILE_LAYERS[rel]
    for name in layers:
        if rel.startswith(folder(name) + "/"):
            return name
    return None


def layer_of_include(target, layers):
    """Layer named by an #include "..." (None: not a layer path, e.g. a same-folder include)."""
    if target.startswith("sage2/"):
        return layer_of_file("include/" + target, layers)
    return layer_of_file(target, layers)


def includes(root, layers):
    """Every #include "..." of the layers' files: (file relative to root, line number, target)."""
    for layer in layers:
        base = os.path.join(root, folder(layer))
        if not os.path.isdir(base):
            continue
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(EXTS):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if m:
                            yield rel, lineno, m.group(1)


def scan(root, layers):
    edges = {}          # (src, dst) -> [file:line]
    bad = []
    for rel, lineno, target in includes(root, layers):
        src = layer_of_file(rel, layers)
        where = f"{rel}:{lineno}"
        if target.startswith("../") or "/../" in target:
            bad.append(f"{where}: includes \"{target}\": no '..' in an include "
                       "(name the folder: \"layer/file\")")
            continue
        if rel.startswith("include/") and not target.startswith("sage2/"):
            bad.append(f"{where}: public header includes internal \"{target}\": "
                       "a public header includes only \"sage2/...\"")
            continue
        if "/" not in target:
            continue  # same-folder include ("quantize_params.cuh" in templates/)
        dst = layer_of_include(target, layers)
        if dst is None:
            top = target.split("/")[0]
            if os.path.isdir(os.path.join(root, top)):
                bad.append(f"{where}: includes \"{target}\": folder '{top}' is "
                           "not a layer of cmake/layers.txt")
            continue
        edges.setdefault((src, dst), []).append(where)
        if dst != src and dst not in layers[src]:
            bad.append(f"{where}: {src} -> {dst} (\"{target}\") is not allowed; "
                       f"{src} may include: {', '.join(layers[src]) or 'nothing'}")
    return edges, bad


def unit_of(rel):
    """A file's unit: its folder-relative path without the extension (x.hpp and x.cpp are one)."""
    return os.path.splitext(rel)[0]


def scan_units(root, layers):
    """Include edges between units of the same folder: {(unit, unit): first file:line}."""
    edges = {}
    for rel, lineno, target in includes(root, layers):
        here = os.path.dirname(rel)
        if "/" not in target:           # same-folder include ("x.cuh")
            target = os.path.join(here, target)
        elif target.startswith("sage2/"):
            target = "include/" + target
        if os.path.dirname(target) != here:
            continue
        a, b = unit_of(rel), unit_of(target)
        if a != b:
            edges.setdefault((a, b), f"{rel}:{lineno}")
    return edges


def unit_cycles(edges):
    """Each elementary circle of the unit graph once (as found by a depth-first search)."""
    graph = {}
    for (a, b) in edges:
        graph.setdefault(a, []).append(b)
    found, seen, done = [], set(), set()

    def dfs(node, stack, on_stack):
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_stack:
                cyc = stack[stack.index(nxt):] + [nxt]
                key = frozenset(zip(cyc, cyc[1:]))
                if key not in seen:
                    seen.add(key)
                    found.append(cyc)
            elif nxt not in done:
                dfs(nxt, stack + [nxt], on_stack | {nxt})
        done.add(node)

    for n in sorted(graph):
        if n not in done:
            dfs(n, [n], {n})
    return found


def cycles(edges):
    graph = {}
    for (a, b) in edges:
        if a != b:
            graph.setdefault(a, set()).add(b)
    found, seen = [], set()

    def dfs(node, stack):
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cyc = stack[stack.index(nxt):] + [nxt]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    found.append(cyc)
            elif len(stack) < 20:
                dfs(nxt, stack + [nxt])

    for n in sorted(graph):
        dfs(n, [n])
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--graph", action="store_true", help="print the folder graph and its cycles")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    layers = load_table(root)
    edges, bad = scan(root, layers)
    if args.graph:
        print("folder graph (includes: count):")
        for (a, b), where in sorted(edges.items()):
            if a != b:
                print(f"  {a} -> {b}: {len(where)}")
        cyc = cycles(edges)
        print("cycles:" if cyc else "cycles: none")
        for c in cyc:
            print("  " + " -> ".join(c))
    unit_edges = scan_units(root, layers)
    for cyc in unit_cycles(unit_edges):
        steps = "; ".join(f"{unit_edges[(a, b)]} includes {b}" for a, b in zip(cyc, cyc[1:]))
        bad.append(f"include cycle inside {os.path.dirname(cyc[0])}/: {' -> '.join(os.path.basename(u) for u in cyc)} "
                   f"({steps}); a file may not include a file that includes it back")
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} include(s) break the layer table (cmake/layers.txt) or close a cycle")
        return 1
    print("check_layers: the include graph follows the layer table; no include cycle inside a folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
