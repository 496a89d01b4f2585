"""semcal-eval: calibration benchmarks for lm-evaluation-harness."""

from pathlib import Path

__version__ = "0.1.0"

_here = Path(__file__).resolve().parent
# In a wheel the task folders are packaged as semcal_eval/tasks; in a checkout they sit at the top level.
TASKS_DIR = _here / "tasks" if (_here / "tasks").is_dir() else _here.parent / "tasks"
