"""semcal_eval.plots: PNGs are written, valid and of plausible size; bad input is rejected."""

import struct

import numpy as np
import pytest
from matplotlib.figure import Figure

from semcal_eval import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, "not a PNG"
    assert data[12:16] == b"IHDR"
    w, h = struct.unpack(">II", data[16:24])
    assert data.rstrip(b"\x00")[-8:-4] == b"IEND"
    return w, h, len(data)


def _series(seed, n=400, over=0.0):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.3, 1.0, n)
    correct = (rng.uniform(size=n) < np.clip(conf - over, 0, 1)).astype(int)
    return conf, correct


def test_reliability_diagram_png(tmp_path):
    out = plots.reliability_diagram(
        tmp_path / "sub" / "rel.png",
        {"baseline": _series(0, over=0.25), "semsoft": _series(1)},
        n_bins=15,
    )
    w, h, size = _png_size(out)
    assert 400 < w < 1500 and 500 < h < 1500 and size > 20_000


def test_reliability_diagram_edge_cases(tmp_path):
    # confidences exactly 0 and 1, n = 1 series, equal-mass bins, most bins empty
    out = plots.reliability_diagram(
        tmp_path / "edge.png",
        {"ones": ([1.0, 1.0, 0.0], [1, 0, 0]), "single": ([0.7], [1])},
        scheme="mass",
    )
    _png_size(out)
    fig = plots.reliability_diagram(None, {"a": _series(2)})
    assert isinstance(fig, Figure)
    ax = Figure().add_subplot()
    assert plots.reliability_diagram(ax, {"a": _series(3)}) is ax
    with pytest.raises(ValueError, match="NaN"):
        plots.reliability_diagram(tmp_path / "x.png", {"a": ([0.5, np.nan], [1, 0])})
    with pytest.raises(ValueError, match="non-empty"):
        plots.reliability_diagram(tmp_path / "x.png", {})
    with pytest.raises(ValueError, match=".png"):
        plots.reliability_diagram(tmp_path / "x.pdf", {"a": _series(4)})


def test_confidence_histogram_sweep_and_scatter(tmp_path):
    w, h, _ = _png_size(plots.confidence_histogram(tmp_path / "h.png", {"a": _series(5)[0], "b": _series(6)[0]}))
    assert w > 300 and h > 200
    taus = [0.1, 0.3, 1.0, 3.0]
    out = plots.sweep_plot(
        taus,
        {"ece_uw15": [0.2, 0.1, 0.05, 0.12], "acc": {"semsoft": [0.6, 0.61, 0.6, 0.58], "baseline": [0.6] * 4},
         "auroc_conf": [0.7, np.nan, 0.72, 0.71]},
        tmp_path / "sweep.png", logx=True,
    )
    w, h, _ = _png_size(out)
    assert h > w * 0.8  # three stacked panels
    with pytest.raises(ValueError, match="values for 4 xs"):
        plots.sweep_plot(taus, {"ece": [0.1, 0.2]}, tmp_path / "bad.png")
    rng = np.random.default_rng(7)
    t = rng.integers(0, 11, 300) / 10
    p = np.clip(t + rng.normal(0, 0.15, 300), 0, 1)
    out = plots.soft_scatter({"model": p, "constant": np.full(300, 0.3)}, t, tmp_path / "soft.png")
    _png_size(out)
    with pytest.raises(ValueError, match="shape mismatch"):
        plots.soft_scatter({"m": p[:10]}, t, tmp_path / "bad.png")


def test_legends_never_cover_the_data():
    """Issue 24: the legend sat on the tallest bar. Every drawn bar, point and line must lie outside it."""
    from matplotlib.patches import Rectangle

    conf = np.r_[np.full(30, 0.05), np.full(10, 0.95)]  # a full-height bar in the top-left corner, where legends go
    series = {"constrained": (conf, np.r_[np.ones(30), np.zeros(10)].astype(int)),
              "semsoft": (conf[::-1], np.r_[np.zeros(10), np.ones(30)].astype(int)),
              "semsoft_tuned": _series(5, n=40)}
    figs = [plots.reliability_diagram(None, series),
            plots.confidence_histogram(None, {k: v[0] for k, v in series.items()}),
            plots.soft_scatter({"a": conf}, np.clip(conf + 0.01, 0, 1))]
    for fig in figs:
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        for ax in fig.axes:
            leg = ax.get_legend()
            if leg is None:
                continue
            box = leg.get_window_extent(r)
            artists = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0] + ax.lines
            assert artists
            for a in artists:
                assert not box.overlaps(a.get_window_extent(r)), (ax.get_title(), a)
