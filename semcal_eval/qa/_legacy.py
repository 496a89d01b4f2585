"""Short-answer QA scoring and calibration by semantic agreement.

Pure functions (strings and lists in, numbers out):

* SQuAD answer normalisation, exact match and token-F1 against a list of gold aliases
  (Rajpurkar et al. 2016, the official SQuAD v1.1 evaluation script's definitions);
* greedy bidirectional clustering of sampled answers with an answer-equivalence judge
  (Kuhn et al. 2023, "Semantic Uncertainty"; the judge decides bidirectional equivalence, see
  :mod:`semcal_eval.qa.judges`);
* discrete semantic entropy and three confidences derived from the clusters;
* a parser for verbalised confidences (RLCR's ``<answer>…</answer> <confidence>0.8</confidence>`` and
  ``Confidence: 0.8`` / ``Confidence: 80%``).

The lm-eval glue of the QA tasks (the task class and the per-judge filter) is built lazily at the bottom
of this module (``QATask``, ``JudgeFilter``, ``VerbalizedFilter``), so that importing the pure functions,
as the CSR trainer does, does not import lm-eval.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from semcal_eval.qa.judges import Judge

__all__ = [
    "normalize_answer",
    "exact_match",
    "token_f1",
    "best_f1",
    "is_correct",
    "cluster",
    "agreement_matrix",
    "semantic_entropy",
    "semantic_entropy_weighted",
    "conf_cluster_share",
    "conf_entropy",
    "conf_likelihood_weighted",
    "parse_verbalized",
    "clean_answer",
    "score_question",
    "EmptyGoldError",
]


class EmptyGoldError(ValueError):
    """Raised when a question has no usable gold answer (empty list, or only empty strings)."""


# ----------------------------------------------------------------------------------------------------------
# SQuAD normalisation, EM, F1
# ----------------------------------------------------------------------------------------------------------

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace.

    >>> normalize_answer("  The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("An apple, a day")
    'apple day'
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(golds: str | Iterable[str]) -> list[str]:
    if isinstance(golds, str):
        golds = [golds]
    golds = [g for g in golds if g is not None]
    if not golds or all(not normalize_answer(str(g)) for g in golds):
        raise EmptyGoldError(
            f"no usable gold answer (got {list(golds)!r}): every alias is empty after SQuAD normalisation. "
            "Drop unanswerable questions before scoring (the semcal QA tasks do this in process_docs and "
            "log how many they dropped)."
        )
    return [str(g) for g in golds]


def exact_match(pred: str, golds: str | Iterable[str]) -> int:
    """EM = max over gold aliases g of [normalize(pred) == normalize(g)], as 0/1.

    >>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
    1
    """
    p = normalize_answer(pred)
    return int(any(p == normalize_answer(g) for g in _golds(golds)))


def token_f1(pred: str, gold: str) -> float:
    """SQuAD token-F1 between two strings: F1 = 2PR/(P+R) over the multiset overlap of normalised tokens.

    If either side has no tokens after normalisation, F1 = 1 when both are empty, else 0 (SQuAD v2 rule).
    Symmetric in its two arguments.

    >>> token_f1("Barack Obama", "President Barack Obama")
    0.8
    """
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def best_f1(pred: str, golds: str | Iterable[str]) -> float:
    """max over gold aliases of :func:`token_f1` (raises :class:`EmptyGoldError` if no alias is usable)."""
    return max(token_f1(pred, g) for g in _golds(golds))


def is_correct(pred: str, golds: str | Iterable[str], threshold: float = 0.5) -> bool:
    """correct ⇔ best_f1(pred, golds) ≥ threshold (CSR / semantic-uncertainty convention: threshold 0.5)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    return best_f1(pred, golds) >= threshold


def clean_answer(text: str) -> str:
    """The answer a short-answer prompt produced: the first non-empty line, stripped; "" if none.

    >>> clean_answer("  Paris\\nQ: next question")
    'Paris'
    """
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


# ----------------------------------------------------------------------------------------------------------
# Clustering
# ----------------------------------------------------------------------------------------------------------


