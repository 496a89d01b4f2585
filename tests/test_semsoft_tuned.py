"""The semsoft_tuned row: chosen by a proper score on documents it never reports, in the same lm-eval run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from sklearn.metrics import f1_score, log_loss

from semcal_eval.semsoft import tuning
from semcal_eval.semsoft.filters import SemSoftTuned
from semcal_eval.semsoft.scoring import SemSoftError
from semcal_eval.semsoft.spec import SemSoftParams, SemSoftRequest, SemSoftResponse

L = 4
GRID = {"taus": [0.0, 0.2], "top_k": [10, 50], "label_embeddings": ["first", "mean"]}
KEYS = tuning.grid_points(GRID)
G = tuning.GridPoint


def _doc_rows(n, seed, informative=G("mean", 50, 0.2)):
    """n documents' (grid, baseline, gold): one configuration puts 60% on the gold, the others are noisier."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, L, n)
    rows = []
    for y in gold:
        grid = {}
        for k in KEYS:
            p = rng.dirichlet(np.ones(L))
            if k == informative:
                p = 0.4 * p + 0.6 * np.eye(L)[y]
            grid[k] = p.tolist()
        rows.append((grid, rng.dirichlet(np.ones(L)).tolist(), int(y), None))
    return rows


def _brier(gold, P):
    return float(np.mean(np.sum((P - np.eye(P.shape[1])[gold]) ** 2, axis=1)))


@pytest.mark.parametrize("by", ["brier", "nll"])
def test_select_is_the_guarded_argmin_of_the_proper_score(by):
    rows = _doc_rows(60, 0)
    grids, base, gold = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    c = tuning.select(grids, base, gold, keys=KEYS, by=by)
    # independent references: sklearn's log loss and macro-F1, numpy's multiclass Brier, per configuration
    f1_base = f1_score(gold, np.argmax(base, 1), average="macro", labels=range(L))
    ref = {}
    for k in KEYS:
        P = np.array([g[k] for g in grids])
        score = log_loss(gold, P, labels=range(L)) if by == "nll" else _brier(np.array(gold), P)
        ref[k] = (score, f1_score(gold, P.argmax(1), average="macro", labels=range(L)))
    ok = [k for k in KEYS if ref[k][1] >= f1_base - 1e-12]
    assert c.key == min(ok or KEYS, key=lambda k: ref[k][0]) == G("mean", 50, 0.2)
    assert c.criterion == {"nll": "nll", "brier": "brier_mc"}[by] and c.n_tune == 60 and c.guard
    for k in KEYS:
        assert c.table[k][0] == pytest.approx(ref[k][0], rel=1e-6)
    assert c.fields() == {"tuned_tau": 0.2, "tuned_top_k": 50, "tuned_embedding": "mean", "tuned_n": 60,
                          "tuned_guard": True}


def test_select_guard_excludes_configurations_that_lose_macro_f1():
    """The best-NLL configuration is a flat one (no discrimination); the guard picks the sharp one instead."""
    rng = np.random.default_rng(3)
    gold = rng.integers(0, L, 80)
    flat = [[0.25] * L for _ in gold]
    sharp = [(0.5 * np.eye(L)[y] + 0.5 * rng.dirichlet(np.ones(L) * 0.2)).tolist() if i % 3 else
             np.roll(np.eye(L)[y] * 0.96 + 0.01, 1).tolist() for i, y in enumerate(gold)]
    grids = [{G("a", 1, 0.0): f, G("b", 1, 0.0): s} for f, s in zip(flat, sharp)]
    base = [(0.1 * np.eye(L)[y] + 0.9 * rng.dirichlet(np.ones(L))).tolist() for y in gold]
    c = tuning.select(grids, base, list(gold), by="nll")
    assert log_loss(gold, flat, labels=range(L)) < log_loss(gold, sharp, labels=range(L))
    assert c.key == G("b", 1, 0.0) and c.guard
    assert tuning.select(grids, base, list(gold), keys=[G("a", 1, 0.0)], by="nll").guard is False


@pytest.mark.parametrize("by", ["brier", "nll"])
def test_soft_targets_choose_by_the_soft_score_without_the_guard(by):
    rng = np.random.default_rng(1)
    t = rng.uniform(0.2, 0.8, 50)
    grids = [{G("first", 10, 0.0): [1 - x, x], G("first", 10, 0.2): [0.5, 0.5]} for x in t]
    c = tuning.select(grids, [[0.5, 0.5]] * 50, [int(x >= 0.5) for x in t], list(t), by=by)
    assert c.criterion == f"soft_{by}" and c.key == G("first", 10, 0.0)
    with pytest.raises(SemSoftError, match="tune_by"):
        tuning.select(grids, [[0.5, 0.5]] * 50, [0] * 50, list(t), by="ece")


