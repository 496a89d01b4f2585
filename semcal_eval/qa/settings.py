"""Typed settings of the QA tasks: :class:`QASettings`, the one table of their fields, defaults and allowed values.

A QA task reads its settings from its ``metadata`` (the YAML's ``metadata:`` merged with ``--metadata``, the CLI
wins) once, when the task is built (:meth:`QASettings.from_metadata`); every field is checked there, and a bad
value is an error naming the key and the fix. Keys of other tasks (Semantic Softmax's ``tau``, ``top_k``, ...) may
share one ``--metadata`` and are left alone. Pure: no lm-eval import (the task glue is :mod:`semcal_eval.qa.task`).
"""

from __future__ import annotations

import json
import logging
import numbers
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from semcal_eval.core.recalibration import POSTHOC_METHODS

from . import estimators as EST
from .labels import CORRECTNESS_RULES, DEFAULT_CORRECTNESS
from .judges import JUDGES
from .ptrue import PTRUE_STYLES

__all__ = ["RECORD_FIELDS", "STATED_MODES", "QASettings"]

log = logging.getLogger(__name__)

#: The modes, and the fields of the one confidence record each fills (metrics may read only these).
RECORD_FIELDS: dict[str, tuple[str, ...]] = {
    "agreement": ("conf", "correct", "em", "conf_entropy"),  # greedy + K samples, clustered by a judge
    "verbalized": ("conf", "correct", "em", "conf_parsed"),  # one greedy answer + a stated confidence
    "rlcr": ("conf", "correct", "em", "conf_parsed"),  # the same for RLCR-trained models (RLCR's prompt, budget)
    "rd": ("conf", "correct", "em", "conf_parsed"),  # Rewarding Doubt: integer confidence 0–10, read as c/10
}
#: The modes with one greedy answer and a stated confidence (no samples, one VerbalizedFilter).
STATED_MODES = ("verbalized", "rlcr", "rd")


# ------------------------------------------------------------------------------------------------------------
# checks: each takes (key, value) and returns the value in its field's type, or raises naming the key and fix
# ------------------------------------------------------------------------------------------------------------


def _bad(key: str, value: Any, rule: str, example: Any) -> ValueError:
    return ValueError(f"QA task: {key}={value!r} {rule}; e.g. --metadata '{json.dumps({key: example})}'")


def _choice(options, example=None) -> Callable:
    options = tuple(options)

    def check(key, v):
        if v not in options:
            raise _bad(key, v, f"must be one of {', '.join(map(json.dumps, options))}", example or options[0])
        return v
    return check


def _number(kind: type, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
            example: Any = 1) -> Callable:
    rule = {int: "an integer", float: "a number"}[kind]
    if lo is not None:
        rule += f" {'>' if lo_open else '≥'} {lo:g}" if hi is None else \
            f" in {'(' if lo_open else '['}{lo:g}, {hi:g}]"

    def check(key, v):
        try:
            if isinstance(v, bool) or v is None:
                raise ValueError
            x = float(v) if kind is float else int(v)
            if kind is int and isinstance(v, numbers.Real) and float(v) != x:
                raise ValueError  # 2.5 samples: no silent truncation
        except (TypeError, ValueError):
            raise _bad(key, v, f"must be {rule}", example) from None
        if lo is not None and (x < lo or (lo_open and x == lo)) or hi is not None and x > hi:
            raise _bad(key, v, f"must be {rule}", example)
        return x
    return check


def _flag(key, v):
    if not isinstance(v, bool):
        raise _bad(key, v, "must be true or false (JSON booleans in --metadata)", True)
    return v


def _text(key, v):
    if not isinstance(v, str) or not v.strip():
        raise _bad(key, v, "must be a non-empty string", "semcal:smollm2-135m")
    return v


def _names(known: Callable[[], tuple[str, ...]], allow_empty: bool, allow_none: bool, example) -> Callable:
    """A list of names (or a string such as ``"f1+embed"``, split at ``+ , |`` and spaces), each known."""

    def check(key, v):
        if v is None and allow_none:
            return None
        names = [x for x in re.split(r"[+,|\s]+", v) if x] if isinstance(v, str) else v
        ok = isinstance(names, (list, tuple)) and all(isinstance(x, str) for x in names)
        if not ok or (not names and not allow_empty) or any(x not in known() for x in names):
            rule = f"must be a {'' if allow_empty else 'non-empty '}list of names from {list(known())}"
            raise _bad(key, v, rule + (" (or null for the YAML's own)" if allow_none else ""), example)
        return tuple(names)
    return check


def _judge_kwargs(key, v):
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(a, dict) for k, a in v.items()):
        raise _bad(key, v, "must map a judge name to its keyword arguments",
                   {"nli": {"model_name": "microsoft/deberta-large-mnli"}})
    return {k: dict(a) for k, a in v.items()}


def _setting(default: Any, check: Callable, doc: str) -> Any:
    """One row of the table: the field's default, its check and what it means."""
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"check": check, "doc": doc})
    return field(default=default, metadata={"check": check, "doc": doc})


