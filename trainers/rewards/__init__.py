"""Reward functions for CSR (and semcal's two CSR variants), RLVR, RLCR and RD, with TRL's reward-function
signature; one module per family:

- :mod:`trainers.rewards.matching`: reading a completion, the dataset's columns, correctness by the one grader
  (:func:`semcal_eval.qa.grading.grade`, shared with the evaluation tasks) and RLVR's reward;
- :mod:`trainers.rewards.csr`: the paper's CSR calibration term (pairwise BCE, λ(t) linear from 0) and semcal's
  ``csr_likelihood`` / ``csr_spread``;
- :mod:`trainers.rewards.verbalised`: RLCR and RD (Rewarding Doubt), scored on a stated confidence.

Every reward is a plain function ``f(prompts, completions, completion_ids, trainer_state, **columns)`` returning
one float per completion, as :class:`trl.GRPOTrainer` calls it. The calibration reward's options are one typed
:class:`trainers.config.RewardSettings` (checked once, when the config is built) bound with K by
:func:`functools.partial`; TRL names a partial after the wrapped function, so its own ``rewards/<name>/mean``
metrics stay readable. Dataset columns used: ``answers`` (list of gold strings) and ``question`` (the raw question).
"""

from semcal_eval.qa.prompts import RLCR_SYSTEM_PROMPT  # the RLCR training prompt's one copy
from trainers.rewards.csr import *  # noqa: F403
from trainers.rewards.csr import __all__ as _csr_all
from trainers.rewards.matching import *  # noqa: F403
from trainers.rewards.matching import __all__ as _matching_all
from trainers.rewards.verbalised import *  # noqa: F403
from trainers.rewards.verbalised import __all__ as _verbalised_all

__all__ = ["RLCR_SYSTEM_PROMPT", *_matching_all, *_csr_all, *_verbalised_all]
