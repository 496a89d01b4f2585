"""Whether a process of this host is still running: read by the evaluation queue (a job whose worker died is
re-queued) and by the site build (a killed render's leftovers are removed)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists on this host: ``kill(pid, 0)`` delivers no signal, it only checks. A
    process owned by another user answers PermissionError, and is alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
