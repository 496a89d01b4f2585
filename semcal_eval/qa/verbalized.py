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

__all__ = ["RLCR_TAGS", "parse_verbalized", "parse_rlcr", "RD_SYSTEM_PROMPT", "RD_BINS", "rd_prompt", "parse_rd"]

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


# ----------------------------------------------------------------------------------------------------------
# Rewarding Doubt (Stangel, Bani-Harouni, Pellegrini et al., arXiv 2503.02623): integer confidence 0–10

#: RD's instructions for open questions (the paper's single-answer "open" prompt, restated): an answer and an
#: integer confidence 0–10, as ``Answer: <answer>, Confidence: <confidence>`` and nothing else. The one copy:
#: the RD training prompt (``trainers``) and the ``*_rd`` evaluation tasks read it from here.
RD_SYSTEM_PROMPT = (
    "You will get questions. Answer with the correct answer. Additionally provide a confidence between "
    "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, of how sure you are the answer is correct. A value close to 0 means you "
    "think there is a high probability that the answer is wrong. The closer the value is to 10, the higher you "
    "think is the probability that the answer is correct. The output should have the format "
    "'Answer: <answer>, Confidence: <confidence>' and nothing else."
)
RD_BINS = 10  # confidence c ∈ {0, …, 10}; the probability is c / 10

_RD = re.compile(r"(?:^|\b)answer\s*:\s*(?P<answer>.*?)\s*[,;]?\s*confidence\s*:\s*(?P<conf>[-+]?\d+(?:\.\d+)?)",
                 re.I | re.S)
_RD_FULL = re.compile(r"^\s*Answer:\s*(?P<answer>[^\n]*?)\s*,\s*Confidence:\s*(?P<conf>\d+)\s*\.?\s*$")


def rd_prompt(question: str) -> str:
    """The plain-text RD prompt: :data:`RD_SYSTEM_PROMPT`, a blank line, ``Question: <question>`` and a newline
    (the model writes ``Answer: …, Confidence: …``).

    >>> rd_prompt(" Who wrote Emma? ").endswith("and nothing else.\\n\\nQuestion: Who wrote Emma?\\n")
    True
    """
    return f"{RD_SYSTEM_PROMPT}\n\nQuestion: {str(question).strip()}\n"


def parse_rd(text: str | None) -> tuple[bool, str, int | None]:
    """Parse an RD completion into ``(format_ok, answer, confidence bin or None)``.

    The first ``Answer: <a>[,] Confidence: <c>`` (case-insensitive, anywhere, as the paper's regex search) gives
    the answer and c; c must be an integer in 0..10 — a decimal ("7.5"), a percentage-like 80 or a negative
    number gives None, never a rounded guess. Without that pattern the answer is the first line with an
    ``Answer:`` prefix removed and c is None. ``format_ok``: the whole text is exactly
    ``Answer: <a>, Confidence: <c>`` (an optional final period) with c parsed.

    >>> parse_rd("Answer: Paris, Confidence: 8")
    (True, 'Paris', 8)
    >>> parse_rd("answer: Paris confidence: 8\\nQuestion: next")
    (False, 'Paris', 8)
    >>> parse_rd("Answer: Paris, Confidence: 80")
    (False, 'Paris', None)
    >>> parse_rd("Paris")
    (False, 'Paris', None)
    """
    text = text or ""
    m = _RD.search(text)
    if m is None:
        return False, clean_answer(_ANSWER_PREFIX.sub("", text.strip())), None
    answer = " ".join(m.group("answer").split())
    raw = m.group("conf")
    conf = int(raw) if re.fullmatch(r"\+?\d+", raw) and 0 <= int(raw) <= RD_BINS else None
    full = _RD_FULL.match(text)
    return bool(full) and conf is not None, answer, conf
