"""Issue 32 item 3, issue 42 item 4: no import cycle in semcal_eval, leaderboards, trainers or research, counting
every import: module level, under ``if``/``try``, and inside functions and methods (a lazy import still ties the
two modules together; it only hides the circle from Python's import order). The graph is read from the source,
so the test needs no package to be importable and names the cycle it finds. And no library module imports a CLI
verb (issue 42 item 1: the verbs call the library, :mod:`semcal_eval.run_rows`, never the other way round)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("semcal_eval", "leaderboards", "trainers", "research")


#: the CLI verbs (argparse, printing, Markdown, files): they import the library, no library module imports them
VERBS = ("semcal_eval.calibrate", "semcal_eval.report", "semcal_eval.summary", "semcal_eval.cli",
         "semcal_eval.__main__")


def _modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    mods = {}
    for pkg in packages:
        for p in (root / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(root).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = p
    return mods


def _edges(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of ``mods`` that ``name`` imports anywhere in its source (module level, under ``if``/``try``,
    inside functions, methods and classes). ``from pkg import sub`` is an edge to ``pkg.sub`` when that is a
    module (not to ``pkg``, whose ``__init__`` may re-export it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                parts = package.split(".")[: len(package.split(".")) - (n.level - 1)]
                base = ".".join(parts + ([n.module] if n.module else []))
            subs = [f"{base}.{a.name}" for a in n.names if f"{base}.{a.name}" in mods]
            out.update(subs)
            if len(subs) < len(n.names):
                out.add(base)
    return {m for m in out if m in mods and m != name}


def _graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    mods = _modules(root, packages)
    return {m: _edges(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    """The graph reads imports inside functions and methods: a package whose only circle goes through a lazy
    import (and a relative one inside a method) fails, and breaking the circle passes."""
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from toy import b\n")
    (pkg / "b.py").write_text("def f():\n    from toy.c import g\n    return g\n")
    (pkg / "c.py").write_text("class K:\n    def m(self):\n        from . import a\n        return a\n")
    assert _graph(tmp_path, ("toy",))["toy.b"] == {"toy.c"}
    assert cycles(_graph(tmp_path, ("toy",))) == [["toy.a", "toy.b", "toy.c"]]
    (pkg / "c.py").write_text("class K:\n    def m(self):\n        return None\n")
    assert cycles(_graph(tmp_path, ("toy",))) == []


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_cycle(pkg):
    bad = [c for c in cycles(_graph()) if any(m.split(".")[0] == pkg for m in c)]
    assert not bad, f"import cycles (counting imports inside functions): {bad}"


def test_no_library_module_imports_a_verb():
    """Only the verbs and the command-line entry points import a verb (semcal_eval.run_rows holds the rows they
    show); ``lm_eval_plugin`` is the hook lm-eval's own command line loads, which checks it as ``semcal-eval``
    does (semcal_eval.cli)."""
    entries = {*VERBS, "semcal_eval.lm_eval_plugin"}
    bad = {m: sorted(e & set(VERBS)) for m, e in _graph().items() if m not in entries and e & set(VERBS)}
    assert not bad, f"library modules import CLI verbs: {bad}; import semcal_eval.run_rows (or the library) instead"


def test_the_library_imports_no_application():
    mods = _modules()
    for m, p in mods.items():
        if m.startswith("semcal_eval"):
            apps = {e for e in _edges(m, p, mods) if e.split(".")[0] in ("leaderboards", "trainers", "research")}
            assert not apps, f"{m} imports {apps}"
