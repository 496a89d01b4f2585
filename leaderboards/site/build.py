"""Writing the site: every output built into a hidden folder next to ``out``, then swapped in atomically
(:func:`render`), one render per parent folder at a time, leftovers of killed renders cleaned up."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from ..processes import pid_alive
from ..ranking import TRUSTED, overall, rank_entries, tier_of
from .data import board_json
from .html import _entry_page, _index
from .plots import reliability_png, valid_png
from .rows import RenderError, entry_slug
from .tables import _markdown, csv_text
from .usable import _usable

_STATIC = Path(__file__).resolve().parent.parent / "static"
#: Top-level names a render writes into ``out``; anything else found there is the user's and is kept.
OWNED = frozenset({"index.html", "style.css", "board.js", "leaderboard.csv", "leaderboard.md", "board.json",
                   "entries"})
_DB_FILE = re.compile(r"\.(sqlite3?|db)(-journal|-wal|-shm)?$", re.IGNORECASE)


def split_views(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(full, partial, self-reported) rows of ranked entries: the default tables hold verified and spot-checked
    model rows (and the board's reference rows); self-reported model rows, whatever their coverage, are in a
    table of their own, ranked only among themselves and shown only by the "self-reported" toggle."""
    trusted = [r for r in rows if r["is_reference"] or tier_of(r) in TRUSTED]
    selfrep = [r for r in rows if not r["is_reference"] and tier_of(r) not in TRUSTED]
    return ([r for r in trusted if r["coverage"] == "full"], [r for r in trusted if r["coverage"] != "full"],
            selfrep)


def _build(entries: list[dict], out: Path, old: Path | None, generated: str, skipped: list[str]) -> dict:
    """Write the whole site into the (new, empty) folder ``out``; diagrams of ``old`` that are still valid
    PNGs are reused."""
    (out / "entries").mkdir(parents=True, exist_ok=True)
    for name in ("style.css", "board.js"):
        shutil.copyfile(_STATIC / name, out / name)
    rows = rank_entries(entries)
    full, partial, selfrep = split_views(rows)
    groups, vgroups = overall(rows), overall(rows, verified_only=True)
    short_skipped = [m.split(":", 1)[0] for m in skipped]
    (out / "index.html").write_text(_index(full, partial, groups, vgroups, generated, short_skipped, selfrep),
                                    encoding="utf-8")

    pages: dict[str, list[dict]] = {}
    for r in rows:
        pages.setdefault(entry_slug(r["content_hash"], r["task"]), []).append(r)
    # reference rows deduplicated away from the index still belong on their own submission's page
    shown = {r["entry_id"] for r in rows}
    for r in entries:
        if r["is_reference"] and r["entry_id"] not in shown:
            pages.setdefault(entry_slug(r["content_hash"], r["task"]), []).append(r)
    n_png = 0
    for slug, prow in pages.items():
        prow.sort(key=lambda r: (r["is_reference"], r["filter"]))
        pngs = {}
        for i, r in enumerate(prow):
            name = f"{slug}-{i}.png"
            target = out / "entries" / name
            cached = old / "entries" / name if old is not None else None
            if cached is not None and valid_png(cached):
                _link_or_copy(cached, target)
            else:
                reliability_png(r["conf"], r["correct"], r["board"]["n_bins"], r["filter"],
                                f"{r['task']} / {r['filter']}", target)
                n_png += 1
            pngs[r["entry_id"]] = name
        (out / "entries" / f"{slug}.html").write_text(_entry_page(slug, prow, pngs), encoding="utf-8")

    (out / "leaderboard.csv").write_text(csv_text(rows), encoding="utf-8")
    (out / "leaderboard.md").write_text(_markdown(full, partial, groups, vgroups, selfrep), encoding="utf-8")
    (out / "board.json").write_text(board_json(rows, groups, vgroups, generated, skipped), encoding="utf-8")
    return {"rows": len(rows), "full": len(full), "partial": len(partial), "pages": len(pages),
            "pngs_drawn": n_png, "skipped": skipped}


