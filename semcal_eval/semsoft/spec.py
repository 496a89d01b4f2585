"""Typed Semantic Softmax parameters, request and response; the defaults are defined here and nowhere else.

* :class:`SemSoftParams`: a task's hyper-parameters, from ``metadata.semsoft`` overridden by flat
  ``--metadata`` keys (``tau``, ``tau_sweep``, ``top_k``, ``label_embedding``, ``recalibrate``,
  ``reference_predictors``, ``tune``, ``tune_taus``, ``tune_top_k``, ``tune_embeddings``, ``tune_limit``,
  ``tune_by``);
  keys left out take the field defaults.
* :class:`SemSoftRequest`: what a task asks of a backend for one document (``Instance.args = (ctx, request)``).
* :class:`SemSoftResponse`: what the backend answers, parsed and checked once, in the backend.
* :class:`SemSoftRow`: what every semsoft filter returns for one document — the distribution of its row plus
  what a recalibrating or tuning filter fitted — and what ``process_results`` turns into the record.

The request crosses lm-eval as a plain dict (``to_dict`` / ``from_dict``): lm-eval logs ``arguments`` with
``json.dumps`` and hashes them for its request cache. The response and the rows stay typed objects from the
backend to ``process_results`` (lm-eval passes ``resps`` / ``filtered_resps`` along untouched, pickles them for
``--use_cache``, and logs them with ``str()``, which here gives compact JSON).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .rows import tau_key
from .scoring import LABEL_EMBEDDINGS, SemSoftError, check_taus, check_top_k, validate_labels
from .tuning import CRITERIA, GridPoint

__all__ = ["REQUEST_TYPE", "SemSoftParams", "SemSoftRequest", "SemSoftResponse", "SemSoftRow", "as_response"]

#: lm-eval request type (and the backend method) of Semantic Softmax
REQUEST_TYPE = "semsoft"


@dataclass(frozen=True)
class SemSoftParams:
    """Hyper-parameters of a semsoft task. τ=0.2, K=100 and first-token label embeddings were chosen on the
    GoEmotions validation split (docs/SWEEP.md)."""

    tau: float = 0.2
    tau_sweep: tuple[float, ...] = ()
    top_k: int = 100
    label_embedding: str = "first"
    recalibrate: bool = True
    reference_predictors: bool = True
    # The ``semsoft_tuned`` row's grid (docs/SWEEP.md): every (τ, K, embedding) is scored from the same
    # forward pass, on validation documents that are never reported (semcal_eval.semsoft.tuning).
    tune: bool = True
    tune_taus: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4)
    tune_top_k: tuple[int, ...] = (10, 50, 100, 500)
    tune_embeddings: tuple[str, ...] = ("first", "mean")
    tune_limit: int = 1000
    tune_by: str = "brier"

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_metadata(cls, metadata: dict | None) -> SemSoftParams:
        """Field defaults < ``metadata.semsoft`` < flat metadata keys; validated with errors naming the fix.

        A list given as ``tau`` is a sweep whose first value is the primary τ.

        >>> SemSoftParams.from_metadata({"tau": [0.3, 0.1], "top_k": 50}).taus
        (0.3, 0.1)
        """
        metadata = metadata or {}
        nested = metadata.get("semsoft") or {}
        if not isinstance(nested, dict):
            raise SemSoftError(f"metadata.semsoft must be a mapping, got {nested!r}")
        keys = cls.keys()
        unknown = set(nested) - set(keys)
        if unknown:
            raise SemSoftError(f"unknown metadata.semsoft key(s) {sorted(unknown)}: known keys are {list(keys)}")
        p: dict[str, Any] = {**nested, **{k: metadata[k] for k in keys if k in metadata}}
        tau = p.get("tau", cls.tau)
        sweep = list(p.get("tau_sweep") or [])
        if isinstance(tau, (list, tuple)):
            if not tau:
                raise SemSoftError("tau is an empty list: give a number in [-1, 1) or a list of them")
            tau, sweep = tau[0], list(tau[1:]) + sweep
        label_embedding = p.get("label_embedding", cls.label_embedding)
        if label_embedding not in LABEL_EMBEDDINGS:
            raise SemSoftError(f"label_embedding={label_embedding!r} is unknown: choose one of {LABEL_EMBEDDINGS}")
        # K's upper bound (the vocabulary) is the one check left to the backend, which knows the model.
        top_k = check_top_k(p.get("top_k", cls.top_k))
        taus = check_taus([tau, *sweep])
        grid = _tune_grid(p)
        sweep = tuple(dict.fromkeys(t for t in taus[1:] if t != taus[0]))  # each τ once
        return cls(tau=taus[0], tau_sweep=sweep, top_k=int(top_k), label_embedding=label_embedding,
                   recalibrate=bool(p.get("recalibrate", cls.recalibrate)),
                   reference_predictors=bool(p.get("reference_predictors", cls.reference_predictors)), **grid)

    def as_metadata(self) -> dict:
        """Every field as plain JSON values (``metadata.semsoft`` form): ``from_metadata`` of it is ``self``."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @property
    def grid(self) -> dict | None:
        """The tuning grid a request carries (None with ``tune: false``)."""
        if not self.tune:
            return None
        return {"taus": list(self.tune_taus), "top_k": list(self.tune_top_k),
                "label_embeddings": list(self.tune_embeddings)}

    @property
    def taus(self) -> tuple[float, ...]:
        """The primary τ, then the sweep's other values (duplicates of the primary dropped)."""
        return (self.tau, *[t for t in self.tau_sweep if t != self.tau])


