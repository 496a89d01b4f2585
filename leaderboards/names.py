"""Model and method names as the board stores and shows them.

A name is NFC-normalised (so a decomposed "é" and a composed one are one name) and refused if it holds a
character that changes how a name looks without being visible: control characters (C0, DEL, C1), bidi
overrides and isolates, zero-width characters and other format characters (Unicode category ``Cf``), line and
paragraph separators, or leading/trailing whitespace (a trailing newline made "base" and "base\\n" two methods).
Each refusal raises :class:`~leaderboards.errors.SubmissionError` naming the character and the fix.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from .errors import SubmissionError

__all__ = ["MAX_MODEL_NAME", "KNOWN_METHODS", "model_name", "method", "submitter", "check_text", "check_looks",
           "skeleton", "check_unconfusable"]

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


@functools.lru_cache(maxsize=1)
def _prototypes() -> dict[str, str]:
    """Character -> its class representative, from the Unicode confusables data that ``confusable_homoglyphs``
    ships (UTS #39 ``confusables.txt``): single characters that the data lists as look-alikes are joined into one
    class (union-find, so "l", "I", "1", "ⅼ" and "ӏ" are one), represented by its smallest ASCII member (else its
    smallest member). Multi-character prototypes ("rn" for "m") are left out."""
    import json
    import os

    from confusable_homoglyphs import confusables

    with open(os.path.join(os.path.dirname(confusables.__file__), "confusables.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    parent: dict[str, str] = {}

    def find(c: str) -> str:
        while parent.setdefault(c, c) != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for c, homoglyphs in data.items():
        for h in homoglyphs:
            if len(c) == 1 and len(h["c"]) == 1:
                a, b = find(c), find(h["c"])
                if a != b:
                    parent[max(a, b, key=_proto_order)] = min(a, b, key=_proto_order)
    return {c: find(c) for c in parent}


def _proto_order(c: str) -> tuple:
    return (not c.isascii(), not c.isalnum(), c.lower() != c, ord(c))  # ASCII lower-case letters/digits first


#: Scripts whose letters are look-alikes of Latin ones: a name mixing two of them is refused outright.
_LATIN_LIKE = ("LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC")


def skeleton(name: str) -> str:
    """The confusable skeleton of a whole name (UTS #39, section 4, with NFKC in place of NFD): NFKC (full-width
    and mathematical letters, Roman numerals, NBSP become plain characters), every character mapped to its
    confusable class (:func:`_prototypes`: "ɑ" → "a", Cyrillic "З" → "3", "‐" → "-", "⁄" → "/"), NFKC again.
    Two names with the same skeleton look alike."""
    proto = _prototypes()
    n = unicodedata.normalize("NFKC", name)
    return unicodedata.normalize("NFKC", "".join(proto.get(c, c) for c in n))


def _scripts(name: str) -> set[str]:
    return {unicodedata.name(c, "").split(" ")[0] for c in name if c.isalpha()} & set(_LATIN_LIKE)


def check_unconfusable(name: str, existing: list[str], what: str = "model name") -> str:
    """SubmissionError when ``name`` mixes Latin-like scripts (Latin with Cyrillic, Greek, ...: "gemma-З-270m")
    or has the :func:`skeleton` of a different stored name ("SmoⅼLM2" beside "SmolLM2")."""
    mixed = _scripts(name)
    if len(mixed) > 1:
        raise SubmissionError(f"{what} {name[:60]!r} mixes the {' and '.join(sorted(mixed))} scripts, whose letters "
                              "look alike; write it in one script")
    sk = skeleton(name)
    for other in existing:
        if other != name and skeleton(other) == sk:
            raise SubmissionError(f"{what} {name[:60]!r} looks like the stored name {other[:60]!r} (same Unicode "
                                  "confusable skeleton); use the stored spelling or a visibly different name")
    return name


#: Longest path component most file systems store (bytes of UTF-8), and the longest path text the board reads.
MAX_COMPONENT_BYTES = 255
MAX_PATH_CHARS = 4096


def check_path_text(s: str, what: str) -> str:
    """A path-like value (``pretrained``, an output folder): SubmissionError naming the problem when it holds a
    control or invisible format character (NUL, bidi overrides), is longer than MAX_PATH_CHARS, or has a
    component longer than MAX_COMPONENT_BYTES (which the OS would refuse as "File name too long")."""
    for i, c in enumerate(s):
        cat = unicodedata.category(c)
        if cat in _BAD_CATEGORIES:
            raise SubmissionError(f"{what} {s[:40]!r} holds a control or invisible character at position {i} "
                                  f"(U+{ord(c):04X} {unicodedata.name(c, 'control character')}); use a plain path")
    if len(s) > MAX_PATH_CHARS:
        raise SubmissionError(f"{what} is {len(s)} characters long; the limit is {MAX_PATH_CHARS}")
    for part in s.replace("\\", "/").split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
            raise SubmissionError(f"{what}: the path component {part[:30]!r}… is {len(part.encode('utf-8', 'surrogatepass'))} "
                                  f"bytes long; file systems allow {MAX_COMPONENT_BYTES}: shorten it")
    return s


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
