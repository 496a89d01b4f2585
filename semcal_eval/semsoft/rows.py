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
* ``order``: reading order, shared by every table (the baseline first, the references last);
* ``tau``: a sweep row's τ, a float carried from the task's parameters (the filter's ``semsoft_select`` step
  holds it, and the logged task config with it); never parsed back out of the row's name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row", "ROWS", "REFERENCES", "DERIVED", "STOCK_FILTER", "SWEEP_PREFIX", "row", "row_order", "display_name",
           "sweep_row", "sweep_taus", "tau_key"]


@dataclass(frozen=True)
class Row:
    """One side-by-side row of a semsoft run."""

    name: str
    kind: str
    order: int
    source: str | None = None
    label: str | None = None  # how tables show it, when not its filter name
    tau: float | None = None  # a sweep row's τ

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
#: the rows fitted or chosen on other documents of the run (cross-fitted temperature, tuned configuration): an
#: edit of their source row is amplified in them, so the board's near-duplicate test reads the raw rows only
DERIVED: tuple[str, ...] = tuple(r.name for r in ROWS if r.kind in ("recalibrated", "tuned"))
#: the name prefix of the τ-sweep rows (``semsoft_tau0.3``)
SWEEP_PREFIX = "semsoft_tau"
_OTHER_ORDER = 7  # rows the table does not know (a user's own filter, report-made ``+T`` rows)


def tau_key(tau: float) -> str:
    """Canonical string for τ, in sweep row names and as the JSON key of a logged response (0.2 → '0.2')."""
    return f"{float(tau):g}"


def sweep_row(tau: float) -> Row:
    """The row of one τ of a sweep: named ``semsoft_tau<τ>``, carrying τ as a float."""
    return Row(f"{SWEEP_PREFIX}{tau_key(tau)}", "sweep", 3, "semsoft", tau=float(tau))


def sweep_taus(filter_list) -> dict[str, float]:
    """``{row name: τ}`` of the sweep rows of a task's ``filter_list`` (as built, or as lm-eval logs it in the
    results' ``configs``), read from each row's typed ``semsoft_select`` step."""
    out = {}
    for f in filter_list or ():
        name = f.get("name", "") if isinstance(f, dict) else ""
        if not name.startswith(SWEEP_PREFIX):
            continue
        for step in f.get("filter") or ():
            if isinstance(step, dict) and step.get("function") == "semsoft_select" and step.get("tau") is not None:
                out[name] = float(step["tau"])
    return out


def row(name: str, taus: dict[str, float] | None = None) -> Row | None:
    """The table's row of a filter name, or None for an unknown name. A sweep row is made on the fly, with its
    τ from ``taus`` (:func:`sweep_taus` of the task's config) when given."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.startswith(SWEEP_PREFIX):
        return Row(name, "sweep", 3, "semsoft", tau=(taus or {}).get(name))
    return None


def row_order(names, taus: dict[str, float] | None = None) -> list[str]:
    """Filter names in reading order: base, constrained, semsoft, the τ sweep (by τ when ``taus`` gives it,
    else by name), the temperature-scaled rows, semsoft_tuned, anything else (``+T`` rows of the report next to
    their source), then prior, majority, uniform.

    >>> row_order(["uniform", "semsoft_ts", "prior", "semsoft_tau0.3", "semsoft", "semsoft_tau0.1", "constrained"])
    ['constrained', 'semsoft', 'semsoft_tau0.1', 'semsoft_tau0.3', 'semsoft_ts', 'prior', 'uniform']
    """
    def key(name: str):
        r = row(name, taus) or row(name.split("+")[0], taus)
        if r is None:
            return (_OTHER_ORDER, 0.0, name)
        derived = "+" in name  # a report-made row (``constrained+T(val)``) right after its source
        return (r.order + (0.5 if derived else 0.0), r.tau if r.tau is not None else 0.0, name)

    return sorted(names, key=key)


def display_name(name: str) -> str:
    """How a table shows filter ``name`` (lm-eval's ``none`` of a stock task reads ``base (loglikelihood)``)."""
    r = row(name)
    return r.label if r is not None and r.label else name