def _as_tuple(name: str, value) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
        raise SemSoftError(f"{name}={value!r} must be a non-empty list, e.g. --metadata '{{\"{name}\": [...]}}'")
    return tuple(value)


def _tune_grid(p: dict) -> dict:
    """The ``tune*`` keys of a parameter mapping, validated (errors name the key and the fix)."""
    d = SemSoftParams
    taus = check_taus(list(_as_tuple("tune_taus", p.get("tune_taus", d.tune_taus))))
    ks = [check_top_k(k) for k in _as_tuple("tune_top_k", p.get("tune_top_k", d.tune_top_k))]
    embs = _as_tuple("tune_embeddings", p.get("tune_embeddings", d.tune_embeddings))
    bad = [e for e in embs if e not in LABEL_EMBEDDINGS]
    if bad:
        raise SemSoftError(f"tune_embeddings {bad} unknown: choose from {LABEL_EMBEDDINGS}")
    limit = p.get("tune_limit", d.tune_limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise SemSoftError(f"tune_limit={limit!r} must be a positive integer (validation documents to tune on)")
    by = p.get("tune_by", d.tune_by)
    if by not in CRITERIA:
        raise SemSoftError(f"tune_by={by!r} is unknown: choose one of {sorted(CRITERIA)} (default {d.tune_by!r})")
    return {"tune": bool(p.get("tune", d.tune)), "tune_by": by, "tune_taus": tuple(sorted(set(taus))),
            "tune_top_k": tuple(sorted(set(int(k) for k in ks))), "tune_embeddings": tuple(dict.fromkeys(embs)),
            "tune_limit": limit}


@dataclass(frozen=True)
class SemSoftRequest:
    """One document's request: the label continuations (target delimiter included), τ values, K, embedding."""

    choices: tuple[str, ...]
    taus: tuple[float, ...]
    top_k: int
    label_embedding: str
    grid: dict | None = None  # {"taus", "top_k", "label_embeddings"}: also score every grid configuration

    def __post_init__(self):
        # the labels are the document's own (doc_to_choice may differ per document), so they are checked here;
        # τ, K, the embedding and the grid were checked once, when SemSoftParams was built for the task
        validate_labels(list(self.choices))

    def check_vocab(self, vocab_size: int) -> None:
        """K ≤ the model's vocabulary, for the request's K and every K of its grid: the one bound the task,
        which does not know the model, leaves to the backend."""
        for k in (self.top_k, *(self.grid or {}).get("top_k", ())):
            check_top_k(k, vocab_size)

    def to_dict(self) -> dict:
        d = {"choices": list(self.choices), "tau": list(self.taus), "top_k": self.top_k,
             "label_embedding": self.label_embedding}
        if self.grid is not None:
            d["grid"] = self.grid
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SemSoftRequest:
        """Read a request dict (as built by :meth:`to_dict`); a missing key is an error, never a default."""
        missing = [k for k in ("choices", "tau", "top_k", "label_embedding") if k not in d]
        if missing:
            raise SemSoftError(f"semsoft request lacks {missing}; build it with SemSoftRequest(...).to_dict()")
        tau = d["tau"]
        return cls(tuple(d["choices"]), tuple(tau) if isinstance(tau, (list, tuple)) else (tau,), d["top_k"],
                   d["label_embedding"], d.get("grid"))


@dataclass
class SemSoftResponse:
    """One document's answer. ``baseline``: the constrained distribution over labels; ``semsoft``: P_sem per
    τ (keyed by the float τ); ``fallback``: per τ, True when every weight was 0 and the baseline was used;
    ``topk_mass``: Σ P(v) over the top K; ``collisions``: labels sharing a first token; ``top_tokens``: the
    five most probable next tokens with their probabilities; ``grid``: P_sem for every configuration of the
    request's tuning grid (keyed by :class:`semcal_eval.semsoft.tuning.GridPoint`, fallback rows already replaced by
    the baseline) — read by the ``semsoft_tuned`` filter and then dropped from the logged response."""

    baseline: list[float]
    semsoft: dict[float, list[float]] = field(default_factory=dict)
    fallback: dict[float, bool] = field(default_factory=dict)
    topk_mass: float = float("nan")
    collisions: list[list[str]] = field(default_factory=list)
    top_tokens: list[list] = field(default_factory=list)
    grid: dict[GridPoint, list[float]] = field(default_factory=dict)

    def probs(self, source: str, tau: float | None = None) -> list[float]:
        """The baseline (``source="baseline"``) or P_sem at τ (default: the first τ computed)."""
        if source == "baseline":
            return self.baseline
        if source != "semsoft":
            raise SemSoftError(f"source={source!r} must be 'baseline' or 'semsoft'")
        key = float(tau) if tau is not None else next(iter(self.semsoft))
        if key not in self.semsoft:
            raise SemSoftError(f"tau={key:g} was not computed (have {sorted(self.semsoft)}); add it to tau_sweep")
        return self.semsoft[key]

    def to_dict(self) -> dict:
        """The JSON form (what ``str()`` logs): τ keys as :func:`tau_key` strings, grid points as ``str()``."""
        d = asdict(self)
        d["semsoft"] = {tau_key(t): v for t, v in self.semsoft.items()}
        d["fallback"] = {tau_key(t): v for t, v in self.fallback.items()}
        d["grid"] = {str(g): v for g, v in self.grid.items()}
        return d

    def without_grid(self) -> SemSoftResponse:
        """The response as logged: the tuning grid (hundreds of distributions) is read by ``semsoft_tuned`` and
        then dropped; the chosen configuration's probabilities are that row's filtered response."""
        return replace(self, grid={}) if self.grid else self

    def __str__(self) -> str:  # lm-eval logs resps with str(): compact JSON, machine-readable
        return json.dumps({k: v for k, v in self.to_dict().items() if k != "grid" or v}, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict) -> SemSoftResponse:
        """Read the logged JSON form back (τ keys to floats at this JSON boundary; a logged response carries no
        grid, which ``semsoft_tuned`` reads in memory only)."""
        if not isinstance(d, dict) or "baseline" not in d:
            raise SemSoftError(f"not a semsoft response (needs 'baseline'): {str(d)[:80]!r}")
        if d.get("grid"):
            raise SemSoftError("a logged semsoft response carries no tuning grid; read the row's filtered_resps")
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d and f.name != "grid"}
        for k in ("semsoft", "fallback"):
            if k in kw:
                kw[k] = {float(t): v for t, v in kw[k].items()}
        return cls(**kw)


