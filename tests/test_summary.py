"""The compact summary after a run: one table per task, built from the logged records and the metric table."""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import numpy as np
import pytest

from semcal_eval.cli import print_summary, results_of_this_run, semcal_tasks_requested
from semcal_eval.core import metric_table as T
from semcal_eval.summary import build_summary, main, row_order, write_summary

DATE = "2026-01-01T00-00-00.000000"


def _classification(rng, n=60, k=4, sharp=1.0):
    logits = rng.normal(size=(n, k)) * sharp
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    gold = rng.integers(0, k, size=n)
    return [{"probs": p.tolist(), "gold": int(g)} for p, g in zip(probs, gold)]


def _write_run(folder, tasks: dict[str, dict[str, list[dict]]], date=DATE):
    """An lm-eval --output_path folder: results_<date>.json and one samples file per task."""
    sub = folder / "model"
    sub.mkdir(parents=True, exist_ok=True)
    (sub / f"results_{date}.json").write_text(json.dumps({"results": {t: {} for t in tasks}}))
    for task, filters in tasks.items():
        with open(sub / f"samples_{task}_{date}.jsonl", "w") as f:
            for name, items in filters.items():
                for i, it in enumerate(items):
                    f.write(json.dumps({"doc_id": i, "filter": name, "metrics": ["ece_uw15"], "ece_uw15": it}) + "\n")
    return sub / f"results_{date}.json"


@pytest.fixture
def goemotions_like(tmp_path):
    rng = np.random.default_rng(0)
    k = 4
    base = _classification(rng, k=k, sharp=3.0)
    golds = [it["gold"] for it in base]
    prior = np.bincount(golds, minlength=k) / len(golds)
    filters = {
        "uniform": [{"probs": [1 / k] * k, "gold": g} for g in golds],
        "prior": [{"probs": prior.tolist(), "gold": g} for g in golds],
        "semsoft_ts": [{**it, "temperature": 2.0, "at_bound": False} for it in base],
        "semsoft_tau0.3": base,
        "semsoft": base,
        "semsoft_tau0.1": base,
        "constrained": base,
        # a row that beats the prior on Brier: puts 0.9 on the gold label
        "majority": [{"probs": [0.9 if j == g else 0.1 / (k - 1) for j in range(k)], "gold": g} for g in golds],
    }
    return _write_run(tmp_path / "out", {"goemotions_semsoft": filters}), filters


def _table(md: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("| ")]


def test_one_table_per_task_rows_in_reading_order_ece_ci_only(goemotions_like):
    results, filters = goemotions_like
    md = build_summary(results.parent.parent)
    rows = _table(md)
    head, body = rows[0], rows[1:]
    assert head == ["row", "n", "acc", "macro_f1", "ece_uw15", "brier_mc", "nll", "auroc_conf", "T",
                    "beats prior (Brier)"]
    assert [r[0] for r in body] == ["constrained", "semsoft", "semsoft_tau0.1", "semsoft_tau0.3", "semsoft_ts",
                                    "prior", "majority", "uniform"]
    by = {r[0]: dict(zip(head, r)) for r in body}
    assert re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", by["constrained"]["ece_uw15"])  # ECE has its CI
    assert all("[" not in by["constrained"][c] for c in ("acc", "brier_mc", "nll", "auroc_conf"))  # the rest don't
    assert by["constrained"]["beats prior (Brier)"] == "✗" and by["prior"]["beats prior (Brier)"] == ""
    assert by["semsoft_ts"]["T"] == "2.00"
    # every number is the metric table's, on the logged records
    m = T.compute_all(filters["constrained"], with_ci=True)
    assert by["constrained"]["brier_mc"] == f"{m['brier_mc']:.3f}"
    assert by["constrained"]["ece_uw15"] == f"{m['ece_uw15']:.3f} [{m['ece_uw15_ci_lo']:.3f}, {m['ece_uw15_ci_hi']:.3f}]"
    assert "### goemotions_semsoft (60 documents)" in md


def test_summary_md_is_written_beside_the_results(goemotions_like, capsys):
    results, _ = goemotions_like
    text, path = write_summary(results)
    assert path == results.with_name("summary.md") and path.read_text() == text
    assert main([str(results.parent.parent)]) == 0
    assert "| constrained |" in capsys.readouterr().out


def test_soft_and_qa_tasks_get_their_own_columns(tmp_path):
    rng = np.random.default_rng(1)
    t = rng.uniform(0.2, 0.8, size=40)
    p = np.clip(t + rng.normal(0, 0.1, 40), 0.01, 0.99)
    soft = [{"probs": [1 - a, a], "gold": None, "soft": float(b)} for a, b in zip(p, t)]
    qa = [{"conf": float(c), "correct": int(c > 0.5)} for c in rng.uniform(size=40)]
    md = build_summary(_write_run(tmp_path, {"civil_comments_ambiguous_semsoft": {"semsoft": soft},
                                             "triviaqa_semagree": {"none": qa}}))
    heads = [r for r in _table(md) if r[0] == "row"]
    assert heads[0][2:-2] == ["acc", "soft_ece", "soft_brier", "soft_nll", "spearman", "auroc_class"]
    assert heads[1][2:-2] == ["acc", "ece_uw10", "brier_conf", "nll_conf", "auroc_conf", "prr"]
    assert re.search(r"\| none \| 40 \| [0-9.]+ \| [0-9.]+ \[", md)  # the QA ECE has its CI too


