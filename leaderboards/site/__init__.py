"""Static site, Markdown and CSV exports of the board, one module per output:

* :mod:`.html`: ``index.html`` and ``entries/<slug>.html`` (plain HTML + one JS + one CSS file, no CDN, no
  inline script; a Content-Security-Policy forbids inline and foreign scripts, as a second line behind
  escaping);
* :mod:`.tables`: ``leaderboard.csv`` and ``leaderboard.md``;
* :mod:`.data`: ``board.json``;
* :mod:`.plots`: the reliability diagram PNGs;

with :mod:`.rows` (what a row shows in every output), :mod:`.usable` (which stored entries can be shown) and
:mod:`.build` (:func:`render`: the atomic write of the whole site).

Every untrusted string (model name, method, provenance) goes through :func:`html.escape` (in Markdown through
:func:`md_escape`); file names never come from them: an entry page is ``entries/<slug>.html`` with
``slug = sha256(content_hash, task)[:16]``. Rendering is atomic: the whole site is built in a hidden folder
next to ``out`` and then swapped in with one rename, so a render that fails or is killed leaves the previous
site exactly as it was. A stored submission whose data cannot be rendered is left out with a warning naming it
(see :func:`render`); it does not stop the rest of the board from updating.
"""

from .build import OWNED, render, split_views
from .html import _CSP, e
from .plots import reliability_png, valid_png
from .rows import COLUMNS, TIER_LABEL, TIER_MEANING, RenderError, entry_slug
from .tables import md_escape

__all__ = ["COLUMNS", "OWNED", "TIER_LABEL", "TIER_MEANING", "RenderError", "e", "entry_slug", "md_escape",
           "reliability_png", "render", "split_views", "valid_png"]
