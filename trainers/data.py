"""Training prompts: QA rows (``semcal_eval.data``) → a dataset with ``prompt``, ``question`` and ``answers``.

``prompt`` is what GRPO generates from; ``question`` (raw) goes to the answer-equivalence judge;
``answers`` is the list of gold aliases. RLCR prompts carry RLCR's format instructions.

The question and the golds of a row come from :mod:`semcal_eval.data.fields`, the table the QA tasks read
too, so a model is trained on the golds it is evaluated against (MS MARCO's "No Answer Present." is never a
gold). Rows that cannot be scored are dropped and counted, as the QA tasks do.
"""

from __future__ import annotations

import logging
from typing import Any

from datasets import Dataset

from semcal_eval.data.fields import qa_example, qa_fields
from semcal_eval.qa.prompts import RLCR_SYSTEM_PROMPT, qa_doc_to_text, rlcr_prompt
from semcal_eval.qa.verbalized import RD_SYSTEM_PROMPT, rd_prompt

log = logging.getLogger(__name__)


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
    if method == "rd":
        if style == "chat":
            return [{"role": "system", "content": RD_SYSTEM_PROMPT}, {"role": "user", "content": question}]
        return rd_prompt(question)
    if method == "rlcr":
        if style == "chat":
            return [{"role": "system", "content": RLCR_SYSTEM_PROMPT}, {"role": "user", "content": question}]
        return rlcr_prompt(question)
    text = qa_doc_to_text({"qa_question": question}) if template is None else template.format(question=question)
    if style == "chat":
        return [{"role": "user", "content": text}]
    return text


def build_dataset(cfg, rows: Dataset | None = None) -> Dataset:
    """The GRPO training dataset of a config (a :class:`trainers.config.TrainConfig`; its ``data`` and ``method``).

    ``rows`` (default: ``semcal_eval.data.load(data.dataset, data.split, data.data_dir)``) must be in the hub
    schema of ``data.dataset``. After a seeded shuffle (``data.shuffle_seed``), the first ``data.limit`` rows
    that can be scored are kept: rows without question text or without a usable gold
    (:func:`semcal_eval.data.fields.qa_golds`) are dropped and their count logged as a warning. No row left is
    an error.
    """
    d = cfg.data
    name = d.dataset
    qa_fields(name)  # a clear error for a dataset that is not QA, before loading anything
    if rows is None:
        from semcal_eval.data import load

        rows = load(name, split=d.split, data_dir=d.data_dir)
    if d.shuffle_seed is not None:
        rows = rows.shuffle(seed=d.shuffle_seed)
    limit = d.limit
    questions, golds = [], []
    seen = 0
    for row in rows:
        if limit is not None and len(questions) == limit:
            break
        seen += 1
        ex = qa_example(name, row)
        if ex is not None:
            questions.append(ex[0])
            golds.append(ex[1])
    if len(questions) < seen:
        log.warning(
            "%s[%s]: dropped %d of %d training rows without question text or a usable gold answer "
            "(unanswerable/empty; they cannot be rewarded)", name, d.split, seen - len(questions), seen)
    if not questions:
        raise ValueError(
            f"{name}[{d.split}]: none of the {seen} rows has both question text and a usable gold answer "
            "(semcal_eval.data.fields.qa_golds); choose another data.split or data.dataset"
        )
    prompts = [make_prompt(q, cfg.method, d.prompt_style, d.prompt_template) for q in questions]
    return Dataset.from_dict({"prompt": prompts, "question": questions, "answers": golds})
