"""The board's own rejection, and every error the CLI reports as one line with exit status 2."""

from __future__ import annotations

from semcal_eval.core.records import RecordError
from semcal_eval.runs import RunError

from .registry import RegistryError

__all__ = ["SubmissionError", "REJECTED"]


class SubmissionError(ValueError):
    """A submission the board refuses (unknown task or version, coverage, tampered numbers, duplicate);
    the message names the file, task, filter or metric and the fix."""


#: Errors that reject a command with a one-line message: the board's own, an unreadable lm-eval output
#: folder (:class:`semcal_eval.runs.RunError`), a malformed per-document record, a bad task folder.
REJECTED = (SubmissionError, RunError, RecordError, RegistryError)
