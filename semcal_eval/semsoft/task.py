"""``SemSoftTask``: a ConfigurableTask whose requests are answered by a backend's ``semsoft`` method.

Used from YAML as ``class: !function semcal_eval.semsoft.task.SemSoftTask`` (through a task folder's
``utils.py``). Each document emits one ``Instance(request_type="semsoft", arguments=(ctx, spec))``; the response
holds the constrained baseline and P_sem for every τ. Named filters (Contract 2 of docs/ARCHITECTURE.md) turn
that one response into side-by-side rows: ``constrained``, ``semsoft``, ``semsoft_tau<τ>`` for a sweep, the
reference predictors ``prior`` / ``majority`` / ``uniform``, and cross-fitted temperature scaling
``constrained_ts`` / ``semsoft_ts``.

Hyper-parameters live in ``metadata.semsoft`` ({tau, tau_sweep, top_k, label_embedding, recalibrate}); the flat
metadata keys of the same names override them, so ``--metadata '{"tau": 0.3, "top_k": 50}'`` works from the CLI.
Keys left out take :data:`DEFAULTS`.
"""

from __future__ import annotations

import math

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask
from lm_eval.api.utils import ends_with_whitespace

from semcal_eval.harness import aggregations  # noqa: F401  (registers the aggregations the YAML names)
from semcal_eval.semsoft import filters as semsoft_filters
from semcal_eval.core import recalibration
from semcal_eval.semsoft.scoring import LABEL_EMBEDDINGS, SemSoftError, tau_key, validate_hparams, validate_labels

REQUEST_TYPE = "semsoft"

# τ=0.2, K=100 and first-token label embeddings were chosen on the GoEmotions validation split (docs/SWEEP.md).
DEFAULTS = {
    "tau": 0.2,
    "tau_sweep": [],
    "top_k": 100,
    "label_embedding": "first",
    "recalibrate": True,
    "reference_predictors": True,
}
HPARAM_KEYS = tuple(DEFAULTS)


def semsoft_params(metadata: dict | None) -> dict:
    """Effective hyper-parameters: DEFAULTS < metadata.semsoft < flat metadata keys; validated."""
    metadata = metadata or {}
    nested = metadata.get("semsoft") or {}
    if not isinstance(nested, dict):
        raise SemSoftError(f"metadata.semsoft must be a mapping, got {nested!r}")
    unknown = set(nested) - set(HPARAM_KEYS)
    if unknown:
        raise SemSoftError(f"unknown metadata.semsoft key(s) {sorted(unknown)}: known keys are {list(HPARAM_KEYS)}")
    params = {**DEFAULTS, **nested, **{k: metadata[k] for k in HPARAM_KEYS if k in metadata}}
    tau = params["tau"]
    if isinstance(tau, (list, tuple)):  # a list given as `tau` is a sweep whose first value is primary
        if not tau:
            raise SemSoftError("tau is an empty list: give a number in [-1, 1) or a list of them")
        params["tau"], params["tau_sweep"] = tau[0], list(tau[1:]) + list(params["tau_sweep"])
    if params["label_embedding"] not in LABEL_EMBEDDINGS:
        raise SemSoftError(
            f"label_embedding={params['label_embedding']!r} is unknown: choose one of {LABEL_EMBEDDINGS}"
        )
    # K's upper bound (the vocabulary) is checked by the backend, which knows the model.
    validate_hparams([params["tau"], *params["tau_sweep"]], params["top_k"], vocab_size=10**9)
    return params


