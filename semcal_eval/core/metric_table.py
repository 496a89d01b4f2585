"""The one metric table: name -> definition. Everything that names a metric reads it from here.

It drives the lm-eval aggregation registry (``semcal_<name>``, :mod:`semcal_eval.harness.aggregations`), the
task classes' default ``metric_list`` (:data:`TASK_METRICS`), the report's tables, the bootstrap CIs, the
``semsoft_tuned`` criteria (:data:`TUNING_CRITERIA`) and the board's columns, ranking directions and ECE bins
(:data:`ROLES`). A metric is a function of :class:`~semcal_eval.core.records.RecordArrays`:

* ``needs``: ``"any"`` (top-label confidence metrics: a classification record gives conf = max prob,
  correct = argmax in gold), ``"classification"`` (needs the probability vector) or ``"soft"`` (needs the
  annotator fraction of a binary soft-label task);
* ``view``: which fields of a confidence record are (confidence, correctness), e.g. ``em`` is the accuracy of
  the ``em`` field and ``ece_uw10_entropy`` the ECE of ``conf_entropy``;
* ``loss``: a per-document loss whose mean is the metric, when there is one; the bootstrap then resamples the
  loss vector (the same distribution as resampling documents and recomputing, without an (n, K) copy).

Confidence intervals are ``<name>_ci_lo`` / ``<name>_ci_hi`` for the metrics with ``ci=True``: a seeded
percentile bootstrap over documents (:data:`CI_N_BOOT` resamples, seed :data:`CI_SEED`, 95%), the same in
results, reports and on the board. ``<name>_stderr`` is the standard deviation of the same resamples: emitted
as a metric of its own, it lands under lm-eval's native stderr key (``<name>_stderr,<filter>``), so lm-eval's
table fills its ``±`` column (:data:`HEADLINE` and docs/ARCHITECTURE.md, Contract 2). The :data:`PARAMETERS` are not scores but what a row fitted:
``temperature`` (the mean fitted temperature of a recalibrated row) and the ``semsoft_tuned`` row's chosen
``tuned_tau``, ``tuned_top_k`` and ``tuned_embedding`` (NaN / "" on the other rows).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from . import metrics as M
from .records import CLASSIFICATION, CONFIDENCE, RecordArrays, to_arrays

__all__ = [
    "Metric",
    "METRICS",
    "N_BINS",
    "CI_N_BOOT",
    "CI_SEED",
    "CI_METRICS",
    "STDERR_SUFFIX",
    "STDERR_METRICS",
    "HEADLINE",
    "headline_columns",
    "lm_eval_metric_names",
    "reported_names",
    "stderr",
    "RANK_METRICS",
    "BOARD_EXTRAS",
    "BOARD_NO_CI_ROLES",
    "board_metric_names",
    "TEMPERATURE",
    "PARAMETERS",
    "TEXT_PARAMETERS",
    "HIGHER_IS_BETTER",
    "ROLES",
    "ROLE_BINS",
    "REPORT_COLUMNS",
    "REPORT_EXTRAS",
    "ROLE_HIGHER_IS_BETTER",
    "role_metrics",
    "TUNING_CRITERIA",
    "TASK_METRICS",
    "report_columns",
    "arrays_for",
    "metric_names",
    "base_metric",
    "replicates",
    "classification_metric_names",
    "applicable",
    "compute",
    "ci",
    "compute_all",
    "temperature",
    "parameter",
]

N_BINS = 15  # bins of the metrics whose name does not say (mce, rms_ce, class-wise and soft ECE)
CI_N_BOOT = 1000
CI_SEED = 0
TEMPERATURE = "temperature"
#: fitted parameters reported beside the scores: name -> what it is
PARAMETERS: dict[str, str] = {
    TEMPERATURE: "mean fitted temperature (cross-fitted rows)",
    "tuned_tau": "semsoft_tuned: chosen τ",
    "tuned_top_k": "semsoft_tuned: chosen K",
    "tuned_embedding": "semsoft_tuned: chosen label embedding",
}

_Fn = Callable[[RecordArrays], float]
_Loss = Callable[[RecordArrays], np.ndarray]


@dataclass(frozen=True)
class Metric:
    """One row of the table."""

    name: str
    higher_is_better: bool
    needs: str  # "any" | "classification" | "soft"
    fn: _Fn
    loss: _Loss | None = None
    ci: bool = False
    view: tuple[str, str] = ("conf", "correct")
    doc: str = ""
    #: reads only the ranking of the confidence (unchanged by any increasing map of conf): the metrics a
    #: non-probability uncertainty score is reported by (issue 23); accuracy / EM do not read conf at all
    rank: bool = False
    #: the confidence bins of a binned metric (reliability diagrams of a role use the same)
    n_bins: int | None = None
    #: the ``tune_by`` criterion (:class:`semcal_eval.semsoft.spec.SemSoftParams`) this proper score is on the
    #: records it ``needs``: ``semsoft_tuned`` chooses its configuration by it (:data:`TUNING_CRITERIA`)
    tune_by: str | None = None
    #: the metric of every bootstrap resample at once ((B, n) conf and correct in, B values out), where a loop of
    #: ``fn`` calls would dominate a run's aggregation (sklearn's roc_auc_score: about 1 ms a call)
    rows: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None

    def applies_to(self, a: RecordArrays) -> bool:
        if self.needs == "classification":
            return a.kind == CLASSIFICATION
        if self.needs == "soft":
            return a.t is not None
        return self.view == ("conf", "correct") or a.kind == CONFIDENCE


def _clip(p: np.ndarray) -> np.ndarray:
    return np.clip(p, M.NLL_EPS, 1 - M.NLL_EPS)


def _ce(n_bins: int, scheme: str = "uniform", norm: str = "l1") -> _Fn:
    return lambda a: M.calibration_error(y_true=a.correct, y_prob=a.conf, norm=norm, n_bins=n_bins, scheme=scheme)


_ece15, _ece10 = _ce(15), _ce(10)
_acc = lambda a: M.accuracy(a.correct)  # noqa: E731
_acc_loss = lambda a: a.correct  # noqa: E731
_brier_conf = lambda a: M.brier_confidence(y_true=a.correct, y_prob=a.conf)  # noqa: E731
_brier_conf_loss = lambda a: (a.conf - a.correct) ** 2  # noqa: E731
_auroc = lambda a: M.auroc_confidence(y_true=a.correct, y_prob=a.conf)  # noqa: E731

_ROWS = [
    Metric("acc", True, "any", _acc, _acc_loss, ci=True, doc="accuracy of the top label / the greedy answer",
           rank=True),
    Metric("macro_f1", True, "classification", lambda a: M.macro_f1(a.pred, a.gold, a.probs.shape[1]),
           doc="macro-F1 over all K classes"),
    Metric("ece_uw15", False, "any", _ece15, ci=True, doc="top-label ECE, 15 equal-width bins", n_bins=15),
    Metric("ece_uw10", False, "any", _ece10, doc="top-label ECE, 10 equal-width bins", n_bins=10),
    Metric("ece_em15", False, "any", _ce(15, "mass"), doc="ECE, 15 equal-mass bins", n_bins=15),
    Metric("classwise_ece", False, "classification",
           lambda a: M.classwise_ece(y_true=a.gold, y_prob=a.probs, n_bins=N_BINS), n_bins=N_BINS),
    Metric("mce", False, "any", _ce(N_BINS, norm="max"), n_bins=N_BINS),
    Metric("rms_ce", False, "any", _ce(N_BINS, norm="l2"), n_bins=N_BINS),
    Metric("brier_mc", False, "classification", lambda a: M.brier_multiclass(y_true=a.gold, y_prob=a.probs),
           lambda a: np.sum((a.probs - M.gold_target(a.gold)) ** 2, axis=1), ci=True,
           doc="multiclass Brier, range [0, 2]", tune_by="brier"),
    Metric("brier_conf", False, "any", _brier_conf, _brier_conf_loss, ci=True, doc="mean (conf - correct)^2"),
    Metric("nll", False, "classification", lambda a: M.nll_multiclass(y_true=a.gold, y_prob=a.probs),
           lambda a: -np.sum(M.gold_target(a.gold) * np.log(_clip(a.probs)), axis=1), ci=True, doc="multiclass NLL",
           tune_by="nll"),
    Metric("nll_conf", False, "any", lambda a: M.nll_confidence(y_true=a.correct, y_prob=a.conf),
           doc="binary NLL of conf"),
    Metric("auroc_conf", True, "any", _auroc, ci=True, doc="AUROC of conf for correct vs wrong", rank=True,
           rows=M.auroc_confidence_rows),
    Metric("auroc_class", True, "classification", lambda a: M.auroc_class(y_true=a.gold, y_prob=a.probs),
           doc="macro one-vs-rest class AUROC"),
    Metric("aurc", False, "any", lambda a: M.aurc(y_true=a.correct, y_prob=a.conf), ci=True,
           doc="area under risk-coverage", rank=True),
    Metric("acc_at_10cov", True, "any", lambda a: M.acc_at_coverage(y_true=a.correct, y_prob=a.conf, coverage=0.1),
           rank=True),
    Metric("soft_brier", False, "soft", lambda a: M.brier_soft(y_true=a.t, y_prob=a.p), lambda a: (a.p - a.t) ** 2,
           ci=True, tune_by="brier"),
    Metric("soft_ece", False, "soft", lambda a: M.soft_ece(y_true=a.t, y_prob=a.p, n_bins=N_BINS), ci=True,
           n_bins=N_BINS),
    Metric("soft_nll", False, "soft", lambda a: M.nll_soft(y_true=a.t, y_prob=a.p),
           lambda a: -(a.t * np.log(_clip(a.p)) + (1 - a.t) * np.log1p(-_clip(a.p))), ci=True, tune_by="nll"),
    Metric("pearson", True, "soft", lambda a: M.pearson(a.p, a.t)),
    Metric("spearman", True, "soft", lambda a: M.spearman(a.p, a.t)),
    Metric("soft_mae", False, "soft", lambda a: M.mae(a.p, a.t)),
    # diagnostic: share of p < 0.1 or p > 0.9; on ambiguous (soft) data fewer extremes is better
    Metric("extreme_rate", False, "soft", lambda a: M.extreme_rate(a.p)),
    # QA views of the one confidence record
    Metric("em", True, "any", _acc, _acc_loss, view=("conf", "em"), doc="exact match of the greedy answer", rank=True),
    Metric("conf_parse_rate", True, "any", _acc, _acc_loss, view=("conf", "conf_parsed"),
           doc="share of answers with a parseable stated confidence"),
    Metric("ece_uw10_entropy", False, "any", _ece10, view=("conf_entropy", "correct"),
           doc="10-bin ECE of 1 - semantic entropy / log K", n_bins=10),
    Metric("brier_conf_entropy", False, "any", _brier_conf, _brier_conf_loss, view=("conf_entropy", "correct")),
    Metric("auroc_conf_entropy", True, "any", _auroc, view=("conf_entropy", "correct")),
    # selective prediction (issue 23): lm-polygraph's PRR (whole curve, its default max_rejection=1; and up
    # to 50% rejected), AUARC, accuracy at fixed coverage, HELM's 1-bin ECE
    Metric("prr", True, "any", lambda a: M.prr(y_true=a.correct, y_prob=a.conf), ci=True,
           doc="prediction-rejection ratio, max rejection 100% (lm-polygraph's default)", rank=True),
    Metric("prr_50", True, "any", lambda a: M.prr(y_true=a.correct, y_prob=a.conf, max_rejection=0.5),
           doc="PRR up to 50% rejected", rank=True),
    Metric("auarc", True, "any", lambda a: M.auarc(y_true=a.correct, y_prob=a.conf), ci=True,
           doc="area under the accuracy-rejection curve (1 - aurc)", rank=True),
    Metric("acc_at_50cov", True, "any", lambda a: M.acc_at_coverage(y_true=a.correct, y_prob=a.conf, coverage=0.5),
           ci=True, rank=True),
    Metric("acc_at_80cov", True, "any", lambda a: M.acc_at_coverage(y_true=a.correct, y_prob=a.conf, coverage=0.8),
           ci=True, rank=True),
    Metric("acc_at_90cov", True, "any", lambda a: M.acc_at_coverage(y_true=a.correct, y_prob=a.conf, coverage=0.9),
           ci=True, rank=True),
    Metric("ece_1bin", False, "any", lambda a: M.ece_1bin(y_true=a.correct, y_prob=a.conf), ci=True,
           doc="|mean conf - accuracy| (HELM's 1-bin ECE)"),
]

#: name -> Metric, in table order
METRICS: dict[str, Metric] = {m.name: m for m in _ROWS}
#: the metrics of a confidence that read only its ranking (:attr:`Metric.rank`)
RANK_METRICS: frozenset[str] = frozenset(m.name for m in _ROWS if m.rank)
#: metrics with a bootstrap CI
CI_METRICS: tuple[str, ...] = tuple(m.name for m in _ROWS if m.ci)

STDERR_SUFFIX = "_stderr"
#: ``<name>_stderr`` of every CI metric: the bootstrap standard error lm-eval's ``±`` column shows
STDERR_METRICS: tuple[str, ...] = tuple(f"{n}{STDERR_SUFFIX}" for n in CI_METRICS)

#: every metric name a task may emit (scores, their CI bounds and stderrs, ``temperature``) -> higher is better
HIGHER_IS_BETTER: dict[str, bool] = {}
for _m in _ROWS:
    HIGHER_IS_BETTER[_m.name] = _m.higher_is_better
    if _m.ci:
        HIGHER_IS_BETTER[f"{_m.name}_ci_lo"] = HIGHER_IS_BETTER[f"{_m.name}_ci_hi"] = _m.higher_is_better
        HIGHER_IS_BETTER[f"{_m.name}{STDERR_SUFFIX}"] = False  # a smaller standard error is a tighter estimate
#: the parameters whose value is a text (not a number)
TEXT_PARAMETERS = frozenset({"tuned_embedding"})
for _p in PARAMETERS:
    HIGHER_IS_BETTER[_p] = False

# -- where the table's metrics are shown ---------------------------------------------------------------------
# Each kind of row has one metric per headline role (ROLES): that is the one statement of "the ECE of a QA row is
# the 10-bin ECE"; the board's columns, lm-eval's table (HEADLINE) and the report (REPORT_COLUMNS) read it, and
# the ECE's bins (ROLE_BINS) are that metric's own. Every name below is checked against the table on import.

#: The headline roles (board columns, summary tables) -> metric, per record kind: classification tasks use
#: the 15-bin ECE and the multiclass proper scores, QA tasks the 10-bin ECE and the binary ones; both the
#: prediction-rejection ratio of the confidence (issue 23: lm-polygraph's metric of record).
ROLES: dict[str, dict[str, str]] = {
    CLASSIFICATION: {"ece": "ece_uw15", "brier": "brier_mc", "nll": "nll", "auroc": "auroc_conf", "acc": "acc",
                     "prr": "prr"},
    CONFIDENCE: {"ece": "ece_uw10", "brier": "brier_conf", "nll": "nll_conf", "auroc": "auroc_conf", "acc": "acc",
                 "prr": "prr"},
}
_C, _Q = ROLES[CLASSIFICATION], ROLES[CONFIDENCE]
#: ECE bins of each kind's headline ECE (reliability diagrams use the same)
ROLE_BINS: dict[str, int] = {kind: METRICS[roles["ece"]].n_bins for kind, roles in ROLES.items()}
#: role -> whether higher is better for its metric (the same on every kind: checked on import); the board's
#: ranking direction of a role's column
ROLE_HIGHER_IS_BETTER: dict[str, bool] = {role: METRICS[m].higher_is_better for role, m in _C.items()}


def role_metrics(kind: str, roles: Iterable[str]) -> tuple[str, ...]:
    """The metrics of ``roles`` (keys of :data:`ROLES`) on rows of record ``kind``.

    >>> role_metrics("confidence", ("acc", "ece"))
    ('acc', 'ece_uw10')
    """
    return tuple(ROLES[kind][r] for r in roles)


#: ``tune_by`` -> {what the records are ("classification" | "soft") -> the proper score chosen by}
#: (:attr:`Metric.tune_by`): ``semsoft_tuned`` minimises it on its tuning documents.
TUNING_CRITERIA: dict[str, dict[str, str]] = {}
for _m in _ROWS:
    if _m.tune_by is not None:
        TUNING_CRITERIA.setdefault(_m.tune_by, {})[_m.needs] = _m.name

#: Roles the board shows without a bootstrap CI: AUROC has no per-document loss, so its CI would be
#: CI_N_BOOT sklearn calls per row, dominating the submit time.
BOARD_NO_CI_ROLES: tuple[str, ...] = ("auroc",)
#: Table metrics the board stores with a row besides its role columns (in board.json, not shown as columns),
#: where they apply to the record kind.
BOARD_EXTRAS: tuple[str, ...] = ("macro_f1", "auroc_class", "brier_conf", "soft_brier", "soft_ece", "soft_nll")

#: The columns of a report table, per kind of row ("soft": classification rows with annotator fractions)
REPORT_COLUMNS: dict[str, tuple[str, ...]] = {
    CLASSIFICATION: (_C["acc"], "macro_f1", _C["ece"], _C["brier"], _C["nll"], "auroc_class", _C["auroc"]),
    "soft": ("soft_ece", "soft_brier", "soft_nll", "spearman", "extreme_rate", "acc", "auroc_class"),
    CONFIDENCE: (_Q["acc"], _Q["ece"], "ece_uw15", _Q["brier"], _Q["nll"], _Q["auroc"], "aurc"),
}
#: Columns the report adds to a QA task's table (the record kind's :data:`REPORT_COLUMNS` plus these): the
#: selective-prediction metrics (issue 23)
REPORT_EXTRAS: dict[str, tuple[str, ...]] = {CONFIDENCE: (_Q["prr"], "auarc")}


#: The headline metrics of a row, per kind of row: what lm-eval's own table shows for a semcal classification
#: task (each with its bootstrap stderr in the ``±`` column where the metric has a CI) and the columns of the
#: compact summary. Six a row, so a table is ~6 x the rows a user compares; every other metric of the table
#: stays recomputable from the logged records (report, board).
HEADLINE: dict[str, tuple[str, ...]] = {
    CLASSIFICATION: (_C["acc"], "macro_f1", _C["ece"], _C["brier"], _C["nll"], _C["auroc"]),
    "soft": ("acc", "soft_ece", "soft_brier", "soft_nll", "spearman", "auroc_class"),
    CONFIDENCE: (_Q["acc"], _Q["ece"], _Q["brier"], _Q["nll"], _Q["auroc"], _Q["prr"]),
}

#: The QA tasks' metric_list when their YAML names none, per layout of their records (:data:`TASK_METRICS`):
#: (metrics, those of them also reported with their bootstrap CI bounds ``_ci_lo`` / ``_ci_hi``).
#: ``agreement``: confidence = the greedy answer's share of the K samples (records also carry ``em`` and
#: ``conf_entropy``, 1 - semantic entropy / log K), with the selective-prediction metrics (issue 23);
#: ``stated``: the model's stated confidence (records carry ``em`` and ``conf_parsed``).
_TASK_SPEC: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "agreement": (("acc", "em", "ece_uw10", "ece_uw15", "ece_em15", "brier_conf", "nll_conf", "auroc_conf", "aurc",
                   "prr", "prr_50", "auarc", "acc_at_50cov", "acc_at_80cov", "acc_at_90cov", "ece_1bin",
                   "ece_uw10_entropy", "brier_conf_entropy", "auroc_conf_entropy"),
                  ("acc", "ece_uw15", "brier_conf", "auroc_conf", "aurc", "prr", "auarc")),
    "stated": (("acc", "em", "conf_parse_rate", "ece_uw10", "ece_uw15", "ece_em15", "brier_conf", "nll_conf",
                "auroc_conf", "aurc"),
               ("acc", "ece_uw15", "auroc_conf")),
}


def _check_names() -> None:
    """Every metric list names table metrics, and every kind has the same roles (a typo fails on import)."""
    lists = {"RANK_METRICS": RANK_METRICS, "BOARD_EXTRAS": BOARD_EXTRAS,
             **{f"ROLES[{k}]": tuple(v.values()) for k, v in ROLES.items()},
             **{f"REPORT_COLUMNS[{k}]": v for k, v in REPORT_COLUMNS.items()},
             **{f"REPORT_EXTRAS[{k}]": v for k, v in REPORT_EXTRAS.items()},
             **{f"HEADLINE[{k}]": v for k, v in HEADLINE.items()},
             **{f"_TASK_SPEC[{k}]": tuple(v[0]) + tuple(v[1]) for k, v in _TASK_SPEC.items()}}
    for where, names in lists.items():
        unknown = sorted(set(names) - set(METRICS))
        if unknown:
            raise ValueError(f"metric_table.{where} names {unknown}, which are not in the metric table")
    if len({tuple(r) for r in ROLES.values()}) != 1 or not set(BOARD_NO_CI_ROLES) <= set(_C):
        raise ValueError("metric_table.ROLES: every kind must fill the same roles, in the same order")
    for role in _C:
        if len({METRICS[roles[role]].higher_is_better for roles in ROLES.values()}) != 1:
            raise ValueError(f"metric_table.ROLES: the {role!r} metrics of the kinds disagree on higher_is_better")
    for by, scores in TUNING_CRITERIA.items():
        if set(scores) != {CLASSIFICATION, "soft"}:
            raise ValueError(f"metric_table: tune_by {by!r} needs one metric on classification and one on soft "
                             f"records, got {scores}")
    for layout, (names, bounded) in _TASK_SPEC.items():
        if not set(bounded) <= set(names) or not all(METRICS[n].ci for n in bounded):
            raise ValueError(f"metric_table._TASK_SPEC[{layout}]: CI bounds only for listed metrics with ci=True")


_check_names()


def board_metric_names(kind: str) -> tuple[list[str], list[str]]:
    """(metrics, ci_metrics) the board computes for a row of records of ``kind``: each role's metric
    (:data:`ROLES`) and the :data:`BOARD_EXTRAS` (those that apply), with a bootstrap CI for every role's
    metric but the :data:`BOARD_NO_CI_ROLES`."""
    roles = ROLES[kind]
    return ([*roles.values(), *BOARD_EXTRAS],
            [m for role, m in roles.items() if role not in BOARD_NO_CI_ROLES])


def headline_columns(a: RecordArrays) -> list[str]:
    """The headline metrics (:data:`HEADLINE`) for rows like ``a``."""
    return list(HEADLINE["soft" if a.t is not None else a.kind])


def lm_eval_metric_names(kind: str, parameters: Iterable[str] = (TEMPERATURE,)) -> list[str]:
    """A classification task's ``metric_list`` names for rows of ``kind`` (a key of :data:`HEADLINE`): each headline
    metric followed by its ``_stderr`` (when it has a CI), then the fitted ``parameters`` (reported only on the
    rows that fitted them, :func:`reported_names`).

    >>> lm_eval_metric_names("classification")[:4]
    ['acc', 'acc_stderr', 'macro_f1', 'ece_uw15']
    """
    out: list[str] = []
    for n in HEADLINE[kind]:
        out.append(n)
        if METRICS[n].ci:
            out.append(f"{n}{STDERR_SUFFIX}")
    return out + [p for p in parameters if _param(p)]


def _param(name: str) -> str:
    if name not in PARAMETERS:
        raise ValueError(f"unknown semcal parameter {name!r}; known: {', '.join(PARAMETERS)}")
    return name


def _with_bounds(names: Sequence[str], bounded: Sequence[str]) -> tuple[str, ...]:
    return tuple(x for n in names for x in ((n, f"{n}_ci_lo", f"{n}_ci_hi") if n in bounded else (n,)))


#: The metric_list a semcal task class fills in when its YAML names none (as lm-eval fills its output type's
#: default), per layout of the task's records: ``classification`` / ``soft`` (SemSoftTask without / with a
#: ``soft_field``: :func:`lm_eval_metric_names` with ``temperature``) and the QA modes (QATask: ``agreement``,
#: and the stated-confidence modes ``verbalized``, ``rlcr``, ``rd``). A YAML that sets its own metric_list keeps
#: it. The stock ``multiple_choice`` variants (``*_base``) declare :func:`lm_eval_metric_names` of their kind with
#: no parameters: what their process_results emits (a plain lm-eval task has no class to fill it in).
TASK_METRICS: dict[str, tuple[str, ...]] = {
    CLASSIFICATION: tuple(lm_eval_metric_names(CLASSIFICATION)),
    "soft": tuple(lm_eval_metric_names("soft")),
    "agreement": _with_bounds(*_TASK_SPEC["agreement"]),
    **dict.fromkeys(("verbalized", "rlcr", "rd"), _with_bounds(*_TASK_SPEC["stated"])),
}


def reported_names(declared: Iterable[str], record: dict) -> list[str]:
    """The metrics of ``declared`` (a task's metric_list, in its order) that lm-eval reports for a row whose
    records look like ``record``: everything declared, except a fitted parameter (:data:`PARAMETERS`) on a row
    that did not fit it — ``temperature`` only on temperature-scaled rows, ``tuned_*`` only on
    ``semsoft_tuned``. The same rule tells the board which metrics each filter's results must hold.

    >>> reported_names(["acc", "temperature"], {"probs": [1.0], "gold": 0})
    ['acc']
    >>> reported_names(["acc", "temperature"], {"probs": [1.0], "gold": 0, "temperature": 1.5})
    ['acc', 'temperature']
    """
    keep = [n for n in declared if n not in PARAMETERS or record.get(n) is not None]
    # a stderr must come after its metric: lm-eval writes "N/A" under <metric>_stderr,<filter> when it
    # aggregates <metric>, and the value written last is the one it keeps
    return sorted(keep, key=lambda n: n.endswith(STDERR_SUFFIX) and base_metric(n) != n)


def report_columns(a: RecordArrays) -> list[str]:
    """The report columns for rows like ``a``."""
    return list(REPORT_COLUMNS["soft" if a.t is not None else a.kind])


def metric_names(with_ci: bool = True) -> list[str]:
    """Every emitted metric name, in table order (with ``_ci_lo/_ci_hi`` and ``temperature`` when ``with_ci``)."""
    return list(HIGHER_IS_BETTER) if with_ci else list(METRICS)


def classification_metric_names() -> list[str]:
    """Every emitted metric name a classification record can feed (all but the confidence-record views)."""
    return [n for n in HIGHER_IS_BETTER if n in PARAMETERS or METRICS[base_metric(n)].view == ("conf", "correct")]


def base_metric(name: str) -> str:
    """The table metric behind an emitted name: ``ece_uw15_ci_lo`` / ``ece_uw15_stderr`` -> ``ece_uw15``.

    >>> base_metric("brier_mc_stderr"), base_metric("nll_ci_hi"), base_metric("acc")
    ('brier_mc', 'nll', 'acc')
    """
    if name.endswith(("_ci_lo", "_ci_hi")):
        return name[:-6]
    if name.endswith(STDERR_SUFFIX) and name[: -len(STDERR_SUFFIX)] in METRICS:
        return name[: -len(STDERR_SUFFIX)]
    return name


def _metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown semcal metric {name!r}; known: {', '.join(HIGHER_IS_BETTER)}") from None


def _check(m: Metric, a: RecordArrays) -> None:
    if m.applies_to(a):
        return
    if m.needs == "classification":
        raise ValueError(f"metric {m.name!r} needs classification records {{probs, gold}}, got confidence records")
    if m.needs == "soft":
        raise ValueError(f"metric {m.name!r} needs a 'soft' annotator fraction in every record")
    raise ValueError(f"metric {m.name!r} reads the confidence-record fields {m.view}, not a classification record")


def view_for(name: str, records: Sequence[dict]) -> tuple[str, str]:
    """The (confidence, correctness) fields metric ``name`` reads from ``records`` (classification records are
    read whole, so their view is the default)."""
    return _metric(name).view if records and "probs" not in records[0] else ("conf", "correct")


def arrays_for(name: str, records: list[dict], convert: Callable[..., RecordArrays] = to_arrays) -> RecordArrays:
    """The records as arrays through metric ``name``'s view, checked to suit the metric (``convert`` lets a
    caller that aggregates many metrics of one row share one conversion)."""
    m = _metric(name)
    a = convert(records, view=view_for(name, records))
    _check(m, a)
    return a


def compute(name: str, a: RecordArrays) -> float:
    """Metric ``name`` of validated arrays (already in the metric's view)."""
    m = _metric(name)
    _check(m, a)
    return float(m.fn(a))


def replicates(name: str, a: RecordArrays, n_boot: int = CI_N_BOOT, seed: int = CI_SEED) -> np.ndarray:
    """The finite bootstrap replicates of metric ``name``: documents resampled with replacement ``n_boot``
    times with ``numpy.random.default_rng(seed)``, after putting them in their records' canonical order
    (:func:`semcal_eval.core.metrics.bootstrap_replicates`). :func:`ci` and :func:`stderr` read the same ones."""
    m = _metric(name)
    _check(m, a)
    a = a.take(canonical_order(a))
    if m.loss is not None:
        return M.bootstrap_replicates(_mean, m.loss(a), n_boot=n_boot, seed=seed)
    if m.rows is not None:
        return M.bootstrap_replicates(m.rows, a.conf, a.correct, n_boot=n_boot, seed=seed, batched=True)
    # resample only the arrays the metric reads: copying an (n, K) matrix per replicate would dominate
    if m.needs == "any":
        a = RecordArrays(a.kind, a.conf, a.correct)
    elif m.needs == "soft":
        a = RecordArrays(a.kind, a.conf, a.correct, p=a.p, t=a.t)
    return M.bootstrap_replicates(lambda idx: m.fn(a.take(idx)), np.arange(a.n), n_boot=n_boot, seed=seed)


def ci(name: str, a: RecordArrays, n_boot: int = CI_N_BOOT, seed: int = CI_SEED, alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap (1 - alpha) CI of metric ``name`` over :func:`replicates`."""
    return M.percentile_interval(replicates(name, a, n_boot, seed), alpha)


def stderr(name: str, a: RecordArrays, n_boot: int = CI_N_BOOT, seed: int = CI_SEED) -> float:
    """Bootstrap standard error of metric ``name``: the sample standard deviation (ddof = 1) of
    :func:`replicates`, lm-eval's definition of a bootstrap stderr."""
    return M.replicate_stderr(replicates(name, a, n_boot, seed))


def canonical_order(a: RecordArrays) -> np.ndarray:
    """A permutation that sorts the documents by their record's contents (conf, correct, t, probs, gold).

    The bootstrap resamples positions, so without it a CI would depend on the order the records arrive in, and
    lm-eval gathers data-parallel ranks rank by rank ([0, 2, 4, …, 1, 3, …] under two processes). Sorted by
    content, the same records give the same CI in any order; identical records are interchangeable.

    >>> a = RecordArrays("confidence", np.array([0.9, 0.2, 0.9]), np.array([1.0, 0.0, 0.0]))
    >>> canonical_order(a).tolist()
    [1, 2, 0]
    """
    keys = [a.conf, a.correct]
    for extra in (a.t, a.probs, a.gold):
        if extra is not None:
            x = np.asarray(extra, dtype=np.float64)
            keys += list(x.reshape(len(x), -1).T)
    return np.lexsort(keys[::-1])  # lexsort's last key is the primary one


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x))


