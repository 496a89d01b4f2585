"""Verbalised confidence: split a generation into its answer and the confidence the model stated.

Two formats are read: RLCR's ``<answer>…</answer> <confidence>0.8</confidence>`` and a plain
``Confidence: 0.8`` / ``Confidence: 80%`` line (what the semcal verbalized prompt asks for). :func:`parse_rlcr`
adds RLCR's full-format check. The one parser of both: the QA tasks read generations with it and the RLCR
rewards (``trainers.rewards``) read completions with it, so a model is scored as it was trained. Pure functions.
"""

from __future__ import annotations

import math
import re

from .answers import clean_answer

__all__ = ["RLCR_TAGS", "parse_verbalized", "parse_rlcr"]

_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(%?)"
_CONF_TAG = re.compile(r"<confidence>\s*" + _NUM + r"\s*</confidence>", re.I)
_CONF_LINE = re.compile(r"\bconfidence(?:\s+level|\s+score)?\s*[:=]\s*" + _NUM, re.I)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.I | re.S)
_ANSWER_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*[:=]\s*", re.I)


def _to_conf(num: str, pct: str) -> float | None:
    try:
        v = float(num)
    except ValueError:
        return None
    if pct:
        v /= 100.0
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        return None
    return v


def parse_verbalized(text: str) -> tuple[str, float | None]:
    """Split a generation into (answer, verbalised confidence or None).

    Confidence: the last ``<confidence>x</confidence>`` tag (RLCR format), else the last ``Confidence: x``
    (``=`` also accepted). ``x`` is a probability in [0, 1] or a percentage ``80%``; a value outside [0, 1]
    (e.g. a bare ``80``) or no confidence at all gives None — never a guess.
    Answer: the last ``<answer>…</answer>`` tag, else the text before the confidence statement with an
    ``Answer:`` prefix removed, first non-empty line.

    >>> parse_verbalized("<think>hm</think><answer> Paris </answer> <confidence>0.8</confidence>")
    ('Paris', 0.8)
    >>> parse_verbalized("Answer: Paris\\nConfidence: 75%")
    ('Paris', 0.75)
    >>> parse_verbalized("Paris. Confidence: 80")
    ('Paris.', None)
    """
    text = str(text)
    conf: float | None = None
    cut = len(text)
    tags = list(_CONF_TAG.finditer(text))
    lines = list(_CONF_LINE.finditer(text))
    if tags:
        conf = _to_conf(*tags[-1].groups())
        cut = tags[0].start()
    elif lines:
        conf = _to_conf(*lines[-1].groups())
        cut = lines[0].start()
    answers = _ANSWER_TAG.findall(text)
    if answers:
        answer = " ".join(answers[-1].split())
    else:
        answer = clean_answer(_ANSWER_PREFIX.sub("", text[:cut].strip()))
    return answer, conf


#: The four blocks of an RLCR completion, in order.
RLCR_TAGS = ("think", "answer", "analysis", "confidence")
_RLCR_FORMAT = re.compile(
    r"^\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*"
    r"<analysis>(?P<analysis>.*?)</analysis>\s*<confidence>(?P<confidence>.*?)</confidence>\s*$",
    re.DOTALL,
)


def parse_rlcr(text: str | None) -> tuple[bool, str, float | None]:
    """Parse an RLCR completion into ``(format_ok, answer, confidence)``.

    ``answer`` and ``confidence`` are :func:`parse_verbalized`'s (last ``<answer>`` block, else the first line;
    last ``<confidence>`` block as a probability or percentage in [0, 1], else None). ``format_ok``: the text is
    exactly ``<think>…</think><answer>…</answer><analysis>…</analysis><confidence>…</confidence>`` (whitespace
    between blocks allowed, each tag once, nothing outside) and the confidence parsed. RLCR's format reward is
    ``format_ok``; the ``*_rlcr`` tasks log it per answer.

    >>> parse_rlcr("<think>hm</think><answer>Paris</answer><analysis>sure</analysis><confidence>0.9</confidence>")
    (True, 'Paris', 0.9)
    >>> parse_rlcr("<think>hm</think><answer>Paris</answer><analysis>sure</analysis><confidence>high</confidence>")
    (False, 'Paris', None)
    >>> parse_rlcr("<confidence>80%</confidence> <answer>Paris</answer>")
    (False, 'Paris', 0.8)
    >>> parse_rlcr(None)
    (False, '', None)
    """
    text = text or ""
    answer, conf = parse_verbalized(text)
    tags_once = all(text.count(f"<{t}>") == 1 and text.count(f"</{t}>") == 1 for t in RLCR_TAGS)
    ok = bool(_RLCR_FORMAT.match(text)) and tags_once and conf is not None
    return ok, answer, conf