class _View:
    """Stand-in for the task: golds by doc_id, tuning rows given (the filter under test is real)."""

    def __init__(self, golds: dict[int, int], tuning_rows=([], [])):
        self.golds, self.rows = golds, tuning_rows

    def gold(self, doc):
        return self.golds[doc["id"]]

    def soft_target(self, doc):
        return None

    def doc_ids(self, docs):
        return [d["id"] for d in docs]

    def tuning_rows(self):
        return self.rows


def _resps(rows):
    return [[SemSoftResponse(baseline=b, grid=g)] for g, b, _, _ in rows], [{"id": i} for i in range(len(rows))]


def test_validation_tuned_row_never_reads_the_reported_labels():
    evaluated, tune = _doc_rows(40, 5), _doc_rows(30, 6, informative=G("first", 10, 0.0))
    resps, docs = _resps(evaluated)
    t_rows = ([-1 - i for i in range(30)], tune)
    golds = {i: r[2] for i, r in enumerate(evaluated)}
    out = SemSoftTuned(_View(golds, t_rows)).apply(resps, docs)
    scrambled = {i: (g + 1 + i) % L for i, g in golds.items()}
    assert SemSoftTuned(_View(scrambled, t_rows)).apply(resps, docs) == out
    assert {o.tuned["tuned_on"] for o in out} == {"validation"} and out[0].tuned["tuned_embedding"] == "first"
    assert all(list(o.probs) == r[0][G("first", 10, 0.0)] for o, r in zip(out, evaluated))
    # the test has power: the tuning documents' own labels do move the choice
    moved = ([-1 - i for i in range(30)], _doc_rows(30, 6, informative=G("mean", 50, 0.2)))
    assert SemSoftTuned(_View(golds, moved)).apply(resps, docs)[0].tuned["tuned_embedding"] == "mean"


def test_crossfit_fold_never_reads_its_own_labels():
    rows = _doc_rows(60, 7)
    resps, docs = _resps(rows)
    golds = {i: r[2] for i, r in enumerate(rows)}
    out = SemSoftTuned(_View(golds)).apply(resps, docs)
    assert [o.tuned["tuned_fold"] for o in out] == [i % 2 for i in range(60)]
    assert {o.tuned["tuned_on"] for o in out} == {"crossfit"} and {o.tuned["tuned_n"] for o in out} == {30}
    for f in (0, 1):
        # scramble fold f's labels so that another configuration is best on it: fold f's rows do not move,
        # the other fold's (tuned on fold f) do
        scrambled = dict(golds)
        for i in range(f, 60, 2):
            scrambled[i] = int(np.argmax(rows[i][0][G("first", 10, 0.0)]))
        again = SemSoftTuned(_View(scrambled)).apply(resps, docs)
        assert [again[i] for i in range(f, 60, 2)] == [out[i] for i in range(f, 60, 2)]
        assert any(again[i] != out[i] for i in range(1 - f, 60, 2))


