"""``SemSoftTask``: a ConfigurableTask whose requests are answered by a backend's ``semsoft`` method.

Used from YAML as ``class: !function semcal_eval.semsoft.task.SemSoftTask`` (through a task folder's
``utils.py``). Each document emits one ``Instance(request_type="semsoft", arguments=(ctx, spec))``; the response
holds the constrained baseline and P_sem for every τ. Named filters (Contract 2 of docs/ARCHITECTURE.md) turn
that one response into side-by-side rows: ``constrained``, ``semsoft``, ``semsoft_tau<τ>`` for a sweep, the
reference predictors ``prior`` / ``majority`` / ``uniform``, cross-fitted temperature scaling
``constrained_ts`` / ``semsoft_ts``, and ``semsoft_tuned``: P_sem at the (τ, K, label embedding) chosen on
documents that are never reported (:mod:`semcal_eval.semsoft.tuning`).

Tuning documents: the task's validation split, less any document whose prompt is also evaluated, at most
``tune_limit`` of them (or max(``--limit``, 10) when that is smaller, so a quick run stays quick). They are answered in
the same run — one more forward pass each, the same request as an evaluated document. Their instances are
appended to the task's instance list (:attr:`SemSoftTask.tuning_instances` keeps them, with lm-eval's own
doc_ids, which number the tuning documents), and :meth:`SemSoftTask.apply_filters` takes exactly those objects
out again before lm-eval's filters, metrics and logs see the instances. With too few of them (the evaluated
split is the validation split, or there is none) the row is cross-fitted over the evaluated documents instead.

Hyper-parameters: :class:`semcal_eval.semsoft.spec.SemSoftParams` (``metadata.semsoft``, overridden by flat
metadata keys, so ``--metadata '{"tau": 0.3, "top_k": 50}'`` works from the CLI).
"""

from __future__ import annotations

import logging

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask
from lm_eval.api.utils import ends_with_whitespace

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import classification_record
from semcal_eval.data.gold import GoldError, GoldReader
from semcal_eval.harness import aggregations  # noqa: F401  (registers the aggregations the YAML names)
from semcal_eval.harness.base import check_aggregations, metric_values, process_results_marker
from semcal_eval.harness.lm_eval_compat import set_task_instances, task_instances
from semcal_eval.run_rows import temperature_skip_reason
from semcal_eval.semsoft import filters as semsoft_filters
from semcal_eval.semsoft import rows as rows_table
from semcal_eval.semsoft import tuning
from semcal_eval.semsoft.scoring import SemSoftError
from semcal_eval.semsoft.spec import REQUEST_TYPE, SemSoftParams, SemSoftRequest, SemSoftRow, as_response


