#!/usr/bin/env python3
"""Moves the files of older result folders that the scoreboard does not read into one compressed
archive (issue 34): every tracked file under bench/results/<folder>/ for the given folders, except
JSON/JSONL files holding at least one record ../shared/tools/scoreboard.py counts (run id, commit,
rounds >= 3; kernel records with timing "cupti"), goes into bench/results/archive/<name>.tar.xz at
its path from the repository root, is listed in bench/results/archive/INDEX.txt, and is removed
with `git rm`. Run from the repository root:

  python3 scripts/archive_results.py NAME FOLDER [FOLDER ...]   # e.g. sessions-1-8 2026-11-22-session1 ...
  tar -xJf bench/results/archive/NAME.tar.xz                    # restores them
"""
import io
import json
import os
import subprocess
import sys
import tarfile


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


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    name, folders = sys.argv[1], sys.argv[2:]
    files = []
    for folder in folders:
        root = os.path.join("bench", "results", folder)
        if not os.path.isdir(root):
            sys.exit("archive_results: no folder %s" % root)
        out = subprocess.run(["git", "ls-files", "-z", root], capture_output=True, check=True).stdout
        files += [p for p in out.decode().split("\0") if p and not scoreboard_reads(p)]
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
