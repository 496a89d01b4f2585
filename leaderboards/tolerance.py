"""The spot check's tolerance: one number shared by the spot check (what it accepts), the near-duplicate test
(what it cannot tell apart) and the ranking (what an edit inside the tolerance can move).

Measured with ``leaderboards/tools/measure_tolerance.py`` (docs/LEADERBOARD.md, "Tolerance"): the largest
|Δp| of any class probability between two honest float32 runs of the same model on this CPU. The batch-size
sweep measured 2.34e-6; an honest re-score in the issue-34 probe differed by 2.65e-6, so the largest value
observed is recorded. The tolerance is MARGIN x that maximum.
"""

from __future__ import annotations

__all__ = ["MEASURED_MAX", "MARGIN", "TOLERANCES", "TOLERANCE", "CROSSFIT_ATOL"]

MEASURED_MAX = {"float32": 2.65e-6}
MARGIN = 4.0
TOLERANCES = {dt: MARGIN * v for dt, v in MEASURED_MAX.items()}
#: Largest accepted |submitted - re-scored| class probability (float32 re-scoring): 1.06e-5.
TOLERANCE = TOLERANCES["float32"]
#: The cross-fitted (_ts) rows are recomputed with the same code on the same logged numbers: float noise only.
CROSSFIT_ATOL = 1e-9