class SemSoftTask(ConfigurableTask):
    """A classification task scored by Semantic Softmax and the constrained baseline from one forward pass."""

    OUTPUT_TYPE = REQUEST_TYPE

    def __init__(self, config: dict | None = None, **kwargs):
        config = dict(config or {})
        config.pop("class", None)  # TaskConfig rejects unknown keys
        config.pop("output_type", None)
        self.params = semsoft_params(config.get("metadata"))
        self.taus = [self.params["tau"], *[t for t in self.params["tau_sweep"] if t != self.params["tau"]]]
        if config.get("process_results") is None:
            # Any callable works: process_results below is what runs; this only tells ConfigurableTask not to
            # look the metric names up as lm-eval metric functions.
            config["process_results"] = _process_results_marker
        if not config.get("filter_list"):
            config["filter_list"] = self._default_filters()
        super().__init__(config=config, **kwargs)
        self._check_aggregations()

    # -- filters ------------------------------------------------------------------------------------------
    def _default_filters(self) -> list[dict]:
        source = semsoft_filters.TaskView(self)
        flt = [
            {"name": "constrained", "filter": [{"function": "semsoft_select", "source": "baseline"}]},
            {"name": "semsoft", "filter": [{"function": "semsoft_select", "source": "semsoft", "tau": self.taus[0]}]},
        ]
        flt += [
            {"name": f"semsoft_tau{tau_key(t)}", "filter": [{"function": "semsoft_select", "source": "semsoft", "tau": t}]}
            for t in self.taus[1:]
        ]
        if self.params["recalibrate"]:
            for name, src in (("constrained_ts", "baseline"), ("semsoft_ts", "semsoft")):
                flt.append(
                    {
                        "name": name,
                        "filter": [
                            {"function": "semsoft_select", "source": src, "tau": self.taus[0]},
                            {"function": "crossfit_temperature", "task": source},
                        ],
                    }
                )
        if self.params["reference_predictors"]:
            for kind in ("prior", "majority", "uniform"):
                flt.append({"name": kind, "filter": [{"function": "reference_predictor", "kind": kind, "task": source}]})
        return flt

    def _check_aggregations(self) -> None:
        missing = [m for m in self._metric_fn_list if m != "bypass" and m not in self._aggregation_list]
        if missing:
            raise SemSoftError(f"task {self.config.task}: metric(s) {missing} have no aggregation in metric_list")

    # -- gold ---------------------------------------------------------------------------------------------
    def gold(self, doc) -> int | list[int]:
        """Gold label index, or the list of acceptable indices (any-gold / multi-label variants)."""
        g = self.doc_to_target(doc)
        return [int(x) for x in g] if isinstance(g, (list, tuple)) else int(g)

    def soft_target(self, doc) -> float | None:
        field = (self.config.metadata or {}).get("soft_field")
        if not field:
            return None
        t = float(doc[field])
        if not (0.0 <= t <= 1.0) or math.isnan(t):
            raise SemSoftError(f"soft target {field}={doc[field]!r} is outside [0, 1]")
        return t

    def train_golds(self) -> list:
        """Gold labels of the training split (for the class-prior reference predictor); [] if none."""
        docs = self.training_docs() if self.has_training_docs() else None
        return [self.gold(d) for d in docs] if docs is not None else []

    def train_soft_targets(self) -> list[float]:
        docs = self.training_docs() if self.has_training_docs() else None
        return [self.soft_target(d) for d in docs] if docs is not None else []

    # -- requests -----------------------------------------------------------------------------------------
    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, plus a check that would otherwise fail only after the model pass."""
        super().build_all_requests(**kwargs)
        n = len({inst.doc_id for inst in self.instances})
        need = 2 * recalibration.MIN_FIT_DOCS
        if self.params["recalibrate"] and kwargs.get("world_size", 1) == 1 and 0 < n < need:
            raise SemSoftError(
                f"task {self.config.task}: cross-fitted temperature scaling (rows constrained_ts / semsoft_ts) "
                f"needs at least {need} documents ({recalibration.MIN_FIT_DOCS} per fold), got {n}; raise "
                "--limit or pass --metadata '{\"recalibrate\": false}'"
            )

    def construct_requests(self, doc, ctx, **kwargs):
        apply_chat_template = kwargs.pop("apply_chat_template", False)
        kwargs.pop("chat_template", None)
        delimiter = self.config.target_delimiter
        if apply_chat_template and not (self.config.gen_prefix and not ends_with_whitespace(self.config.gen_prefix)):
            delimiter = ""  # the chat template already ends the turn; ConfigurableTask drops it the same way
        choices = self.doc_to_choice(doc)
        validate_labels(choices)
        spec = {
            "choices": [f"{delimiter}{c}" for c in choices],
            "top_k": int(self.params["top_k"]),
            "tau": list(self.taus),
            "label_embedding": self.params["label_embedding"],
        }
        return Instance(request_type=REQUEST_TYPE, doc=doc, arguments=(ctx, spec), idx=0, **kwargs)

    def process_results(self, doc, results):
        """Per-document item (Contract 1) under every metric name, so every metric is recomputable from logs."""
        if "bypass" in self._metric_fn_list:  # --predict_only
            return {"bypass": None}
        (resp,) = results
        item = {"probs": list(resp["probs"]) if isinstance(resp, dict) else list(resp), "gold": self.gold(doc)}
        soft = self.soft_target(doc)
        if soft is not None:
            item["soft"] = soft
        if isinstance(resp, dict) and "temperature" in resp:  # cross-fitted rows record their fitted T
            item["temperature"] = resp["temperature"]
            item["at_bound"] = resp.get("at_bound", False)
        return {m: item for m in self._metric_fn_list}


def _process_results_marker(doc, results):  # pragma: no cover - SemSoftTask.process_results is what runs
    raise RuntimeError("SemSoftTask.process_results should have been called")


def semsoft_task_names(tasks_dir=None) -> set[str]:
    """Names of the task YAMLs (following ``include:``) that use SemSoftTask, for the CLI's backend check."""
    from semcal_eval import TASKS_DIR
    from semcal_eval.harness.task_yaml import iter_task_configs

    return {cfg["task"] for _, cfg in iter_task_configs(tasks_dir or TASKS_DIR) if "SemSoftTask" in str(cfg.get("class", ""))}


__all__ = ["SemSoftTask", "semsoft_params", "semsoft_task_names", "DEFAULTS", "REQUEST_TYPE"]
