"""A grammar of surface tricks a policy can play on a reward, and the expected-reward checks for them.

A *trick* rewrites one answer string. Each entry of :data:`GRAMMAR` says what it claims about the result,
so that tests can hold it to that claim (tests/test_rd_adversaries.py):

``kind``
    * ``surface`` — the same answer under :func:`semcal_eval.qa.grading.fold` and the grader's answer core
      (case, punctuation, diacritics "Lyón", Cyrillic homoglyphs "Lуon", full-width letters, a content-free
      lead-in "The answer is …"): :func:`~semcal_eval.qa.grading.same_answer` with the original, and graded like it.
    * ``content`` — adds or changes content while keeping the claim: filler words before or after, the question
      repeated, a hedge ("maybe Lyon"), a translation ("Lione"). A different answer for the grader (a gold in
      this form is wrong) and for the strict judge.
    * ``gold`` — a wrong answer made to mention the gold: lists ("Lyon, Paris", "Paris or Lyon", "either Lyon or
      Paris") and the negation "not Paris". The grader's strictness is what these test: none of them is correct.

``gold`` tricks need the gold; the others ignore it. Every trick takes ``(answer, gold, question, rng)`` and is
deterministic given ``rng`` (filler words are drawn from :data:`WORDS`).

:func:`policy_table` (a policy right with probability a, otherwise one consistent wrong guess, honest or through a
trick) and :func:`deviation_gain` (one wrong rollout of a group rewritten, the others not) run the trainer's own
reward functions with a shipped config's reward options (:func:`reward_options`), and report the correctness
term and the calibration term separately. ``trainers/policy_lab.py`` builds its trick candidates from this
grammar.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "WORDS",
    "TRANSLATIONS",
    "Trick",
    "GRAMMAR",
    "ADVERSARIES",
    "SURFACE",
    "CONTENT",
    "GOLD",
    "transform",
    "translate",
    "transliterate",
    "homoglyph",
    "accent",
    "reward_options",
    "group_rewards",
    "policy_table",
    "deviation_gain",
]

#: Filler vocabulary for random prefixes and suffixes: ordinary words that name no answer of the simulations.
WORDS = tuple(
    "apple river stone cloud garden window silver morning candle forest yellow bridge engine pocket summer "
    "thunder marble copper velvet meadow harbor lantern pepper saddle violin walnut feather glacier hammer "
    "island jungle kettle ladder magnet needle orchard pillow quartz ribbon shadow timber umbrella valley "
    "wagon yarn zipper anchor basket cactus dolphin eagle falcon goblet helmet igloo jacket koala lemon".split()
)

_PUNCT_SUFFIX = ("!", "?", ".", "...", ";")
_HEDGES = ("maybe", "perhaps", "probably", "possibly")
_LEAD_INS = ("The answer is", "Answer:", "It's", "Final answer:")

#: Translations of a few real names (Italian, Spanish without the accent that would fold away, Chinese); any
#: other answer is transliterated (:func:`transliterate`). A translation is a different answer for the grader.
TRANSLATIONS = {
    "paris": ("Parigi", "Parí", "巴黎"),
    "lyon": ("Lione", "Lió", "里昂"),
    "london": ("Londra", "Londres", "伦敦"),
    "berlin": ("Berlino", "Berlim", "柏林"),
    "rome": ("Roma", "Rom", "罗马"),
    "nice": ("Nizza", "Niza", "尼斯"),
    "new york": ("Nuova York", "Nueva York", "纽约"),
}

#: Latin → Cyrillic, phonetic (not the look-alikes): a fixed transliteration for answers without a table entry.
_TRANSLIT = {
    "a": "а", "b": "б", "c": "ц", "d": "д", "e": "э", "f": "ф", "g": "г", "h": "х", "i": "и", "j": "й", "k": "к",
    "l": "л", "m": "м", "n": "н", "o": "о", "p": "п", "q": "к", "r": "р", "s": "с", "t": "т", "u": "у", "v": "в",
    "w": "в", "x": "кс", "y": "ы", "z": "з",
}
#: Latin → a Cyrillic letter drawn like it (each one folds back: semcal_eval.qa.answers.CONFUSABLES)
_HOMOGLYPH = {"a": "а", "c": "с", "e": "е", "o": "о", "p": "р", "x": "х", "y": "у", "i": "і", "j": "ј", "s": "ѕ",
              "A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н", "K": "К", "M": "М", "O": "О", "P": "Р", "T": "Т",
              "X": "Х", "Y": "Ү"}
_ACCENT = {"a": "á", "e": "é", "i": "í", "o": "ó", "u": "ú", "y": "ÿ", "n": "ñ", "c": "ç",
           "A": "Á", "E": "É", "I": "Í", "O": "Ó", "U": "Ú", "Y": "Ÿ", "N": "Ñ", "C": "Ç"}


def transliterate(answer: str) -> str:
    """The fixed Cyrillic transliteration of an answer (digits and punctuation kept); a soft sign is added if
    the result would fold back to the original (an answer made only of look-alike letters).

    >>> transliterate("wrong3x2"), transliterate("Lyon")
    ('вронг3кс2', 'Лыон')
    """
    from semcal_eval.qa.answers import fold

    out = "".join((_TRANSLIT[ch.lower()].capitalize() if ch.isupper() else _TRANSLIT[ch]) if ch.lower() in _TRANSLIT
                  else ch for ch in answer)
    return out + "ь" if fold(out) == fold(answer) else out


def translate(answer: str, rng: np.random.Generator | None = None) -> str:
    """A translation of ``answer``: one of :data:`TRANSLATIONS` (chosen by ``rng``, the first without one) for a
    known name, else :func:`transliterate`."""
    from semcal_eval.qa.answers import fold

    opts = TRANSLATIONS.get(" ".join(fold(answer).split()))
    if not opts:
        return transliterate(answer)
    return opts[int(rng.integers(len(opts)))] if rng is not None else opts[0]


def homoglyph(answer: str, rng: np.random.Generator | None = None) -> str:
    """Latin letters replaced by Cyrillic look-alikes: all of them (``rng`` None) or a random non-empty subset.
    Differs as a string whenever the answer has one of those letters; folds back to the same answer."""
    pos = [i for i, ch in enumerate(answer) if ch in _HOMOGLYPH]
    if rng is not None and len(pos) > 1:
        pos = sorted(rng.choice(pos, size=int(rng.integers(1, len(pos) + 1)), replace=False).tolist())
    chars = list(answer)
    for i in pos:
        chars[i] = _HOMOGLYPH[chars[i]]
    return "".join(chars)


def accent(answer: str, rng: np.random.Generator | None = None) -> str:
    """Diacritics on letters that take one ("Lyon" → "Lyón"): the last such vowel (``rng`` None) or a random
    such letter; a combining acute on the first letter when none does. Folds back to the same answer."""
    pos = [i for i, ch in enumerate(answer) if ch in _ACCENT]
    if not pos:
        i = next((i for i, ch in enumerate(answer) if ch.isalpha()), None)
        return answer if i is None else answer[: i + 1] + "\u0301" + answer[i + 1 :]
    vowels = [i for i in pos if answer[i] in "aeiouAEIOU"] or pos
    i = vowels[-1] if rng is None else int(rng.choice(pos))
    return answer[:i] + _ACCENT[answer[i]] + answer[i + 1 :]


TrickFn = Callable[[str, str, str, np.random.Generator], str]


@dataclass(frozen=True)
class Trick:
    """One rule of the grammar: ``fn(answer, gold, question, rng)``; ``kind`` surface / content / gold."""

    name: str
    kind: str
    fn: TrickFn
    doc: str = ""

    def __call__(self, answer: str, gold: str, question: str, rng: np.random.Generator) -> str:
        return self.fn(answer, gold, question, rng)


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(WORDS, size=n).tolist())


def _rules() -> list[Trick]:
    r = [
        # surface: the same answer once folded
        Trick("upper", "surface", lambda a, g, q, rng: a.upper(), "upper case"),
        Trick("lower", "surface", lambda a, g, q, rng: a.lower(), "lower case"),
        Trick("punct", "surface", lambda a, g, q, rng: f'"{a}"{rng.choice(_PUNCT_SUFFIX)}', "quotes and a mark"),
        Trick("accent", "surface", lambda a, g, q, rng: accent(a, rng), 'diacritics: "Lyón"'),
        Trick("homoglyph", "surface", lambda a, g, q, rng: homoglyph(a, rng), 'Cyrillic look-alikes: "Lуon"'),
        Trick("fullwidth", "surface", lambda a, g, q, rng: unicodedata.normalize("NFKC", a).translate(_FULLWIDTH),
              "full-width letters"),
        Trick("lead_in", "surface", lambda a, g, q, rng: f"{rng.choice(_LEAD_INS)} {a}", '"The answer is Lyon"'),
        # content: the claim kept, the answer string changed
        *[Trick(f"suffix_{n}", "content", (lambda n: lambda a, g, q, rng: f"{a} {_words(rng, n)}")(n),
                f"{n} random words after") for n in range(1, 6)],
        Trick("prefix", "content", lambda a, g, q, rng: f"{_words(rng, 1)} {a}", "a random word before"),
        Trick("chatter", "content", lambda a, g, q, rng: f"{a}, I think, but I am not sure about it",
              "the answer with chatter"),
        Trick("question_before", "content", lambda a, g, q, rng: f"{q} {a}", "the question repeated before"),
        Trick("question_after", "content", lambda a, g, q, rng: f"{a} {q}", "the question repeated after"),
        Trick("hedge", "content", lambda a, g, q, rng: f"{rng.choice(_HEDGES)} {a}", '"maybe Lyon"'),
        Trick("translation", "content", lambda a, g, q, rng: translate(a, rng), '"Lione", "Parigi", "巴黎"'),
        # gold: a wrong answer that mentions the gold
        Trick("list_comma", "gold", lambda a, g, q, rng: f"{a}, {g}", '"Lyon, Paris"'),
        Trick("list_or", "gold", lambda a, g, q, rng: f"{g} or {a}", '"Paris or Lyon"'),
        Trick("list_either", "gold", lambda a, g, q, rng: f"either {a} or {g}", '"either Lyon or Paris"'),
        Trick("negation", "gold", lambda a, g, q, rng: f"not {g}", '"not Paris" (the guess dropped)'),
    ]
    return r


_FULLWIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}

#: name → :class:`Trick`
GRAMMAR: dict[str, Trick] = {t.name: t for t in _rules()}
SURFACE = tuple(n for n, t in GRAMMAR.items() if t.kind == "surface")
CONTENT = tuple(n for n, t in GRAMMAR.items() if t.kind == "content")
GOLD = tuple(n for n, t in GRAMMAR.items() if t.kind == "gold")
#: the tricks that need no gold (every rule but the ``gold`` kind): name → f(answer, question, rng)
ADVERSARIES: dict[str, Callable[[str, str, np.random.Generator], str]] = {
    n: (lambda t: lambda a, q, rng: t.fn(a, "", q, rng))(t) for n, t in GRAMMAR.items() if t.kind != "gold"
}


def transform(name: str, answer: str, question: str, rng: np.random.Generator, gold: str = "") -> str:
    """Apply trick ``name`` of :data:`GRAMMAR` to one answer (``gold`` for the ``gold`` kind)."""
    if name == "gold_chatter":  # the name before the grammar
        name = "chatter"
    if name not in GRAMMAR:
        raise ValueError(f"unknown trick {name!r}; choose one of {', '.join(GRAMMAR)}")
    t = GRAMMAR[name]
    if t.kind == "gold" and not gold:
        raise ValueError(f"trick {name!r} mentions the gold: pass gold=...")
    return t(answer, gold, question, rng)


# ----------------------------------------------------------------------------------------------------------
# expected-reward checks through the trainer's reward functions

_CONFIGS = Path(__file__).resolve().parent / "configs"


def reward_options(method_or_path: str) -> dict:
    """The calibration reward's keyword options as a shipped config sets them (``csr``, ``csr_likelihood``,
    ``csr_spread`` or a YAML path): ``num_generations`` and the ``reward`` keys that
    :func:`trainers.rewards.calibration_reward` takes; ``method`` too."""
    from trainers.config import load_config

    p = Path(method_or_path)
    path = p if p.suffix in (".yaml", ".yml") else _CONFIGS / f"{method_or_path}.yaml"
    cfg = load_config(path)
    r = cfg["reward"]
    keys = ("eps", "reading", "lambda_schedule", "lambda_max", "lambda_min", "lambda_step_fraction", "judge",
            "judge_kwargs", "score", "bounded", "empty_answer", "agreement_wrong")
    return {"method": cfg["method"], "num_generations": int(cfg["grpo"]["num_generations"]),
            **{k: r[k] for k in keys if k in r}}


def group_rewards(comps: list[str], gold: str, question: str, options: dict, lam: float | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(correctness term, calibration term λ·r_cal) of one group of rollouts under ``options``
    (:func:`reward_options`); ``lam`` fixes λ (else the config's λ at the end of training)."""
    from trainers.rewards import calibration_reward, correctness_reward

    n = len(comps)
    cols = dict(answers=[[gold]] * n, question=[question] * n)
    y = np.asarray(correctness_reward([question] * n, comps, **cols), float)
    if options["method"] == "rlvr":
        return y, np.zeros(n)
    kw = {k: v for k, v in options.items() if k not in ("method", "num_generations")}
    if lam is not None:
        kw.update(lambda_schedule="constant", lambda_max=float(lam), lambda_min=0.0)
    cal = np.asarray(calibration_reward([question] * n, comps, num_generations=n, **kw, **cols), float)
    return y, cal


