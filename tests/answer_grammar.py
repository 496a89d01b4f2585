"""A grammar of answer transformations for the adversary searches (tests/test_answer_grading.py,
tests/test_reward_adversary_search.py, benchmarks/adversary_search.py).

An *attack* is a short program over an answer: a list of (operation, argument) steps applied in order. The
operations are the forms a policy could learn to game an answer grader or an agreement reward with: lead-in
prefixes and trailing chatter, lists that include the gold (or other candidates), hedges, negations, case,
punctuation, accents, homoglyphs, the question repeated, translations from a small table, and garbling (unique
noise in place of the answer). Every step is a
pure function of (answer, argument, gold, question), so a failing example reads as a recipe.

Two ways to draw attacks: :func:`attacks` (a hypothesis strategy, shrinking to the smallest failing recipe) and
:func:`random_attack` (a seeded numpy draw, for the benchmark's exhaustive report).
"""

from __future__ import annotations

import unicodedata

import numpy as np

PREFIXES = ("The answer is", "Answer:", "I think", "It's", "Final answer:", "Q: A:", "Sure!", "Hmm,", "well")
SUFFIXES = ("I think", "probably", "(I'm sure)", "for sure", "!!!", "...", "is the answer", "lol", "right?")
HEDGES = ("maybe", "perhaps", "probably", "possibly", "I guess", "might be")
NEGATIONS = ("not", "definitely not", "it isn't", "no,", "never")
SEPARATORS = (", ", " or ", " and ", "/", "; ", " | ", " & ", " vs ")
OTHERS = ("London", "Berlin", "Lyon", "yes", "no", "Michelle Obama", "Yale University", "1944", "the Seine")
#: look-alike letters another script offers for a Latin one (Cyrillic, Greek); only letters whose other case
#: is a look-alike too, so a later case change keeps the disguise (Greek "Ε" lower-cases to "ε", which is not)
HOMOGLYPHS = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "y": "у", "x": "х", "i": "і", "s": "ѕ",
              "A": "Α", "K": "Κ", "O": "Ο", "P": "Ρ", "T": "Τ"}
#: translations: different answers that a string judge without a lexicon cannot relate
TRANSLATIONS = {"paris": "Parigi", "lyon": "Lione", "london": "Londres", "berlin": "Berlino", "yes": "oui",
                "no": "non", "rome": "Roma", "germany": "Deutschland"}
ACCENTS = ("\u0301", "\u0308", "\u0300", "\u0303", "\u0327")
OPS = ("prefix", "suffix", "list_gold", "list_other", "hedge", "negate", "upper", "lower", "title", "punct",
       "accent", "homoglyph", "question", "translate", "repeat", "space", "garble")
#: operations that only dress an answer: a grader must give the dressed gold the gold's verdict
DRESSING = ("upper", "lower", "title", "punct", "accent", "homoglyph", "space")


def _accent(s: str, k: int) -> str:
    letters = [i for i, ch in enumerate(s) if ch.isalpha()]
    if not letters:
        return s
    i = letters[k % len(letters)]
    return s[: i + 1] + ACCENTS[k % len(ACCENTS)] + s[i + 1:]


def _homoglyph(s: str, k: int) -> str:
    spots = [i for i, ch in enumerate(s) if ch in HOMOGLYPHS]
    if not spots:
        return s
    i = spots[k % len(spots)]
    return s[:i] + HOMOGLYPHS[s[i]] + s[i + 1:]


def apply(op: str, k: int, answer: str, gold: str, question: str) -> str:
    """One step: operation ``op`` with integer argument ``k`` (which table entry, which letter, which order)."""
    if op == "prefix":
        return f"{PREFIXES[k % len(PREFIXES)]} {answer}"
    if op == "suffix":
        return f"{answer} {SUFFIXES[k % len(SUFFIXES)]}"
    if op in ("list_gold", "list_other"):
        item = gold if op == "list_gold" else OTHERS[k % len(OTHERS)]
        sep = SEPARATORS[k % len(SEPARATORS)]
        parts = [answer, item] if k % 2 == 0 else [item, answer]
        return ("either " if k % 5 == 0 else "") + sep.join(parts)
    if op == "hedge":
        return f"{HEDGES[k % len(HEDGES)]} {answer}"
    if op == "negate":
        return f"{NEGATIONS[k % len(NEGATIONS)]} {answer}" if k % 3 else f"{answer} is wrong"
    if op == "upper":
        return answer.upper()
    if op == "lower":
        return answer.lower()
    if op == "title":
        return answer.title()
    if op == "punct":
        return ("\"", "'", "«", "(", "")[k % 5] + answer + (".", "!", "?", ")", "»", "。")[k % 6]
    if op == "accent":
        return unicodedata.normalize("NFC", _accent(answer, k))
    if op == "homoglyph":
        return _homoglyph(answer, k)
    if op == "question":
        return f"{question} {answer}" if k % 2 == 0 else f"{answer} ({question})"
    if op == "translate":
        return TRANSLATIONS.get(answer.strip().lower(), answer)
    if op == "repeat":
        return " ".join([answer] * (2 + k % 2))
    if op == "garble":  # unique noise in place of the answer: what scattering wrong answers looks like
        return "".join("zqxjkvbwy"[(k * 7 + i * 3) % 9] for i in range(3 + k % 4))
    if op == "space":
        return (" " * (1 + k % 3)) + answer.replace(" ", "  ") + "\t"
    raise ValueError(f"unknown operation {op!r}")


def run(program, answer: str, gold: str, question: str) -> str:
    """Apply a program (a sequence of (op, k) steps) to ``answer``."""
    for op, k in program:
        answer = apply(op, k, answer, gold, question)
    return answer


def attacks(max_steps: int = 3, ops: tuple[str, ...] = OPS):
    """A hypothesis strategy of programs of 1..max_steps steps over ``ops``."""
    from hypothesis import strategies as st

    step = st.tuples(st.sampled_from(ops), st.integers(min_value=0, max_value=59))
    return st.lists(step, min_size=1, max_size=max_steps)


def random_attack(rng: np.random.Generator, max_steps: int = 3, ops: tuple[str, ...] = OPS) -> list[tuple[str, int]]:
    """A seeded draw of one program (the benchmark's exhaustive counterpart of :func:`attacks`)."""
    n = int(rng.integers(1, max_steps + 1))
    return [(ops[int(rng.integers(len(ops)))], int(rng.integers(60))) for _ in range(n)]


def adds_content(program) -> bool:
    """True iff the program holds a step that adds or changes content (not only dressing)."""
    return any(op not in DRESSING for op, _ in program)