class _PairCache:
    """Judge results for one question, keyed by the unordered pair of stripped strings.

    Judges are symmetric by construction (NLI and the LLM judge evaluate both orders), so (a, b) and (b, a)
    share one entry; identical strings are equivalent without asking the judge.
    """

    def __init__(self, question: str, judge: "Judge"):
        self.question, self.judge = question, judge
        self.store: dict[tuple[str, str], bool] = {}
        self.judged = 0  # pairs actually sent to the judge

    @staticmethod
    def key(a: str, b: str) -> tuple[str, str]:
        return (a, b) if a <= b else (b, a)

    def ask(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        todo = []
        for a, b in pairs:
            k = self.key(a, b)
            if a != b and k not in self.store and k not in todo:
                todo.append(k)
        if todo:
            res = self.judge.equivalent(self.question, todo)
            if len(res) != len(todo):
                raise RuntimeError(
                    f"judge {getattr(self.judge, 'name', self.judge)!r} returned {len(res)} results for "
                    f"{len(todo)} pairs"
                )
            self.judged += len(todo)
            for k, r in zip(todo, res):
                self.store[k] = bool(r)
        return [True if a == b else self.store[self.key(a, b)] for a, b in pairs]


def _cluster(question: str, answers: Sequence[str], judge: "Judge") -> tuple[list[int], _PairCache]:
    cache = _PairCache(question, judge)
    ids: list[int] = []
    reps: list[str] = []  # reps[c] = stripped text of cluster c's first member ("" for empty clusters)
    for a in answers:
        a = (a or "").strip()
        if not a:  # an empty generation is its own cluster and never a representative
            ids.append(len(reps))
            reps.append("")
            continue
        live = [c for c, r in enumerate(reps) if r]
        # one batched judge call against all representatives; the first (oldest) match wins
        res = cache.ask([(reps[c], a) for c in live])
        match = next((c for c, r in zip(live, res) if r), None)
        if match is None:
            match = len(reps)
            reps.append(a)
        ids.append(match)
    return ids, cache


def cluster(question: str, answers: Sequence[str], judge: "Judge") -> list[int]:
    """Greedy bidirectional clustering (Kuhn et al. 2023, Algorithm 1).

    Answers are visited in order; each is compared (one batched ``judge.equivalent`` call) with the
    representative — the first member — of every existing cluster and joins the oldest cluster whose
    representative it is equivalent to, else opens a new cluster. Cluster ids are 0, 1, … in order of first
    appearance. Pair results are cached within the call and identical strings are equivalent without a
    judge call, so at most K·C < K² pairs are judged (C = number of clusters). An empty (or whitespace-only)
    answer is its own cluster and is never compared.

    >>> from semcal_eval.qa.judges import F1Judge
    >>> cluster("Who?", ["Barack Obama", "Obama", "", "Trump", "obama"], F1Judge())
    [0, 0, 1, 2, 0]
    """
    return _cluster(question, answers, judge)[0]


def agreement_matrix(question: str, answers: Sequence[str], judge: "Judge") -> np.ndarray:
    """K×K 0/1 matrix A with A[i, j] = 1 iff answers i and j are equivalent under ``judge``.

    The diagonal is 1 (every answer agrees with itself, an empty one included); an empty answer agrees with
    nothing else. If ``judge.transitive`` is true (equivalence is an equivalence relation by construction,
    e.g. normalised exact match) the matrix is read off :func:`cluster` (A[i, j] = [c_i == c_j], K·C pairs);
    otherwise (token-F1, NLI, LLM and embedding thresholds are not transitive) every distinct pair is judged
    directly, K(K−1)/2 at most, in one batched call.
    """
    K = len(answers)
    stripped = [(a or "").strip() for a in answers]
    if getattr(judge, "transitive", False):
        ids = np.asarray(cluster(question, answers, judge))
        A = (ids[:, None] == ids[None, :]).astype(np.int64)
    else:
        cache = _PairCache(question, judge)
        pairs = [(i, j) for i in range(K) for j in range(i + 1, K) if stripped[i] and stripped[j]]
        res = cache.ask([(stripped[i], stripped[j]) for i, j in pairs])
        A = np.eye(K, dtype=np.int64)
        for (i, j), r in zip(pairs, res):
            A[i, j] = A[j, i] = int(r)
    np.fill_diagonal(A, 1)
    return A


# ----------------------------------------------------------------------------------------------------------
# Semantic entropy and confidences
# ----------------------------------------------------------------------------------------------------------


def _ids(cluster_ids: Sequence[int]) -> list[int]:
    ids = [int(c) for c in cluster_ids]
    if not ids:
        raise ValueError("cluster_ids is empty: semantic entropy and confidences need at least one sample")
    return ids


def semantic_entropy(cluster_ids: Sequence[int]) -> float:
    """Discrete semantic entropy (Farquhar et al., Nature 2024): SE = −Σ_c p_c ln p_c with p_c = n_c / K.

    >>> round(semantic_entropy([0, 0, 1, 2]), 6)  # p = (1/2, 1/4, 1/4)
    1.039721
    """
    ids = _ids(cluster_ids)
    K = len(ids)
    return float(-sum((n / K) * math.log(n / K) for n in Counter(ids).values()))


def semantic_entropy_weighted(cluster_ids: Sequence[int], seq_logprobs: Sequence[float]) -> float:
    """Likelihood-weighted semantic entropy (Kuhn et al. 2023; Farquhar et al. 2024, normalised form).

    p(c) = Σ_{s∈c} exp(ℓ_s) / Σ_s exp(ℓ_s) over the K samples s with sequence log-probability ℓ_s (computed in
    log space with logsumexp); SE = −Σ_c p(c) ln p(c). Each sample counts once, duplicates included, as in the
    reference implementation. Length normalisation, if wanted, is the caller's choice of ℓ_s.
    """
    ids = _ids(cluster_ids)
    lp = np.asarray(seq_logprobs, dtype=np.float64)
    if lp.shape != (len(ids),):
        raise ValueError(f"seq_logprobs has shape {lp.shape}, expected ({len(ids)},): one log-prob per sample")
    if not np.all(np.isfinite(lp)):
        raise ValueError("seq_logprobs must be finite log-probabilities (got NaN or ±inf)")
    total = np.logaddexp.reduce(lp)
    ids_arr = np.asarray(ids)
    logp_c = np.array([np.logaddexp.reduce(lp[ids_arr == c]) - total for c in sorted(set(ids))])
    return float(-np.sum(np.exp(logp_c) * logp_c))


def conf_cluster_share(greedy_cluster: int, cluster_ids: Sequence[int]) -> float:
    """Primary confidence: the share of the K samples in the greedy answer's cluster, n_{c(greedy)} / K.

    ``greedy_cluster`` may be a cluster id that no sample has (the greedy answer agrees with no sample, or is
    empty): the confidence is then 0.

    >>> conf_cluster_share(0, [0, 0, 1, 2])
    0.5
    """
    ids = _ids(cluster_ids)
    return sum(c == int(greedy_cluster) for c in ids) / len(ids)


def _log_k(K: int | None, n: int) -> float:
    K = n if K is None else int(K)
    if K < 2:
        raise ValueError(
            f"entropy-based confidence needs K ≥ 2 samples (got K={K}): 1 − SE/log K is undefined for K=1 "
            "(log 1 = 0). Sample at least 2 answers per question (--metadata '{\"num_samples\": 10}')."
        )
    return math.log(K)


def _unit(x: float) -> float:
    # clip to [0, 1] and drop float noise (1 − ln 3 / ln 3 is 2e-16, not a confidence)
    return float(min(1.0, max(0.0, round(x, 12))))


def conf_entropy(cluster_ids: Sequence[int], K: int | None = None) -> float:
    """Entropy confidence: 1 − SE / ln K, in [0, 1] (1: all samples agree; 0: all K samples disagree).

    ``K`` defaults to ``len(cluster_ids)``; K = 1 raises ``ValueError`` (ln 1 = 0).

    >>> round(conf_entropy([0, 0, 1, 2]), 6)  # 1 − 1.039721 / ln 4
    0.25
    """
    ids = _ids(cluster_ids)
    return _unit(1.0 - semantic_entropy(ids) / _log_k(K, len(ids)))


def conf_likelihood_weighted(cluster_ids: Sequence[int], seq_logprobs: Sequence[float]) -> float:
    """1 − SE_w / ln K with the likelihood-weighted semantic entropy :func:`semantic_entropy_weighted`.

    Needs the samples' sequence log-probs (a semcal backend can return them; plain ``generate_until`` cannot).
    """
    ids = _ids(cluster_ids)
    return _unit(1.0 - semantic_entropy_weighted(ids, seq_logprobs) / _log_k(None, len(ids)))


# ----------------------------------------------------------------------------------------------------------
# Verbalised confidence
# ----------------------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------------------
# One question, end to end
# ----------------------------------------------------------------------------------------------------------


def score_question(
    question: str,
    greedy: str,
    samples: Sequence[str],
    golds: Sequence[str],
    judge: "Judge",
    threshold: float = 0.5,
    correctness: str = "f1",
    seq_logprobs: Sequence[float] | None = None,
) -> dict:
    """Everything the QA tasks log for one question.

    The greedy answer is clustered together with the K samples (greedy first, so it represents its cluster
    and ``greedy_cluster`` is 0 unless it is empty); ``cluster_ids`` are the samples' ids. Correctness is
    best token-F1 ≥ ``threshold`` (``correctness="f1"``) or the judge's equivalence with any gold alias
    (``correctness="judge"``). Returns a JSON-serialisable dict with ``conf`` (primary confidence: cluster
    share) and ``correct`` (Contract 1) plus ``em``, ``f1``, ``greedy``, ``samples``, ``cluster_ids``,
    ``greedy_cluster``, ``n_clusters``, ``semantic_entropy``, ``conf_entropy``, ``conf_likelihood`` (None
    without log-probs) and ``judged_pairs``.
    """
    golds = _golds(golds)
    greedy = (greedy or "").strip()
    samples = [(s or "").strip() for s in samples]
    ids, cache = _cluster(question, [greedy, *samples], judge)
    g_id, s_ids = ids[0], ids[1:]
    f1 = best_f1(greedy, golds)
    if correctness == "f1":
        correct = int(f1 >= threshold)
    elif correctness == "judge":
        correct = int(bool(greedy) and any(judge.equivalent(question, [(greedy, g) for g in golds])))
    else:
        raise ValueError(f"correctness must be 'f1' or 'judge', got {correctness!r}")
    rec = {
        "conf": conf_cluster_share(g_id, s_ids) if s_ids else None,
        "correct": correct,
        "em": exact_match(greedy, golds),
        "f1": f1,
        "greedy": greedy,
        "samples": samples,
        "cluster_ids": s_ids,
        "greedy_cluster": g_id,
        "n_clusters": len(set(s_ids)),
        "semantic_entropy": semantic_entropy(s_ids) if s_ids else None,
        "conf_entropy": conf_entropy(s_ids) if len(s_ids) >= 2 else None,
        "conf_likelihood": (
            conf_likelihood_weighted(s_ids, seq_logprobs) if seq_logprobs is not None and len(s_ids) >= 2 else None
        ),
        "judge": getattr(judge, "name", type(judge).__name__),
        "judged_pairs": cache.judged,
    }
    return rec


# ----------------------------------------------------------------------------------------------------------
# lm-eval glue for the QA tasks (tasks/{nq_open,triviaqa,hotpotqa,msmarco}/), built on first access
# ----------------------------------------------------------------------------------------------------------

#: Task settings read from the task's ``metadata`` (YAML ``metadata:`` merged with ``--metadata``, CLI wins).
QA_DEFAULTS: dict = {
    "mode": "agreement",  # "agreement": greedy + K samples, judged; "verbalized": one greedy answer + stated confidence
    "num_samples": 10,  # K sampled answers per question (≥ 2)
    "temperature": 1.0,  # sampling temperature of the K samples (the greedy answer is always greedy)
    "top_p": 1.0,  # 1.0 and top_k 0: plain multinomial sampling at `temperature`, as in Farquhar et al. 2024
    "top_k": 0,
    "correct_threshold": 0.5,  # correct ⇔ best token-F1 against the gold aliases ≥ this
    "correctness": "f1",  # or "judge": the filter's judge says the greedy answer ≡ some gold alias
    "judges": None,  # None: the YAML's filter_list; else e.g. ["f1", "embed"] → filters judge_f1, judge_embed
    "judge_kwargs": {},  # per judge name, e.g. {"nli": {"model_name": "microsoft/deberta-large-mnli"}}
    "missing_confidence": 0.5,  # verbalized mode: confidence used when none can be parsed (counted in conf_parse_rate)
}

#: generation keys that set the *sampling* of the K answers; ``--gen_kwargs`` may not change them.
SAMPLING_KEYS = ("do_sample", "temperature", "top_p", "top_k", "min_p", "typical_p", "num_beams",
                 "num_return_sequences", "repetition_penalty")

#: The one prompt of every semcal QA task (zero-shot with three fixed examples, short answers).
QA_DESCRIPTION = (
    "Answer each question with a short answer: a name, a date, a number or a few words. Do not explain.\n\n"
    "Q: What is the capital of Australia?\nA: Canberra\n\n"
    "Q: Who wrote the novel Nineteen Eighty-Four?\nA: George Orwell\n\n"
    "Q: In which year did the Berlin Wall fall?\nA: 1989\n\n"
)
#: The verbalised-confidence variant's prompt (the answer, then "Confidence: p").
VERBALIZED_DESCRIPTION = (
    "Answer each question with a short answer: a name, a date, a number or a few words. Do not explain. "
    "Then give your confidence that the answer is correct, as a probability between 0 and 1.\n\n"
    "Q: What is the capital of Australia?\nA: Canberra\nConfidence: 0.9\n\n"
    "Q: Who wrote the novel Nineteen Eighty-Four?\nA: George Orwell\nConfidence: 0.95\n\n"
    "Q: Which Danish composer wrote the opera Maskarade?\nA: Niels Gade\nConfidence: 0.3\n\n"
)


def qa_doc_to_text(doc: dict) -> str:
    """:data:`QA_DESCRIPTION` (instructions and three fixed examples), then ``Q: <question>`` and ``A:``."""
    return f"{QA_DESCRIPTION}Q: {doc['qa_question']}\nA:"


def verbalized_doc_to_text(doc: dict) -> str:
    """:data:`VERBALIZED_DESCRIPTION`, then ``Q: <question>`` and ``A:``."""
    return f"{VERBALIZED_DESCRIPTION}Q: {doc['qa_question']}\nA:"


def qa_doc_to_target(doc: dict) -> str:
    return doc["qa_golds"][0]


def qa_settings(metadata: dict | None) -> dict:
    """Effective QA task settings: :data:`QA_DEFAULTS` < metadata; validated with errors naming the fix."""
    meta = metadata or {}
    s = {**QA_DEFAULTS, **{k: meta[k] for k in QA_DEFAULTS if k in meta}}
    if s["mode"] not in ("agreement", "verbalized"):
        raise ValueError(f"QA task: mode={s['mode']!r} must be 'agreement' or 'verbalized'")
    try:
        s["num_samples"] = int(s["num_samples"])
        s["temperature"], s["top_p"] = float(s["temperature"]), float(s["top_p"])
        s["top_k"], s["correct_threshold"] = int(s["top_k"]), float(s["correct_threshold"])
        s["missing_confidence"] = float(s["missing_confidence"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"QA task: bad numeric setting in --metadata ({e})") from e
    if s["mode"] == "agreement" and s["num_samples"] < 2:
        raise ValueError(
            f"QA task: num_samples={s['num_samples']} but semantic agreement needs K ≥ 2 sampled answers "
            "(entropy confidence 1 − SE/log K is undefined for K = 1). Use --metadata '{\"num_samples\": 10}', "
            "or the verbalized variant for single-answer confidence."
        )
    if not s["temperature"] > 0:
        raise ValueError(f"QA task: temperature={s['temperature']} must be > 0 for sampling")
    if not 0.0 < s["correct_threshold"] <= 1.0:
        raise ValueError(f"QA task: correct_threshold={s['correct_threshold']} must be in (0, 1]")
    if not 0.0 <= s["missing_confidence"] <= 1.0:
        raise ValueError(f"QA task: missing_confidence={s['missing_confidence']} must be in [0, 1]")
    if s["correctness"] not in ("f1", "judge"):
        raise ValueError(f"QA task: correctness={s['correctness']!r} must be 'f1' or 'judge'")
    j = s["judges"]
    if isinstance(j, str):
        j = [x for x in re.split(r"[+,|\s]+", j) if x]
    if j is not None:
        from semcal_eval.qa.judges import JUDGES

        bad = [x for x in j if x not in JUDGES]
        if not j or bad:
            raise ValueError(f"QA task: judges={s['judges']!r}: choose a non-empty list from {sorted(JUDGES)}")
    s["judges"] = j
    if not isinstance(s["judge_kwargs"], dict):
        raise ValueError("QA task: judge_kwargs must map a judge name to its keyword arguments")
    return s


def make_process_docs(question: str, golds, unanswerable: Sequence[str] = ()):
    """A ``process_docs`` hook adding ``qa_question`` (str) and ``qa_golds`` (list[str]) to every document.

    ``question`` is the dataset's question field; ``golds(doc) -> list[str]`` extracts the gold aliases.
    Questions with no usable gold (an empty list, only empty strings, or only strings in ``unanswerable``
    such as MS MARCO's "No Answer Present.") cannot be scored for correctness: they are dropped and the
    count is logged as a warning, never silently.
    """
    bad = {normalize_answer(u) for u in unanswerable}
    done: dict[str, object] = {}  # lm-eval calls process_docs on every eval_docs access: map/filter/warn once

    def process_docs(dataset):
        import logging

        fp = getattr(dataset, "_fingerprint", None)
        if fp is not None and fp in done:
            return done[fp]

        def add(doc):
            gs = [str(g) for g in (golds(doc) or []) if g is not None]
            gs = [g for g in gs if normalize_answer(g) and normalize_answer(g) not in bad]
            return {"qa_question": str(doc[question]).strip(), "qa_golds": gs}

        ds = dataset.map(add)
        kept = ds.filter(lambda d: len(d["qa_golds"]) > 0 and bool(d["qa_question"]))
        dropped = len(ds) - len(kept)
        if dropped:
            logging.getLogger("semcal_eval.qa").warning(
                "QA task: dropped %d of %d questions without a usable gold answer or question text "
                "(unanswerable/empty; they cannot be scored)", dropped, len(ds))
        if len(kept) == 0:
            raise EmptyGoldError(f"QA task: none of the {len(ds)} questions has a usable gold answer")
        if fp is not None:
            done.clear()
            done[fp] = kept
        return kept

    return process_docs


_GLUE_NAMES = ("QATask", "JudgeFilter", "VerbalizedFilter")


def __getattr__(name: str):
    if name in _GLUE_NAMES:
        _build_glue()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _pairs_by_doc(resps: list, docs: list, per_doc: int) -> list[tuple[int, dict]]:
    """Start index and doc of each document's ``per_doc`` consecutive instances (their construction order)."""
    if len(resps) % per_doc:
        raise RuntimeError(f"QA filter: {len(resps)} instances is not a multiple of {per_doc} per question; "
                           "the QA filters only work on tasks built by semcal_eval.qa.QATask")
    out = []
    for i in range(0, len(resps), per_doc):
        if any(docs[i + j] is not docs[i] and docs[i + j] != docs[i] for j in range(per_doc)):
            raise RuntimeError("QA filter: a question's greedy and sampled instances are not adjacent; "
                               "the QA filters only work on tasks built by semcal_eval.qa.QATask")
        out.append((i, docs[i]))
    return out


def _build_glue() -> None:
    if "QATask" in globals():
        return
    import logging
    from copy import deepcopy

    from lm_eval.api.filter import Filter
    from lm_eval.api.instance import Instance
    from lm_eval.api.task import ConfigurableTask

    from semcal_eval.harness import aggregations  # noqa: F401  (registers the semcal_* aggregations the YAMLs name)
    from semcal_eval.qa.judges import get_judge

    log = logging.getLogger("semcal_eval.qa")

    class JudgeFilter(Filter):
        """Cluster each question's greedy answer and K samples with one judge (one filter per judge).

        Output per question: the greedy answer (for the greedy instance) and the :func:`score_question`
        record as a JSON string (for the sampled instance), which lm-eval logs in ``filtered_resps``.
        """

        def __init__(self, judge: str = "f1", correctness: str = "f1", threshold: float = 0.5, **judge_kwargs):
            self.judge = get_judge(judge, **judge_kwargs)
            self.correctness, self.threshold = correctness, float(threshold)

        def apply(self, resps, docs):
            resps, docs = list(resps), list(docs)
            out: list = []
            for i, doc in _pairs_by_doc(resps, docs, 2):
                greedy = clean_answer(resps[i][0])
                samples = [clean_answer(s) for s in resps[i + 1]]
                rec = score_question(doc["qa_question"], greedy, samples, doc["qa_golds"], self.judge,
                                     threshold=self.threshold, correctness=self.correctness)
                # a JSON string: lm-eval logs filtered_resps with str(), and JSON stays machine-readable
                out += [greedy, json.dumps(rec, ensure_ascii=False)]
            return out

    class VerbalizedFilter(Filter):
        """Parse ``answer`` and stated confidence from each greedy generation (:func:`parse_verbalized`)."""

        def __init__(self, threshold: float = 0.5, missing_confidence: float = 0.5, **_):
            self.threshold, self.missing = float(threshold), float(missing_confidence)

        def apply(self, resps, docs):
            out = []
            for r, doc in zip(resps, docs):
                answer, conf = parse_verbalized(r[0])
                f1 = best_f1(answer, doc["qa_golds"])
                out.append(json.dumps({
                    "conf": self.missing if conf is None else conf,
                    "conf_parsed": conf is not None,
                    "correct": int(f1 >= self.threshold),
                    "em": exact_match(answer, doc["qa_golds"]),
                    "f1": f1,
                    "greedy": answer,
                    "raw": r[0],
                }, ensure_ascii=False))
            return out

    class QATask(ConfigurableTask):
        """QA calibration by semantic agreement: per question one greedy answer (scored for correctness) and
        K sampled answers (``repeats=K`` on a second ``generate_until`` instance), clustered by each judge
        filter; or, with ``mode: verbalized``, one greedy answer with a stated confidence.

        Settings come from ``metadata`` (:data:`QA_DEFAULTS`). ``--gen_kwargs`` may change ``until`` or
        ``max_gen_toks`` (applied to greedy and samples, with a warning) but not the sampling keys
        (:data:`SAMPLING_KEYS`): those raise, naming the ``--metadata`` keys to use instead.
        """

        def __init__(self, config: dict | None = None, **kwargs):
            config = dict(config or {})
            config.pop("class", None)  # TaskConfig rejects unknown keys
            self.qa = qa_settings(config.get("metadata"))
            if int(config.get("repeats", 1) or 1) != 1:
                raise ValueError("QA task: set the number of samples with metadata num_samples, not repeats")
            config["filter_list"] = self._filters_from_settings(config.get("filter_list"))
            # A callable here tells ConfigurableTask not to look the metric names up as lm-eval metric
            # functions (which falls back to downloading HF `evaluate` metrics); our process_results runs.
            config["process_results"] = _process_results_marker
            super().__init__(config=config)
            self._gen_snapshot = deepcopy(self.config.generation_kwargs or {})
            self._warned_gen = False

        def _filters_from_settings(self, filter_list):
            s = self.qa
            if s["mode"] == "verbalized":
                return [{"name": "verbalized", "filter": [{
                    "function": VerbalizedFilter, "threshold": s["correct_threshold"],
                    "missing_confidence": s["missing_confidence"]}]}]
            if s["judges"] is not None:
                filter_list = [{"name": f"judge_{'embed' if j == 'embedding' else j}",
                                "filter": [{"function": JudgeFilter, "judge": j}]} for j in s["judges"]]
            if not filter_list:
                filter_list = [{"name": "judge_f1", "filter": [{"function": JudgeFilter, "judge": "f1"}]}]
            filter_list = deepcopy(filter_list)
            for fl in filter_list:
                steps = fl.get("filter") or []
                fn = steps[0].get("function") if len(steps) == 1 else None
                if not (isinstance(fn, type) and fn.__name__ == "JudgeFilter"):
                    raise ValueError(f"QA task: filter {fl.get('name')!r} must be exactly one "
                                     "semcal_eval.qa.JudgeFilter step (one judge per named filter)")
                step = steps[0]
                name = step.get("judge", "f1")
                step.update(s["judge_kwargs"].get(name, {}))
                step.setdefault("correctness", s["correctness"])
                step.setdefault("threshold", s["correct_threshold"])
            return filter_list

        def _gen_kwargs(self) -> tuple[dict, dict | None]:
            cur = dict(self.config.generation_kwargs or {})
            snap = self._gen_snapshot
            changed = sorted(k for k in set(cur) | set(snap) if cur.get(k) != snap.get(k))
            bad = [k for k in changed if k in SAMPLING_KEYS]
            if bad:
                raise ValueError(
                    f"{self.config.task}: --gen_kwargs would change {bad}, which this QA task sets itself (one "
                    "greedy answer plus K samples). Set sampling with --metadata, e.g. "
                    f"'{{\"num_samples\": {self.qa['num_samples']}, \"temperature\": {self.qa['temperature']}, "
                    f"\"top_p\": {self.qa['top_p']}, \"top_k\": {self.qa['top_k']}}}', and drop {bad} from "
                    "--gen_kwargs."
                )
            if changed and not self._warned_gen:
                log.warning("%s: --gen_kwargs changed %s; applied to the greedy answer and to the samples",
                            self.config.task, {k: cur.get(k) for k in changed})
                self._warned_gen = True
            base = {k: v for k, v in cur.items() if k not in SAMPLING_KEYS}
            greedy = {**base, "do_sample": False}
            if self.qa["mode"] == "verbalized":
                return greedy, None
            sample = {**base, "do_sample": True, "temperature": self.qa["temperature"],
                      "top_p": self.qa["top_p"], "top_k": self.qa["top_k"]}
            return greedy, sample

        def construct_requests(self, doc, ctx, **kwargs):
            task, doc_id, _ = kwargs["metadata"]
            greedy, sample = self._gen_kwargs()
            reqs = [Instance(request_type="generate_until", doc=doc, arguments=(ctx, greedy), idx=0,
                             metadata=(task, doc_id, 1))]
            if sample is not None:
                reqs.append(Instance(request_type="generate_until", doc=doc, arguments=(ctx, sample), idx=1,
                                     metadata=(task, doc_id, self.qa["num_samples"])))
            return reqs

        def process_results(self, doc, results):
            rec = results[-1]
            if isinstance(rec, str) and rec.startswith("{"):
                rec = json.loads(rec)
            if not isinstance(rec, dict) or "conf" not in rec:
                raise TypeError(
                    f"{self.config.task}: process_results got {type(rec).__name__} results; every filter of a "
                    "QA task must be a semcal_eval.qa.JudgeFilter (or VerbalizedFilter) step"
                )
            item = {"conf": float(rec["conf"]), "correct": int(rec["correct"])}
            out = {"acc": item, "em": {"conf": item["conf"], "correct": int(rec["em"])}}
            if self.qa["mode"] == "verbalized":
                out["conf_parse_rate"] = {"conf": item["conf"], "correct": int(rec["conf_parsed"])}
            else:
                out["_entropy"] = {"conf": float(rec["conf_entropy"]), "correct": item["correct"]}
            res = {}
            for m in self._metric_fn_list:
                if m in out:
                    res[m] = out[m]
                elif m.endswith("_entropy"):
                    if "_entropy" not in out:
                        raise ValueError(f"{self.config.task}: metric {m} needs mode 'agreement'")
                    res[m] = out["_entropy"]
                else:
                    res[m] = item
            return res

    def _process_results_marker(doc, results):  # pragma: no cover - QATask.process_results overrides it
        raise NotImplementedError

    for cls in (JudgeFilter, VerbalizedFilter, QATask):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        globals()[cls.__name__] = cls