def _link_or_copy(src: Path, dst: Path) -> None:
    # a hard link shares the bytes without copying; the old name goes away with the old site
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _foreign(out: Path) -> list[Path]:
    """Top-level entries of ``out`` that a render did not write (kept across renders, e.g. a README)."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if p.name not in OWNED)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False where not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False  # e.g. a file system without exchange support: fall back to two renames
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(new: Path, out: Path) -> None:
    """Make ``new`` the folder at ``out``. With an existing ``out`` the two are exchanged in one step; where
    that is not possible the old one is moved aside first (a kill between the two renames leaves it under
    ``.<name>.old-*``, which the next render moves back)."""
    if not out.exists():
        os.rename(new, out)
        return
    if _exchange(new, out):
        shutil.rmtree(new, ignore_errors=True)  # ``new`` now holds the previous site
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
    os.rmdir(aside)
    os.rename(out, aside)
    os.rename(new, out)
    shutil.rmtree(aside, ignore_errors=True)


def _cleanup(out: Path) -> None:
    """Remove what killed renders left next to ``out``, and restore a site moved aside by an interrupted swap."""
    pat = re.compile(re.escape(f".{out.name}.") + r"(render|old)-(\d+)-")
    leftovers = [p for p in out.parent.iterdir() if pat.match(p.name)]
    for p in leftovers:
        kind, pid = pat.match(p.name).groups()
        if pid_alive(int(pid)) and int(pid) != os.getpid():
            continue  # another render is still working there
        if kind == "old" and not out.exists():
            os.rename(p, out)
        else:
            shutil.rmtree(p, ignore_errors=True)


@contextlib.contextmanager
def _lock(out: Path):
    """One render per parent folder at a time (an flock on the parent folder itself, so no lock file is
    left behind), so two renders never swap the same folder at once."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, renders are still atomic one by one
        yield
        return
    fd = os.open(out.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr, flush=True)


def render(entries: list[dict], out: str | Path, generated: str | None = None, *,
           warn: Callable[[str], None] | None = _warn) -> dict:
    """Write the site into ``out``: index.html, entries/<slug>.html + PNGs, leaderboard.csv/.md, board.json.

    Atomic: everything is written into a hidden folder next to ``out`` (``.<name>.render-<pid>-*``), then
    swapped in; files in ``out`` that a render does not write (a README, the database) are carried over.
    A failure or a kill at any point leaves the previous site byte for byte; leftovers are removed by the
    next render. PNGs are named by entry content (slug + filter index) and reused from the previous site when
    they are complete PNGs, so re-rendering a grown board only draws the new diagrams.

    A stored submission whose rows cannot be shown (wrong types, values that are not numbers) is left out
    whole, with one ``warn`` line naming it and the field, and a note on the index page: one bad row must
    not freeze the board for everyone else (issue 12, D6). Raises :class:`RenderError` (one line; exit 2 in
    the CLI) when ``out`` cannot hold a site or writing fails. Returns counts, and ``skipped``: the messages.
    """
    out = Path(out).absolute()
    if out.is_symlink():
        out = out.resolve()  # swap the real folder, keep the link
    if out.exists() and not out.is_dir():
        raise RenderError(f"--out {out} is a file, not a folder; pass a folder for the site")
    dirs = [p.name for p in _foreign(out) if p.is_dir() and not p.is_symlink()]
    if dirs:
        raise RenderError(f"--out {out} holds folders a render does not write ({', '.join(dirs[:3])}); "
                          "render into an empty or new folder")
    dbs = [p.name for p in _foreign(out) if _DB_FILE.search(p.name)]
    if dbs:
        # the database holds the spot-check secret: it must never sit where the site is served from
        raise RenderError(f"--out {out} holds a database file ({', '.join(dbs[:3])}); move it out of the site "
                          "folder (the board database must never be published) and render again")
    good, skipped = _usable(list(entries))
    for msg in skipped:
        if warn is not None:
            warn(f"{msg}; it is left out of the site (fix or remove it in the board database)")
    generated = generated or datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with _lock(out):
            _cleanup(out)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.render-{os.getpid()}-", dir=out.parent))
            try:
                os.chmod(tmp, 0o755)  # mkdtemp makes it private; the site is meant to be read by others
                stats = _build(good, tmp, out if out.is_dir() else None, generated, skipped)
                for p in _foreign(out):
                    if p.is_symlink():
                        os.symlink(os.readlink(p), tmp / p.name)
                    else:
                        _link_or_copy(p, tmp / p.name)
                _swap_in(tmp, out)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except OSError as exc:
        raise RenderError(f"could not write the site to {out}: {exc.strerror or exc}; the previous site is "
                          "unchanged") from exc
    return stats