def policy_table(
    options: dict | str = "csr", accuracies=(0.0, 0.1, 0.5), lam: float | None = None, n_groups: int = 300,
    K: int = 8, seed: int = 0, adversary: str = "suffix_random", question: str = "What is the capital of France?",
    gold: str = "Paris", guess: str = "Lyon",
) -> dict[float, dict[str, float]]:
    """Mean reward per rollout over ``n_groups`` groups of K rollouts, each right ("Paris") with probability a,
    else the consistent wrong guess ("Lyon"); in the tricked policy every wrong guess goes through ``adversary``
    (``suffix_random``: 1–5 random words). Groups share their random draws between the two policies.

    Returns ``{a: {"transformed", "honest", "transformed_correct", "honest_correct", "transformed_cal",
    "honest_cal"}}``: total, correctness term and calibration term."""
    opts = reward_options(options) if isinstance(options, str) else options
    out = {}
    for a in accuracies:
        rng = np.random.default_rng(seed)
        acc = {k: 0.0 for k in ("transformed_correct", "transformed_cal", "honest_correct", "honest_cal")}
        for _ in range(n_groups):
            right = rng.random(K) < a
            honest = [gold if r else guess for r in right]
            if adversary == "suffix_random":
                tricked = [h if r else transform(f"suffix_{int(rng.integers(1, 6))}", h, question, rng)
                           for h, r in zip(honest, right)]
            else:
                tricked = [h if r else transform(adversary, h, question, rng, gold=gold) for h, r in zip(honest, right)]
            for key, comps in (("honest", honest), ("transformed", tricked)):
                y, c = group_rewards(comps, gold, question, opts, lam)
                acc[f"{key}_correct"] += float(y.mean()) / n_groups
                acc[f"{key}_cal"] += float(c.mean()) / n_groups
        acc["honest"] = acc["honest_correct"] + acc["honest_cal"]
        acc["transformed"] = acc["transformed_correct"] + acc["transformed_cal"]
        out[float(a)] = acc
    return out


def deviation_gain(
    adversary: str, group: list[str], j: int, gold: str, question: str, options: dict | str = "csr",
    lam: float | None = None, n_draws: int = 20, seed: int = 0,
) -> tuple[float, float]:
    """E[reward of rollout j after ``adversary`` rewrites it] − its reward as it is, the other rollouts of
    ``group`` unchanged, over ``n_draws`` draws of the trick's randomness: ``(correctness gain, calibration
    gain)``."""
    opts = reward_options(options) if isinstance(options, str) else options
    y0, c0 = group_rewards(group, gold, question, opts, lam)
    rng = np.random.default_rng(seed)
    gy, gc = [], []
    for _ in range(n_draws):
        g = list(group)
        g[j] = transform(adversary, g[j], question, rng, gold=gold)
        y, c = group_rewards(g, gold, question, opts, lam)
        gy.append(y[j] - y0[j])
        gc.append(c[j] - c0[j])
    return float(np.mean(gy)), float(np.mean(gc))
