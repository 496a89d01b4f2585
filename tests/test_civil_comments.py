"""Civil Comments tasks: subsets against an independent count of the raw CSV, bad band / annotator settings,
skip reporting, the soft-target multiple_choice hook, and one real lm-eval run on SmolLM2-135M."""

from __future__ import annotations

import csv
import importlib.util
import json
import logging
import math

import numpy as np
import pytest
import torch

from semcal_eval import TASKS_DIR
from semcal_eval.runs import row_record
from semcal_eval.data import load_report, skipped_rows
from semcal_eval.harness.base import unwrap
from semcal_eval.harness.multiple_choice import make_mc_process_results, mc_record

CC_DIR = TASKS_DIR / "civil_comments"


@pytest.fixture(scope="module")
def cc():
    """The task folder's utils.py, imported the way lm-eval's !function does (by file path)."""
    spec = importlib.util.spec_from_file_location("civil_comments_utils", CC_DIR / "utils.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def raw_rows(data_dir):
    """(target, toxicity_annotator_count) of every row of the mirror's CSV, read with the csv module."""
    path = data_dir / "civil_comments" / "train_sample.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        return [(float(r["target"]), int(float(r["toxicity_annotator_count"]))) for r in csv.DictReader(fh)]


def _expected(rows, subset, lo, hi, min_ann=None):
    n = 0
    for t, c in rows:
        # float32 is the storage type of toxicity (see docs/DATA.md), so compare there
        inside = np.float32(lo) < np.float32(t) < np.float32(hi)
        keep = inside if subset == "ambiguous" else (not inside) if subset == "clear" else True
        n += keep and (min_ann is None or c >= min_ann)
    return n


@pytest.mark.parametrize(
    "subset,band,min_ann",
    [("ambiguous", None, None), ("clear", None, None), ("full", None, None),
     ("ambiguous", [0.3, 0.7], None), ("ambiguous", [0.2, 0.8], 20), ("clear", [0.1, 0.9], 10)],
)
def test_subsets_match_raw_csv(cc, raw_rows, data_dir, subset, band, min_ann):
    meta = {"split": "train", "version": 1.0, "pretrained": "ignored"}  # lm-eval passes unrelated keys too
    if band is not None:
        meta["band"] = band
    if min_ann is not None:
        meta["min_annotators"] = min_ann
    dd = getattr(cc, f"load_{subset}")(**meta)
    lo, hi = band or (0.2, 0.8)
    expected = _expected(raw_rows, subset, lo, hi, min_ann)
    assert len(dd["eval"]) == expected
    if (subset, band, min_ann) == ("ambiguous", None, None):
        assert expected == 445  # the documented count of the shared sample
    t = np.asarray(dd["eval"]["toxicity"], dtype=np.float32)
    if subset == "ambiguous":
        assert ((t > np.float32(lo)) & (t < np.float32(hi))).all()
    # the training split (class prior of the reference rows) is the same subset
    assert len(dd["train"]) == expected
    assert load_report(dd["eval"]).subset["subset"] == subset
    assert load_report(dd["eval"]).skipped == 0 and skipped_rows(dd)["eval"] == 0
    assert load_report(dd["eval"]).subset["rows_after"] == len(dd["eval"])  # carried over to the subset


@pytest.mark.parametrize(
    "meta,needle",
    [({"band": [0.8, 0.2]}, "band"), ({"band": [0.2]}, "band"), ({"band": "0.2,0.8"}, "band"),
     ({"band": [0.0, 1.5]}, "band"), ({"band": [float("nan"), 0.8]}, "band"),
     ({"min_annotators": 0}, "min_annotators"), ({"min_annotators": -3}, "min_annotators"),
     ({"min_annotators": 2.5}, "min_annotators"), ({"min_annotators": True}, "min_annotators"),
     ({"min_annotators": "10"}, "min_annotators")],
)
def test_invalid_settings_raise_clear_errors(cc, meta, needle):
    with pytest.raises(cc.CivilCommentsConfigError) as e:
        cc.load_ambiguous(split="train", **meta)
    msg = str(e.value)
    assert needle in msg and "--metadata" in msg  # names the key and how to pass a valid one


def test_invalid_band_through_lm_eval_task_manager(data_dir):
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(CC_DIR), include_defaults=False,
                     metadata={"split": "train", "band": [0.9, 0.1]})
    with pytest.raises(Exception, match="band") as e:
        tm.load(["civil_comments_ambiguous_semsoft"])
    assert "lo < hi" in str(e.value) or "lo <= hi" in str(e.value) or "0 <= lo < hi <= 1" in str(e.value)


