"""Model and method names as the board stores and shows them.

A name is NFC-normalised (so a decomposed "é" and a composed one are one name) and refused if it holds a
character that changes how a name looks without being visible: control characters (C0, DEL, C1), bidi
overrides and isolates, zero-width characters and other format characters (Unicode category ``Cf``), line and
paragraph separators, or leading/trailing whitespace (a trailing newline made "base" and "base\\n" two methods).
Each refusal raises :class:`~leaderboards.errors.SubmissionError` naming the character and the fix.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import SubmissionError

__all__ = ["MAX_MODEL_NAME", "KNOWN_METHODS", "model_name", "method", "check_text"]

MAX_MODEL_NAME = 200
KNOWN_METHODS = ("base", "semsoft", "temperature", "csr", "rlvr", "rlcr")
_METHOD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}")
#: Categories refused anywhere in a name: Cc control (C0, DEL, C1), Cf format (bidi controls, zero-width
#: space/joiners, BOM, soft hyphen), Zl/Zp line and paragraph separators, Co private use, Cn unassigned, Cs.
_BAD_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"}


def check_text(s: object, what: str, max_len: int) -> str:
    """``s`` NFC-normalised, or SubmissionError if it is not a clean one-line name of 1..max_len characters."""
    if not isinstance(s, str):
        raise SubmissionError(f"{what} must be a string, got {type(s).__name__}")
    n = unicodedata.normalize("NFC", s)
    for i, c in enumerate(n):
        cat = unicodedata.category(c)
        if cat in _BAD_CATEGORIES:
            label = unicodedata.name(c, "control character")
            raise SubmissionError(
                f"{what} {s[:40]!r} holds an invisible or control character at position {i} "
                f"(U+{ord(c):04X} {label}, category {cat}); use plain printable characters"
            )
    if not n or n != n.strip():
        raise SubmissionError(f"{what} {s[:40]!r} is empty or has leading/trailing whitespace; strip it")
    if len(n) > max_len:
        raise SubmissionError(f"{what} is {len(n)} characters long; the limit is {max_len}")
    return n


def model_name(s: object) -> str:
    """A model name as stored: NFC, 1-200 printable characters, no control/bidi/zero-width characters."""
    return check_text(s, "model name", MAX_MODEL_NAME)


def method(s: object) -> str:
    """A method name as stored: a short identifier (letters, digits, ``_ . + -``), e.g. one of
    :data:`KNOWN_METHODS`."""
    n = check_text(s, "method", 40)
    if not _METHOD_RE.fullmatch(n):
        raise SubmissionError(
            f"method {n[:40]!r} must be a short identifier (letters, digits, _ . + -), e.g. one of "
            + ", ".join(KNOWN_METHODS)
        )
    return n
