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

__all__ = ["MAX_MODEL_NAME", "KNOWN_METHODS", "model_name", "method", "submitter", "check_text", "check_looks"]

MAX_MODEL_NAME = 200
KNOWN_METHODS = ("base", "semsoft", "temperature", "csr", "csr_likelihood", "csr_spread", "rlvr", "rlcr", "rd")
_METHOD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}")
#: Categories refused anywhere in a name: Cc control (C0, DEL, C1), Cf format (bidi controls, zero-width
#: space/joiners, BOM, soft hyphen), Zl/Zp line and paragraph separators, Co private use, Cn unassigned, Cs.
_BAD_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"}
#: Letters that render as blank space although Unicode files them as letters or symbols (Hangul fillers,
#: the braille blank, the Mongolian vowel separator): a name of only these and spaces looks empty.
_BLANK_LOOKING = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800", "\u180e"}
#: Most combining marks in a row on one base character: real scripts stack up to 2-3 (Vietnamese, Hebrew
#: points), "zalgo" text dozens, drawing over neighbouring rows.
MAX_COMBINING_RUN = 3


def check_looks(n: str, what: str) -> str:
    """Refuse a name that renders blank, stacks more than MAX_COMBINING_RUN combining marks on one character,
    starts with a combining mark, or mixes scripts confusably (``confusable_homoglyphs.is_dangerous``: mixed
    scripts within one word AND a character that looks like one of another script, e.g. a Cyrillic "а" in
    "pаypal"; "模型 v2" mixes scripts across words and is kept)."""
    from confusable_homoglyphs import confusables

    if not any(unicodedata.category(c)[0] in "LNPS" and c not in _BLANK_LOOKING for c in n):
        raise SubmissionError(f"{what} {n[:40]!r} renders blank (only spaces, fillers or marks); use a visible name")
    run = 0
    for i, c in enumerate(n):
        if unicodedata.category(c).startswith("M"):
            run += 1
            if i == 0 or run > MAX_COMBINING_RUN:
                raise SubmissionError(
                    f"{what} {n[:40]!r} has {'a leading combining mark' if i == 0 else f'more than {MAX_COMBINING_RUN} combining marks in a row'} "
                    f"at position {i} (U+{ord(c):04X}); use plain characters")
        else:
            run = 0
    # per word: "pаypal-7b" mixes scripts inside a word; "模型 v2" is two one-script words and is kept
    if any(confusables.is_dangerous(w) for w in re.split(r"[\s\-_./:()\[\],+]+", n) if w):
        raise SubmissionError(
            f"{what} {n[:40]!r} mixes scripts with look-alike characters (e.g. a Cyrillic letter in a Latin "
            "name); write it in one script")
    return n


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
    """A model name as stored: NFC, 1-200 printable characters, no control/bidi/zero-width characters, not
    blank-looking, no combining-mark runs, no confusable mixed scripts (:func:`check_looks`)."""
    return check_looks(check_text(s, "model name", MAX_MODEL_NAME), "model name")


_SUBMITTER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")


def submitter(s: object) -> str:
    """A submitter name: a short ASCII identifier (letters, digits, ``_ . @ + -``), so no two look alike."""
    n = check_text(s, "submitter", 64)
    if not _SUBMITTER_RE.fullmatch(n) or n in ("anonymous", "board"):
        raise SubmissionError(f"submitter {n[:40]!r} must be a short ASCII identifier (letters, digits, _ . @ + -) "
                              "other than the reserved 'anonymous' and 'board'")
    return n


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
