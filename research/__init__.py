"""Research code: the reward and policy labs, the answer grammar and the adversary checks.

Not part of the shipped packages (pyproject's wheel includes ``semcal_eval``, ``trainers`` and ``leaderboards``
only): it imports the trainer's reward functions to study them, and only tests and ``benchmarks/`` import it.
An editable install (``pip install -e .``) puts the checkout on ``sys.path``, so ``import research`` works there.
"""
