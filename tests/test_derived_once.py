"""Issue 32: facts derived once, in semcal_eval, and called by the filters, the QA rows and the board.

* :mod:`semcal_eval.core.crossfit`: the folds (position % 2 = scikit-learn's ``PredefinedSplit``) and the
  out-of-fold map, as the temperature filter, the tuned row, the QA ``_iso`` rows and the board's re-check use them;
* :mod:`semcal_eval.core.references`: the reference predictors against hand values, and the semsoft filter and
  the board's reference rows giving the same rows;
* :mod:`semcal_eval.data.gold`: the one gold reader, read by the semsoft task and by the board's dataset check.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from semcal_eval.core import crossfit as CF
from semcal_eval.core import recalibration
from semcal_eval.core import references as REF
from semcal_eval.core.records import gold_key
from semcal_eval.data.gold import GoldError, GoldReader

# ---------------------------------------------------------------- crossfit


@pytest.mark.parametrize("n", [0, 1, 2, 7, 40])
def test_folds_are_sklearns_predefined_split_of_position_mod_2(n):
    from sklearn.model_selection import PredefinedSplit

    assert CF.folds(n).tolist() == [i % 2 for i in range(n)]
    ours = [(fit.tolist(), app.tolist()) for _, fit, app in CF.splits(n) if len(app)]
    if n:
        theirs = [(tr.tolist(), te.tolist()) for tr, te in PredefinedSplit(CF.folds(n)).split()]
        assert ours == theirs
    assert [CF.fold_of(i) for i in range(n)] == CF.folds(n).tolist()


def test_crossfit_applies_each_fold_what_the_other_fold_fitted():
    seen = []

    def fit_apply(k, fit_on, apply_to):
        assert not set(fit_on) & set(apply_to) and (CF.folds(9)[apply_to] == k).all()
        seen.append(k)
        return [(k, tuple(fit_on.tolist()))] * len(apply_to)

    out = CF.crossfit(9, fit_apply)
    assert seen == [0, 1]
    assert out[0] == (0, (1, 3, 5, 7)) and out[1] == (1, (0, 2, 4, 6, 8))
    assert [k for k, _ in out] == CF.folds(9).tolist()
    with pytest.raises(ValueError, match="returned 1 values"):
        CF.crossfit(4, lambda k, fit_on, apply_to: [0])
    with pytest.raises(ValueError, match="fold values"):
        list(CF.splits(fold=[0, 2]))


def _probs(n, k=3, seed=0):
    """Overconfident probabilities (labels drawn from the same logits at a third of the scale) and labels."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 3, size=(n, k))
    p = np.exp(z - z.max(1, keepdims=True))
    q = np.exp((z - z.max(1, keepdims=True)) / 3)
    q /= q.sum(1, keepdims=True)
    return p / p.sum(1, keepdims=True), np.array([rng.choice(k, p=row) for row in q])


class _View:
    """The filters' task view over synthetic documents: gold = doc['y'], doc_ids = doc['id'] (any order)."""

    def __init__(self, train=(), train_soft=(), soft=None):
        self.train, self.train_s, self.s = list(train), list(train_soft), soft

    def gold(self, doc):
        return doc["y"]

    def soft_target(self, doc):
        return self.s

    def train_golds(self):
        return self.train

    def train_soft_targets(self):
        return self.train_s

    def doc_ids(self, docs):
        return [d["id"] for d in docs]


def test_temperature_filter_folds_are_the_crossfit_folds_over_sorted_doc_ids():
    from semcal_eval.semsoft.filters import CrossfitTemperature
    from semcal_eval.semsoft.spec import SemSoftRow

    n = 2 * recalibration.MIN_FIT_DOCS + 3
    P, y = _probs(n, seed=1)
    ids = np.random.default_rng(2).permutation(np.arange(100, 100 + 3 * n, 3)).tolist()  # gaps, shuffled
    docs = [{"id": i, "y": int(y[j])} for j, i in enumerate(ids)]
    rows = CrossfitTemperature(_View()).apply([SemSoftRow(p) for p in P], docs)
    order = np.argsort(ids)  # canonical order: sorted doc_id
    fold = dict(zip(np.asarray(ids)[order].tolist(), CF.folds(n).tolist()))
    assert [r.fold for r in rows] == [fold[i] for i in ids]
    # by hand: each fold scaled with T fitted on the other fold's documents only
    Ps, ys = P[order], y[order]
    for k, fit_on, apply_to in CF.splits(n):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scaled, fit = recalibration.temperature_scale(Ps[fit_on], ys[fit_on], Ps[apply_to])
        for j, p in zip(order[apply_to], scaled):
            assert rows[j].temperature == float(fit.T) and np.allclose(rows[j].probs, p, atol=0, rtol=0)