def as_response(r) -> SemSoftResponse:
    """``r`` itself when it is a :class:`SemSoftResponse` (what a semsoft backend returns); otherwise an error
    naming the two ways it happens."""
    if isinstance(r, SemSoftResponse):
        return r
    raise SemSoftError(
        f"a semsoft filter got {type(r).__name__} {str(r)[:60]!r}, not a SemSoftResponse: a semsoft backend's "
        "semsoft() must return SemSoftResponse objects (semcal_eval.semsoft.spec); a request cache written by an "
        "older semcal holds dicts — delete the --use_cache file and rerun"
    )


@dataclass(frozen=True)
class SemSoftRow:
    """One document's row of one filter: ``probs`` over the labels; ``temperature`` / ``at_bound`` / ``fold``
    when the row was temperature-scaled on the other fold; ``tuned`` (the ``tuned_*`` record fields) when its
    configuration was chosen on other documents. Built by the filters only; read by ``process_results``."""

    probs: tuple[float, ...]
    temperature: float | None = None
    at_bound: bool = False
    fold: int | None = None
    tuned: dict | None = None

    def __post_init__(self):
        object.__setattr__(self, "probs", tuple(float(p) for p in self.probs))

    def __str__(self) -> str:  # lm-eval logs filtered_resps with str()
        d = {"probs": list(self.probs)}
        if self.temperature is not None:
            d.update(temperature=self.temperature, at_bound=self.at_bound, fold=self.fold)
        if self.tuned:
            d.update(self.tuned)
        return json.dumps(d, separators=(",", ":"))