def test_too_few_documents_and_bad_grids_are_clear_errors():
    rows = _doc_rows(5, 0)
    with pytest.raises(SemSoftError, match="at least 10 tuning documents"):
        tuning.select([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    with pytest.raises(SemSoftError, match="lack grid configurations"):
        tuning.select([r[0] for r in rows] * 2 + [{}] * 2, [r[1] for r in rows] * 2 + [[0.25] * 4] * 2,
                      [r[2] for r in rows] * 2 + [0, 0], keys=KEYS)
    with pytest.raises(SemSoftError, match="carries no tuning grid"):
        SemSoftTuned(_View({0: 0})).apply([[SemSoftResponse(baseline=[0.5, 0.5])]], [{"id": 0}])
    with pytest.raises(SemSoftError, match="not a SemSoftResponse.*--use_cache"):  # a stale cache's dict
        SemSoftTuned(_View({0: 0})).apply([[{"baseline": [0.5, 0.5], "grid": {}}]], [{"id": 0}])
    for meta, needle in [({"tune_taus": 0.2}, "non-empty list"), ({"tune_top_k": [0]}, "outside"),
                         ({"tune_embeddings": ["hidden"]}, "unknown"), ({"tune_limit": 0}, "positive integer"),
                         ({"tune_taus": [1.5]}, "outside"), ({"tune_by": "ece_uw15"}, "tune_by")]:
        with pytest.raises(SemSoftError, match=needle):
            SemSoftParams.from_metadata(meta)
    req = SemSoftRequest(("a", "b"), (0.2,), 10, "first", SemSoftParams().grid)
    with pytest.raises(SemSoftError, match="outside"):
        req.check_vocab(vocab_size=100)  # the grid's K = 500 exceeds this vocabulary
    point = tuning.GridPoint("mean", 50, 0.1)  # typed grid keys: read by attribute, shown by str()
    assert (point.label_embedding, point.top_k, point.tau, str(point)) == ("mean", 50, 0.1, "mean/k50/tau0.1")


def test_backend_grid_equals_the_main_rows_at_the_same_configuration(semsoft_lm):
    """The grid the backend returns is Semantic Softmax itself: at (first, K=100, τ=0.2) it equals the main
    semsoft row computed by the separate top-K path, and at (mean, 50, 0.1) a second request's main row."""
    from lm_eval.api.instance import Instance

    labels = (" joy", " anger", " sadness", " fear")
    grid = {"taus": [0.1, 0.2], "top_k": [50, 100], "label_embeddings": ["first", "mean"]}

    def ask(tau, k, emb):
        spec = SemSoftRequest(labels, (tau,), k, emb, grid).to_dict()
        inst = Instance("semsoft", {}, ("I am so happy today! Emotion:", spec), 0, ("t", 0, 1))
        return semsoft_lm.semsoft([inst], disable_tqdm=True)[0]

    a, b = ask(0.2, 100, "first"), ask(0.1, 50, "mean")
    assert set(a.grid) == set(tuning.grid_points(grid))
    G = tuning.GridPoint
    np.testing.assert_allclose(a.grid[G("first", 100, 0.2)], a.semsoft[0.2], atol=1e-6)
    np.testing.assert_allclose(a.grid[G("mean", 50, 0.1)], b.semsoft[0.1], atol=1e-6)
    assert a.grid == b.grid


@pytest.mark.slow
def test_lm_eval_run_tunes_on_validation_documents_it_does_not_report(tmp_path, data_dir, smollm2_path):
    """Two real lm-eval runs; in the second the evaluated documents' gold labels are changed in the data
    files. Every semsoft_tuned probability stays the same (the row never read those labels) while the
    constrained row's accuracy moves (the change reached the run)."""
    import subprocess
    import sys

    changed = tmp_path / "data"
    shutil.copytree(data_dir / "goemotions", changed / "goemotions")
    dev = changed / "goemotions" / "dev.tsv"
    lines = dev.read_text(encoding="utf-8").split("\n")
    n_single = 0
    for i, line in enumerate(lines):  # the first 20 single-label rows are the evaluated documents
        cols = line.split("\t")
        if n_single < 20 and len(cols) == 3 and "," not in cols[1]:
            cols[1] = str((int(cols[1]) + 1) % 27)
            lines[i], n_single = "\t".join(cols), n_single + 1
    dev.write_text("\n".join(lines), encoding="utf-8")

    def run(root, out):
        env = {**__import__("os").environ, "SEMCAL_DATA_DIR": str(root)}
        cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft", "--model_args",
               f"pretrained={smollm2_path},dtype=float32", "--device", "cpu", "--batch_size", "8", "--tasks",
               "goemotions_semsoft", "--limit", "20", "--log_samples", "--output_path", str(out), "--metadata",
               json.dumps({"split": "validation", "recalibrate": False, "reference_predictors": False})]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        (samples,) = out.glob("*/samples_goemotions_semsoft_*.jsonl")
        (results,) = out.glob("*/results_*.json")
        by = {}
        for line in samples.read_text().splitlines():
            r = json.loads(line)
            by.setdefault(r["filter"], {})[r["doc_id"]] = r["acc"]
        return by, json.loads(results.read_text())["results"]["goemotions_semsoft"]

    a, res_a = run(data_dir, tmp_path / "a")
    b, res_b = run(changed, tmp_path / "b")
    assert len(a["semsoft_tuned"]) == 20
    for doc, rec in a["semsoft_tuned"].items():
        assert rec["tuned_on"] == "validation" and rec["tuned_n"] == 20
        assert b["semsoft_tuned"][doc]["probs"] == rec["probs"]
        assert b["semsoft_tuned"][doc]["gold"] != rec["gold"]
    assert res_a["acc,constrained"] != res_b["acc,constrained"] or res_a["nll,constrained"] != res_b["nll,constrained"]
    # the choice lives in the per-document records (not as lm-eval metric rows): the same in both runs
    choice = lambda by: {tuple(r[k] for k in ("tuned_tau", "tuned_top_k", "tuned_embedding"))  # noqa: E731
                         for r in by["semsoft_tuned"].values()}
    assert len(choice(a)) == 1 and choice(a) == choice(b)
    assert "tuned_tau,semsoft_tuned" not in res_a