class SemSoftTask(ConfigurableTask):
    """A classification task scored by Semantic Softmax and the constrained baseline from one forward pass."""

    OUTPUT_TYPE = REQUEST_TYPE

    def __init__(self, config: dict | None = None, **kwargs):
        config = dict(config or {})
        config.pop("class", None)  # TaskConfig rejects unknown keys
        config.pop("output_type", None)
        self.params = SemSoftParams.from_metadata(config.get("metadata"))  # validated here, once
        # the effective parameters (defaults included) go into the config lm-eval logs, so a run records what it
        # used even after a default changes; re-reading them gives the same SemSoftParams
        config["metadata"] = {**(config.get("metadata") or {}), "semsoft": self.params.as_metadata()}
        self.taus = list(self.params.taus)
        #: this rank's tuning-document instances between build_all_requests and apply_filters (module docstring)
        self.tuning_instances: list[Instance] = []
        if config.get("process_results") is None:
            config["process_results"] = process_results_marker
        # no metric_list in the YAML: the metric table's default for these records, filled in as lm-eval fills an
        # output type's default (aggregations.config_layout: the same rule the board's registry reads YAMLs by)
        config["metric_list"] = aggregations.declared_metric_list({**config, "class": type(self)})
        if not config.get("filter_list"):
            config["filter_list"] = self._default_filters()
        super().__init__(config=config, **kwargs)
        check_aggregations(self)

    # -- filters ------------------------------------------------------------------------------------------
    def _default_filters(self) -> list[dict]:
        """The filter_list, built from the rows table (:mod:`semcal_eval.semsoft.rows`) and the task's
        parameters (which τ, whether to recalibrate / tune / add the references)."""
        source = semsoft_filters.TaskView(self)
        steps = {
            "baseline": lambda r: [{"function": "semsoft_select", "source": "baseline"}],
            "semsoft": lambda r: [{"function": "semsoft_select", "source": "semsoft", "tau": self.taus[0]}],
            "recalibrated": lambda r: [{"function": "semsoft_select", "source": r.source, "tau": self.taus[0]},
                                       {"function": "crossfit_temperature", "task": source}],
            "tuned": lambda r: [{"function": "semsoft_tuned", "task": source, "by": self.params.tune_by}],
            "reference": lambda r: [{"function": "reference_predictor", "kind": r.name, "task": source}],
        }
        wanted = {"baseline": True, "semsoft": True, "recalibrated": self.params.recalibrate,
                  "tuned": self.params.tune, "reference": self.params.reference_predictors}
        flt = [{"name": r.name, "filter": steps[r.kind](r)} for r in rows_table.ROWS if wanted.get(r.kind)]
        sweep = [{"name": r.name, "filter": [{"function": "semsoft_select", "source": r.source, "tau": r.tau}]}
                 for r in map(rows_table.sweep_row, self.taus[1:])]
        at = next(i for i, f in enumerate(flt) if f["name"] == "semsoft") + 1  # the sweep follows semsoft
        return flt[:at] + sweep + flt[at:]

    # -- gold ---------------------------------------------------------------------------------------------
    # Read by the one gold reader (semcal_eval.data.gold), from the task's doc_to_target / metadata.soft_field:
    # the board reads the same fields through the same reader to check a run's records.
    @property
    def gold_reader(self) -> GoldReader:
        return GoldReader(self)

    def gold(self, doc) -> int | list[int] | None:
        """Gold label index, or the list of acceptable indices (any-gold / multi-label variants)."""
        return self.gold_reader.gold(doc)

    def soft_target(self, doc) -> float | None:
        """The annotator fraction of the positive class (``metadata.soft_field``), None without one."""
        try:
            return self.gold_reader.soft(doc)
        except GoldError as e:
            raise SemSoftError(str(e)) from None

    def train_golds(self) -> list:
        """Gold labels of the training split (for the class-prior reference predictor); [] if none."""
        return self.gold_reader.train_golds()

    def train_soft_targets(self) -> list[float]:
        """Soft targets of the training split; [] if none (or no soft targets)."""
        try:
            return self.gold_reader.train_soft()
        except GoldError as e:
            raise SemSoftError(str(e)) from None

    # -- requests -----------------------------------------------------------------------------------------
    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, plus one line, before the model pass, when this run has too few documents
        for the cross-fitted rows: those rows are then skipped (absent from the results; the filter logs the
        reason in their filtered_resps), the others are computed.

        The count is every document of the run, not this rank's shard, so it is the same under ``accelerate
        launch`` (the cross-fitted rows are fitted on the gathered documents)."""
        n = self._n_evaluated(kwargs.get("limit"), kwargs.get("samples"))
        skip = temperature_skip_reason(n) if self.params.recalibrate and n > 0 else None
        if skip is not None:
            ts = [r.name for r in rows_table.ROWS if r.kind == "recalibrated"]
            logging.getLogger(__name__).warning("task %s: rows %s skipped: %s", self.config.task, ", ".join(ts), skip)
        self.tuning_responses = None
        self.tuning_instances = []
        super().build_all_requests(**kwargs)
        if self.params.tune and n > 0:
            self._add_tuning_instances(n, kwargs)

    # -- tuning documents (the semsoft_tuned row) ----------------------------------------------------------
    @property
    def eval_docs(self):
        """lm-eval's evaluated documents, or the tuning documents while their requests are built."""
        docs = getattr(self, "_tuning_docs_now", None)
        return docs if docs is not None else super().eval_docs

    def tuning_docs(self, n_evaluated: int, limit=None, samples=None) -> list:
        """Validation documents whose prompt is not among the evaluated ones (all ranks), in split order, at
        most ``tune_limit`` (and at most max(``--limit``, MIN_TUNE_DOCS))."""
        # the YAML names a validation split; a source may still lack it (the shared Civil Comments mirror)
        if not self.has_validation_docs() or self.config.validation_split not in (self.dataset or {}):
            return []
        evaluated = self.eval_docs
        if samples:
            ids = sorted({i for i in samples if 0 <= i < len(evaluated)})
        else:
            ids = range(n_evaluated)
        seen = {self.doc_to_text(evaluated[i]) for i in ids}
        # a quick --limit run stays quick (as many tuning as evaluated documents, at least MIN_TUNE_DOCS)
        cap = self.params.tune_limit if not limit else min(self.params.tune_limit, max(int(limit), tuning.MIN_TUNE_DOCS))
        out = []
        for doc in self.validation_docs():
            if len(out) >= cap:
                break
            if self.doc_to_text(doc) not in seen:
                out.append(doc)
        return out

    def _add_tuning_instances(self, n_evaluated: int, kwargs: dict) -> None:
        docs = self.tuning_docs(n_evaluated, kwargs.get("limit"), kwargs.get("samples"))
        if len(docs) < tuning.MIN_TUNE_DOCS:
            # the rows' rule (semsoft_filters.tuned_skip_reason): too few documents skip the row, as for `_ts` rows
            skip = semsoft_filters.tuned_skip_reason(len(docs), n_evaluated)
            if skip is not None:
                logging.getLogger(__name__).warning("task %s: row semsoft_tuned skipped: %s", self.config.task, skip)
            self.tuning_responses = ([], [])  # cross-fit (SemSoftTuned), or its skip
            return
        evaluated = task_instances(self)
        self._tuning_docs_now = docs
        try:
            super().build_all_requests(**{**kwargs, "limit": None, "samples": None, "cache_requests": False,
                                          "rewrite_requests_cache": False})
        finally:
            self._tuning_docs_now = None
        # The tuning requests ride along in the model pass (the evaluator collects task.instances). They are
        # told apart by object, not by a doctored doc_id: their doc_ids repeat the evaluated ones, which is
        # harmless because apply_filters removes them before the evaluator groups instances by doc_id to score
        # and log documents.
        self.tuning_instances = task_instances(self)
        set_task_instances(self, evaluated + self.tuning_instances)

    def apply_filters(self):
        """Take the tuning instances out (their (grid, baseline, gold, soft) rows are kept for the
        ``semsoft_tuned`` filter), run lm-eval's filters on the evaluated ones, then drop the tuning grid from
        the logged responses (the chosen configuration's probabilities are the row's filtered response)."""
        tune = getattr(self, "tuning_instances", None) or []
        if tune:
            insts = task_instances(self)
            n = len(insts) - len(tune)
            if n < 0 or any(a is not b for a, b in zip(insts[n:], tune)):
                raise SemSoftError(
                    f"task {self.config.task}: the tuning documents' instances are no longer the last "
                    f"{len(tune)} of the task's {len(insts)} instances; something between build_all_requests and "
                    "apply_filters changed task.instances (run the task through lm-eval's evaluator)"
                )
            set_task_instances(self, insts[:n])
            self.tuning_instances = []
            self.tuning_responses = ([int(i.doc_id) for i in tune],
                                     [semsoft_filters._tune_row(i.resps[0], self.gold(i.doc), self.soft_target(i.doc))
                                      for i in tune])
        out = super().apply_filters()
        for inst in task_instances(self):
            if inst.resps:
                inst.resps[0] = as_response(inst.resps[0]).without_grid()
        return out

    def _n_evaluated(self, limit, samples) -> int:
        """Documents of the whole run (all ranks): what ``doc_iterator`` yields with rank 0 of 1."""
        n_all = len(self.eval_docs)
        if samples:
            return len({i for i in samples if 0 <= i < n_all})
        return n_all if not limit else min(int(limit), n_all)

    def construct_requests(self, doc, ctx, **kwargs):
        apply_chat_template = kwargs.pop("apply_chat_template", False)
        kwargs.pop("chat_template", None)
        delimiter = self.config.target_delimiter
        if apply_chat_template and not (self.config.gen_prefix and not ends_with_whitespace(self.config.gen_prefix)):
            delimiter = ""  # the chat template already ends the turn; ConfigurableTask drops it the same way
        request = SemSoftRequest(
            choices=tuple(f"{delimiter}{c}" for c in self.doc_to_choice(doc)),
            taus=tuple(self.taus),
            top_k=self.params.top_k,
            label_embedding=self.params.label_embedding,
            grid=self.params.grid,
        )
        return Instance(request_type=REQUEST_TYPE, doc=doc, arguments=(ctx, request.to_dict()), idx=0, **kwargs)

    def process_results(self, doc, results):
        """The per-document record (semcal_eval.core.records) under each metric name this row reports
        (:func:`semcal_eval.core.metric_table.reported_names`: the metric_list, less the fitted parameters the
        row did not fit), so every metric is recomputable from the logs."""
        declared = list(self.aggregation())
        if "bypass" in declared:  # --predict_only
            return {"bypass": None}
        (row,) = results
        if isinstance(row, semsoft_filters.SkippedRow):  # no metric: the row is absent from the results
            return {}
        if not isinstance(row, SemSoftRow):
            raise SemSoftError(f"task {self.config.task}: a filter returned {type(row).__name__}, not a SemSoftRow; "
                               "a semsoft row's last filter must be one of semcal_eval.semsoft.filters")
        record = classification_record(row.probs, self.gold(doc), self.soft_target(doc),
                                       temperature=row.temperature, at_bound=row.at_bound, tuned=row.tuned or {})
        return metric_values(T.reported_names(declared, record), record)


def semsoft_task_names(tasks_dir=None) -> set[str]:
    """Names of the task YAMLs (following ``include:``) that use SemSoftTask, for the CLI's backend check."""
    from semcal_eval import TASKS_DIR
    from semcal_eval.harness.task_yaml import iter_task_configs

    return {cfg["task"] for _, cfg in iter_task_configs(tasks_dir or TASKS_DIR) if "SemSoftTask" in str(cfg.get("class", ""))}


__all__ = ["SemSoftTask", "semsoft_task_names"]