def test_row_order_puts_references_last():
    assert row_order(["uniform", "majority", "none", "constrained_ts", "prior", "semsoft+T(val)", "mine",
                      "constrained"]) == [
        "none", "constrained", "semsoft+T(val)", "constrained_ts", "mine", "prior", "majority", "uniform"]


def test_report_and_summary_read_one_row_order():
    """Issue 21/24: the report listed references first and the summary last; both now read the rows table."""
    from semcal_eval import report

    names = ["uniform", "semsoft_ts", "prior", "semsoft_tau0.3", "semsoft", "semsoft_tuned", "constrained"]
    assert report._sorted_filters(names) == row_order(names)
    assert row_order(names)[-2:] == ["prior", "uniform"]


def test_base_row_is_named_and_gets_the_prior_of_its_sibling(tmp_path):
    """A stock *_base task has no prior row: it borrows the one of a task of the same run on the same documents,
    and its lm-eval filter 'none' reads 'base (loglikelihood)'."""
    rng = np.random.default_rng(3)
    golds = rng.integers(0, 3, 40).tolist()
    model = [{"probs": (p := rng.dirichlet([1, 1, 1])).tolist(), "gold": g} for g in golds]
    prior = [{"probs": [0.5, 0.3, 0.2], "gold": g} for g in golds]
    md = build_summary(_write_run(tmp_path, {"x_semsoft": {"constrained": model, "prior": prior},
                                             "x_base": {"none": model}}))
    base = next(r for r in _table(md) if r[0] == "base (loglikelihood)")
    semsoft = next(r for r in _table(md) if r[0] == "constrained")
    assert base[-1] == semsoft[-1] and base[-1] in ("✓", "✗")
    brier = lambda recs: np.mean([np.sum((np.array(r["probs"]) - np.eye(3)[r["gold"]]) ** 2) for r in recs])  # noqa: E731
    assert base[-1] == ("✓" if brier(model) < brier(prior) else "✗")
    # another task's prior on other documents is not borrowed
    md2 = build_summary(_write_run(tmp_path / "b", {"x_semsoft": {"constrained": model[:20], "prior": prior[:20]},
                                                    "x_base": {"none": model[20:]}}))
    assert next(r for r in _table(md2) if r[0] == "base (loglikelihood)")[-1] == ""


def test_a_folder_without_semcal_records_is_a_clear_error(tmp_path, capsys):
    results = _write_run(tmp_path, {"tiny_user_mc": {}})
    (results.parent / f"samples_tiny_user_mc_{DATE}.jsonl").write_text(json.dumps({"doc_id": 0, "acc": 1}) + "\n")
    with pytest.raises(ValueError, match="--log_samples"):
        build_summary(results)
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere")])
    assert "does not exist" in capsys.readouterr().err


# -- the CLI's after-run hook (no model: the run's files are written by hand) ----------------------------------
def _args(**kw):
    base = {"command": "run", "tasks": ["goemotions_semsoft"], "output_path": None, "log_samples": False}
    return argparse.Namespace(**{**base, **kw})


def test_semcal_tasks_are_recognised_by_name_tag_and_wildcard():
    assert semcal_tasks_requested(["goemotions_semsoft,hellaswag"])
    assert semcal_tasks_requested(["semcal_qa"]) and semcal_tasks_requested(["civil_comments_*"])
    assert not semcal_tasks_requested(["hellaswag"]) and not semcal_tasks_requested(None)


def test_after_a_run_the_summary_follows_and_is_written(goemotions_like, capsys):
    results, _ = goemotions_like
    since = time.time() - 0.5
    print_summary(_args(output_path=str(results.parent.parent), log_samples=True), since)
    out = capsys.readouterr().out
    assert "| semsoft |" in out and "summary written to" in out
    assert results.with_name("summary.md").is_file()


def test_the_newest_results_of_this_run_are_summarised(goemotions_like):
    results, _ = goemotions_like
    old = results.with_name("results_2025-01-01T00-00-00.000000.json")
    old.write_text("{}")
    os.utime(old, (0, 0))
    since = time.time() - 5
    assert results_of_this_run(str(results.parent.parent), since) == results
    assert results_of_this_run(str(results.parent.parent), time.time() + 60) is None


def test_without_log_samples_one_line_says_how(capsys):
    print_summary(_args(output_path="out/"), time.time())
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "--log_samples" in out[0]
    print_summary(_args(tasks=["hellaswag"]), time.time())  # a stock task: lm-eval's output only
    print_summary(_args(predict_only=True, log_samples=True, output_path="out/"), time.time())
    assert capsys.readouterr().out == ""


def test_a_summary_that_cannot_be_built_does_not_fail_the_run(tmp_path, capsys):
    results = _write_run(tmp_path, {"goemotions_semsoft": {}})
    print_summary(_args(output_path=str(tmp_path), log_samples=True), time.time() - 5)
    assert "no summary" in capsys.readouterr().err and results.is_file()