def applicable(a: RecordArrays, names: Iterable[str] | None = None) -> list[str]:
    """The metrics of ``names`` (default: the whole table) that apply to these arrays' kind, in table order.
    Views of other confidence-record fields are left out: they need their own arrays."""
    names = list(METRICS) if names is None else [n for n in names if _metric(n)]
    return [n for n in names if METRICS[n].applies_to(a) and METRICS[n].view == ("conf", "correct")]


def compute_all(
    records_or_arrays: list[dict] | RecordArrays,
    names: Iterable[str] | None = None,
    *,
    with_ci: bool = True,
    ci_names: Iterable[str] | None = None,
    n_boot: int = CI_N_BOOT,
    seed: int = CI_SEED,
) -> dict[str, float]:
    """Every applicable metric of ``names`` (default: the table) plus ``<name>_ci_lo/_ci_hi`` for the CI
    metrics among them (or for ``ci_names``) when ``with_ci``. NaN-with-warning metrics (AUROC on one class)
    are returned as NaN, their warnings silenced."""
    a = records_or_arrays if isinstance(records_or_arrays, RecordArrays) else to_arrays(records_or_arrays)
    out: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", M.SemcalMetricWarning)
        todo = applicable(a, names)
        for n in todo:
            out[n] = float(METRICS[n].fn(a))
        if with_ci:
            for n in (CI_METRICS if ci_names is None else list(ci_names)):
                if n in out:
                    out[f"{n}_ci_lo"], out[f"{n}_ci_hi"] = ci(n, a, n_boot=n_boot, seed=seed)
    return out


def temperature(records: list[dict]) -> float:
    """Mean fitted temperature of a recalibrated row's records (NaN when none carries one)."""
    return parameter(TEMPERATURE, records)


def parameter(name: str, records: list[dict]) -> float | str:
    """A fitted parameter of a row (:data:`PARAMETERS`): the mean over the records that carry it (NaN when
    none does); a text parameter gives its distinct values joined by "|" ("" when none), so cross-fitted folds
    that chose differently both show."""
    vals = [r[name] for r in records if isinstance(r, dict) and r.get(name) is not None]
    if vals and isinstance(vals[0], str):
        return "|".join(sorted(set(vals)))
    if not vals:
        return "" if name in TEXT_PARAMETERS else float("nan")
    return float(np.mean([float(v) for v in vals]))
