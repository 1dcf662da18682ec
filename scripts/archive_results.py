#!/usr/bin/env python3
"""Moves the files of older result folders that nothing reads or cites into one compressed archive
(issues 34 and 42): every tracked file under bench/results/<folder>/ for the given folders goes into
bench/results/archive/<name>.tar.xz at its path from the repository root, is listed in
bench/results/archive/INDEX.txt, and is removed with `git rm` — except
  - JSON/JSONL files holding at least one record ../shared/tools/scoreboard.py counts (run id,
    commit, rounds >= 3; kernel records with timing "cupti"), and
  - files the documentation cites (README.md, docs/*.md, bench/NOTES.md; `--list` shows which
    document cites each): a path under bench/results (`bench/results/...`, `results/...` or
    `<date>-<what>/...`, with `*` globs and `{a,b}` alternatives), a run folder inside a results
    folder (`2026-11-28-session9/c2-final-clients/`: every file below it), or, below a heading
    `Session N (<date>...` of bench/NOTES.md, a path relative to that session's folder
    (`r4-wide-default-ab-h200/ab_compare.txt`). A results folder named alone (`2026-11-28-session10/`)
    keeps nothing by itself.
Run from the repository root:

  python3 scripts/archive_results.py NAME FOLDER [FOLDER ...]   # e.g. sessions-9-13 2026-11-28-session9 ...
  python3 scripts/archive_results.py --list FOLDER [FOLDER ...] # what would stay and why; changes nothing
  tar -xJf bench/results/archive/NAME.tar.xz                    # restores them
"""
import fnmatch
import glob
import io
import json
import os
import re
import subprocess
import sys
import tarfile

RESULTS = "bench/results/"
CITING = ["README.md", "bench/NOTES.md"]  # + docs/*.md
TOKEN = re.compile(r"[A-Za-z0-9_.*{},+/\-]+")
FILE_ENDING = re.compile(r"\.(txt|log|jsonl|json|md|csv|tgz|gz|out|sh|py|xml|diff)$")
SESSION_HEADING = re.compile(r"#+ Session (\d+) \((\d{4}-\d\d-\d\d)")
RESULTS_FOLDER = re.compile(r"\d{4}-\d\d-\d\d-")


def counted(rec):
    return (isinstance(rec, dict) and isinstance(rec.get("run"), str) and rec["run"] and rec.get("commit")
            and isinstance(rec.get("rounds"), int) and rec["rounds"] >= 3
            and (rec.get("mode") != "kernel" or rec.get("timing") == "cupti"))


def scoreboard_reads(path):
    if not path.endswith((".json", ".jsonl")):
        return False
    text = open(path, encoding="utf-8", errors="replace").read()
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except ValueError:
        items = []
        for line in text.splitlines():
            try:
                items.append(json.loads(line))
            except ValueError:
                pass
    return any(counted(r) for r in items)


def alternatives(word):
    """`a/{b,c}.txt` -> [`a/b.txt`, `a/c.txt`]."""
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    out = []
    for alt in m.group(1).split(","):
        out += alternatives(word[:m.start()] + alt + word[m.end():])
    return out


def cited(files):
    """{file under bench/results (path from the repository root): the documents citing it} for `files`."""
    rel = [f[len(RESULTS):] for f in files]
    folders = {"/".join(f.split("/")[:i]) for f in rel for i in range(1, f.count("/") + 1)}
    sessions = {f.split("/")[0] for f in rel}
    found = {}

    def mark(path, doc):
        path = path.rstrip("/")
        hit = False
        for f in rel:
            if (f == path or ("*" in path and (fnmatch.fnmatchcase(f, path) or fnmatch.fnmatchcase(f, path + "/*")))
                    or ("/" in path and path in folders and f.startswith(path + "/"))):
                found.setdefault(RESULTS + f, set()).add(doc)
                hit = True
        return hit

    for doc in CITING + sorted(glob.glob("docs/*.md")):
        session = None
        for line in open(doc, encoding="utf-8"):
            m = SESSION_HEADING.match(line)
            if m:
                session = "%s-session%s" % (m.group(2), m.group(1))
            for word in TOKEN.findall(line):
                for w in alternatives(word.strip(".,;:()")):
                    w = w.strip(".,;:")
                    if "/" not in w and not FILE_ENDING.search(w):
                        continue
                    if w.startswith(RESULTS):
                        mark(w[len(RESULTS):], doc)
                    elif w.startswith("results/"):
                        mark(w[len("results/"):], doc)
                    elif RESULTS_FOLDER.match(w):
                        mark(w, doc)
                    elif session in sessions:
                        mark(session + "/" + w, doc)
    return found


def tracked(folders):
    files = []
    for folder in folders:
        root = os.path.join("bench", "results", folder)
        if not os.path.isdir(root):
            sys.exit("archive_results: no folder %s" % root)
        out = subprocess.run(["git", "ls-files", "-z", root], capture_output=True, check=True).stdout
        files += [p for p in out.decode().split("\0") if p]
    return files


def main():
    listing = len(sys.argv) >= 2 and sys.argv[1] == "--list"
    if len(sys.argv) < 3 - listing:
        sys.exit(__doc__)
    name, folders = (None, sys.argv[2:]) if listing else (sys.argv[1], sys.argv[2:])
    files = tracked(folders)
    why = cited(files)
    for p in files:
        if scoreboard_reads(p):
            why.setdefault(p, set()).add("the scoreboard")
    if listing:
        for p in files:
            print("%s\t%s" % ("stays (" + ", ".join(sorted(why[p])) + ")" if p in why else "archived", p))
        return
    files = [p for p in files if p not in why]
    if not files:
        sys.exit("archive_results: nothing to archive")
    os.makedirs("bench/results/archive", exist_ok=True)
    tar_path = os.path.join("bench", "results", "archive", name + ".tar.xz")
    if os.path.exists(tar_path):
        sys.exit("archive_results: %s exists" % tar_path)
    with tarfile.open(tar_path, "w:xz", preset=9) as tar:
        for p in sorted(files):
            tar.add(p, arcname=p)
    index = os.path.join("bench", "results", "archive", "INDEX.txt")
    lines = ["%s\t%d\t%s" % (name + ".tar.xz", os.path.getsize(p), p) for p in sorted(files)]
    with open(index, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run(["git", "rm", "-q", "--"] + sorted(files), check=True)
    subprocess.run(["git", "add", tar_path, index], check=True)
    print("archived %d files (%d bytes) into %s (%d bytes)" % (len(files), sum(int(l.split("\t")[1]) for l in lines),
                                                             tar_path, os.path.getsize(tar_path)))


if __name__ == "__main__":
    main()
