"""The cover judge against people, on a deterministic sample of EVOUNA (every 40th judged answer, 604 answers), and
the agreement statistics of benchmarks/bench_judge_humans.py against hand computations.

The full measurement (all 24,133 answers, bootstrap CIs, cross-validation, cost) is the benchmark's; docs/JUDGE.md.
Margins were measured on this sample while the judge was written: agreement cover 0.858–0.886 (by version), strict
0.358, f1 0.402, contained 0.861; false-positive rates cover 0.035–0.049, contained 0.021 (144 people-wrong
answers). The asserted margins leave room for small changes of the judge, not for a judge that falls back toward
exact match or pays listed candidates.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_judge_humans", REPO / "benchmarks" / "bench_judge_humans.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


B = _bench()


def _evouna_dir() -> Path:
    env = os.environ.get("SEMCAL_DATA_DIR")
    for d in ([Path(env) / "evouna"] if env and env != "hub" else []) + [REPO.parent / "shared" / "data" / "evouna"]:
        if (d / "NQ.json").is_file() and (d / "TQ.json").is_file():
            return d
    pytest.skip("EVOUNA data not found ($SEMCAL_DATA_DIR/evouna or ../shared/data/evouna with NQ.json, TQ.json): "
                "the agreement-with-people check needs the human verdicts")


@pytest.fixture(scope="module")
def sample():
    rows, info = B.load_evouna(_evouna_dir())
    assert info["NQ"]["answers"] + info["TQ"]["answers"] == len(rows) == 24_133
    s = rows[::40]
    human = np.array([r.human for r in s])
    fns = B.grader_fns()
    return {g: B.metrics(B.run_grader(fns[g], s)[0], human) for g in ("strict", "f1", "contained", "cover")}


def test_cover_agrees_with_people_far_more_than_exact_rules(sample):
    cover = sample["cover"]["agreement"]
    assert sample["cover"]["n"] == 604
    assert cover > sample["strict"]["agreement"] + 0.30, (cover, sample["strict"])
    assert cover > sample["f1"]["agreement"] + 0.30, (cover, sample["f1"])


def test_cover_false_positive_rate_near_containment(sample):
    assert sample["cover"]["fpr"] < sample["contained"]["fpr"] + 0.05, (sample["cover"], sample["contained"])


def test_kappa_against_a_hand_computation():
    # tp 20, fp 5, fn 10, tn 15 (n 50): p_o = 35/50 = 0.7; p_e = (25·30 + 25·20)/50² = 0.5; kappa = 0.2/0.5 = 0.4
    pred = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    human = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert B.table(pred, human).tolist() == [20, 5, 10, 15]
    assert math.isclose(B.kappa(pred, human), 0.4)
    assert math.isclose(B.kappa_from_table([20, 5, 10, 15]), 0.4)
    m = B.metrics(pred, human)
    assert math.isclose(m["agreement"], 0.7) and math.isclose(m["kappa"], 0.4)
    assert math.isclose(m["fpr"], 5 / 20) and math.isclose(m["fnr"], 10 / 30)
    assert math.isclose(m["accuracy_reported"], 0.5) and math.isclose(m["accuracy_people"], 0.6)
    # vectorised over bootstrap tables; a constant grader has kappa 0, two constant raters none
    k = B.kappa_from_table(np.array([[20, 5, 10, 15], [30, 20, 0, 0]]))
    assert np.allclose(k, [0.4, 0.0])
    assert math.isnan(B.kappa([1, 1], [1, 1]))


def test_cluster_bootstrap_resamples_questions():
    rows = [B.Answer("NQ", q, "q", ("g",), s, "a", bool((q + i) % 2), False)
            for q in range(30) for i, s in enumerate(B.SYSTEMS)]
    boot = B.ClusterBootstrap(rows, boot=50, seed=1)
    assert (boot.weights.sum(axis=1) == 30).all()  # 30 questions drawn per replicate
    pred = np.ones(len(rows), bool)
    human = np.array([r.human for r in rows])
    t = boot.tables(pred, human, np.ones(len(rows), bool))
    assert (t.sum(axis=1) == 150).all()  # whole questions (5 answers each) move together
    again = B.ClusterBootstrap(rows, boot=50, seed=1)
    assert np.array_equal(boot.weights, again.weights)


def test_contained_and_golds():
    assert B.contained("It is Paris, France.", ["Paris"]) and not B.contained("Parisian food", ["Paris"])
    assert B.split_golds("Olivia/MFSK/ ") == ("Olivia", "MFSK") and B.split_golds(None) == ()
    assert B.fold_of("NQ", 7) == B.fold_of("NQ", 7) and 0 <= B.fold_of("TQ", 3) < 5
