"""The sage2 package's modules import each other in one direction only (issue 26): no module
imports one that imports it back, directly or through others. Every import statement counts,
those inside functions too (a deferred import is still a dependency). Parses the sources with
ast; needs neither torch nor the library."""
import ast
import os

import sage2

PACKAGE_DIR = os.path.dirname(os.path.abspath(sage2.__file__))  # the package under test


def package_modules(root=PACKAGE_DIR, name="sage2"):
    """{dotted module name: source path} of every .py file of the package (subpackages too)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not x.startswith("."))
        rel = os.path.relpath(d, root)
        pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
        for f in sorted(files):
            if f.endswith(".py"):
                out[pkg if f == "__init__.py" else pkg + "." + f[:-3]] = os.path.join(d, f)
    return out


def import_graph(modules):
    """{module: set of package modules it imports} from the import statements of each source."""
    graph = {}
    for mod, path in modules.items():
        with open(path, "r", encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        is_pkg = os.path.basename(path) == "__init__.py"
        here = mod if is_pkg else mod.rpartition(".")[0]  # the package relative imports start from
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                names = []
                for a in node.names:  # `from P import X`: X is a submodule, or a name of P
                    sub = base + "." + a.name
                    names.append(sub if sub in modules else base)
            else:
                continue
            for n in names:
                # `import sage2.a.b` depends on sage2.a.b (the parents' __init__ run implicitly, as for
                # every submodule import, and are not counted as this module's own imports)
                if n in modules and n != mod:
                    deps.add(n)
        graph[mod] = deps
    return graph


def find_cycle(graph):
    """One import cycle as a list [m0, m1, ..., m0], or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {m: WHITE for m in graph}
    stack = []

    def visit(m):
        colour[m] = GREY
        stack.append(m)
        for n in sorted(graph[m]):
            if colour[n] == GREY:
                return stack[stack.index(n):] + [n]
            if colour[n] == WHITE:
                c = visit(n)
                if c:
                    return c
        stack.pop()
        colour[m] = BLACK
        return None

    for m in sorted(graph):
        if colour[m] == WHITE:
            c = visit(m)
            if c:
                return c
    return None


def tangles(graph):
    """The modules caught in cycles: every strongly connected component of more than one module,
    each sorted (Tarjan's algorithm)."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(m):
        index[m] = low[m] = len(index)
        stack.append(m)
        on.add(m)
        for n in graph[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            comp = []
            while True:
                n = stack.pop()
                on.discard(n)
                comp.append(n)
                if n == m:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return sorted(out)


def test_the_checker_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    assert tangles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}, "e": {"a"}}) == [["a", "b"], ["c", "d"]]


def test_the_graph_sees_the_package():
    g = import_graph(package_modules())
    assert "sage2._lib" in g["sage2._attention"]  # from . import _lib
    assert "sage2._attention" in g["sage2.sdpa"]  # from ._attention import sageattn
    assert "sage2._attention" in g["sage2.integrations.transformers"]  # from .._attention import ...


def test_package_imports_have_no_cycle():
    g = import_graph(package_modules())
    cycle = find_cycle(g)
    assert cycle is None, "import cycle in the sage2 package: %s; modules caught in cycles: %s" % (
        " -> ".join(cycle), "; ".join(", ".join(c) for c in tangles(g)))
