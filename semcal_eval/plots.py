"""Calibration plots (matplotlib, Agg; no pyplot, so no global backend or GUI state is touched).

Every function takes an ``ax_or_path``: a matplotlib ``Axes`` to draw into, a file path (a PNG is
written and the path returned), or None (a new ``Figure`` is returned).

* :func:`reliability_diagram` - several series (e.g. baseline vs Semantic Softmax) on one diagram:
  per-bin accuracy bars, the gap to the mean confidence hatched, the diagonal, ECE in the legend, and
  (for a new figure) a per-bin count histogram underneath.
* :func:`confidence_histogram` - distribution of confidences per series.
* :func:`sweep_plot` - metrics against a swept parameter (e.g. the Semantic-Softmax tau).
* :func:`soft_scatter` - predicted P(positive) against the annotator fraction, with binned means.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .core import metrics as M

__all__ = ["reliability_diagram", "confidence_histogram", "sweep_plot", "soft_scatter", "risk_coverage_plot"]

_DPI = 120


def _new_fig(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _single_axes(ax_or_path: Any, w: float, h: float) -> tuple[Figure | None, Axes]:
    """Draw into the caller's Axes (no figure of ours), or into a new one-panel figure of w x h inches."""
    if isinstance(ax_or_path, Axes):
        return None, ax_or_path
    fig = _new_fig(w, h)
    return fig, fig.add_subplot(1, 1, 1)