# ------------------------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QASettings:
    """The settings of one QA task: each field is a row of the one table (default, check, meaning); checked when
    built, so a task never holds a bad value. ``judges`` / ``estimators`` come back as tuples of names."""

    mode: str = _setting("agreement", _choice(RECORD_FIELDS),
                         "agreement (greedy + K samples, judged), or a stated confidence: verbalized, rlcr, rd")
    num_samples: int = _setting(10, _number(int, 1, example=10),
                                "K sampled answers per question (≥ 2 in agreement mode; unused otherwise)")
    temperature: float = _setting(1.0, _number(float, 0, lo_open=True, example=1.0),
                                  "sampling temperature of the K samples (the greedy answer is always greedy)")
    top_p: float = _setting(1.0, _number(float, 0, 1, lo_open=True, example=1.0),
                            "nucleus of the samples; 1.0 with sample_top_k 0: plain multinomial sampling, as in "
                            "Farquhar et al. 2024")
    sample_top_k: int = _setting(0, _number(int, 0, example=0),
                                 "the samples' top-k (0: off); not top_k, which is Semantic Softmax's K (one "
                                 "--metadata serves every task of a run)")
    correctness: str = _setting(DEFAULT_CORRECTNESS, _choice(CORRECTNESS_RULES),
                                "cover: semcal_eval.qa.grading.grade (the training rewards' grader); strict: the "
                                "exact rule of task versions 2.x; f1: best token-F1 ≥ correct_threshold; judge: "
                                "the filter's judge ≡ a gold")
    correct_threshold: float = _setting(0.5, _number(float, 0, 1, lo_open=True, example=0.5),
                                        "correctness f1 only")
    judges: tuple[str, ...] | None = _setting(None, _names(lambda: tuple(sorted(JUDGES)), False, True, ["f1"]),
                                              "None: the YAML's filter_list; else e.g. [f1, embed] → filters "
                                              "judge_f1, judge_embed")
    judge_kwargs: dict = _setting({}, _judge_kwargs,
                                  "per judge name, e.g. {nli: {model_name: microsoft/deberta-large-mnli}}")
    missing_confidence: float = _setting(0.5, _number(float, 0, 1, example=0.5),
                                         "verbalized / rlcr / rd: the confidence used when none can be parsed "
                                         "(counted in conf_parse_rate)")
    estimators: tuple[str, ...] = _setting(tuple(EST.DEFAULT_ESTIMATORS),
                                           _names(lambda: (*EST.ESTIMATORS, "ptrue"), True, False, ["msp"]),
                                           "agreement mode: one filter row per uncertainty estimator; [] for none; "
                                           "ptrue for P(True) (one more forward pass per question)")
    estimator_judge: str = _setting("cover", _choice(sorted(JUDGES), "cover"),
                                    "the judge of the samples' agreement matrix the consistency rows read")
    estimator_calibration: str | None = _setting("isotonic", _choice((None, *POSTHOC_METHODS), "isotonic"),
                                                 "cross-fitted map of each non-probability estimator to P(correct) "
                                                 "(rows <name>_iso or <name>_platt); null: no such rows")
    ptrue_model: str = _setting("semcal:smollm2-135m", _text, "the model P(True) asks; should be the evaluated one")
    cluster_greedy: bool = _setting(True, _flag, "false: cluster the samples without the greedy answer "
                                                 "(lm-polygraph's NumSets, semantic entropy)")
    ptrue_prompt: str = _setting("semcal", _choice(PTRUE_STYLES), "P(True)'s prompt: semcal's or polygraph's")
    min_new_tokens: int = _setting(0, _number(int, 0, example=2),
                                   "EOS masked for the first n tokens (polygraph: 2; sends generation to stock HFLM)")
    log_token_logprobs: bool = _setting(False, _flag,
                                        "log each answer's token log-probs in the judge filters' records, so "
                                        "logit-based estimators can be recomputed from the samples file")

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
        if self.mode == "agreement" and self.num_samples < 2:
            raise ValueError(
                f"QA task: num_samples={self.num_samples} but semantic agreement needs K ≥ 2 sampled answers "
                "(entropy confidence 1 − SE/log K is undefined for K = 1). Use --metadata '{\"num_samples\": 10}', "
                "or the verbalized variant for single-answer confidence.")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_metadata(cls, metadata: dict | None) -> QASettings:
        """Field defaults < ``metadata`` (the task's merged metadata); keys of other tasks are ignored.

        >>> s = QASettings.from_metadata({"num_samples": 5, "judges": "f1+embed"})
        >>> s.num_samples, s.judges, s.mode
        (5, ('f1', 'embed'), 'agreement')
        """
        meta = metadata or {}
        if not isinstance(meta, dict):
            raise ValueError(f"QA task: metadata must be a mapping, got {type(meta).__name__} ({str(meta)[:40]!r})")
        s = cls(**{k: meta[k] for k in cls.keys() if k in meta})
        if "top_k" in meta and "sample_top_k" not in meta:
            log.warning("QA task: metadata top_k=%r is Semantic Softmax's K and does not change QA sampling; the "
                        "samples' top-k is sample_top_k (now %s)", meta["top_k"], s.sample_top_k)
        return s

    def as_metadata(self) -> dict:
        """Every field as plain JSON values: ``from_metadata`` of it is ``self``."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @property
    def stated(self) -> bool:
        """One greedy answer with a stated confidence (no samples): modes verbalized, rlcr, rd."""
        return self.mode in STATED_MODES

