"""CSR / RLVR / RLCR training on TRL's GRPOTrainer (issue 6).

- :mod:`trainers.rewards`: reward functions with TRL's signature (correctness, CSR calibration, RLCR terms), λ(t)
- :mod:`trainers.config`: defaults, YAML + ``key=value`` overrides, validation (incl. the group layout check)
- :mod:`trainers.data`: QA rows → ``prompt`` / ``question`` / ``answers``
- :mod:`trainers.train`: build and run the GRPOTrainer, save ``final/`` for lm-eval
- :mod:`trainers.pipeline`: evaluate with the QA tasks, submit to the leaderboard
- :mod:`trainers.cli`: ``semcal-train`` / ``semcal-eval train``

The reward and policy labs, the answer grammar and the adversary checks are research code, not part of this
package: the top-level ``research/`` folder (not shipped).

See docs/TRAINING.md.
"""