def test_empty_subset_is_an_error(cc, data_dir):
    # min_annotators above every rater count in the sample (max 1,630) leaves nothing to evaluate
    with pytest.raises(cc.CivilCommentsConfigError, match="empty"):
        cc.load_ambiguous(split="train", min_annotators=100000)


def test_skipped_rows_are_counted_and_logged(cc, tmp_path, caplog):
    d = tmp_path / "civil_comments"
    d.mkdir()
    rows = [
        {"text": "fine comment", "toxicity": 0.5},
        {"text": "another one", "toxicity": 0.3},
        {"text": None, "toxicity": 0.4},          # missing text
        {"text": "   ", "toxicity": 0.6},          # blank text counts as missing
        {"text": "no label", "toxicity": None},   # missing toxicity
        {"text": "clear", "toxicity": 0.0},
    ]
    (d / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with caplog.at_level(logging.WARNING):
        dd = cc.load_ambiguous(split="train", data_dir=str(tmp_path))
    assert len(dd["eval"]) == 2  # 0.5 and 0.3; 0.0 is outside the band
    assert load_report(dd["eval"]).skipped == 3
    assert sum(load_report(dd["eval"]).reasons.values()) == 3
    assert skipped_rows(dd)["eval"] == 3
    assert any("3 row(s) skipped" in r.getMessage() for r in caplog.records)


def test_mc_item_soft_target():
    lls = [math.log(0.3), math.log(0.1)]  # unnormalised: softmax gives [0.75, 0.25]
    item = mc_record(lls, 0, soft=0.4)
    np.testing.assert_allclose(item["probs"], [0.75, 0.25])
    assert item["soft"] == 0.4 and item["gold"] == 0
    assert "soft" not in mc_record(lls, 0)  # existing callers unchanged
    with pytest.raises(ValueError, match="NaN"):
        mc_record(lls, 0, soft=float("nan"))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mc_record(lls, 0, soft=1.2)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        mc_record([0.0, 0.0, 0.0], 0, soft=0.5)
    pr = make_mc_process_results(lambda d: int(d["t"] >= 0.5), "soft", soft_fn=lambda d: d["t"])
    out = pr({"t": 0.6}, [(math.log(0.25), False), (math.log(0.75), False)])
    assert {"soft_brier", "acc", "soft_brier_stderr"} <= set(out) and unwrap(out["soft_brier"]) is out["acc"]
    assert out["acc"]["gold"] == 1 and out["acc"]["soft"] == 0.6


def test_extreme_rate_on_ambiguous_items_by_hand():
    from semcal_eval.harness.aggregations import aggregate

    # p = 0.95, 0.5, 0.05, 0.92, 0.3 against ambiguous t: three of five are extreme (> 0.9 or < 0.1)
    items = [mc_record([math.log(1 - p), math.log(p)], int(t >= 0.5), soft=t)
             for p, t in [(0.95, 0.6), (0.5, 0.4), (0.05, 0.3), (0.92, 0.7), (0.3, 0.25)]]
    assert aggregate("extreme_rate", items) == pytest.approx(3 / 5)
    # soft Brier by hand: mean (p - t)^2
    want = ((0.35) ** 2 + 0.1 ** 2 + 0.25 ** 2 + 0.22 ** 2 + 0.05 ** 2) / 5
    assert aggregate("soft_brier", items) == pytest.approx(want)


@pytest.mark.smoke  # the fast tier's one end-to-end lm-eval run: a real model, a semsoft and a stock task
def test_end_to_end_smollm2(semsoft_lm, data_dir):
    """Both variants in one lm-eval run on the real model; items, rows and metrics recomputed from logs."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from semcal_eval.harness.aggregations import aggregate

    meta = {"split": "train", "recalibrate": False, "tune": False}
    # only this folder is indexed: indexing lm-eval's own thousands of YAMLs costs ~40 s on a loaded CPU
    tm = TaskManager(include_path=str(CC_DIR), include_defaults=False, metadata=meta)
    tasks = ["civil_comments_ambiguous_semsoft", "civil_comments_ambiguous_base"]
    res = lm_eval.simple_evaluate(model=semsoft_lm, tasks=tasks, limit=6, log_samples=True, task_manager=tm,
                                  verbosity="WARNING")
    sem = res["results"]["civil_comments_ambiguous_semsoft"]
    for f in ("constrained", "semsoft", "prior", "majority", "uniform"):
        assert f"soft_ece,{f}" in sem and f"auroc_class,{f}" in sem
    assert not any(k.endswith(("constrained_ts", "semsoft_ts")) for k in sem)  # recalibrate: false

    by = {}
    for row in res["samples"]["civil_comments_ambiguous_semsoft"]:
        by.setdefault(row["filter"], []).append(row)
    assert len(by["semsoft"]) == len(by["constrained"]) == 6
    for row in by["semsoft"] + by["constrained"]:
        item = row_record(row)[1]
        t = float(row["doc"]["toxicity"])
        assert 0.2 < item["soft"] < 0.8 and item["soft"] == pytest.approx(t)
        assert item["gold"] == int(t >= 0.5)
        assert len(item["probs"]) == 2 and sum(item["probs"]) == pytest.approx(1.0, abs=1e-6)
    for f in ("constrained", "semsoft"):
        p = np.array([row_record(r)[1]["probs"][1] for r in by[f]])
        t = np.array([row_record(r)[1]["soft"] for r in by[f]])
        assert sem[f"soft_brier,{f}"] == pytest.approx(np.mean((p - t) ** 2))
        assert isinstance(sem[f"soft_brier_stderr,{f}"], float)  # lm-eval's ± column is filled
        # metrics lm-eval's table no longer shows stay recomputable from the logged records
        recs = [row_record(r)[1] for r in by[f]]
        assert aggregate("soft_mae", recs) == pytest.approx(np.mean(np.abs(p - t)))
        assert aggregate("extreme_rate", recs) == pytest.approx(np.mean((p > 0.9) | (p < 0.1)))
        assert f"soft_mae,{f}" not in sem and f"temperature,{f}" not in sem
    # the prior row is the mean annotator fraction of the training split's ambiguous rows
    prior_p = row_record(by["prior"][0])[1]["probs"][1]
    assert 0.2 < prior_p < 0.8

    # The stock multiple_choice item is the softmax of the full-label log-likelihoods; recompute them straight
    # from the model's logits (independently of lm-eval's loglikelihood path) on the first document.
    base_rows = {r["doc_id"]: r for r in res["samples"]["civil_comments_ambiguous_base"]}
    assert len(base_rows) == 6
    row = base_rows[min(base_rows)]
    args = row["arguments"]  # in memory: one (context, continuation) pair per choice
    ctx, conts = args[0][0], [a[1] for a in args]
    assert [c.strip() for c in conts] == ["safe", "toxic"]
    lls = [_full_label_ll(semsoft_lm, ctx, c) for c in conts]
    lls = np.asarray(lls)
    ref = np.exp(lls - lls.max())
    np.testing.assert_allclose(row_record(row)[1]["probs"], ref / ref.sum(), atol=1e-4)
    assert row_record(row)[1]["soft"] == pytest.approx(float(row["doc"]["toxicity"]))
    # The constrained baseline is the renormalised next-token probability of each label's first token
    # (for single-token labels this is also the full-label softmax).
    ids = semsoft_lm.tok_encode(ctx)
    with torch.no_grad():
        logp = torch.log_softmax(semsoft_lm.model(torch.tensor([ids])).logits[0, -1].double(), -1)
    first = [semsoft_lm.tok_encode(ctx + c)[len(ids)] for c in conts]
    q = np.exp(logp[first].numpy())
    con = next(r for r in by["constrained"] if r["doc_id"] == row["doc_id"])
    np.testing.assert_allclose(row_record(con)[1]["probs"], q / q.sum(), atol=1e-4)


def _full_label_ll(lm, ctx: str, cont: str) -> float:
    """sum_j log p(cont_j | ctx, cont_<j) from one forward pass over ctx + cont."""
    ids = lm.tok_encode(ctx)
    full = lm.tok_encode(ctx + cont)
    assert full[: len(ids)] == ids  # the label starts a new token
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(torch.tensor([full])).logits[0].double(), -1)
    return float(sum(logp[j - 1, full[j]] for j in range(len(ids), len(full))))
