"""THE rows table: the side-by-side rows (lm-eval filters) of a Semantic Softmax run, once.

A semsoft task answers one forward pass per document; named filters turn it into rows (Contract 3 of
docs/ARCHITECTURE.md). Every consumer reads the rows from here: the task's default ``filter_list``, the
reference-predictor filter, the report's and the summary's row order, the board's reference rows. Pure data, no
lm-eval import.

* ``kind``: ``baseline`` (the constrained softmax), ``semsoft`` (P_sem at the primary τ), ``sweep``
  (``semsoft_tau<τ>``, one per extra τ), ``recalibrated`` (cross-fitted temperature scaling of ``source``),
  ``tuned`` (``semsoft_tuned``), ``reference`` (model-free predictors the board computes itself), ``stock``
  (lm-eval's own ``multiple_choice`` row of a ``*_base`` task, whose filter lm-eval names ``none``);
* ``source``: which distribution of the response the row starts from (``baseline`` / ``semsoft``);
* ``order``: reading order, shared by every table (the baseline first, the references last).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Row", "ROWS", "REFERENCES", "STOCK_FILTER", "row", "row_order", "display_name", "sweep_name",
           "tau_of"]


@dataclass(frozen=True)
class Row:
    """One side-by-side row of a semsoft run."""

    name: str
    kind: str
    order: int
    source: str | None = None
    label: str | None = None  # how tables show it, when not its filter name

    @property
    def reference(self) -> bool:
        return self.kind == "reference"


#: lm-eval's name for the one filter of a task without a filter_list (the ``*_base`` tasks)
STOCK_FILTER = "none"

ROWS: tuple[Row, ...] = (
    Row(STOCK_FILTER, "stock", 0, label="base (loglikelihood)"),
    Row("constrained", "baseline", 1, "baseline"),
    Row("semsoft", "semsoft", 2, "semsoft"),
    # semsoft_tau<τ> rows (kind "sweep") sit at order 3, by τ
    Row("constrained_ts", "recalibrated", 4, "baseline"),
    Row("semsoft_ts", "recalibrated", 5, "semsoft"),
    Row("semsoft_tuned", "tuned", 6),
    Row("prior", "reference", 8),
    Row("majority", "reference", 9),
    Row("uniform", "reference", 10),
)
_BY_NAME = {r.name: r for r in ROWS}
#: the model-free reference rows, in order (the board recomputes these itself)
REFERENCES: tuple[str, ...] = tuple(r.name for r in ROWS if r.reference)
_SWEEP = re.compile(r"semsoft_tau(-?[0-9.e+-]+)")
_OTHER_ORDER = 7  # rows the table does not know (a user's own filter, report-made ``+T`` rows)


def sweep_name(tau_key: str) -> str:
    """The filter name of one τ of a sweep (``tau_key``: :func:`semcal_eval.semsoft.scoring.tau_key`)."""
    return f"semsoft_tau{tau_key}"


def tau_of(name: str) -> float | None:
    """τ of a sweep row's name, else None.

    >>> tau_of("semsoft_tau0.3"), tau_of("semsoft")
    (0.3, None)
    """
    m = _SWEEP.fullmatch(name)
    return float(m.group(1)) if m else None


def row(name: str) -> Row | None:
    """The table's row of a filter name (a sweep row is made on the fly), or None for an unknown name."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if tau_of(name) is not None:
        return Row(name, "sweep", 3, "semsoft")
    return None


def row_order(names) -> list[str]:
    """Filter names in reading order: base, constrained, semsoft, the τ sweep (by τ), the temperature-scaled
    rows, semsoft_tuned, anything else (``+T`` rows of the report next to their source), then prior, majority,
    uniform.

    >>> row_order(["uniform", "semsoft_ts", "prior", "semsoft_tau0.3", "semsoft", "semsoft_tau0.1", "constrained"])
    ['constrained', 'semsoft', 'semsoft_tau0.1', 'semsoft_tau0.3', 'semsoft_ts', 'prior', 'uniform']
    """
    def key(name: str):
        r = row(name) or row(name.split("+")[0])
        if r is None:
            return (_OTHER_ORDER, 0.0, name)
        derived = "+" in name  # a report-made row (``constrained+T(val)``) right after its source
        return (r.order + (0.5 if derived else 0.0), tau_of(r.name) or 0.0, name)

    return sorted(names, key=key)


def display_name(name: str) -> str:
    """How a table shows filter ``name`` (lm-eval's ``none`` of a stock task reads ``base (loglikelihood)``)."""
    r = row(name)
    return r.label if r is not None and r.label else name
