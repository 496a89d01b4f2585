"""Source selection: a local data mirror or the Hugging Face hub.

The local data root is the ``data_dir`` argument, else ``$SEMCAL_DATA_DIR``; no root (or the value ``"hub"``)
means the hub.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "SEMCAL_DATA_DIR"
HUB = "hub"  # data_dir value that forces the hub even when $SEMCAL_DATA_DIR is set


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The local data root, or None for the hub: ``data_dir`` if given (``"hub"`` → None), else
    ``$SEMCAL_DATA_DIR`` (empty or ``hub`` → None). A root that does not exist is an error."""
    if data_dir is None:
        data_dir = os.environ.get(ENV_VAR) or None
        origin = f"${ENV_VAR}"
    else:
        origin = "data_dir"
    if data_dir is None or str(data_dir).strip() in ("", HUB):
        return None
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"{origin}={str(data_dir)!r} is not a directory. Point it at the local data mirror "
            f"(one folder per dataset, e.g. <dir>/goemotions/train.tsv), or unset it to read the hub."
        )
    return root
