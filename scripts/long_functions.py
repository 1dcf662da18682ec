#!/usr/bin/env python3
"""List the library's functions longer than a limit (default 150 lines), longest first.

A function is a brace block opened at namespace or class scope whose header (the text since the
previous ';', '{' or '}') has a parameter list and is not a class, namespace, enum or initializer;
its length runs from its header's first line to its closing brace, lambdas and nested blocks
included. Comments, strings and preprocessor lines are blanked first, so braces inside them do
not count. Device code (.cuh) is scanned too: the kernels' main loops are listed, not exempted.

Usage: scripts/long_functions.py [--limit N] [--root DIR] [folders...]
"""
import argparse
import os
import re
import sys

LIBRARY = ["base", "kernels", "jit", "cache", "reference", "plan", "runtime", "autotune",
           "templates", "include/sage2"]
EXTS = (".cpp", ".hpp", ".cuh", ".h")
SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def blank(text):
    """Comments, string/char literals and preprocessor lines replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#" or (line_start and c in " \t" and text[i:].lstrip(" \t").startswith("#")):
            j = i
            while j < n:  # a preprocessor line, with its continuations
                k = text.find("\n", j)
                if k < 0:
                    k = n
                if text[k - 1:k] == "\\":
                    j = k + 1
                    continue
                break
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        if text.startswith("//", i):
            k = text.find("\n", i)
            k = n if k < 0 else k
            out.append(" " * (k - i))
            i = k
            continue
        if text.startswith("/*", i):
            k = text.find("*/", i + 2)
            k = n if k < 0 else k + 2
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        m = re.match(r'R"([^(]*)\(', text[i:i + 40])
        if m:
            end = text.find(")" + m.group(1) + '"', i)
            k = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        if c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 separators
            k = i + 1
            while k < n and text[k] != c and text[k] != "\n":
                k += 2 if text[k] == "\\" else 1
            out.append(" " * (min(k + 1, n) - i))
            i = k + 1
            continue
        out.append(c)
        line_start = c == "\n" or (line_start and c in " \t")
        i += 1
    return "".join(out)


def functions(path):
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # per open brace: ("scope" | "func" | "block", start line, name)
    header_start = 0
    for i, c in enumerate(text):
        if c in ";":
            header_start = i + 1
        elif c == "{":
            header = text[header_start:i]
            inside_func = any(kind != "scope" for kind, _, _ in stack)
            kind = "block"
            name = ""
            if not inside_func:
                h = " ".join(header.split())
                m = re.search(r"([~\w:<>]+)\s*\([^;]*\)[^()]*$", h)
                if m and not SCOPE_WORDS.search(h.split("(")[0]) and not h.endswith("="):
                    kind, name = "func", m.group(1)
                elif SCOPE_WORDS.search(h) or h.startswith("extern") or not h:
                    kind = "scope"
            start = text.count("\n", 0, header_start + len(header) - len(header.lstrip())) + 1
            stack.append((kind, start, name))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "func":
                    found.append((text.count("\n", 0, i) + 1 - start + 1, start, name))
            header_start = i + 1
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("folders", nargs="*", default=LIBRARY)
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    rows = []
    for folder in args.folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in sorted(files):
                if f.endswith(EXTS):
                    p = os.path.join(dirpath, f)
                    for length, line, name in functions(p):
                        if length > args.limit:
                            rows.append((length, f"{os.path.relpath(p, root)}:{line}", name))
    for length, where, name in sorted(rows, reverse=True):
        print(f"{length:5d}  {where}  {name}")
    print(f"{len(rows)} function(s) over {args.limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