def _finish(fig: Figure, ax_or_path: Any) -> Any:
    if ax_or_path is None:
        return fig
    path = Path(ax_or_path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"plots are written as PNG; give a path ending in .png, got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write a hidden temporary file next to the target and rename it into place: a process killed while
    # drawing leaves no 0-byte or truncated PNG under the real name (the board reuses diagrams by name).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fig.savefig(fh, format="png", dpi=_DPI, bbox_inches="tight")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _legend_outside(ax: Axes, fontsize: int = 8) -> None:
    """The legend to the right of the axes, so it never covers a bar or a point (the saved figure's tight
    bounding box takes it in)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=fontsize, frameon=True)


def _check_series(series: Mapping, what: str) -> None:
    if not isinstance(series, Mapping) or not series:
        raise ValueError(f"{what} must be a non-empty dict name -> data")


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def reliability_diagram(
    ax_or_path: Axes | str | Path | None,
    series: Mapping[str, tuple[Sequence[float], Sequence[int]]],
    n_bins: int = 15,
    scheme: str = "uniform",
    title: str | None = None,
) -> Any:
    """Reliability diagram of ``series`` = {name: (conf, correct)}; bins as in :mod:`semcal_eval.core.metrics`.

    Bars: per-bin accuracy (one bar per series, side by side within the bin); hatched bar: the gap
    between accuracy and mean confidence; legend: ECE and n. Empty bins draw nothing.
    """
    _check_series(series, "series")
    tables = {name: M.reliability_table(y_true=y, y_prob=c, n_bins=n_bins, scheme=scheme)
              for name, (c, y) in series.items()}
    eces = {name: M.ece(y_true=y, y_prob=c, n_bins=n_bins, scheme=scheme) for name, (c, y) in series.items()}
    if isinstance(ax_or_path, Axes):
        ax, hax, fig = ax_or_path, None, None
    else:
        fig = _new_fig(6.0, 6.8)
        gs = fig.add_gridspec(2, 1, height_ratios=[3.2, 1], hspace=0.08)
        ax = fig.add_subplot(gs[0])
        hax = fig.add_subplot(gs[1], sharex=ax)
    k = len(series)
    colors = _colors(k)
    for j, (name, t) in enumerate(tables.items()):
        lo, hi = t["lower"], t["upper"]
        width = (hi - lo) / k
        left = lo + j * width
        keep = t["count"] > 0
        n = int(t["count"].sum())
        ax.bar(left[keep], t["acc"][keep], width=width[keep], align="edge", color=colors[j], alpha=0.75,
               edgecolor="black", linewidth=0.4, label=f"{name} (ECE {eces[name]:.3f}, n={n})")
        gap = t["conf"][keep] - t["acc"][keep]
        ax.bar(left[keep], gap, bottom=t["acc"][keep], width=width[keep], align="edge", fill=False,
               edgecolor=colors[j], hatch="///", linewidth=0.6)
        ax.plot(t["conf"][keep], t["acc"][keep], "o", color=colors[j], markersize=3,
                markeredgecolor="black", markeredgewidth=0.3)
        if hax is not None:
            hax.bar(left, t["count"], width=width, align="edge", color=colors[j], alpha=0.75)
    ax.plot([0, 1], [0, 1], "--", color="gray", linewidth=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (hatched: gap to mean confidence)")
    _legend_outside(ax)
    ax.set_title(title or f"Reliability diagram ({n_bins} {'equal-width' if scheme == 'uniform' else 'equal-mass'} bins)")
    ax.grid(alpha=0.3, linewidth=0.5)
    if hax is not None:
        hax.set_yscale("symlog", linthresh=1)
        hax.set_ylabel("count")
        hax.set_xlabel("confidence")
        hax.grid(alpha=0.3, linewidth=0.5)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel("confidence")
    return ax if fig is None else _finish(fig, ax_or_path)


def confidence_histogram(
    ax_or_path: Axes | str | Path | None,
    series: Mapping[str, Sequence[float]],
    n_bins: int = 20,
    title: str = "Confidence distribution",
) -> Any:
    """Step histograms of confidences, one per series, with each series' mean marked."""
    _check_series(series, "series")
    data = {name: M._unit(c, f"confidences of {name!r}") for name, c in series.items()}
    fig, ax = _single_axes(ax_or_path, 6.0, 4.0)
    edges = np.linspace(0, 1, M._check_bins(n_bins) + 1)
    for color, (name, c) in zip(_colors(len(data)), data.items()):
        ax.hist(c, bins=edges, histtype="step", linewidth=1.5, color=color,
                weights=np.full(len(c), 1 / len(c)), label=f"{name} (mean {c.mean():.3f})")
        ax.axvline(c.mean(), color=color, linestyle=":", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of documents")
    ax.set_title(title)
    _legend_outside(ax)
    ax.grid(alpha=0.3, linewidth=0.5)
    return ax if fig is None else _finish(fig, ax_or_path)


def sweep_plot(
    xs: Sequence[float],
    ys_by_metric: Mapping[str, Sequence[float] | Mapping[str, Sequence[float]]],
    ax_or_path: str | Path | None = None,
    xlabel: str = "τ",
    title: str | None = None,
    logx: bool = False,
) -> Any:
    """One panel per metric against the swept ``xs``; a metric maps to ys or to {series: ys}.

    NaN values are drawn as gaps (an undefined metric at some x stays visible as missing).
    """
    _check_series(ys_by_metric, "ys_by_metric")
    x = M._float_1d(xs, "xs")
    if isinstance(ax_or_path, Axes):
        raise ValueError("sweep_plot draws one panel per metric; pass a .png path or None, not an Axes")
    k = len(ys_by_metric)
    fig = _new_fig(6.0, 1.0 + 2.0 * k)
    axes = fig.subplots(k, 1, sharex=True, squeeze=False)[:, 0]
    for ax, (metric, ys) in zip(axes, ys_by_metric.items()):
        lines = ys if isinstance(ys, Mapping) else {metric: ys}
        for color, (name, y) in zip(_colors(len(lines)), lines.items()):
            yy = np.asarray(y, dtype=np.float64)
            if yy.shape != x.shape:
                raise ValueError(f"{metric}/{name}: {yy.shape[0] if yy.ndim else 0} values for {len(x)} xs")
            if np.isinf(yy).any():
                raise ValueError(f"{metric}/{name} contains inf")
            ax.plot(x, yy, "o-", color=color, markersize=3, label=name)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3, linewidth=0.5)
        if isinstance(ys, Mapping):
            _legend_outside(ax, fontsize=7)
        if logx:
            ax.set_xscale("log")
    axes[-1].set_xlabel(xlabel)
    axes[0].set_title(title or f"Sweep over {xlabel}")
    return _finish(fig, ax_or_path)


def soft_scatter(
    p_by_series: Mapping[str, Sequence[float]],
    t: Sequence[float],
    ax_or_path: Axes | str | Path | None = None,
    n_bins: int = 10,
    title: str = "Predicted P(positive) vs annotator fraction",
) -> Any:
    """Scatter of predicted p against annotator fraction t per series, with per-bin mean p (bins on t)
    and the diagonal; the legend gives the soft ECE and Spearman correlation."""
    _check_series(p_by_series, "p_by_series")
    tt = M._unit(t, "t")
    fig, ax = _single_axes(ax_or_path, 5.5, 5.5)
    rng = np.random.default_rng(0)  # jitter only spreads the discrete annotator fractions visually
    jit = rng.uniform(-0.01, 0.01, len(tt))
    edges = np.linspace(0, 1, M._check_bins(n_bins) + 1)
    tb = np.searchsorted(edges[1:-1], tt, side="left")
    for color, (name, p) in zip(_colors(len(p_by_series)), p_by_series.items()):
        pp, _ = M._p_t(p, tt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", M.SemcalMetricWarning)
            rho = M.spearman(pp, tt)
        ax.scatter(np.clip(tt + jit, 0, 1), pp, s=6, alpha=0.35, color=color, linewidths=0)
        cnt = np.bincount(tb, minlength=n_bins)
        mp = np.bincount(tb, weights=pp, minlength=n_bins) / np.maximum(cnt, 1)
        mt = np.bincount(tb, weights=tt, minlength=n_bins) / np.maximum(cnt, 1)
        ok = cnt > 0
        ax.plot(mt[ok], mp[ok], "o-", color=color, markeredgecolor="black", markeredgewidth=0.3,
                label=f"{name} (soft ECE {M.soft_ece(y_true=tt, y_prob=pp):.3f}, ρ {rho:.2f})")
    ax.plot([0, 1], [0, 1], "--", color="gray", linewidth=1)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("annotator fraction t")
    ax.set_ylabel("predicted P(positive)")
    ax.set_title(title)
    _legend_outside(ax)
    ax.grid(alpha=0.3, linewidth=0.5)
    return ax if fig is None else _finish(fig, ax_or_path)


def risk_coverage_plot(
    ax_or_path: Axes | str | Path | None,
    series: Mapping[str, tuple[Sequence[float], Sequence[int]]],
    title: str | None = None,
) -> Any:
    """Risk–coverage curves of ``series`` = {name: (conf, correct)} on one axes (Geifman & El-Yaniv 2017):
    at coverage k/n, the error rate of the k most confident documents (ties: expected value over random
    tie-breaking, as :func:`semcal_eval.core.metrics.aurc`); the legend gives AURC and PRR. The dotted line is
    the random order (the overall error rate), the grey one the oracle (errors rejected first).
    """
    _check_series(series, "series")
    fig, ax = _single_axes(ax_or_path, 7.0, 5.0)
    colors = _colors(len(series))
    base = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", M.SemcalMetricWarning)
        for j, (name, (c, y)) in enumerate(series.items()):
            c, y = np.asarray(c, float), np.asarray(y, float)
            n = len(c)
            acc = M.rejection_curve(y_true=y, y_prob=c)[::-1]  # retained k = 1..n
            cov = np.arange(1, n + 1) / n
            ls = "-" if j < 10 else "--"
            ax.plot(cov, 1.0 - acc, ls, color=colors[j], linewidth=1.2,
                    label=f"{name} (AURC {M.aurc(y_true=y, y_prob=c):.3f}, PRR {M.prr(y_true=y, y_prob=c):.2f})")
            base = y
    if base is not None:
        n = len(base)
        k = np.arange(1, n + 1)
        ax.axhline(1.0 - base.mean(), linestyle=":", color="black", linewidth=1, label="random order")
        ax.plot(k / n, 1.0 - np.minimum(1.0, base.sum() / k), color="gray", linewidth=1, label="oracle")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("coverage (share of questions answered, most confident first)")
    ax.set_ylabel("risk (error rate of the answered)")
    ax.set_title(title or "Risk–coverage")
    # below the axes: with a dozen estimators an inside legend would cover the curves
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=7, frameon=False, ncol=2)
    ax.grid(alpha=0.3, linewidth=0.5)
    return ax if fig is None else _finish(fig, ax_or_path)
