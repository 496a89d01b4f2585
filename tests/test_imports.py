"""Issue 32 item 3: no import cycle in semcal_eval, leaderboards, trainers or research. The graph is read from the
source (module-level imports, including those under ``if``/``try``; imports inside functions are lazy and may
break a cycle on purpose), so the test needs no package to be importable and names the cycle it finds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("semcal_eval", "leaderboards", "trainers", "research")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = p
    return mods


def _edges(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of ``mods`` that ``name`` imports at module level. ``from pkg import sub`` is an edge to
    ``pkg.sub`` when that is a module (not to ``pkg``, whose ``__init__`` may re-export it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for top in ast.parse(path.read_text(encoding="utf-8")).body:
        nodes = ast.walk(top) if isinstance(top, (ast.If, ast.Try)) else [top]
        for n in nodes:
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


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_cycle(pkg):
    mods = _modules()
    graph = {m: _edges(m, p, mods) for m, p in mods.items()}
    bad = [c for c in cycles(graph) if any(m.split(".")[0] == pkg for m in c)]
    assert not bad, f"import cycles: {bad}"


def test_the_library_imports_no_application():
    mods = _modules()
    for m, p in mods.items():
        if m.startswith("semcal_eval"):
            apps = {e for e in _edges(m, p, mods) if e.split(".")[0] in ("leaderboards", "trainers", "research")}
            assert not apps, f"{m} imports {apps}"
