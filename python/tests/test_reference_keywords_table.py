"""The reference-keyword table of docs/integrations.md ("The reference's call form") against the code:
every row is parsed and each value in it run through sage2's own mapping (_compat.translate for
the keywords every function takes, _compat.reference_pv_options with the rule of the named entry
point for pv_accum_dtype), which must give what the row says; and every keyword and every
(entry point, pv_accum_dtype) pair the code maps must have a row. So the table and the code cannot
drift apart. Needs neither torch nor the library (the entry points' own use of these rules is
checked through the fake library in test_reference_kwargs.py)."""
import ast
import os
import re

import pytest

import sage2
from sage2 import _compat

REPO = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PKG = os.path.dirname(os.path.abspath(sage2.__file__))

# entry point -> the rule of _compat it follows (the code's own wiring is checked below, from source)
KIND = {"sageattn": "sageattn", "sageattn_varlen": "sageattn",
        "sageattn_qk_int8_pv_fp16_cuda": "fp16_cuda", "sageattn_qk_int8_pv_fp16_triton": "fp16_triton",
        "sageattn_qk_int8_pv_fp8_cuda": "fp8", "sageattn_qk_int8_pv_fp8_cuda_sm90": "fp8"}
UNQUOTED = object()  # a value the table gives in words ("a tensor"): anything that is not None


def readme_table():
    """The rows of the reference-keyword table (docs/integrations.md) as dicts (function, keyword, value, sage2, note)."""
    readme = os.path.join(REPO, "README.md")
    if not os.path.isfile(readme):
        pytest.skip("no README beside the tests (%s)" % readme)
    path = os.path.join(REPO, "docs", "integrations.md")
    assert os.path.isfile(path), "the repository has a README but no %s" % path
    lines = open(path, encoding="utf-8").read().splitlines()
    head = "| function | keyword | value | sage2 | note |"
    assert head in lines, "docs/integrations.md has no reference-keyword table (%s)" % head
    i = lines.index(head) + 2
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        assert len(cells) == 5, lines[i]
        rows.append(dict(zip(("function", "keyword", "value", "sage2", "note"), cells)))
        i += 1
    assert len(rows) > 20, rows
    return rows


def code(cell):
    return re.findall(r"`([^`]*)`", cell)


def values(cell):
    """The values a cell names: each literal in code font; a cell in words only stands for a non-None object."""
    lits = code(cell)
    return [ast.literal_eval(x) for x in lits] if lits else [UNQUOTED]


def effect(cell):
    """'accepted' / 'ValueError' / 'TypeError', or {name: value} from `name=value` items."""
    if cell in ("accepted", "ValueError", "TypeError"):
        return cell
    out = {}
    for item in code(cell):
        name, _, val = item.partition("=")
        out[name.strip()] = ast.literal_eval(val.strip())
    assert out, "the sage2 cell %r says nothing checkable" % cell
    return out


def sage2_options():
    """sage2's own option names (sage2._options: no torch needed)."""
    from sage2._options import OPTIONS

    return frozenset(OPTIONS)


def test_every_row_is_what_the_code_does():
    known = sage2_options()
    checked = 0
    for row in readme_table():
        kw = code(row["keyword"])
        assert len(kw) == 1, row
        kw = kw[0]
        want = effect(row["sage2"])
        funcs = ["all"] if row["function"] == "all" else code(row["function"])
        for fn in funcs:
            for val in values(row["value"]):
                where = "row %r, %s" % (row, fn)
                if kw == "pv_accum_dtype" and fn != "all":
                    run = lambda: (False, None, _compat.reference_pv_options(val, fn, KIND[fn]))
                else:
                    assert fn == "all" or KIND[fn] == "sageattn", where
                    run = lambda: _compat.translate(False, None, {kw: val}, known)
                if want in ("ValueError", "TypeError"):
                    with pytest.raises({"ValueError": ValueError, "TypeError": TypeError}[want]):
                        run()
                    checked += 1
                    continue
                is_causal, sm_scale, out = run()
                got = dict(out)
                if is_causal is not False:
                    got["is_causal"] = is_causal
                if sm_scale is not None:
                    got["sm_scale"] = sm_scale
                if kw in known:  # one of sage2's own options: kept as it is
                    assert got.pop(kw) == val, where
                    got[kw] = val
                assert got == ({} if want == "accepted" else want), (where, got)
                checked += 1
    assert checked > 50, checked


def test_the_table_covers_every_keyword_and_value_the_code_maps():
    rows = readme_table()
    keywords = {code(r["keyword"])[0] for r in rows}
    missing = set(_compat.REFERENCE_KEYWORDS) - keywords
    assert not missing, "keywords the code maps but the table in docs/integrations.md lacks: %s" % sorted(missing)
    covered = set()
    for r in rows:
        if code(r["keyword"]) != ["pv_accum_dtype"]:
            continue
        for fn in code(r["function"]):
            for val in values(r["value"]):
                covered.add((KIND[fn], fn, val))
    for fn, kind in KIND.items():
        for val in _compat.PV_ACCUM_DTYPES:
            assert (kind, fn, val) in covered, "no row in docs/integrations.md's table for %s(pv_accum_dtype=%r)" % (fn, val)


def _reference_api_defaults():
    """{function: {parameter: default}} of sage2's reference entry points, from source."""
    tree = ast.parse(open(os.path.join(PKG, "_reference_api.py"), encoding="utf-8").read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("sageattn"):
            args = node.args.args
            defs = node.args.defaults
            out[node.name] = {a.arg: ast.literal_eval(d) for a, d in zip(args[len(args) - len(defs):], defs)}
    return out


def test_defaults_in_the_table_are_the_functions_defaults():
    """A value marked "(default)" in a row of a named entry point is that function's default."""
    defaults = _reference_api_defaults()
    marked = 0
    for r in readme_table():
        kw = code(r["keyword"])[0]
        m = re.search(r"`([^`]*)` \(default\)", r["value"])
        if not m or r["function"] == "all":
            continue
        for fn in code(r["function"]):
            if fn in defaults:
                assert defaults[fn].get(kw) == ast.literal_eval(m.group(1)), (fn, kw, defaults[fn].get(kw))
                marked += 1
    assert marked >= 3, marked


def test_entry_points_use_their_rule():
    """Each of sage2's reference entry points passes its own rule (KIND) to reference_pv_options."""
    tree = ast.parse(open(os.path.join(PKG, "_reference_api.py"), encoding="utf-8").read())
    seen = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in KIND:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "reference_pv_options":
                    seen[node.name] = ast.literal_eval(call.args[2])
    assert seen == {n: k for n, k in KIND.items() if n.startswith("sageattn_qk")}, seen
