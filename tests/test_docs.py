"""The documentation a user reads: every relative link of the README, docs/ and the results pages resolves (file and
``#anchor``), and docs/ stays a reference that fits its budget (120,000 bytes in all, no page over 25,000; dated
results live in benchmarks/results/, beside the commands that made them)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *DOCS.glob("*.md"), *(REPO / "benchmarks" / "results").rglob("*.md")])
#: a Markdown link or image target: ](target) or ](target#anchor), outside code spans
LINK = re.compile(r"\]\(([^)\s]+)\)")
BUDGET_BYTES, PAGE_BYTES = 120_000, 25_000


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans (their brackets are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower-cased, punctuation other than ``-`` and ``_`` dropped, spaces → ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text only
    text = text.lower()
    return "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LN").replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page (a repeated heading gets ``-1``, ``-2``, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        a = github_anchor(m.group(1))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file, or whose ``#anchor`` in a Markdown file, does not exist."""
    bad = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading #{anchor} in {dest.name})")
    return bad


def test_the_anchor_rule_matches_githubs():
    assert github_anchor("Stock lm-eval tasks (any `multiple_choice` task)") == "stock-lm-eval-tasks-any-multiple_choice-task"
    assert github_anchor("Tolerance (`leaderboards/tools/measure_tolerance.py`)") == \
        "tolerance-leaderboardstoolsmeasure_tolerancepy"
    assert github_anchor("What `submit` checks") == "what-submit-checks"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == [], f"{page.relative_to(REPO)}: fix or drop these links"


def test_a_broken_link_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n[ok](#title) [file](b.md) [anchor](a.md#nope) `[code](x.md)`\n")
    assert broken_links(tmp_path / "a.md") == ["b.md (no such file)", "a.md#nope (no heading #nope in a.md)"]


def test_docs_fit_their_budget():
    sizes = {p.name: p.stat().st_size for p in DOCS.glob("*.md")}
    big = {name: size for name, size in sizes.items() if size > PAGE_BYTES}
    assert not big, f"docs pages over {PAGE_BYTES:,} bytes: {big}; move dated results to benchmarks/results/"
    assert sum(sizes.values()) <= BUDGET_BYTES, (
        f"docs/ holds {sum(sizes.values()):,} bytes, over {BUDGET_BYTES:,}: keep reference there, move dated results "
        "and narrative to benchmarks/results/")