def test_qa_iso_rows_use_the_crossfit_folds():
    from semcal_eval.qa.estimators import crossfit_calibrate

    rng = np.random.default_rng(3)
    x = rng.uniform(size=30)
    y = (rng.uniform(size=30) < x).astype(int)
    assert crossfit_calibrate(x, y).tolist() == crossfit_calibrate(x, y, folds=CF.folds(30)).tolist()
    # a document's value moves only with the other fold's labels
    y2 = y.copy()
    y2[CF.folds(30) == 0] = 1 - y2[CF.folds(30) == 0]
    same = CF.folds(30) == 0
    assert np.array_equal(crossfit_calibrate(x, y)[same], crossfit_calibrate(x, y2)[same])


# ---------------------------------------------------------------- reference predictors


def test_reference_predictors_by_hand():
    # golds 0, 0, 1 (+ a multi-gold training row, counted as its first label 2), K = 3, add-one smoothing
    train = [0, 0, 1, [2, 0]]
    assert np.allclose(REF.reference_probs("prior", 3, 2, train_golds=train), [[3 / 7, 2 / 7, 2 / 7]] * 2)
    assert REF.reference_probs("majority", 3, 1, train_golds=train).tolist() == [[1.0, 0.0, 0.0]]
    assert REF.reference_probs("uniform", 4, 1).tolist() == [[0.25] * 4]
    # binary soft labels: the mean training annotator fraction, unsmoothed; majority = the side of 0.5
    soft = [0.1, 0.2, 0.9, None]
    assert np.allclose(REF.reference_probs("prior", 2, 1, train_soft=soft, soft=True), [[0.6, 0.4]])
    assert REF.reference_probs("majority", 2, 1, train_soft=soft, soft=True).tolist() == [[1.0, 0.0]]
    # no training split: prior / majority cannot be computed (None), uniform can
    assert REF.reference_probs("prior", 3, 1) is None
    assert list(REF.reference_rows(3, 1)) == ["uniform"]
    assert list(REF.reference_rows(3, 1, train_golds=train)) == list(REF.KINDS)
    with pytest.raises(ValueError, match="must be one of"):
        REF.reference_probs("oracle", 3, 1)


def test_training_split_is_read_only_when_the_rule_needs_it():
    def never():
        raise AssertionError("read")

    assert REF.reference_probs("uniform", 2, 1, train_golds=never, train_soft=never, soft=True) is not None
    reads = []
    REF.reference_rows(2, 3, train_golds=lambda: reads.append("g") or [0, 1, 1], train_soft=never)
    assert reads == ["g"]  # once, for prior and majority together; soft targets never (a hard-label task)


@pytest.mark.parametrize("soft", [False, True])
def test_the_filter_and_the_board_compute_the_same_reference_rows(soft):
    from leaderboards.references import reference_records
    from semcal_eval.semsoft.filters import ReferencePredictor
    from semcal_eval.semsoft.spec import SemSoftResponse

    k = 2 if soft else 4
    train = [0, 1, 1, 3 % k, [2 % k, 0]]
    train_soft = [0.2, 0.7, 0.9] if soft else []
    view = _View(train, train_soft, soft=0.4 if soft else None)
    docs = [{"id": i, "y": i % k} for i in range(5)]
    board = SimpleNamespace(n_classes=k, gold=lambda i: i % k, soft=lambda i: view.s, train_golds=train,
                            train_soft=train_soft)
    recs = reference_records(board, list(range(5)))
    resp = [[SemSoftResponse(baseline=[1 / k] * k)] for _ in docs]
    for kind in REF.KINDS:
        rows = ReferencePredictor(kind, view).apply(resp, docs)
        assert [list(r.probs) for r in rows] == [r["probs"] for r in recs[kind]]


