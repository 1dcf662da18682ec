"""README.md and docs/*.md point only at things that exist: every relative Markdown link target and
every repository path written in code font (`bench/results/...`, `scripts/x.sh`,
`include/sage2/sage2.hpp`, also inside commands and code blocks) must name a file or folder of the
repository. Anchors (#...) and http(s) links are not checked. A path counts as a repository path
when its first folder is one the repository has (so `build/...`, `.dev/...` or `~/.cache/...` are
outputs, not citations); placeholders (`<name>`, `{a,b}`, `...`) are skipped and `*` is matched as a
glob. A results folder named alone (`2026-11-25-session7/r4/`, as cited inside an archive) must be
a folder of bench/results or listed in bench/results/archive/INDEX.txt. Needs neither torch nor the
library; skipped where the repository's README is not beside the tests (an installed copy)."""
import fnmatch
import glob
import os
import re
import subprocess

import pytest

REPO = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"`([^`\n]+)`")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.+\-/*]+$")
RESULTS_FOLDER = re.compile(r"^\d{4}-\d\d-\d\d-[^/]+(/|$)")


def doc_files():
    readme = os.path.join(REPO, "README.md")
    if not os.path.isfile(readme):
        pytest.skip("no README beside the tests (%s): an installed copy" % readme)
    return [readme] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))


def _ignored_top_level():
    """Top-level patterns of the repository's .gitignore ("/build*/" -> "build*"), for the no-git fallback."""
    path = os.path.join(REPO, ".gitignore")
    pats = []
    if os.path.isfile(path):
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line.startswith("/"):
                pats.append(line.strip("/"))
    return pats


def repo_files():
    """The repository's files (paths relative to REPO, '/'-separated): git's tracked and not-ignored
    files when REPO is a checkout, else the file tree without the .gitignore'd top-level folders."""
    try:
        out = subprocess.run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True, timeout=120).stdout.decode("utf-8")
        files = {f for f in out.split("\0") if f and os.path.exists(os.path.join(REPO, f))}
        if files:
            return files
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        pass
    ignored = _ignored_top_level()
    files = set()
    for root, dirs, names in os.walk(REPO):
        rel = os.path.relpath(root, REPO)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != ".git" and not any(fnmatch.fnmatch(d, p) for p in ignored)]
        for n in names:
            files.add(os.path.normpath(os.path.join(rel, n)).replace(os.sep, "/"))
    return files


@pytest.fixture(scope="module")
def repo():
    docs = doc_files()
    files = repo_files()
    paths = set(files)
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            paths.add("/".join(parts[:i]))
    roots = {f.split("/")[0] for f in files}
    archived = set()
    index = os.path.join(REPO, "bench", "results", "archive", "INDEX.txt")
    if os.path.isfile(index):
        for line in open(index, encoding="utf-8"):
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 3 and cols[2].startswith("bench/results/"):
                parts = cols[2][len("bench/results/"):].split("/")
                for i in range(1, len(parts) + 1):
                    archived.add("/".join(parts[:i]))
    return {"docs": docs, "paths": paths, "roots": roots, "archived": archived}


def split_fences(text):
    """(prose, code): the text outside fenced code blocks (fenced lines blanked) and the fenced lines."""
    prose, code, fenced = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append("")
            continue
        (code if fenced else prose).append(line)
        if fenced:
            prose.append("")
    return "\n".join(prose), "\n".join(code)


def exists(path, paths):
    if "*" in path:
        return any(fnmatch.fnmatchcase(p, path) for p in paths)
    return path.rstrip("/") in paths


def links(text):
    """Markdown link targets outside code (inline code spans blanked first: `[B, 1](x)` is not a link)."""
    prose, _ = split_fences(text)
    prose = CODE.sub(lambda m: " " * len(m.group(0)), prose)
    return [m.group(1) for m in LINK.finditer(prose)]


def code_words(text):
    """Words of every code span and fenced code block."""
    prose, code = split_fences(text)
    words = []
    for span in CODE.findall(prose):
        words += span.split()
    words += code.split()
    return words


def candidate(word):
    """The repository path a word of code names, or None when it is not one."""
    w = word.strip("'\"(),;:[]")
    w = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*=", "", w)  # VAR=path, --flag=path
    w = re.sub(r"^--[A-Za-z0-9-]+=", "", w)
    w = w.rstrip(".,;:")
    if "/" not in w or not PATHLIKE.match(w) or "..." in w or w.startswith(("/", "./", "../")):
        return None
    return w


def check_file(md, repo):
    """The broken references of one Markdown file, as strings."""
    text = open(md, encoding="utf-8").read()
    here = os.path.dirname(md)
    rel_md = os.path.relpath(md, REPO)
    bad = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path = target.split("#", 1)[0]
        if not path:
            continue  # an anchor in the same page
        full = os.path.normpath(os.path.join(here, path))
        rel = os.path.relpath(full, REPO).replace(os.sep, "/")
        if rel.startswith("../") or rel == "..":
            bad.append("%s: link outside the repository: %s" % (rel_md, target))
        elif not exists(rel, repo["paths"]):
            bad.append("%s: broken link: %s" % (rel_md, target))
    for word in code_words(text):
        path = candidate(word)
        if path is None:
            continue
        first = path.split("/")[0]
        if first in repo["roots"]:
            if not exists(path, repo["paths"]):
                bad.append("%s: no such repository path: `%s`" % (rel_md, path))
        elif RESULTS_FOLDER.match(path):
            p = path.rstrip("/")
            if not (exists("bench/results/" + p, repo["paths"]) or p in repo["archived"]):
                bad.append("%s: no such results folder (nor in the archive's INDEX.txt): `%s`" % (rel_md, path))
    if "../shared" in text:
        bad.append("%s: cites ../shared (outside the repository)" % rel_md)
    return bad


def test_links_and_paths_exist(repo):
    bad = []
    for md in repo["docs"]:
        bad += check_file(md, repo)
    assert not bad, "broken references in the documentation:\n  " + "\n  ".join(bad)


def test_the_checker_sees_things(repo):
    """The parsing above finds the README's links and paths (a checker that finds nothing passes anything)."""
    readme = repo["docs"][0]
    text = open(readme, encoding="utf-8").read()
    assert any(t.startswith("docs/") for t in links(text)), links(text)
    words = [candidate(w) for w in code_words(text)]
    assert "scripts/build.sh" in words and "scripts/test.sh" in words, words
    assert exists("scripts/build.sh", repo["paths"]) and not exists("scripts/no-such-file.sh", repo["paths"])
    assert exists("kernels/direct.*", repo["paths"]) and not exists("kernels/no-such.*", repo["paths"])
