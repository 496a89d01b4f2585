"""Training prompts: QA rows (``semcal_eval.data``) → a dataset with ``prompt``, ``question`` and ``answers``.

``prompt`` is what GRPO generates from; ``question`` (raw) goes to the answer-equivalence judge;
``answers`` is the list of gold aliases. RLCR prompts carry RLCR's format instructions.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from semcal_eval import qa
from trainers.rewards import RLCR_SYSTEM_PROMPT


def gold_list(answer: Any) -> list[str]:
    """Gold aliases of one row in any of the hub schemas: a string (HotpotQA), a list (NQ-Open), or a dict with
    ``aliases``/``value`` (TriviaQA). Empty strings are dropped.

    >>> gold_list("filmmaker"), gold_list(["a", ""]), gold_list({"value": "x", "aliases": ["x", "X"]})
    (['filmmaker'], ['a'], ['x', 'X'])
    """
    if isinstance(answer, str):
        out = [answer]
    elif isinstance(answer, dict):
        out = list(answer.get("aliases") or []) or [answer.get("value") or ""]
    else:
        out = list(answer or [])
    return [str(a) for a in out if str(a).strip()]


def make_prompt(question: str, method: str, style: str = "plain", template: str | None = None) -> Any:
    """One prompt, as plain text (``style="plain"``) or as chat messages (``style="chat"``).

    ``template=None`` (default) uses the QA tasks' own prompt (:func:`semcal_eval.qa.qa_doc_to_text`: short-answer
    instructions, three fixed examples, ``Q: <question>\\nA:``), so a checkpoint is trained on exactly the prompt
    it is evaluated with. A custom template is a format string with ``{question}``.

    >>> make_prompt("Who wrote Emma? ", "csr").endswith("Q: Who wrote Emma?\\nA:")
    True
    >>> make_prompt("Who wrote Emma?", "rlvr", "chat", "Q: {question}")
    [{'role': 'user', 'content': 'Q: Who wrote Emma?'}]
    """
    question = question.strip()
    if method == "rlcr":
        if style == "chat":
            return [{"role": "system", "content": RLCR_SYSTEM_PROMPT}, {"role": "user", "content": question}]
        return f"{RLCR_SYSTEM_PROMPT}\n\nQuestion: {question}\n"
    text = qa.qa_doc_to_text({"qa_question": question}) if template is None else template.format(question=question)
    if style == "chat":
        return [{"role": "user", "content": text}]
    return text


def build_dataset(cfg: dict, rows: Dataset | None = None) -> Dataset:
    """The GRPO training dataset of a config (``cfg["data"]``), from ``rows`` or ``semcal_eval.data.load``."""
    d = cfg["data"]
    if rows is None:
        from semcal_eval.data import load

        rows = load(d["dataset"], split=d["split"])
    if d.get("shuffle_seed") is not None:
        rows = rows.shuffle(seed=int(d["shuffle_seed"]))
    if d.get("limit"):
        rows = rows.select(range(min(int(d["limit"]), len(rows))))
    questions, golds = [], []
    for r in rows:
        g = gold_list(r["answer"])
        if not g or not str(r["question"]).strip():
            raise ValueError(
                f"training row {r.get('id', '?')!r} has an empty question or no gold answer; "
                "semcal_eval.data drops such rows, so this dataset was not loaded through it"
            )
        questions.append(str(r["question"]))
        golds.append(g)
    prompts = [make_prompt(q, cfg["method"], d["prompt_style"], d.get("prompt_template")) for q in questions]
    return Dataset.from_dict({"prompt": prompts, "question": questions, "answers": golds})
