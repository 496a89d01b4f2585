"""The one per-document record: built and validated here, read by the metrics, the report and the board.

Every semcal task's ``process_results`` returns one record per document, the same object under each metric
name (lm-eval logs it per document in ``samples_*.jsonl``, so every metric is recomputable offline). Two kinds:

Classification record (GoEmotions, Civil Comments)::

    {"probs": [float, ...],    # probability vector over the task's labels, sums to 1
     "gold": int | [int, ...] | None,   # gold index, or acceptable golds (any-gold / multi-label policy)
     "soft": float | None,     # binary soft-label tasks: annotator fraction of the positive class (index 1)
     "temperature": float, "at_bound": bool,    # only on recalibrated rows: the fitted T
     "tuned_tau": float, "tuned_top_k": int, "tuned_embedding": str,   # only on the semsoft_tuned row:
     "tuned_on": "validation" | "crossfit", "tuned_n": int, "tuned_guard": bool, "tuned_fold": 0 | 1 | None}

confidence = max(probs), prediction = argmax (ties -> lowest index), correct = prediction in gold; a ``gold``
of None is allowed only with ``soft`` (hard label = soft >= 0.5).

Confidence record (QA)::

    {"conf": float, "correct": 0 | 1,          # the headline confidence and correctness
     "em": 0 | 1, "conf_entropy": float, "conf_parsed": 0 | 1}   # optional named fields (views)

A metric may read a *view* of a confidence record: another field as the confidence (``conf_entropy``) or as
the correctness (``em``, ``conf_parsed``); see :mod:`semcal_eval.core.metric_table`.

:func:`classification_record` / :func:`confidence_record` build records (validated, plain JSON values);
:func:`check_record` validates one record read from a file, naming where it came from; :func:`to_arrays`
turns a list of records into :class:`RecordArrays`, the one input of every metric in the table.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from . import metrics as M

__all__ = [
    "CLASSIFICATION",
    "CONFIDENCE",
    "CONFIDENCE_VIEWS",
    "RecordError",
    "RecordArrays",
    "classification_record",
    "confidence_record",
    "record_kind",
    "check_record",
    "to_arrays",
    "first_gold",
    "gold_value",
    "gold_key",
    "TUNED_FIELDS",
    "canonical",
    "records_hash",
]

CLASSIFICATION = "classification"
CONFIDENCE = "confidence"

#: Optional fields of a confidence record and what they are: ("conf", ...) fields are confidences in [0, 1],
#: ("correct", ...) fields are 0/1 outcomes. A metric's view names one of them in place of conf or correct.
CONFIDENCE_VIEWS: dict[str, str] = {
    "em": "correct",  # exact match of the greedy answer against any gold alias
    "conf_parsed": "correct",  # verbalised mode: a confidence could be parsed from the answer
    "conf_entropy": "conf",  # 1 - semantic entropy / log K
}
_CLS_EXTRA = ("temperature", "at_bound")
#: the semsoft_tuned row's chosen configuration and how it was chosen (semcal_eval.semsoft.tuning)
TUNED_FIELDS = ("tuned_tau", "tuned_top_k", "tuned_embedding", "tuned_on", "tuned_n", "tuned_guard", "tuned_fold")


class RecordError(ValueError):
    """A per-document record that is not one of the two kinds; the message names the document and the field."""


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def gold_value(gold: Any) -> int | list[int] | None:
    """A gold label as a record holds it: None, an index, or the list of acceptable indices (plain ints).

    The one normalisation of a gold label: records (:func:`classification_record`), the tasks' gold reader
    (:class:`semcal_eval.data.gold.GoldReader`) and the board's dataset check all use it.

    >>> gold_value(3), gold_value((1, 2)), gold_value(None)
    (3, [1, 2], None)
    """
    if gold is None:
        return None
    if isinstance(gold, (list, tuple, np.ndarray)):
        return [int(g) for g in gold]
    return int(gold)


def gold_key(gold: Any) -> tuple:
    """A comparison key of a gold label that may come from an untrusted file: the sorted acceptable indices, or
    ``("?", text)`` for anything that is not a gold label (so two golds compare equal exactly when they name the
    same set of labels, and junk never raises).

    >>> gold_key([2, 1]) == gold_key((1, 2)), gold_key(1) == gold_key([1]), gold_key("x")
    (True, True, ('?', 'x'))
    """
    if gold is None:
        return ("?", str(gold))
    try:
        value = gold_value(gold)
    except (TypeError, ValueError):
        return ("?", str(gold))
    return tuple(sorted(value)) if isinstance(value, list) else (value,)


def classification_record(
    probs: Sequence[float],
    gold: Any,
    soft: float | None = None,
    *,
    temperature: float | None = None,
    at_bound: bool | None = None,
    tuned: dict | None = None,
) -> dict:
    """A validated classification record with plain-Python values (JSON-loggable).

    >>> classification_record([0.25, 0.75], 1)
    {'probs': [0.25, 0.75], 'gold': 1}
    >>> classification_record([0.5, 0.5], None, soft=0.7)
    {'probs': [0.5, 0.5], 'gold': None, 'soft': 0.7}
    """
    P = M.check_probs([list(probs)])
    if gold is None and soft is None:
        raise RecordError("a classification record needs a gold label or a soft target")
    if gold is not None:
        M.gold_matrix([gold], P.shape[1])
    rec: dict[str, Any] = {"probs": [float(x) for x in P[0]], "gold": gold_value(gold)}
    if soft is not None:
        t = float(M.check_unit([soft], "soft")[0])
        if P.shape[1] != 2:
            raise RecordError(f"a soft target needs exactly 2 classes (positive class = index 1), got {P.shape[1]}")
        rec["soft"] = t
    if temperature is not None:
        rec["temperature"] = float(temperature)
        rec["at_bound"] = bool(at_bound)
    if tuned:
        unknown = set(tuned) - set(TUNED_FIELDS)
        if unknown:
            raise RecordError(f"unknown tuned field(s) {sorted(unknown)}; known: {TUNED_FIELDS}")
        rec.update({k: tuned[k] for k in TUNED_FIELDS if k in tuned})
    return rec


def confidence_record(conf: float, correct: Any, **views: Any) -> dict:
    """A validated confidence record; ``views`` are the optional fields of :data:`CONFIDENCE_VIEWS`.

    >>> confidence_record(0.8, 1, em=0)
    {'conf': 0.8, 'correct': 1, 'em': 0}
    """
    rec: dict[str, Any] = {"conf": float(M.check_unit([conf], "conf")[0]), "correct": int(M.check_binary([correct], "correct")[0])}
    for name, value in views.items():
        role = CONFIDENCE_VIEWS.get(name)
        if role is None:
            raise RecordError(f"unknown confidence-record field {name!r}; known: {sorted(CONFIDENCE_VIEWS)}")
        rec[name] = float(M.check_unit([value], name)[0]) if role == "conf" else int(M.check_binary([value], name)[0])
    return rec


def record_kind(rec: Any, where: str = "record") -> str:
    """``"classification"`` or ``"confidence"``; RecordError for anything else."""
    if isinstance(rec, dict) and "probs" in rec:
        return CLASSIFICATION
    if isinstance(rec, dict) and "conf" in rec and "correct" in rec:
        return CONFIDENCE
    raise RecordError(
        f"{where}: not a semcal per-document record ({{probs, gold, soft}} or {{conf, correct}}), "
        f"got {str(rec)[:80]!r}"
    )


def check_record(rec: Any, where: str = "record") -> str:
    """Validate one record read from a file (structure and ranges, no probability-sum check: that needs the
    whole vector and is done by :func:`to_arrays`); return its kind. The message names ``where``."""
    kind = record_kind(rec, where)
    if kind == CLASSIFICATION:
        probs = rec.get("probs")
        if not isinstance(probs, list) or not probs or not all(_finite(p) for p in probs):
            raise RecordError(f"{where}: 'probs' must be a list of finite numbers, got {str(probs)[:80]}")
        soft = rec.get("soft")
        if soft is not None and not (_finite(soft) and 0.0 <= soft <= 1.0):
            raise RecordError(f"{where}: 'soft' must be null or a number in [0, 1], got {soft!r}")
        return kind
    c, y = rec.get("conf"), rec.get("correct")
    if not (_finite(c) and 0.0 <= c <= 1.0):
        raise RecordError(f"{where}: confidence {c!r} is not a number in [0, 1] (NaN is not allowed)")
    if isinstance(y, bool) or y not in (0, 1):
        raise RecordError(f"{where}: 'correct' must be 0 or 1, got {y!r}")
    for name, role in CONFIDENCE_VIEWS.items():
        if name in rec:
            v = rec[name]
            ok = (_finite(v) and 0.0 <= v <= 1.0) if role == "conf" else (not isinstance(v, bool) and v in (0, 1))
            if not ok:
                raise RecordError(f"{where}: '{name}' must be {'a number in [0, 1]' if role == 'conf' else '0 or 1'}, got {v!r}")
    return kind


@dataclass(frozen=True)
class RecordArrays:
    """Validated arrays of a list of records: the one input of every metric in the table.

    ``conf``, ``correct`` (n,); classification records add ``probs`` (n, K), ``gold`` (n, K) bool multi-hot,
    ``pred`` and, when every record has ``soft``, ``p`` = probs[:, 1] and ``t`` (the annotator fraction).
    """

    kind: str
    conf: np.ndarray
    correct: np.ndarray
    probs: np.ndarray | None = None
    gold: np.ndarray | None = None
    pred: np.ndarray | None = None
    p: np.ndarray | None = None
    t: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.conf)

    def take(self, idx: np.ndarray) -> RecordArrays:
        """The same arrays for the documents ``idx`` (a bootstrap resample); no re-validation."""
        return replace(self, **{f.name: getattr(self, f.name)[idx] for f in fields(self)
                                if f.name != "kind" and getattr(self, f.name) is not None})


def to_arrays(records: Sequence[dict], view: tuple[str, str] = ("conf", "correct")) -> RecordArrays:
    """Turn a list of records into :class:`RecordArrays`.

    ``view`` = (confidence field, correctness field) of confidence records (default the headline pair).
    Mixed kinds, missing keys and ragged probability vectors raise RecordError naming the document.
    """
    records = list(records)
    if not records:
        raise RecordError("no records to aggregate (0 documents)")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise RecordError(
                f"record {i} is a {type(rec).__name__}, expected a dict with probs/gold or conf/correct; "
                "process_results must return the per-document record under every metric name"
            )
    kind = record_kind(records[0], "record 0")
    if kind == CLASSIFICATION:
        return _classification_arrays(records)
    return _confidence_arrays(records, view)


def _confidence_arrays(records: list[dict], view: tuple[str, str]) -> RecordArrays:
    cf, yf = view
    for i, rec in enumerate(records):
        if cf not in rec or yf not in rec:
            raise RecordError(
                f"record {i} lacks '{cf}'/'{yf}' (keys: {sorted(rec)}); records of one metric must be one kind"
            )
    c = M.check_unit([rec[cf] for rec in records], cf)
    y = M.check_binary([float(rec[yf]) for rec in records], yf)
    return RecordArrays(CONFIDENCE, c, y)


def _classification_arrays(records: list[dict]) -> RecordArrays:
    K = None
    for i, rec in enumerate(records):
        if "probs" not in rec:
            raise RecordError(f"record {i} lacks 'probs' (keys: {sorted(rec)}); records of one metric must be one kind")
        k = len(rec["probs"])
        if K is None:
            K = k
        elif k != K:
            raise RecordError(f"record {i} has {k} probabilities but record 0 has {K}; all documents need the same label set")
    P = M.check_probs([rec["probs"] for rec in records])
    softs = [rec.get("soft") for rec in records]
    t = None
    if all(s is not None for s in softs):
        t = M.check_unit(softs, "soft")
        if K != 2:
            raise RecordError(f"soft labels need binary probs (K = 2), got K = {K}")
    golds = []
    for i, rec in enumerate(records):
        g = rec.get("gold")
        if g is None:
            if softs[i] is None:
                raise RecordError(f"record {i} has neither 'gold' nor 'soft'")
            g = int(float(softs[i]) >= 0.5)
        golds.append(g)
    G = M.gold_matrix(golds, K)
    conf, pred, correct = M.top_label(P, G)
    return RecordArrays(CLASSIFICATION, conf, correct, probs=P, gold=G, pred=pred,
                        p=None if t is None else P[:, 1], t=t)


def first_gold(gold: Any) -> Any:
    """The first acceptable gold of a record's ``gold`` (the label a recalibration fit is trained on)."""
    return gold[0] if isinstance(gold, (list, tuple)) else gold


def canonical(rec: Any) -> bytes:
    """Canonical JSON bytes of a record (sorted keys, no whitespace): equal records give equal bytes."""
    return json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


def records_hash(records: Sequence[Any]) -> str:
    """sha256 over the canonical records, in order: the identity of a set of predictions."""
    h = hashlib.sha256()
    for rec in records:
        h.update(canonical(rec))
        h.update(b"\n")
    return h.hexdigest()
