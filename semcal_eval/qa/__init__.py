"""Short-answer QA: scoring, answer-equivalence judges and calibration by semantic agreement.

=================  =====================================================================================
module             job
=================  =====================================================================================
``answers``        SQuAD normalisation, the one gold reader (usable aliases), exact match, token-F1, the answer line
``judges``         answer-equivalence judges (F1, EM, embedding, NLI, LLM) and ``get_judge``
``agreement``      greedy bidirectional clustering, semantic entropy, the confidences, ``score_question``
``verbalized``     the verbalised-confidence parsers (plain "Confidence: p" and RLCR's tags)
``prompts``        the QA tasks' prompts (shared with the trainers)
``settings``       ``QASettings``: the QA tasks' typed settings, one table of fields, defaults and checks
``task``           the lm-eval glue: data hook, filters, ``QATask`` (imports lm-eval; not imported here)
=================  =====================================================================================

This package exports the pure API only, so that the trainers (and anyone scoring answers) do not import
lm-eval; the tasks reach the glue as ``semcal_eval.qa.task``.
"""

from __future__ import annotations

from .agreement import (
    agreement_matrix,
    cluster,
    conf_cluster_share,
    conf_entropy,
    conf_likelihood_weighted,
    score_question,
    semantic_entropy,
    semantic_entropy_weighted,
)
from .answers import (
    EmptyGoldError,
    best_f1,
    check_golds,
    clean_answer,
    exact_match,
    is_correct,
    normalize_answer,
    token_f1,
)
from .judges import Judge, get_judge
from .prompts import (
    QA_DESCRIPTION,
    RLCR_SYSTEM_PROMPT,
    VERBALIZED_DESCRIPTION,
    qa_doc_to_text,
    rlcr_doc_to_text,
    rlcr_prompt,
    verbalized_doc_to_text,
)
from .verbalized import parse_rlcr, parse_verbalized

__all__ = [
    "normalize_answer",
    "check_golds",
    "exact_match",
    "token_f1",
    "best_f1",
    "is_correct",
    "clean_answer",
    "EmptyGoldError",
    "Judge",
    "get_judge",
    "cluster",
    "agreement_matrix",
    "semantic_entropy",
    "semantic_entropy_weighted",
    "conf_cluster_share",
    "conf_entropy",
    "conf_likelihood_weighted",
    "score_question",
    "parse_verbalized",
    "parse_rlcr",
    "QA_DESCRIPTION",
    "RLCR_SYSTEM_PROMPT",
    "rlcr_prompt",
    "rlcr_doc_to_text",
    "VERBALIZED_DESCRIPTION",
    "qa_doc_to_text",
    "verbalized_doc_to_text",
]
