"""The board's checks of one lm-eval run, as named stages, in the order a submission goes through them:

1. **shape** (:mod:`.shape`): the results file has lm-eval's types and names known semcal tasks at their
   YAML's version, or stock ``multiple_choice`` tasks (stages 3-5 of those: :mod:`.stock`); each task's reported
   values are numbers (or short text for text parameters);
2. **provenance** (:mod:`.provenance`): versions, hashes, date and ``config`` bounded for storage;
   ``config.limit`` read as lm-eval records it;
3. **dataset** (:mod:`.dataset`): document counts and coverage against the split the board loads itself;
   per row, the document's hashes, gold label and soft target against the dataset;
4. **records** (:mod:`.records`): one canonical record per (filter, document), streamed, read by
   :func:`semcal_eval.runs.row_record`;
5. **metrics** (:mod:`.metrics`): each reported aggregate recomputes from the records;
6. **tier** (:mod:`leaderboards.spotcheck`): a secret HMAC-drawn sample re-scored with the model the run names gives
   ``spot-checked``, else ``self-reported`` with the reason (run by ``board submit`` after the others).

:func:`leaderboards.recompute.validate_run` runs stages 1-5 and builds the board's rows from their outputs.
Each stage raises :class:`~leaderboards.errors.SubmissionError` naming file (and line), task, filter, document
or metric, and the fix.
"""

from .dataset import SCORING_METADATA, Coverage, check_dataset, check_document, check_labels
from .metrics import ATOL, RTOL, check_metrics
from .provenance import RunProvenance, check_provenance, provenance
from .records import FilterRows, check_filters, read_task_rows, record_of
from .shape import MAX_DOCS, MAX_TASKS, Reported, RunShape, check_shape, reported_metrics

__all__ = ["ATOL", "RTOL", "MAX_DOCS", "MAX_TASKS", "SCORING_METADATA", "Coverage", "FilterRows", "Reported",
           "RunProvenance", "RunShape", "check_dataset", "check_document", "check_filters", "check_labels",
           "check_metrics", "check_provenance", "check_shape", "provenance", "read_task_rows", "record_of",
           "reported_metrics"]
