"""The generative adversary search over every shipped method's reward (issue 31 item 2).

Two properties, kept apart:
- **Correctness**: no transformation of a rollout's answer raises its correctness reward above the honest
  answer's, in any method, at 0, 10, 30 and 50 % honest accuracy, K = 8 — hypothesis searches the grammar of
  research/answer_grammar.py and must find nothing.
- **Calibration term**: the search reports what a transformation earns through the rest of the reward. The
  paper's BCE rewards a wrong rollout for disagreeing with its group, so scattering wrong answers pays; the
  test checks the search finds that pay (it is documented in docs/TRAINING.md), so the search is not blind.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research import answer_grammar as G
import reward_search as S


@pytest.mark.parametrize("method", S.METHODS)
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(program=G.attacks(max_steps=3), accuracy=st.sampled_from(S.ACCURACIES),
       who=st.sampled_from(("wrong", "correct")))
def test_no_transformation_raises_correctness(method, program, accuracy, who):
    pay = S.attack_pay(method, program, accuracy, K=8, n_groups=6, seed=1, who=who)
    assert pay.max_correctness <= 0.0, (method, program, accuracy, who, pay)


def test_paper_csr_pays_wrong_rollouts_for_scattering_and_rlvr_does_not():
    """The known, stated exploit of the paper's design, found by the search's own machinery."""
    csr = S.scatter_pay("csr", 0.0, n_groups=20)
    assert csr > 0.0
    assert S.scatter_pay("rlvr", 0.0, n_groups=20) == 0.0
    # csr_spread charges a wrong rollout for sharing; unique noise shares nothing, so it pays there too
    assert S.scatter_pay("csr_spread", 0.0, n_groups=20) > 0.0


def test_dressing_a_correct_answer_changes_nothing_for_rlvr():
    for program in ([("upper", 0)], [("punct", 1)], [("accent", 2)], [("homoglyph", 3)], [("prefix", 0)]):
        pay = S.attack_pay("rlvr", program, 0.5, n_groups=10, who="correct")
        assert pay.total == 0.0, program