# ---------------------------------------------------------------- the gold reader


def _task(target, *, choices=("a", "b", "c"), soft_field=None, train=None):
    """A stand-in lm-eval task: the fields the gold reader reads."""
    meta = {"soft_field": soft_field} if soft_field else {}
    return SimpleNamespace(doc_to_target=target, doc_to_choice=lambda doc: list(choices),
                           config=SimpleNamespace(metadata=meta), has_training_docs=lambda: train is not None,
                           training_docs=lambda: train)


def test_gold_reader_reads_the_tasks_fields():
    r = GoldReader(_task(lambda d: d["y"], soft_field="tox", train=[{"y": 1, "tox": 0.25}, {"y": (0, 2), "tox": 1}]))
    assert r.gold({"y": 2}) == 2 and r.gold({"y": np.int64(1)}) == 1 and type(r.gold({"y": np.int64(1)})) is int
    assert r.gold({"y": [2, 0]}) == [2, 0] and r.gold({"y": None}) is None
    assert r.soft({"tox": "0.5"}) == 0.5
    assert r.train_golds() == [1, [0, 2]] and r.train_soft() == [0.25, 1.0]
    with pytest.raises(GoldError, match=r"tox=1.5 is outside \[0, 1\]"):
        r.soft({"tox": 1.5})
    text = GoldReader(_task(lambda d: d["label"]))  # a label given as text: its index among the choices
    assert text.gold({"label": "b"}) == 1 and text.gold({"label": "z"}) is None
    assert text.soft({}) is None and text.train_golds() == [] and text.train_soft() == []
    with pytest.raises(GoldError, match="soft_field"):
        GoldReader(_task(lambda d: 0, soft_field=["tox"]))


def _semsoft_task(target, soft_field=None, train=None):
    """A SemSoftTask instance without lm-eval's construction: only the fields its gold methods read."""
    from semcal_eval.semsoft.task import SemSoftTask

    t = object.__new__(SemSoftTask)
    for name, value in vars(_task(target, soft_field=soft_field, train=train)).items():
        setattr(t, "_config" if name == "config" else name, value)  # Task.config is a property over _config
    return t


def test_the_semsoft_task_and_the_board_read_gold_through_the_same_reader():
    from leaderboards.dataset_check import TaskDocs
    from leaderboards.errors import SubmissionError
    from semcal_eval.semsoft.scoring import SemSoftError

    docs = [{"y": 2, "tox": 0.75}, {"y": [1, 0], "tox": 0.0}, {"y": np.int64(0), "tox": 1}]
    train = [{"y": 1, "tox": 0.5}]
    task = _semsoft_task(lambda d: d["y"], soft_field="tox", train=train)
    reader = GoldReader(task)
    board = TaskDocs(task="t", split="test", docs=docs, _task=task)
    for i, d in enumerate(docs):
        assert task.gold(d) == reader.gold(d) == board.gold(i)
        assert task.soft_target(d) == reader.soft(d) == board.soft(i)
    assert task.train_golds() == board.train_golds == [1]
    assert task.train_soft_targets() == board.train_soft == [0.5]
    # a task without SemSoftTask's methods (a *_base task) is read by the same reader
    plain = TaskDocs(task="t", split="test", docs=docs, _task=_task(lambda d: d["y"], soft_field="tox", train=train))
    assert [plain.gold(i) for i in range(3)] == [board.gold(i) for i in range(3)]
    assert plain.train_soft == board.train_soft
    # a bad soft target: the task's own error, and a clean rejection on the board
    bad = [{"y": 0, "tox": 2.0}]
    with pytest.raises(SemSoftError, match="outside"):
        _semsoft_task(lambda d: d["y"], soft_field="tox").soft_target(bad[0])
    with pytest.raises(SubmissionError, match="outside"):
        TaskDocs(task="t", split="test", docs=bad, _task=task).soft(0)


def test_gold_key_compares_label_sets_and_never_raises_on_junk():
    assert gold_key([2, 1]) == gold_key((1, 2)) == (1, 2)
    assert gold_key(1) == gold_key([1]) == gold_key("1")
    assert gold_key({"a": 1}) == ("?", "{'a': 1}") and gold_key(None) == ("?", "None")
    assert gold_key([1, "x"]) == ("?", "[1, 'x']")
