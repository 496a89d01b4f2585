"""lm-eval glue: per-document metric items -> registered aggregations.

Every semcal task's ``process_results`` returns the same *item* under each metric name (Contract 1,
docs/ARCHITECTURE.md)::

    {"probs": [...], "gold": int | [int, ...], "soft": float | None}   # classification item
    {"conf": float, "correct": 0 | 1}                                   # confidence (QA) item

lm-eval hands the list of items of one (metric, filter) to the aggregation named in the task's
``metric_list``. Each aggregation here is a thin wrapper: items -> arrays (:func:`items_to_arrays`)
-> a function of :mod:`semcal_eval.metrics`.

Naming: the aggregation for metric ``X`` is registered as ``semcal_X`` (e.g. ``ece_uw15`` ->
``semcal_ece_uw15``), one rule for every metric, so nothing can clash with lm-eval's own
aggregations (``f1``, ``brier_score``, ``mean``, ...). A task YAML therefore reads::

    metric_list:
      - metric: ece_uw15
        aggregation: semcal_ece_uw15
        higher_is_better: false

:func:`metric_list` builds those entries. Confidence-only metrics (acc, ECEs, MCE, RMS-CE, brier_conf,
nll_conf, auroc_conf, aurc, acc_at_10cov) accept both item kinds (a classification item gives
conf = max prob, correct = argmax in gold); the others need classification items, and the soft ones
need ``soft``. On a soft-label task whose items carry ``gold: None``, the hard label is soft >= 0.5.

Confidence intervals: ``<metric>_ci_lo`` / ``<metric>_ci_hi`` for the metrics in
:data:`semcal_eval.metrics.CI_METRICS` are separate metrics (same items) with aggregations
``semcal_<metric>_ci_lo`` / ``_ci_hi``: a seeded percentile bootstrap (:data:`CI_N_BOOT` resamples,
seed :data:`CI_SEED`), computed once per items list and shared by the lo/hi pair. lm-eval's own
``_stderr`` column stays "N/A" for these aggregations (lm-eval only bootstraps its built-in ones).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# lm-eval's get_aggregation() only imports its built-in aggregations when the registry is empty;
# import them first so registering ours never hides theirs.
import lm_eval.api.metrics  # noqa: F401
from lm_eval.api.registry import aggregation_registry

from . import metrics as M

__all__ = [
    "AGG_PREFIX",
    "METRIC_HIGHER_IS_BETTER",
    "AGGREGATIONS",
    "CI_N_BOOT",
    "CI_SEED",
    "items_to_arrays",
    "aggregate",
    "metric_list",
    "classification_item",
    "confidence_item",
]

AGG_PREFIX = "semcal_"
CI_N_BOOT = 1000
CI_SEED = 0
N_BINS = 15

# --------------------------------------------------------------------------------------------
# items -> arrays
# --------------------------------------------------------------------------------------------


def classification_item(probs: Sequence[float], gold: Any, soft: float | None = None) -> dict:
    """A validated classification item (Contract 1) with plain-Python values (JSON-loggable)."""
    P = M._probs([list(probs)])
    M.gold_matrix([gold], P.shape[1])
    if soft is not None:
        M._unit([soft], "soft")
    g = [int(x) for x in gold] if isinstance(gold, (list, tuple)) else (None if gold is None else int(gold))
    return {"probs": [float(x) for x in P[0]], "gold": g, "soft": None if soft is None else float(soft)}


def confidence_item(conf: float, correct: Any) -> dict:
    """A validated confidence item (Contract 1)."""
    c = M._unit([conf], "conf")[0]
    y = M._binary([correct], "correct")[0]
    return {"conf": float(c), "correct": int(y)}


def items_to_arrays(items: Sequence[dict]) -> dict[str, Any]:
    """Turn a list of items into arrays.

    Classification items -> ``kind="classification"``, ``probs`` (n, K), ``gold`` (n, K) bool
    multi-hot, ``conf``, ``pred``, ``correct`` and, if every item has ``soft``, ``p`` = probs[:, 1]
    and ``t`` (else ``t`` is None). Confidence items -> ``kind="confidence"``, ``conf``, ``correct``.
    A ``gold`` of None is allowed only with ``soft`` (hard label = soft >= 0.5).
    Mixed kinds, missing keys, ragged probability vectors -> ValueError naming the document.
    """
    items = list(items)
    if not items:
        raise ValueError("no items to aggregate (0 documents)")
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise ValueError(
                f"item {i} is a {type(it).__name__}, expected a dict with probs/gold or conf/correct; "
                "process_results must return the Contract 1 item under every metric name"
            )
    if "probs" in items[0]:
        return _classification_arrays(items)
    if "conf" in items[0]:
        return _confidence_arrays(items)
    raise ValueError(f"item 0 has neither 'probs' nor 'conf' (keys: {sorted(items[0])})")


def _confidence_arrays(items: list[dict]) -> dict[str, Any]:
    for i, it in enumerate(items):
        if "conf" not in it or "correct" not in it:
            raise ValueError(f"item {i} lacks 'conf'/'correct' (keys: {sorted(it)}); items of one metric must be one kind")
    conf = [it["conf"] for it in items]
    correct = [float(it["correct"]) for it in items]
    c, y = M._conf_correct(conf, correct)
    return {"kind": "confidence", "conf": c, "correct": y, "n": len(c)}


def _classification_arrays(items: list[dict]) -> dict[str, Any]:
    K = None
    for i, it in enumerate(items):
        if "probs" not in it:
            raise ValueError(f"item {i} lacks 'probs' (keys: {sorted(it)}); items of one metric must be one kind")
        k = len(it["probs"])
        if K is None:
            K = k
        elif k != K:
            raise ValueError(f"item {i} has {k} probabilities but item 0 has {K}; all documents need the same label set")
    P = M._probs([it["probs"] for it in items])
    softs = [it.get("soft") for it in items]
    has_soft = [s is not None for s in softs]
    t = None
    if all(has_soft):
        t = M._unit(softs, "soft")
        if K != 2:
            raise ValueError(f"soft labels need binary probs (K = 2), got K = {K}")
    golds = []
    for i, it in enumerate(items):
        g = it.get("gold")
        if g is None:
            if softs[i] is None:
                raise ValueError(f"item {i} has neither 'gold' nor 'soft'")
            g = int(float(softs[i]) >= 0.5)
        golds.append(g)
    G = M.gold_matrix(golds, K)
    conf, pred, correct = M.top_label(P, G)
    out = {"kind": "classification", "probs": P, "gold": G, "conf": conf, "pred": pred,
           "correct": correct, "t": t, "n": len(P)}
    if t is not None:
        out["p"] = P[:, 1]
    return out


def _need(a: dict, kind: str, metric: str) -> None:
    if kind == "classification" and a["kind"] != "classification":
        raise ValueError(f"metric {metric!r} needs classification items {{probs, gold}}, got confidence items")
    if kind == "soft" and a.get("t") is None:
        raise ValueError(f"metric {metric!r} needs a 'soft' annotator fraction in every item")


# --------------------------------------------------------------------------------------------
# metric table: name -> (higher_is_better, item kind, fn(arrays) -> float)
# --------------------------------------------------------------------------------------------

_Fn = Callable[[dict], float]
_TABLE: dict[str, tuple[bool, str, _Fn]] = {
    "acc": (True, "any", lambda a: M.accuracy(a["correct"])),
    "macro_f1": (True, "classification", lambda a: M.macro_f1(a["pred"], a["gold"], a["probs"].shape[1])),
    "ece_uw15": (False, "any", lambda a: M.ece(a["conf"], a["correct"], 15, "uniform")),
    "ece_uw10": (False, "any", lambda a: M.ece(a["conf"], a["correct"], 10, "uniform")),
    "ece_em15": (False, "any", lambda a: M.ece(a["conf"], a["correct"], 15, "mass")),
    "classwise_ece": (False, "classification", lambda a: M.classwise_ece(a["probs"], a["gold"], N_BINS)),
    "mce": (False, "any", lambda a: M.mce(a["conf"], a["correct"], N_BINS)),
    "rms_ce": (False, "any", lambda a: M.rms_ce(a["conf"], a["correct"], N_BINS)),
    "brier_mc": (False, "classification", lambda a: M.brier_multiclass(a["probs"], a["gold"])),
    "brier_conf": (False, "any", lambda a: M.brier_confidence(a["conf"], a["correct"])),
    "nll": (False, "classification", lambda a: M.nll_multiclass(a["probs"], a["gold"])),
    "nll_conf": (False, "any", lambda a: M.nll_confidence(a["conf"], a["correct"])),
    "auroc_conf": (True, "any", lambda a: M.auroc_confidence(a["conf"], a["correct"])),
    "auroc_class": (True, "classification", lambda a: M.auroc_class(a["probs"], a["gold"])),
    "aurc": (False, "any", lambda a: M.aurc(a["conf"], a["correct"])),
    "acc_at_10cov": (True, "any", lambda a: M.acc_at_coverage(a["conf"], a["correct"], 0.1)),
    "soft_brier": (False, "soft", lambda a: M.brier_soft(a["p"], a["t"])),
    "soft_ece": (False, "soft", lambda a: M.soft_ece(a["p"], a["t"], N_BINS)),
    "soft_nll": (False, "soft", lambda a: M.nll_soft(a["p"], a["t"])),
    "pearson": (True, "soft", lambda a: M.pearson(a["p"], a["t"])),
    "spearman": (True, "soft", lambda a: M.spearman(a["p"], a["t"])),
    "soft_mae": (False, "soft", lambda a: M.mae(a["p"], a["t"])),
    # diagnostic: share of p < 0.1 or p > 0.9; on ambiguous (soft) data fewer extremes is better
    "extreme_rate": (False, "soft", lambda a: M.extreme_rate(a["p"])),
}

#: metric name (as emitted by process_results / shown by lm-eval) -> higher is better
METRIC_HIGHER_IS_BETTER: dict[str, bool] = {name: hib for name, (hib, _, _) in _TABLE.items()}
for _name in M.CI_METRICS:
    METRIC_HIGHER_IS_BETTER[f"{_name}_ci_lo"] = METRIC_HIGHER_IS_BETTER[_name]
    METRIC_HIGHER_IS_BETTER[f"{_name}_ci_hi"] = METRIC_HIGHER_IS_BETTER[_name]

# Not a score: the temperature a recalibration filter fitted (mean over documents; NaN on rows that were
# not recalibrated), so fitted parameters are part of the results, not only of the sample log.
METRIC_HIGHER_IS_BETTER["temperature"] = False

#: metric name -> registered aggregation name
AGGREGATIONS: dict[str, str] = {name: AGG_PREFIX + name for name in METRIC_HIGHER_IS_BETTER}

_ci_cache: OrderedDict[tuple, tuple[float, float]] = OrderedDict()


def _ci(name: str, a: dict) -> tuple[float, float]:
    if name in ("brier_mc", "nll"):
        _need(a, "classification", name + "_ci")
    if name.startswith("soft_"):
        _need(a, "soft", name + "_ci")
    fn, arrs = M.ci_inputs(name, a)
    h = hashlib.sha1()
    for x in arrs:
        h.update(np.ascontiguousarray(x).tobytes())
        h.update(str(x.shape).encode())
    key = (name, h.hexdigest(), CI_N_BOOT, CI_SEED)
    if key not in _ci_cache:
        _ci_cache[key] = M.bootstrap_ci(fn, *arrs, n_boot=CI_N_BOOT, seed=CI_SEED)
        while len(_ci_cache) > 64:
            _ci_cache.popitem(last=False)
    return _ci_cache[key]


def aggregate(name: str, items: Sequence[dict]) -> float:
    """Compute metric ``name`` (a key of :data:`METRIC_HIGHER_IS_BETTER`) from a list of items."""
    if name == "temperature":
        temps = [it.get("temperature") for it in items if isinstance(it, dict)]
        temps = [float(t) for t in temps if t is not None]
        return float(np.mean(temps)) if temps else float("nan")
    a = items_to_arrays(items)
    if name.endswith(("_ci_lo", "_ci_hi")) and name[:-6] in M.CI_METRICS:
        lo, hi = _ci(name[:-6], a)
        return lo if name.endswith("_lo") else hi
    try:
        _, kind, fn = _TABLE[name]
    except KeyError:
        raise ValueError(f"unknown semcal metric {name!r}; known: {', '.join(METRIC_HIGHER_IS_BETTER)}") from None
    _need(a, kind, name)
    return float(fn(a))


def metric_list(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """lm-eval ``metric_list`` entries ({metric, aggregation, higher_is_better}) for ``names``
    (default: every metric).

    >>> metric_list(["ece_uw15"])
    [{'metric': 'ece_uw15', 'aggregation': 'semcal_ece_uw15', 'higher_is_better': False}]
    """
    names = list(METRIC_HIGHER_IS_BETTER) if names is None else list(names)
    bad = [n for n in names if n not in METRIC_HIGHER_IS_BETTER]
    if bad:
        raise ValueError(f"unknown semcal metric(s) {bad}")
    return [{"metric": n, "aggregation": AGGREGATIONS[n], "higher_is_better": METRIC_HIGHER_IS_BETTER[n]} for n in names]


# --------------------------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------------------------


def _make(name: str) -> Callable[[Sequence[dict]], float]:
    def agg(items: Sequence[dict]) -> float:
        return aggregate(name, items)

    agg.__name__ = AGG_PREFIX + name
    agg.__qualname__ = AGG_PREFIX + name
    agg.__doc__ = f"lm-eval aggregation for the semcal metric {name!r} (items -> semcal_eval.metrics)."
    return agg


def _register(agg_name: str, fn: Callable) -> None:
    current = aggregation_registry.get(agg_name, None) if agg_name in aggregation_registry else None
    if current is None:
        aggregation_registry.register(agg_name)(fn)
        return
    # Re-import (importlib.reload, or this file loaded again under another module name) makes new
    # function objects, which lm-eval's registry would reject as a clash: keep the first one.
    if getattr(current, "__qualname__", None) == fn.__qualname__ and getattr(current, "__module__", "").endswith(
        "aggregations"
    ):
        return
    raise ValueError(
        f"lm-eval aggregation {agg_name!r} is already registered by {getattr(current, '__module__', current)}; "
        "semcal cannot register its own under that name"
    )


for _name, _agg in AGGREGATIONS.items():
    _register(_agg, _make(_name))
