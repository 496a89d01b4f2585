"""The site's PNGs: one reliability diagram per board row, and the check that a diagram left by an earlier
render is complete (so it is reused instead of drawn again)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the IEND chunk (length 0, type, CRC): a complete PNG ends so


def reliability_png(conf: np.ndarray, correct: np.ndarray, n_bins: int, name: str, title: str, path: Path) -> None:
    """Write the reliability diagram of one row (:func:`semcal_eval.plots.reliability_diagram`, which writes
    the file atomically)."""
    from semcal_eval.plots import reliability_diagram

    reliability_diagram(path, {name: (conf, correct)}, n_bins=n_bins, title=title)


def valid_png(path: Path) -> bool:
    """True for a regular (non-symlink) file holding a complete PNG: signature first, IEND chunk last.
    A diagram cut short by a killed render fails this and is drawn again instead of reused."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size < len(_PNG_SIG) + len(_PNG_END) + 25:
            return False
        with open(path, "rb") as fh:
            head = fh.read(len(_PNG_SIG))
            fh.seek(-len(_PNG_END), os.SEEK_END)
            return head == _PNG_SIG and fh.read() == _PNG_END
    except OSError:
        return False
